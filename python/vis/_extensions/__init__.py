"""Extensions, pages and skills: what the worker drives, and where each part lives.

The worker's Runner calls `install(ns, core, names)` once at start-up and
`before_block(session)` before every block. Everything an extension registers goes through
`vis.extension` (the public API); MCP tools are pushed in by `vis._mcp`, which uses this
package (never the other way round).

- `registry`: the shared state (what is registered, loaded and reported);
- `discovery`: the four sources and which candidate wins; `entry_points`: installed
  distributions' entry points and their cached index;
- `loading`: importing one extension, all or nothing;
- `skills`: SKILL.md folders;
- `signatures`: signatures and docstrings, cached; `manifest`: the prelude's entries and the
  native manifest;
- `namespace`: the objects the model calls (`git.diff(...)`).
"""
from __future__ import annotations


from vis._extensions import loading as _loading
from vis._extensions.discovery import discover
from vis._extensions.loading import denied
from vis._extensions.manifest import build, collect_core, manifest, name_of, take_manifest_update
from vis._extensions.namespace import build_objects
from vis._extensions.registry import CoreFunctions, Registrations, registry, short_error
from vis._extensions.signatures import signature_text
from vis._extensions.skills import collect_skills

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = [
    "CoreFunctions",
    "Registrations",
    "denied",
    "registry",
    "install",
    "rebuild",
    "reload_extension",
    "before_block",
    "manifest",
    "take_manifest_update",
    "take_cache_writes",
    "name_of",
    "signature_text",
]


def rebuild() -> None:
    """Rebuilds the manifest and the model's namespace objects after a change."""
    registry.manifest = build()
    registry.manifest_changed = True
    ns = registry.ns
    if ns is None:
        return
    for name, obj in list(registry.installed.items()):
        if ns.get(name) is obj:
            del ns[name]
    functions: dict[str, Any] = {}
    for ext in registry.loaded.values():
        functions.update(ext.functions)
    functions.update(registry.mcp_functions)
    registry.installed = build_objects(registry.manifest.function_names(), functions)
    for name, obj in registry.installed.items():
        ns[name] = obj
    for name in registry.core_names:
        if _loading.denied(name) and name in ns:
            del ns[name]


def install(ns: dict[str, Any], core: CoreFunctions, names: list[str]) -> None:
    """Start-up: core entries (the prelude's functions `core`, its public `names`), pages,
    skills, extensions; then the namespace objects in `ns`."""
    registry.ns = ns
    registry.core_functions = core
    registry.prelude_names = list(names)
    collect_core()
    collect_skills()
    _loading.load_extensions()
    rebuild()
    registry.manifest_changed = False


def reload_extension(name: str) -> None:
    """Drops extension `name` and loads it again from its current best source."""
    registry.loaded.pop(name, None)
    registry.status.pop(name, None)
    registry.reported.pop(name, None)
    c = discover(also=name).get(name)
    if c is not None and not _loading.denied(name):
        _loading.load_one(c)
    rebuild()


def take_cache_writes() -> list[dict[str, Any]]:
    """The cache files this start computed (`{"path", "content"}` dicts, the worker reads them
    as `runtime::cache::CacheWrite`), for the host to write; empty afterwards."""
    writes, registry.cache_writes = registry.cache_writes, []
    return writes


def before_block(session: dict[str, Any]) -> None:
    """Fills session["extensions"] from the context providers and prints each new problem
    once (at the top of the block's output)."""
    out: dict[str, Any] = {}
    lines = registry.notices
    registry.notices = []
    for name in sorted(registry.status):
        status = registry.status[name]
        if status.get("error"):
            out[name] = {"error": status["error"], "source": status["source"], "path": status["path"]}
            continue
        ext = registry.loaded.get(name)
        if ext is None:
            continue
        value: dict[str, Any] = {}
        if ext.provider is not None:
            try:
                got = ext.provider()
                if not isinstance(got, dict):
                    raise TypeError("the context provider returned %s, not a dict" % type(got).__name__)
                value = got
                registry.reported.pop(name, None)
            except BaseException as e:  # noqa: BLE001
                error = "context provider failed: %s" % short_error(e)
                value = {"error": error}
                if registry.reported.get(name) != error:
                    registry.reported[name] = error
                    lines.append(
                        "[vis] extension `%s`: %s (session[\"extensions\"][%r] holds the error)" % (name, error, name)
                    )
        out[name] = value
    session["extensions"] = out
    for line in lines:
        print(line)
