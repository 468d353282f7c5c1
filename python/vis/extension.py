"""The extension API: what an extension module calls while it is imported.

An extension is an ordinary Python module or package (see `doc('vis.extensions')`)::

    from vis.extension import register, namespace, page, context_provider

    namespace("jira", "Jira issues of this project")

    @register                      # -> jira.issue (the extension's name, then the function's)
    def issue(key: str) -> str:
        \"\"\"Show one issue.\"\"\"

    @register("jira.search", pinned=True)
    def search(jql: str) -> list: ...

    page("jira.howto", "# Jira\\n\\nHow this project uses Jira.")

    @context_provider
    def context() -> dict:
        return {"project": "VIS"}      # appears in session["extensions"]["jira"]

Names are dotted paths of Python identifiers, validated and never sanitized: a bad segment is
an error naming it, and the extension is reported as broken.

Outside a worker (a plain `python3`, e.g. the extension's own unit tests) importing the module
works the same: registrations are recorded under the extension's name (its top-level package or
module name) and `registered(name)` returns them, so a test can call the functions and check
what they registered. Calls that need the worker (`cat`, `grep`, `sh`, host calls...) raise
`WorkerRequiredError` there.
"""
from __future__ import annotations

import sys

from vis import _state
from vis._extensions.registry import Registrations, registry

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Callable, TypeVar, overload

    from vis._outside import WorkerRequiredError

    F = TypeVar("F", bound=Callable[..., Any])
else:

    def overload(fn):  # `typing.overload` only marks the typed variants; the last `def` wins
        return fn

__all__ = ["register", "namespace", "page", "context_provider", "current", "registered", "WorkerRequiredError"]


def __getattr__(name: str) -> Any:
    """`WorkerRequiredError`, from `vis._outside` when first asked for: a worker's start, which
    loads this module for every extension, never needs that module."""
    if name == "WorkerRequiredError":
        from vis._outside import WorkerRequiredError

        return WorkerRequiredError
    raise AttributeError("module 'vis.extension' has no attribute %r" % name)


def _caller_extension() -> str:
    """Outside a worker: the extension a registration belongs to, i.e. the top-level package
    (or module) of the first caller outside `vis`."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != "vis" and not module.startswith("vis."):
            return str(module).split(".")[0]
        frame = frame.f_back  # type: ignore[assignment]
    return "__main__"


def _registrations(what: str) -> Registrations:
    """Where a call made now registers: the extension loading in this worker, or (outside a
    worker) the calling extension's record."""
    current = registry.loading
    if current is not None:
        return current
    if not _state.in_worker:
        name = _caller_extension()
        return registry.recorded.setdefault(name, Registrations(name))
    raise RuntimeError(
        "%s() works only while an extension loads: put the call at the top level of an "
        "extension module (e.g. .vis/extensions/NAME.py) or use promote(name)" % what
    )


def current() -> str:
    """The name of the extension being loaded (outside a worker: the calling module's
    extension; inside one, RuntimeError when no extension is loading)."""
    return _registrations("current").name


def registered(extension: str) -> Registrations:
    """Outside a worker: what `extension` registered when it was imported (`.functions` by
    dotted name, `.entries` as the manifest gets them, `.provider`). LookupError names the
    extensions that did register something."""
    found = registry.recorded.get(extension)
    if found is None:
        known = ", ".join(sorted(registry.recorded)) or "none yet"
        raise LookupError(
            "no registrations recorded for extension `%s` (recorded: %s); import the extension's "
            "module first, outside a worker" % (extension, known)
        )
    return found


def _origin(ext: str) -> dict[str, str]:
    return {"extension": ext}


@overload
def register(target: F) -> F: ...
@overload
def register(target: str | None = None, *, pinned: bool = False) -> Callable[[F], F]: ...


def register(target: Any = None, name: str | None = None, *, pinned: bool = False) -> Any:
    """Register a function under a dotted name; use as `@register`, `@register("a.b")`,
    `@register(pinned=True)` or `register(fn, "a.b")`.

    The default name is `<extension>.<function name>`. Pinned functions are always shown in the
    prompt's catalog, even when it only has room for namespace summaries. The function's
    signature and docstring are what `apropos` and `doc` show.
    """
    if isinstance(target, str):
        name, target = target, None

    def decorate(fn: F) -> F:
        from vis import _native

        ext = _registrations("register")
        if not callable(fn):
            raise TypeError("register() needs a function, got %r" % (fn,))
        full = name if name is not None else "%s.%s" % (ext.name, getattr(fn, "__name__", ""))
        _native.validate_name(full, "function")
        signature = doc = None
        if not _state.in_worker:
            # In a worker the loader fills them in, from the cache when it can
            # (`vis._extensions.signatures`).
            from vis._extensions.signatures import doc_text, signature_text

            signature, doc = signature_text(fn), doc_text(fn)
        ext.add(
            {
                "name": full,
                "kind": "function",
                "signature": signature,
                "doc": doc,
                "pinned": bool(pinned),
                "origin": _origin(ext.name),
            }
        )
        ext.functions[full] = fn
        return fn

    if target is not None:
        return decorate(target)
    return decorate


def namespace(path: str, summary: str = "", doc: str = "", *, pinned: bool = False) -> None:
    """Describe a namespace: a one-line `summary` (shown by apropos and the catalog), an optional
    longer `doc`, and `pinned=True` to show all its functions in the catalog. Namespaces exist
    anyway once a function is registered in them; this only adds metadata."""
    from vis import _native

    ext = _registrations("namespace")
    _native.validate_name(path, "namespace")
    ext.add(
        {
            "name": path,
            "kind": "namespace",
            "summary": summary,
            "doc": doc,
            "pinned": bool(pinned),
            "origin": _origin(ext.name),
        }
    )


def page(name: str, markdown: str) -> None:
    """Register a documentation page (Markdown) that `doc(name)` shows and `apropos` finds.
    Its first line (a `# Title` works) is its summary."""
    from vis import _native

    ext = _registrations("page")
    _native.validate_name(name, "page")
    if not isinstance(markdown, str) or not markdown.strip():
        raise ValueError("page `%s` needs non-empty Markdown text" % name)
    ext.add({"name": name, "kind": "page", "doc": markdown, "origin": _origin(ext.name)})


def context_provider(fn: F) -> F:
    """Register a function returning a dict that is put in `session["extensions"][<extension>]`
    before every block. Keep it fast (it runs before each block); if it raises, the error is
    put there instead and reported once in the block's output."""
    ext = _registrations("context_provider")
    if not callable(fn):
        raise TypeError("context_provider() needs a function, got %r" % (fn,))
    ext.provider = fn
    return fn
