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
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, TypeVar, overload

from vis import _extensions

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["register", "namespace", "page", "context_provider", "current"]


def _loading(what: str) -> _extensions.Loading:
    current = _extensions.loading
    if current is None:
        raise RuntimeError(
            "%s() works only while an extension loads: put the call at the top level of an "
            "extension module (e.g. .vis/extensions/NAME.py) or use promote(name)" % what
        )
    return current


def current() -> str:
    """The name of the extension being loaded (raises RuntimeError outside loading)."""
    return _loading("current").name


def _origin(ext: str) -> dict[str, str]:
    return {"extension": ext}


def _add(ext: _extensions.Loading, entry: dict[str, Any]) -> None:
    key = (entry["name"], entry["kind"] == "namespace")
    if key in ext.keys:
        raise ValueError("extension `%s` registers `%s` twice" % (ext.name, entry["name"]))
    ext.keys.add(key)
    ext.entries.append(entry)


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
        ext = _loading("register")
        if not callable(fn):
            raise TypeError("register() needs a function, got %r" % (fn,))
        full = name if name is not None else "%s.%s" % (ext.name, getattr(fn, "__name__", ""))
        from vis import _native

        _native.validate_name(full, "function")
        signature = _extensions.signature_text(fn)
        _add(
            ext,
            {
                "name": full,
                "kind": "function",
                "signature": signature,
                "doc": inspect.getdoc(fn) or "",
                "pinned": bool(pinned),
                "origin": _origin(ext.name),
            },
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
    ext = _loading("namespace")
    from vis import _native

    _native.validate_name(path, "namespace")
    _add(
        ext,
        {
            "name": path,
            "kind": "namespace",
            "summary": summary,
            "doc": doc,
            "pinned": bool(pinned),
            "origin": _origin(ext.name),
        },
    )


def page(name: str, markdown: str) -> None:
    """Register a documentation page (Markdown) that `doc(name)` shows and `apropos` finds.
    Its first line (a `# Title` works) is its summary."""
    ext = _loading("page")
    from vis import _native

    _native.validate_name(name, "page")
    if not isinstance(markdown, str) or not markdown.strip():
        raise ValueError("page `%s` needs non-empty Markdown text" % name)
    _add(ext, {"name": name, "kind": "page", "doc": markdown, "origin": _origin(ext.name)})


def context_provider(fn: F) -> F:
    """Register a function returning a dict that is put in `session["extensions"][<extension>]`
    before every block. Keep it fast (it runs before each block); if it raises, the error is
    put there instead and reported once in the block's output."""
    ext = _loading("context_provider")
    if not callable(fn):
        raise TypeError("context_provider() needs a function, got %r" % (fn,))
    ext.provider = fn
    return fn
