"""Where extensions come from: every name with the candidate that wins.

Sources, highest priority first (a name found in several loads only from the first):
  1. the workspace: `<workspace>/.vis/extensions/NAME.py` or `NAME/__init__.py` (only in a
     trusted workspace, or the one extension a block just wrote with `promote()`);
  2. the user's config: `<config>/extensions/` (same layout);
  3. installed distributions declaring the `vis.extensions` entry-point group (name = entry
     name; see `entry_points`);
  4. bundled with vis (`extensions/` in the repository, embedded in the binary).
"""
from __future__ import annotations

import os
import sys

from vis import _state
from vis._extensions import entry_points
from vis._extensions.registry import registry

#: Where a candidate extension comes from, in priority order.
SOURCES = ("workspace", "config", "entry point", "bundled")


class Candidate:
    """One place an extension named `name` can be loaded from. `target` is a file or package
    directory (workspace, config), an entry point's `module:attr` (entry point), or a module
    name (bundled); `dist` is the distribution directory of an entry point."""

    def __init__(self, name: str, source: str, target: str, dist: str = "") -> None:
        self.name = name
        self.source = source
        self.target = target
        self.dist = dist
        self.shadows: list[str] = []

    def where(self) -> str:
        """Where it is, for messages and session["extensions"]."""
        if self.source == "entry point":
            return "entry point %s = %s" % (self.name, self.target)
        if self.source == "bundled":
            return "bundled with vis"
        return self.target

    def __repr__(self) -> str:
        return "<extension candidate %s (%s)>" % (self.name, self.where())


def _dir_candidates(directory: str | None, source: str) -> list[Candidate]:
    if not directory or not os.path.isdir(directory):
        return []
    out = []
    for entry in sorted(os.listdir(directory)):
        if entry.startswith((".", "_")):
            continue
        path = os.path.join(directory, entry)
        if entry.endswith(".py") and os.path.isfile(path):
            out.append(Candidate(entry[:-3], source, path))
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            out.append(Candidate(entry, source, path))
    return out


def _entry_point_candidates() -> list[Candidate]:
    try:
        found = entry_points.installed()
    except Exception as e:  # noqa: BLE001 (a broken distribution must not stop the worker)
        from vis._extensions.registry import short_error

        registry.notices.append("[vis] cannot list installed extensions: %s" % short_error(e))
        return []
    chosen: dict[str, Candidate] = {}
    for name, value, dist in found:
        if name not in chosen:
            chosen[name] = Candidate(name, "entry point", value, dist)
    return [chosen[name] for name in sorted(chosen)]


def _bundled_candidates() -> list[Candidate]:
    embedded = sys.modules.get("_vis_embedded")
    bundled: dict[str, str] = getattr(embedded, "BUNDLED", {}) if embedded else {}
    names = set()
    for path in bundled:
        if not path.endswith(".py"):
            continue
        parts = path[:-3].split("/")
        if len(parts) == 1 and not parts[0].startswith("_"):
            names.add(parts[0])
        elif len(parts) == 2 and parts[1] == "__init__":
            names.add(parts[0])
    return [Candidate(n, "bundled", "_vis_bundled." + n) for n in sorted(names)]


def workspace_extension_dir() -> str | None:
    """`<workspace>/.vis/extensions`, if the worker has a workspace."""
    return os.path.join(_state.workspace, ".vis", "extensions") if _state.workspace else None


def config_extension_dir() -> str | None:
    """`<config>/extensions`, if the worker has a config directory."""
    return os.path.join(_state.config_dir, "extensions") if _state.config_dir else None


def discover(also: str | None = None) -> dict[str, Candidate]:
    """Every extension name with the candidate that wins (highest-priority source).

    In an untrusted workspace its `.vis/extensions` are skipped, except `also`: the one a
    block of this session just wrote with `promote()`."""
    if _state.safe_mode:
        return {c.name: c for c in _bundled_candidates()}
    workspace = _dir_candidates(workspace_extension_dir(), "workspace")
    if workspace and not _state.trusted and also is None:
        registry.notices.append(
            "[vis] skipped the workspace's extensions (%s in .vis/extensions): this workspace is not trusted yet; run `vis trust %s` to let its code load"
            % (", ".join(c.name for c in workspace), _state.workspace)
        )
    if not _state.trusted:
        workspace = [c for c in workspace if c.name == also]
    groups = [
        workspace,
        _dir_candidates(config_extension_dir(), "config"),
        _entry_point_candidates(),
        _bundled_candidates(),
    ]
    chosen: dict[str, Candidate] = {}
    for group in groups:
        for c in group:
            if c.name in chosen:
                chosen[c.name].shadows.append(c.source)
            else:
                chosen[c.name] = c
    return chosen
