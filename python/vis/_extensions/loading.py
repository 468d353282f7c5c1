"""Loading one extension: import it while collecting what it registers, then commit all of it
or, if anything failed (import error, invalid or duplicate name), none of it.

Failures are recorded in `registry.status` and `registry.notices`, never raised: a broken
extension never breaks the runtime.
"""
from __future__ import annotations

import os
import sys

from vis._extensions import entry_points, signatures
from vis._extensions.discovery import Candidate, discover
from vis._extensions.registry import Registrations, registry, short_error

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


def _module_name(c: Candidate) -> str:
    return "_vis_ext_%s_%s" % (c.source.replace(" ", "_"), c.name)


def _import_candidate(c: Candidate) -> None:
    if c.source == "bundled":
        sys.modules.pop(c.target, None)
        # `importlib.import_module` for an absolute name, without importing `importlib`.
        __import__(c.target)
    elif c.source == "entry point":
        obj = entry_points.load(c.target)
        if not isinstance(obj, type(sys)) and callable(obj):
            obj()
    else:
        import importlib.util

        path = c.target
        modname = _module_name(c)
        if os.path.isdir(path):
            spec = importlib.util.spec_from_file_location(
                modname, os.path.join(path, "__init__.py"), submodule_search_locations=[path]
            )
        else:
            spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot load %s" % path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(modname, None)
            raise


def _taken_names() -> dict[tuple[str, bool], str]:
    """(name, is_namespace) -> who registered it, for duplicate checks."""
    taken: dict[tuple[str, bool], str] = {}
    for e in registry.core_entries + registry.page_entries + registry.skill_entries:
        taken[(e["name"], e["kind"] == "namespace")] = "the core prelude"
    for ext in registry.loaded.values():
        for e in ext.entries:
            taken[(e["name"], e["kind"] == "namespace")] = "extension `%s`" % ext.name
    return taken


def broken_line(name: str, status: dict[str, Any]) -> str:
    """The one line the next block's output shows about a broken extension."""
    return "[vis] extension `%s` failed to load and is skipped (%s): %s" % (
        name,
        status.get("path", status.get("source")),
        status.get("error"),
    )


def load_one(c: Candidate) -> None:
    """Loads one extension; any failure is recorded, never raised."""
    from vis import _native

    status: dict[str, Any] = {"source": c.source, "path": c.where()}
    if c.shadows:
        status["shadows"] = list(c.shadows)
    registry.status[c.name] = status
    try:
        _native.validate_name(c.name, "namespace")
    except ValueError as invalid:
        status["error"] = "invalid extension name: %s" % invalid
        registry.notices.append(broken_line(c.name, status))
        return
    current = Registrations(c.name)
    registry.loading = current
    try:
        _import_candidate(c)
        taken = _taken_names()
        for e in current.entries:
            who = taken.get((e["name"], e["kind"] == "namespace"))
            if who is not None:
                raise ValueError(
                    "duplicate name `%s`: already registered by %s; rename it in extension `%s` "
                    "or deny one of them in the config" % (e["name"], who, c.name)
                )
        signatures.fill(current.entries, current.functions)
    except BaseException as error:  # noqa: BLE001 (a broken extension never breaks the runtime)
        status["error"] = short_error(error)
        registry.notices.append(broken_line(c.name, status))
        return
    finally:
        registry.loading = None
    registry.loaded[c.name] = current


def denied(name: str) -> bool:
    """True when the config's deny list covers `name` (the list lives in Rust, set by the
    worker at start-up)."""
    from vis import _native

    return _native.denied(name)


def load_extensions() -> None:
    """Loads every discovered extension that is not denied."""
    for name, c in sorted(discover().items()):
        if not denied(name):
            load_one(c)
