"""Compiled persisted definitions, kept between worker starts.

Every start restores the session's persisted definitions, and compiling them is most of that
(tens of microseconds each, milliseconds for a hundred). Their code objects are kept in Vis's
cache directory, so the next start of the same session loads them instead of compiling.

Who decides what is in the file (`runtime::restore` on the host):
- the host names it (`restore/<32 hex>.json`, a digest of the workspace and every definition's
  name, kind and source), reads it while the worker starts, and sends its code with the
  definitions only when the file holds exactly them (names, kinds, sources, in order);
- otherwise the worker compiles the definitions (each checked with Python's parser first) and
  hands the code to the host in its `compiled` message, which it sends *before any definition
  runs*: nothing a restored definition does (a decorator, a class body) can change it, and
  later messages are ignored;
- the host writes the file from its own copy of the names, kinds and sources and that code,
  as `{"version": 2, "magic": hex, "defs": [[name, kind, source, base64 code], ...]}`.

Code the host sends is used only when it was compiled by a Python with this one's bytecode
magic number; it was checked when it was compiled, so it is not parsed again. The worker sees
it as bytes (the host's base64 is decoded in Rust) and never reads the file itself.
"""
from __future__ import annotations

import marshal
import sys

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from types import CodeType
    from typing import Sequence

    from vis._protocol import Definition
else:
    # Not `type(compile(...))`: the first `compile()` makes every `ast` node type (about a
    # millisecond of each worker start).
    CodeType = type((lambda: None).__code__)

FORMAT_VERSION = 2


def magic() -> str:
    """This interpreter's bytecode magic number, in hex (marshalled code is only valid for it).
    Read from the frozen import system, always loaded (`importlib.util` would cost an import)."""
    number: bytes = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER
    return number.hex()


def load(cached: tuple[str, list[bytes]] | None, defs: Sequence[Definition]) -> list[CodeType] | None:
    """The code of `defs` from what the host sent (`(magic, [marshalled code, ...])`, one per
    definition), or None when it sent none usable by this Python."""
    if cached is None:
        return None
    compiled_by, blobs = cached
    if compiled_by != magic() or len(blobs) != len(defs):
        return None
    codes: list[CodeType] = []
    try:
        for blob in blobs:
            code = marshal.loads(blob)
            if not isinstance(code, CodeType):
                return None
            codes.append(code)
    except (ValueError, EOFError, TypeError):
        return None
    return codes


def encode(codes: Sequence[CodeType]) -> list[bytes]:
    """The code objects marshalled, for the host to cache (it adds the base64)."""
    return [marshal.dumps(code) for code in codes]
