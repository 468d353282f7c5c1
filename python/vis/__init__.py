"""Vis: the Python surface of a coding gateway whose model has one tool, `python_execution`.

Inside a worker, the names in `__all__` are pre-imported into every block's namespace.
In a plain Python (no worker: an extension's unit tests), the package imports too: see
`vis.extension` for what works there.
"""
from __future__ import annotations

import sys as _sys

if "vis._native" not in _sys.modules:
    # No worker put its Rust module here: stand in for it (calls that need the worker raise
    # WorkerRequiredError saying so).
    from vis import _outside

    _sys.modules["vis._native"] = _outside

from pathlib import Path

from vis._state import session
from vis.defs import DefRegistry, defs
from vis.discovery import apropos, doc
from vis.folding import FoldReceipt, fold_session, read_session
from vis._mcp import McpContent, McpServerError, McpToolError
from vis.promote import promote
from vis.shell import ShellResult, sh
from vis.text import AddressError, PatchError, cat, grep, patch

_registry: DefRegistry | None = None

__all__ = ["Path", "cat", "defs", "grep", "patch", "PatchError", "AddressError", "session", "sh"]
__all__ += ["apropos", "doc", "promote", "fold_session", "read_session"]
__all__ += ["McpToolError", "McpServerError", "McpContent"]
