"""Vis: the Python surface of a coding gateway whose model has one tool, `python_execution`.

Inside a worker, the names in `__all__` are pre-imported into every block's namespace.
In a plain Python (no worker: an extension's unit tests), the package imports too: see
`vis.extension` for what works there.

`Path` is `pathlib.Path`. `pathlib` (with `re`, `enum`, `functools` and `urllib.parse` behind it)
costs a worker start milliseconds, so it is imported when first used: `vis.Path` here, and in
a block's namespace before the first block or restored definition that names `Path` (see
`vis._runner`).
"""
from __future__ import annotations

import sys as _sys

if "vis._native" not in _sys.modules:
    # No worker put its Rust module here: stand in for it (calls that need the worker raise
    # WorkerRequiredError saying so).
    from vis import _outside

    _sys.modules["vis._native"] = _outside

from vis._state import session
from vis.defs import DefRegistry, defs
from vis.discovery import apropos, doc
from vis.folding import FoldReceipt, fold_session, read_session
from vis.images import ShownImage, show
from vis._mcp import McpContent, McpServerError, McpToolError
from vis.promote import promote
from vis.jobs import Job, jobs
from vis.shell import ShellResult, sh
from vis.spawn import Sub, SubSessionError, spawn, subs
from vis.text import AddressError, PatchError, cat, grep, patch

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["Path", "cat", "defs", "grep", "patch", "PatchError", "AddressError", "session", "sh"]
__all__ += ["apropos", "doc", "promote", "fold_session", "read_session"]
__all__ += ["McpToolError", "McpServerError", "McpContent", "jobs"]
__all__ += ["spawn", "subs", "Sub", "SubSessionError"]
__all__ += ["show", "ShownImage"]

#: Names of `__all__` imported on first use: name -> (module, attribute).
LAZY = {"Path": ("pathlib", "Path")}


def __getattr__(name: str) -> object:
    """`vis.Path` and `from vis import Path`: imports `pathlib` at the first use (PEP 562)."""
    lazy = LAZY.get(name)
    if lazy is None:
        raise AttributeError("module 'vis' has no attribute %r" % name)
    module, attribute = lazy
    value: object = getattr(__import__(module), attribute)
    globals()[name] = value
    return value
