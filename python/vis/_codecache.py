"""Compiled persisted definitions, kept between worker starts.

Every start restores the session's persisted definitions, and compiling them is most of that
(tens of microseconds each, milliseconds for a hundred). Their code objects are kept in Vis's
cache directory as `restore/<32 hex>.json`, keyed by this Python's bytecode magic number, the
workspace and every definition's name and source, so the next start of the same session loads
them instead of compiling.

Trust: the worker only reads the cache; what it compiled goes to the host, which writes it
(`runtime::cache`). The code is marshalled as soon as it is compiled, before any restored
definition runs, so nothing a definition does while it is restored (a decorator, a class body)
can change what is kept. An entry is used only when it lists the same definitions with the same
sources, in order; anything else (another Python, a damaged or foreign file) is ignored and the
definitions are compiled.
"""
from __future__ import annotations

import binascii
import marshal
import sys
from types import CodeType
from typing import TYPE_CHECKING, Any, Sequence

from vis import _native, _state
from vis._extensions.registry import registry

if TYPE_CHECKING:
    from vis._runner import Definition


def _magic() -> bytes:
    """The bytecode magic number of this interpreter (marshalled code is only valid for it)."""
    external = sys.modules.get("importlib._bootstrap_external")
    magic = getattr(external, "MAGIC_NUMBER", None)
    if isinstance(magic, bytes):
        return magic
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER


def cache_path(defs: Sequence[Definition]) -> str:
    """The cache file for exactly these definitions in this workspace."""
    parts = [_magic(), (_state.workspace or "").encode()]
    for d in defs:
        parts.append(d["name"].encode())
        parts.append(d["source"].encode())
    # Each part with its length, so no two lists of parts run together into the same bytes.
    key = b"".join(len(p).to_bytes(8, "little") + p for p in parts)
    return "restore/%s.json" % _native.digest(key)


def load(path: str, defs: Sequence[Definition]) -> list[CodeType] | None:
    """The cached code of `defs` from the cache file `path`, or None when there is no usable
    entry for exactly these definitions."""
    cached: Any = _native.read_cache(path)
    entries = cached.get("defs") if isinstance(cached, dict) else None
    if not isinstance(entries, list) or len(entries) != len(defs):
        return None
    codes: list[CodeType] = []
    try:
        for d, entry in zip(defs, entries):
            if not (
                isinstance(entry, list)
                and len(entry) == 3
                and entry[0] == d["name"]
                and entry[1] == d["source"]
                and isinstance(entry[2], str)
            ):
                return None
            code = marshal.loads(binascii.a2b_base64(entry[2]))
            if not isinstance(code, CodeType):
                return None
            codes.append(code)
    except (ValueError, EOFError, TypeError, binascii.Error):
        return None
    return codes


def keep(path: str, defs: Sequence[Definition], codes: Sequence[CodeType]) -> None:
    """Hands the freshly compiled code of `defs` to the host, to write as the cache file `path`."""
    content = {
        "defs": [
            [d["name"], d["source"], binascii.b2a_base64(marshal.dumps(code), newline=False).decode("ascii")]
            for d, code in zip(defs, codes)
        ]
    }
    registry.cache_writes.append({"path": path, "content": content})
