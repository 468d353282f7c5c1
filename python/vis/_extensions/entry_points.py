"""Installed extensions: the `vis.extensions` entry points of the distributions on sys.path.

They are read straight from `entry_points.txt` in each `*.dist-info` / `*.egg-info` directory
(`importlib.metadata` would cost more to import than the whole scan), and what one sys.path
directory holds is kept in an index so a start does not open every distribution again:

- the index of a directory is the cache file `entry-points/<8 hex digits of a digest of its
  path>.json`,
  `{"version": 1, "dir": path, "mtime": mtime_ns, "entries": [[name, value, dist_dir], ...]}`;
- it is used only when it parses, has this shape, names this directory and the directory
  still has the recorded mtime (installing or removing a distribution adds or removes an entry
  of the directory, which changes its mtime). Anything else is a fresh scan of that directory
  alone: a corrupt index is never trusted, and a change in one directory (say the workspace
  root) does not make the others be scanned again;
- the worker cannot write the cache directory (the sandbox). A fresh index goes to the host in
  the worker's `ready` message, and the host writes it (`runtime::cache`);
- a scan is not cached while its directory changed less than `SETTLE_NS` ago: a distribution
  being installed writes its `entry_points.txt` after creating its directory, which does not
  change the parent's mtime again, so an index taken in between would stay stale.

Editing an installed `entry_points.txt` in place does not change any directory's mtime; a
reinstall (`pip install -e .` again) does.
"""
from __future__ import annotations

import os
import sys

from vis import _native, _state
from vis._extensions.registry import registry

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

GROUP = "vis.extensions"
INDEX_VERSION = 1
#: How long ago a directory must have changed for its scan to be cached (see above).
SETTLE_NS = 5 * 10**9


def search_dirs() -> list[str]:
    """The sys.path directories whose distributions may provide extensions: absolute,
    existing, and not inside an untrusted workspace (its venv's code must not run at start)."""
    untrusted = None
    if _state.workspace and not _state.trusted:
        untrusted = os.path.realpath(_state.workspace) + os.sep
    dirs: list[str] = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or entry in dirs or not os.path.isdir(entry):
            continue
        if untrusted and (os.path.realpath(entry) + os.sep).startswith(untrusted):
            continue
        dirs.append(entry)
    return dirs


def parse_group(text: str, group: str = GROUP) -> list[tuple[str, str]]:
    """`(name, value)` pairs of one section of an `entry_points.txt` (INI syntax)."""
    pairs: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
            continue
        if inside and "=" in line:
            name, value = line.split("=", 1)
            pairs.append((name.strip(), value.strip()))
    return pairs


def scan(directory: str) -> list[list[str]]:
    """`[name, value, dist_dir]` of every entry point of the group in one directory."""
    found: list[list[str]] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return found
    for dist in names:
        if not dist.endswith((".dist-info", ".egg-info")):
            continue
        path = os.path.join(directory, dist, "entry_points.txt")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        if GROUP in text:
            for name, value in parse_group(text):
                found.append([name, value, os.path.join(directory, dist)])
    return found


def _index_path(directory: str) -> str:
    # `_native.digest`, not `zlib.crc32`: no extension module to load at start-up.
    return "entry-points/%s.json" % _native.digest(directory.encode("utf-8", "surrogateescape"))[:8]


def _read_index(path: str, directory: str, mtime: int) -> list[list[str]] | None:
    """The cached entries if the index is well formed and is that of `directory` at `mtime`,
    else None."""
    if not _state.cache_dir:
        return None
    index = _native.read_cache(path)
    if (
        not isinstance(index, dict)
        or index.get("version") != INDEX_VERSION
        or index.get("dir") != directory
        or index.get("mtime") != mtime
    ):
        return None
    entries = index.get("entries")
    if not isinstance(entries, list):
        return None
    for e in entries:
        if not (isinstance(e, list) and len(e) == 3 and all(isinstance(x, str) for x in e)):
            return None
    return entries


def _settled(mtime: int) -> bool:
    """True when a directory that last changed at `mtime` did so over `SETTLE_NS` ago."""
    import time

    return time.time_ns() - mtime > SETTLE_NS


def _entries_of(directory: str) -> list[list[str]]:
    """One directory's entry points: from its index when current, else scanned (and the new
    index queued for the host to write once the directory has settled)."""
    try:
        mtime = os.stat(directory).st_mtime_ns
    except OSError:
        return []
    path = _index_path(directory)
    cached = _read_index(path, directory, mtime)
    if cached is not None:
        return cached
    entries = scan(directory)
    if _state.cache_dir and _settled(mtime):
        content = {"version": INDEX_VERSION, "dir": directory, "mtime": mtime, "entries": entries}
        registry.cache_writes.append({"path": path, "content": content})
    return entries


def installed() -> list[list[str]]:
    """`[name, value, dist_dir]` of the group's entry points, in sys.path order."""
    found: list[list[str]] = []
    for directory in search_dirs():
        found.extend(_entries_of(directory))
    return found


def load(value: str) -> Any:
    """Imports an entry point's `module[:attr.path]` (extras in brackets ignored)."""
    target = value.split("[", 1)[0].strip()
    module_name, _, attrs = target.partition(":")
    # `importlib.import_module` for an absolute name, without importing `importlib`.
    __import__(module_name.strip())
    obj: Any = sys.modules[module_name.strip()]
    for attr in filter(None, attrs.strip().split(".")):
        obj = getattr(obj, attr)
    return obj
