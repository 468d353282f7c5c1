"""Compiled persisted definitions, kept between worker starts.

Every start restores the session's persisted definitions, and compiling them is most of that
(tens of microseconds each, milliseconds for a hundred). Their code objects are kept in Vis's
cache directory, so the next start of the same session loads them instead of compiling.

Who decides what is in the file (`runtime::restore` on the host):
- the host names it (`restore/<32 hex>.json`, a digest of the workspace and every definition's
  name, kind and source) and sends that name with the definitions;
- the worker compiles the definitions (each checked with Python's parser first) and hands the
  code to the host in its `compiled` message, which it sends *before any definition runs*:
  nothing a restored definition does (a decorator, a class body) can change it, and later
  messages are ignored;
- the host writes the file from its own copy of the names, kinds and sources and that code,
  as `{"version": 2, "magic": hex, "defs": [[name, kind, source, base64 code], ...]}`.

A file is used only when it has this format, this Python's bytecode magic number and exactly
the session's definitions (names, kinds, sources) in order; anything else is compiled again.
Code in it was checked when it was compiled, so it is not parsed again.
"""
from __future__ import annotations

import binascii
import marshal
import sys

from vis import _native

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any, Sequence

    from vis._protocol import Definition
else:
    CodeType = type(compile("", "", "exec"))

FORMAT_VERSION = 2


def magic() -> str:
    """This interpreter's bytecode magic number, in hex (marshalled code is only valid for it).
    Read from the frozen import system, always loaded (`importlib.util` would cost an import)."""
    number: bytes = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
    return number.hex()


def load(path: str | None, defs: Sequence[Definition]) -> list[CodeType] | None:
    """The cached code of `defs` from the cache file `path`, or None when there is no usable
    entry for exactly these definitions."""
    if not path:
        return None
    cached: Any = _native.read_cache(path)
    if not isinstance(cached, dict) or cached.get("version") != FORMAT_VERSION or cached.get("magic") != magic():
        return None
    entries = cached.get("defs")
    if not isinstance(entries, list) or len(entries) != len(defs):
        return None
    codes: list[CodeType] = []
    try:
        for d, entry in zip(defs, entries):
            if not (
                isinstance(entry, list)
                and len(entry) == 4
                and entry[0] == d["name"]
                and entry[1] == d["kind"]
                and entry[2] == d["source"]
                and isinstance(entry[3], str)
            ):
                return None
            code = marshal.loads(binascii.a2b_base64(entry[3]))
            if not isinstance(code, CodeType):
                return None
            codes.append(code)
    except (ValueError, EOFError, TypeError, binascii.Error):
        return None
    return codes


def encode(codes: Sequence[CodeType]) -> list[str]:
    """The code objects as the host caches them (marshalled, base64)."""
    return [binascii.b2a_base64(marshal.dumps(code), newline=False).decode("ascii") for code in codes]
