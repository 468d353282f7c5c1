"""MCP servers as namespaces: each configured server is a namespace, each of its tools a function.

The host (the gateway, `vis mcp` or `vis exec`) holds the MCP client sessions; this module only
builds Python functions from the tool list the host sends (`install`), pushes them into the
extension registry as one more source of entries and functions, and turns a call into a host
call (`mcp.call`). The runner calls `before_block` before every block. The server connection therefore outlives worker restarts, and the raw
MCP envelope never reaches the model's code: results come back as Python values.

- Structured content comes back as dicts and lists; text as `str`; several parts as a list;
  images, audio and resources as `McpContent` objects whose `path` is an artifact file.
- A tool that reports an error raises `McpToolError` with the server's message; a server that
  crashed, hung or could not start raises `McpServerError` (a subclass), and is started again
  on the next call.
"""
from __future__ import annotations

import builtins

from vis import _extensions, _native

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["McpToolError", "McpServerError", "McpContent"]


class McpToolError(Exception):
    """An MCP tool reported an error. `str(e)` is the server's message; `e.server` and
    `e.tool` name the call. Catch it like any exception:
    `try: github.create_issue(...) except McpToolError as e: print(e)`."""

    def __init__(self, message: str, server: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool


class McpServerError(McpToolError):
    """The MCP server itself failed: it could not start, crashed or exited during the call, or
    did not answer in time. It is started again on the next call; session["mcp"] says what
    happened."""


class McpContent:
    """An image, audio clip or resource an MCP tool returned, saved as an artifact file.

    Attributes: `type` ("image", "audio", "resource" or "resource_link"), `mime_type`, `path`
    (the artifact file; None for a link), `uri` (resources), `name`, `size` (bytes).
    `read_bytes()` and `read_text()` read the file; `cat(c.path)` shows text resources with
    addresses.
    """

    __slots__ = ("type", "mime_type", "path", "uri", "name", "size")

    def __init__(self, part: dict[str, Any]) -> None:
        self.type: str = part.get("type", "resource")
        self.mime_type: str | None = part.get("mime_type")
        self.path: str | None = part.get("path")
        self.uri: str | None = part.get("uri")
        self.name: str | None = part.get("name")
        self.size: int | None = part.get("size")

    def read_bytes(self) -> bytes:
        """The content's bytes (from the artifact file)."""
        if self.path is None:
            raise ValueError("this %s has no file: it only links to %s" % (self.type, self.uri))
        with open(self.path, "rb") as f:
            return f.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        """The content as text (from the artifact file)."""
        return self.read_bytes().decode(encoding, errors="replace")

    def __repr__(self) -> str:
        what = self.type + (" " + self.mime_type if self.mime_type else "")
        if self.uri:
            what += " " + self.uri
        if self.path is None:
            return "<%s>" % what
        size = "" if self.size is None else ", %s bytes" % format(self.size, ",")
        return "<%s%s: %s>" % (what, size, self.path)


class _State:
    """What could not become a namespace (the tools themselves live in the registry)."""

    #: server -> why its namespace is left out (its name is taken).
    skipped: dict[str, str] = {}


def _taken_top_level() -> dict[str, str]:
    """Top-level names already in use, with who uses them."""
    taken: dict[str, str] = {}
    for name in dir(builtins):
        taken[name] = "the Python builtin `%s`" % name
    reg = _extensions.registry
    for name in ("session", "Path", "vis", "McpToolError", "McpServerError", "McpContent", *reg.prelude_names):
        taken[name] = "the prelude's `%s`" % name
    for e in reg.core_entries + reg.page_entries + reg.skill_entries:
        taken.setdefault(e["name"].split(".")[0], "the prelude")
    for ext in reg.loaded.values():
        for e in ext.entries:
            taken.setdefault(e["name"].split(".")[0], "extension `%s`" % ext.name)
    return taken


def _decode(answer: dict[str, Any], server: str, tool: str) -> Any:
    kind = answer.get("kind")
    if kind == "value":
        return answer.get("value")
    if kind == "content":
        parts = [_part(p) for p in answer.get("parts", [])]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else parts
    message = str(answer.get("message", "the MCP call failed"))
    if kind == "tool_error":
        raise McpToolError(message, server, tool)
    raise McpServerError(message, server, tool)


def _part(part: dict[str, Any]) -> Any:
    if part.get("type") == "text":
        return part.get("text", "")
    return McpContent(part)


def _make_function(spec: dict[str, Any]) -> Callable[..., Any]:
    import inspect

    name: str = spec["name"]
    server: str = spec["server"]
    tool: str = spec["tool"]
    params = spec.get("params", [])
    sig_params = []
    for p in params:
        if p["required"]:
            sig_params.append(inspect.Parameter(p["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD))
        else:
            sig_params.append(inspect.Parameter(p["name"], inspect.Parameter.KEYWORD_ONLY, default=None))
    signature = inspect.Signature(sig_params)
    keys = {p["name"]: p["key"] for p in params}

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError("%s%s: %s; doc('%s') shows the arguments" % (name, spec["signature"], e, name)) from None
        arguments = {keys[k]: v for k, v in bound.arguments.items() if v is not None}
        try:
            answer = _native.host_call("mcp.call", {"server": server, "tool": tool, "arguments": arguments})
        except (TypeError, ValueError) as e:
            raise TypeError(
                "%s(): the arguments must be JSON values (str, int, float, bool, None, lists, dicts): %s"
                % (name, e)
            ) from None
        return _decode(answer, server, tool)

    call.__name__ = name.rsplit(".", 1)[-1]
    call.__qualname__ = name
    call.__doc__ = spec.get("doc", "")
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


def install(namespaces: list[dict[str, Any]], specs: list[dict[str, Any]]) -> Any:
    """Replaces the MCP namespaces with the host's list (`protocol::McpNamespace` and
    `protocol::McpFunction` as dicts); returns the visible manifest."""
    taken = _taken_top_level()
    skipped: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    functions: dict[str, Callable[..., Any]] = {}
    for ns in namespaces:
        server = ns["name"]
        who = taken.get(server)
        if who is None and len(server) > 4 and server.startswith("__") and server.endswith("__"):
            # A namespace `__builtins__` would replace the block's builtins.
            who = "Python (names of the form __name__ are reserved)"
        if who is not None:
            skipped[server] = (
                "its name is taken by %s, so its tools are left out; rename the server in the "
                "config (e.g. [mcp.servers.%s_mcp])" % (who, server)
            )
            continue
        entries.append(
            {
                "name": server,
                "kind": "namespace",
                "summary": ns.get("summary", ""),
                "doc": ns.get("doc", ""),
                "origin": {"mcp": server},
            }
        )
    for spec in specs:
        if spec["server"] in skipped:
            continue
        entries.append(
            {
                "name": spec["name"],
                "kind": "function",
                "signature": spec["signature"],
                "doc": spec.get("doc", ""),
                "origin": {"mcp": spec["server"]},
            }
        )
        functions[spec["name"]] = _make_function(spec)
    _extensions.registry.mcp_entries = entries
    _extensions.registry.mcp_functions = functions
    _State.skipped = skipped
    _extensions.rebuild()
    # The host takes the manifest from this answer, not from the next block's result.
    _extensions.registry.manifest_changed = False
    return _extensions.manifest()


def before_block(session: dict[str, Any]) -> None:
    """Adds to session["mcp"] the servers whose namespace could not be installed."""
    if not _State.skipped:
        return
    mcp = session.setdefault("mcp", {})
    servers = mcp.setdefault("servers", {})
    for server, why in _State.skipped.items():
        entry = servers.setdefault(server, {})
        entry["namespace"] = "left out: " + why
