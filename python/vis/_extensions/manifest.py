"""The manifest: every entry the session can see (the prelude's functions and pages, skills,
extensions, MCP tools), built into the native `Manifest` that `apropos` and `doc` search and
that the worker sends to the host.
"""
from __future__ import annotations

import sys

from vis import _native
from vis._extensions.namespace import Namespace, path_of
from vis._extensions.registry import registry
from vis._extensions.signatures import describe, doc_text, signature_text

__all__ = ["all_entries", "build", "collect_core", "doc_text", "manifest", "name_of", "signature_text", "take_manifest_update"]

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


def collect_core() -> None:
    """The prelude's own entries: its functions (pinned) and documentation pages."""
    functions = registry.core_functions
    # All of them are the embedded prelude's: its digest is in the cache key, their modules
    # need not be imported to make it.
    described = describe(functions, embedded=True)
    registry.core_entries = [
        {
            "name": name,
            "kind": "function",
            "signature": described[name][0],
            "doc": described[name][1],
            "pinned": True,
            "origin": "core",
        }
        for name in functions
    ]
    registry.core_names = list(functions)
    embedded = sys.modules.get("_vis_embedded")
    files: dict[str, str] = getattr(embedded, "FILES", {}) if embedded else {}
    pages: list[dict[str, Any]] = []
    for path in sorted(files):
        if path.startswith("vis/docs/") and path.endswith(".md"):
            stem = path[len("vis/docs/") : -3]
            pages.append({"name": "vis." + stem, "kind": "page", "doc": files[path], "origin": "core"})
    if pages:
        pages.insert(
            0,
            {
                "name": "vis",
                "kind": "namespace",
                "summary": "Vis documentation pages: doc('vis.NAME') reads one",
                "origin": "core",
            },
        )
    registry.page_entries = pages


def all_entries() -> list[dict[str, Any]]:
    """Every entry, in manifest input order (core, pages, skills, extensions by name, MCP)."""
    entries = registry.core_entries + registry.page_entries + registry.skill_entries
    for name in sorted(registry.loaded):
        entries.extend(registry.loaded[name].entries)
    entries.extend(registry.mcp_entries)
    return entries


def build() -> Any:
    """The native manifest of every entry, deny list applied."""
    try:
        return _native.Manifest(all_entries())
    except (TypeError, KeyError, ValueError) as e:
        # Should not happen (duplicates are checked per extension); keep the prelude usable.
        registry.notices.append("[vis] the manifest could not be built: %s; extensions are disabled" % e)
        registry.loaded.clear()
        return _native.Manifest(all_entries())


def manifest() -> Any:
    """The session's native manifest (built on first use)."""
    if registry.manifest is None:
        registry.manifest = build()
    return registry.manifest


def take_manifest_update() -> Any:
    """The visible manifest (deny list applied) if it changed since the last call, else None;
    the worker sends its entries to the host."""
    if not registry.manifest_changed:
        return None
    registry.manifest_changed = False
    return manifest()


def name_of(obj: Any) -> str | None:
    """The registered dotted name of a function or namespace object, if any."""
    if isinstance(obj, Namespace):
        return path_of(obj)
    for ext in registry.loaded.values():
        for name, fn in ext.functions.items():
            if fn is obj:
                return name
    for name, fn in registry.mcp_functions.items():
        if fn is obj:
            return name
    for name in registry.core_names:
        if registry.core_functions.loaded(name) is obj:
            return name
    return None
