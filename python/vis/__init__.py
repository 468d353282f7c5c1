"""Vis: the Python surface of a coding gateway whose model has one tool, `python_execution`.

Inside a worker, the names in `__all__` are pre-imported into every block's namespace.
In a plain Python (no worker: an extension's unit tests), the package imports too: see
`vis.extension` for what works there.

`Path` is `pathlib.Path`. Every public name but `session` and `defs` is imported when first
used (`LAZY`): `vis.cat` here, and in a block's namespace before the first block or restored
definition that names it (see `vis._runner`). Their modules (and `pathlib`, with `re`,
`enum`, `functools` and `urllib.parse` behind it) would cost every worker start milliseconds.
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

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    # What `LAZY` imports on first use, for type checkers (they take TYPE_CHECKING as True).
    from pathlib import Path

    from vis._mcp import McpContent, McpServerError, McpToolError
    from vis.discovery import apropos, doc
    from vis.folding import FoldReceipt, fold_session, read_session
    from vis.images import ShownImage, show
    from vis.jobs import Job, jobs
    from vis.promote import promote
    from vis.shell import ShellResult, sh
    from vis.spawn import Sub, SubSessionError, spawn, subs
    from vis.text import AddressError, PatchError, cat, grep, patch

__all__ = ["Path", "cat", "defs", "grep", "patch", "PatchError", "AddressError", "session", "sh"]
__all__ += ["apropos", "doc", "promote", "fold_session", "read_session"]
__all__ += ["McpToolError", "McpServerError", "McpContent", "jobs"]
__all__ += ["spawn", "subs", "Sub", "SubSessionError"]
__all__ += ["show", "ShownImage"]

#: Names imported on first use: name -> (module, attribute). Each module costs a worker start
#: a fraction of a millisecond, and most blocks use few of them: the runner binds a name into
#: a block's namespace just before the first code that names it (`vis._runner`).
LAZY = {
    "Path": ("pathlib", "Path"),
    "apropos": ("vis.discovery", "apropos"),
    "doc": ("vis.discovery", "doc"),
    "FoldReceipt": ("vis.folding", "FoldReceipt"),
    "fold_session": ("vis.folding", "fold_session"),
    "read_session": ("vis.folding", "read_session"),
    "ShownImage": ("vis.images", "ShownImage"),
    "show": ("vis.images", "show"),
    "McpContent": ("vis._mcp", "McpContent"),
    "McpServerError": ("vis._mcp", "McpServerError"),
    "McpToolError": ("vis._mcp", "McpToolError"),
    "promote": ("vis.promote", "promote"),
    "Job": ("vis.jobs", "Job"),
    "jobs": ("vis.jobs", "jobs"),
    "ShellResult": ("vis.shell", "ShellResult"),
    "sh": ("vis.shell", "sh"),
    "Sub": ("vis.spawn", "Sub"),
    "SubSessionError": ("vis.spawn", "SubSessionError"),
    "spawn": ("vis.spawn", "spawn"),
    "subs": ("vis.spawn", "subs"),
    "AddressError": ("vis.text", "AddressError"),
    "PatchError": ("vis.text", "PatchError"),
    "cat": ("vis.text", "cat"),
    "grep": ("vis.text", "grep"),
    "patch": ("vis.text", "patch"),
}

#: The prelude's functions (the callable public names that are not classes), in `__all__`
#: order: the registry's core entries, known without importing their modules (a test checks
#: the list against the objects).
FUNCTIONS = ["cat", "defs", "grep", "patch", "sh", "apropos", "doc", "promote", "fold_session", "read_session"]
FUNCTIONS += ["jobs", "spawn", "subs", "show"]


def __getattr__(name: str) -> object:
    """`vis.cat`, `from vis import Path`: imports the name's module at its first use (PEP 562)."""
    lazy = LAZY.get(name)
    if lazy is None:
        raise AttributeError("module 'vis' has no attribute %r" % name)
    module, attribute = lazy
    __import__(module)
    value: object = getattr(_sys.modules[module], attribute)
    globals()[name] = value
    return value


class _Package(type(_sys)):  # type: ignore[misc]  # (`types.ModuleType`, without importing `types`)
    """The module `vis` itself. Loading submodule `vis.jobs` makes the import system set the
    package's attribute `jobs` to that module, over the function `vis.jobs` (`spawn` and
    `promote` likewise): the function stays, as when `__init__` imported it eagerly."""

    def __setattr__(self, name: str, value: object) -> None:
        lazy = LAZY.get(name)
        if lazy is not None and isinstance(value, type(_sys)) and value.__name__ == lazy[0]:
            value = getattr(value, lazy[1], value)
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def loaded(name: str) -> object | None:
    """The object public name `name` stands for if its module is imported already, else None
    (nothing is imported)."""
    value = globals().get(name)
    if value is None and name in LAZY:
        module, attribute = LAZY[name]
        value = getattr(_sys.modules.get(module), attribute, None)
    return value
