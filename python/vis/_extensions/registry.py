"""The state behind extensions, pages and skills: what is registered, loaded and reported.

Its sources are pushed into it by the layers above, never fetched from them: the runner gives
the prelude's functions and public names (`install`), the loader what each extension
registered, and `vis._mcp` the MCP servers' tools. So nothing here imports `vis` or `vis._mcp`.
"""
from __future__ import annotations

from _collections_abc import Mapping  # loaded at every start (`collections.abc` is not)

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator


#: Longest error text kept per extension (the model sees it in session["extensions"]).
ERROR_MAX = 1500


class Registrations:
    """What one extension registered: manifest `entries`, `functions` by dotted name, and its
    context `provider`. While an extension loads they are only collected; they take effect
    when it loaded cleanly. Outside a worker they are what `vis.extension.registered` returns.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: list[dict[str, Any]] = []
        self.functions: dict[str, Callable[..., Any]] = {}
        self.provider: Callable[[], dict[str, Any]] | None = None
        #: (name, is_namespace) of every entry, for duplicate checks.
        self.keys: set[tuple[str, bool]] = set()

    def add(self, entry: dict[str, Any]) -> None:
        """Adds one manifest entry; the same name twice in one extension is an error."""
        key = (entry["name"], entry["kind"] == "namespace")
        if key in self.keys:
            raise ValueError("extension `%s` registers `%s` twice" % (self.name, entry["name"]))
        self.keys.add(key)
        self.entries.append(entry)

    def __repr__(self) -> str:
        return "<registrations of %s: %d entries, %d functions%s>" % (
            self.name,
            len(self.entries),
            len(self.functions),
            ", a context provider" if self.provider else "",
        )


class CoreFunctions(Mapping):  # type: ignore[type-arg]  # (`_collections_abc`: no generics at run time)
    """The prelude's functions by name, each imported when first read through `get` (the
    manifest takes their signatures and docstrings from the cache without them; see
    `signatures.describe`). `peek(name)` is the function if its module is imported already,
    else None."""

    def __init__(
        self,
        names: list[str],
        get: Callable[[str], Any] | None = None,
        peek: Callable[[str], Any] | None = None,
    ) -> None:
        self.names = list(names)
        self._get = get
        self._peek = peek

    def __getitem__(self, name: str) -> Callable[..., Any]:
        if name not in self.names or self._get is None:
            raise KeyError(name)
        fn: Callable[..., Any] = self._get(name)
        return fn

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def loaded(self, name: str) -> Callable[..., Any] | None:
        """Function `name` if its module is imported already, else None (nothing is imported)."""
        if name not in self.names or self._peek is None:
            return None
        fn: Callable[..., Any] | None = self._peek(name)
        return fn


class Registry:
    """Everything the extension machinery of one worker knows."""

    def __init__(self) -> None:
        self.core_entries: list[dict[str, Any]] = []
        self.core_names: list[str] = []
        #: The prelude's functions (its callable public names), by name.
        self.core_functions: CoreFunctions = CoreFunctions([])
        #: Every public name of the prelude (`vis.__all__`): a block's namespace has them.
        self.prelude_names: list[str] = []
        self.page_entries: list[dict[str, Any]] = []
        self.skill_entries: list[dict[str, Any]] = []
        #: Committed extensions: name -> Registrations.
        self.loaded: dict[str, Registrations] = {}
        #: The extension being loaded now, if any.
        self.loading: Registrations | None = None
        #: Outside a worker: what each extension module registered (see `vis.extension`).
        self.recorded: dict[str, Registrations] = {}
        #: name -> {"source", "path", "error"?, "shadows"?}; skills as "skill:FOLDER".
        self.status: dict[str, dict[str, Any]] = {}
        self.notices: list[str] = []
        #: Context-provider errors already reported, by extension.
        self.reported: dict[str, str] = {}
        self.manifest: Any = None
        self.manifest_changed = False
        self.ns: dict[str, Any] | None = None
        #: Names this package put in the model's namespace (and the objects it put there).
        self.installed: dict[str, Any] = {}
        #: Cache files to write, for the host: {"path": relative path, "content": JSON-like value}.
        self.cache_writes: list[dict[str, Any]] = []
        #: The MCP servers' namespaces and tools (pushed by `vis._mcp.install`).
        self.mcp_entries: list[dict[str, Any]] = []
        #: Dotted name -> function, for every installed MCP tool.
        self.mcp_functions: dict[str, Callable[..., Any]] = {}


registry = Registry()


def short_error(exc: BaseException) -> str:
    """`Type: message` plus the innermost frame outside the prelude, capped."""
    if isinstance(exc, SyntaxError) and exc.filename:
        text = "SyntaxError: %s (%s, line %s)" % (exc.msg, exc.filename, exc.lineno)
    else:
        where = ""
        tb = exc.__traceback__
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if not filename.startswith("<vis>/vis/"):
                where = " (%s, line %s)" % (filename, tb.tb_lineno)
            tb = tb.tb_next
        text = "%s: %s%s" % (type(exc).__name__, exc, where)
    return text if len(text) <= ERROR_MAX else text[: ERROR_MAX - 1] + "…"
