"""Signatures and docstrings of registered functions, cached per digest of their sources.

The manifest shows each function's signature and docstring, which `inspect` computes; importing
`inspect` and walking every function costs a worker start several milliseconds. So they are
computed once per version of the code and kept in the cache file
`signatures/<16 hex digits>.json`, `{"version": 1, "key": KEY, "functions": {name: [signature,
doc]}}`, where KEY names what they were computed from:

- the registered names, in order;
- the Python version (signature text may differ between versions) and the digest of the
  embedded prelude (which formats them, and holds the core and bundled functions);
- the digest of every source file that defines one of the functions (following
  `__wrapped__`, as `inspect.signature` does).

An entry is used only when its key is exactly this key; anything else (no cache, a function
that is not plain Python code from a file, a corrupt file) computes them with `inspect`, and a
new entry goes to the host to write (the worker cannot write the cache; see `runtime::cache`).

What the key does not cover: a default or annotation whose text comes from another module
(`def f(x=other.DEFAULT)`) shows the value it had when the entry was computed, until the
function's own file changes.
"""
from __future__ import annotations

import sys

from vis import _native, _state
from vis._extensions.registry import registry

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

FORMAT_VERSION = 1
#: Files of the embedded prelude and bundled extensions: covered by the prelude digest.
_EMBEDDED_PREFIX = "<vis>/"


class _Raw:
    """Shows a string annotation without quotes (`path: str`, not `path: 'str'`)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def signature_text(obj: Any) -> str:
    """`(a, b: int = 1) -> str` for a callable (string annotations unquoted); "" if unknown."""
    import inspect

    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""

    def raw(annotation: Any) -> Any:
        return _Raw(annotation) if isinstance(annotation, str) else annotation

    params = [p.replace(annotation=raw(p.annotation)) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=raw(sig.return_annotation)))


def doc_text(obj: Any) -> str:
    """The cleaned docstring of `obj` ("" if it has none)."""
    import inspect

    return inspect.getdoc(obj) or ""


def _source_files(fn: Any) -> list[str] | None:
    """The files whose code makes up `fn` (what it wraps included; a callable object's
    `__call__`), or None when `fn` is not made of plain Python code."""
    files: list[str] = []
    while fn is not None and len(files) < 100:
        code = getattr(fn, "__code__", None)
        if code is None and not isinstance(fn, type):
            code = getattr(getattr(type(fn), "__call__", None), "__code__", None)
        if code is None:
            return None
        files.append(code.co_filename)
        fn = getattr(fn, "__wrapped__", None)
    return files


def _key(functions: Mapping[str, Callable[..., Any]], embedded: bool = False) -> str | None:
    """What the signatures of `functions` depend on (see the module docs), or None. With
    `embedded`, all of them are known to be the embedded prelude's (covered by its digest):
    they are not read (nor their modules imported) to find their files."""
    digests: dict[str, str] = {}
    for fn in () if embedded else functions.values():
        files = _source_files(fn)
        if files is None:
            return None
        for path in files:
            if path in digests or path.startswith(_EMBEDDED_PREFIX):
                continue
            try:
                with open(path, "rb") as f:
                    digests[path] = _native.digest(f.read())
            except OSError:
                return None
    parts = ["names", *functions, "python", sys.version, "prelude", _state.prelude_digest or ""]
    for path in sorted(digests):
        parts += ["file", path, digests[path]]
    return "\0".join(parts)


def _read(path: str, key: str, names: list[str]) -> dict[str, tuple[str, str]] | None:
    entry = _native.read_cache(path)
    if not isinstance(entry, dict) or entry.get("version") != FORMAT_VERSION or entry.get("key") != key:
        return None
    functions = entry.get("functions")
    if not isinstance(functions, dict) or list(functions) != names:
        return None
    out: dict[str, tuple[str, str]] = {}
    for name, value in functions.items():
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
            return None
        out[name] = (value[0], value[1])
    return out


def describe(functions: Mapping[str, Callable[..., Any]], embedded: bool = False) -> dict[str, tuple[str, str]]:
    """`name -> (signature, doc)` of each function: from the cache when it holds this exact
    version of their code, else computed (and the entry queued for the host to write).
    `embedded`: all of them are the embedded prelude's (see `_key`)."""
    if not functions:
        return {}
    key = _key(functions, embedded) if _state.cache_dir else None
    path = None
    if key is not None:
        path = "signatures/%s.json" % _native.digest(key.encode("utf-8", "surrogateescape"))[:16]
        cached = _read(path, key, list(functions))
        if cached is not None:
            return cached
    computed = {name: (signature_text(fn), doc_text(fn)) for name, fn in functions.items()}
    if path is not None:
        content = {
            "version": FORMAT_VERSION,
            "key": key,
            "functions": {name: list(pair) for name, pair in computed.items()},
        }
        registry.cache_writes.append({"path": path, "content": content})
    return computed


def fill(entries: list[dict[str, Any]], functions: dict[str, Callable[..., Any]]) -> None:
    """Sets `signature` and `doc` of the function entries registered without them (inside a
    worker, `vis.extension.register` leaves them to this, so they come from the cache)."""
    pending = [e for e in entries if e["kind"] == "function" and e.get("signature") is None]
    described = describe({e["name"]: functions[e["name"]] for e in pending})
    for e in pending:
        e["signature"], e["doc"] = described[e["name"]]
