"""Extensions, pages and skills: loading, the manifest, and the model's namespace objects.

The worker's Runner calls `install(ns)` once at start-up and `before_block(session)` before
every block. Everything an extension registers goes through `vis.extension` (the public API);
this module owns the state behind it.

Sources, highest priority first (a name found in several loads only from the first):
  1. the workspace: `<workspace>/.vis/extensions/NAME.py` or `NAME/__init__.py`;
  2. the user's config: `<config>/extensions/` (same layout);
  3. installed packages declaring the `vis.extensions` entry-point group (name = entry name);
  4. bundled with vis (`extensions/` in the repository, embedded in the binary).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable

from vis import _state

#: Where a candidate extension comes from, in priority order.
SOURCES = ("workspace", "config", "entry point", "bundled")

#: Longest error text kept per extension (the model sees it in session["extensions"]).
_ERROR_MAX = 1500


@dataclass
class Candidate:
    name: str
    source: str
    #: A file or package directory (workspace/config), an entry point, or a module name.
    target: Any
    shadows: list[str] = field(default_factory=list)


@dataclass
class Loading:
    """What one extension registered while it loaded (committed only if it loads cleanly)."""

    name: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    provider: Callable[[], dict[str, Any]] | None = None
    #: (name, is_namespace) of every entry, for duplicate checks.
    keys: set[tuple[str, bool]] = field(default_factory=set)


class _Registry:
    def __init__(self) -> None:
        self.core_entries: list[dict[str, Any]] = []
        self.core_names: list[str] = []
        self.page_entries: list[dict[str, Any]] = []
        self.skill_entries: list[dict[str, Any]] = []
        #: Committed extensions: name -> Loading.
        self.loaded: dict[str, Loading] = {}
        #: name -> {"source", "path", "error"?, "shadows"?}
        self.status: dict[str, dict[str, Any]] = {}
        self.notices: list[str] = []
        self.reported: dict[str, str] = {}
        self.manifest: Any = None
        self.manifest_changed = False
        self.ns: dict[str, Any] | None = None
        #: Names this module put in the model's namespace (and the objects it put there).
        self.installed: dict[str, Any] = {}


registry = _Registry()
loading: Loading | None = None


def _short_error(exc: BaseException) -> str:
    """`Type: message` plus the innermost frame inside the extension, capped."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(tb):
        if not frame.filename.startswith("<vis>/vis/"):
            where = " (%s, line %s)" % (frame.filename, frame.lineno)
            break
    text = "%s: %s%s" % (type(exc).__name__, exc, where)
    if isinstance(exc, SyntaxError) and exc.filename:
        text = "SyntaxError: %s (%s, line %s)" % (exc.msg, exc.filename, exc.lineno)
    return text if len(text) <= _ERROR_MAX else text[: _ERROR_MAX - 1] + "…"


# -- discovery of candidates ----------------------------------------------------------------


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
        from importlib.metadata import entry_points

        eps = entry_points(group="vis.extensions")
    except Exception as e:  # noqa: BLE001 (a broken distribution must not stop the worker)
        registry.notices.append("[vis] cannot list installed extensions: %s" % _short_error(e))
        return []
    seen: set[str] = set()
    out = []
    for ep in sorted(eps, key=lambda ep: ep.name):
        if ep.name not in seen:
            seen.add(ep.name)
            out.append(Candidate(ep.name, "entry point", ep))
    return out


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
    return os.path.join(_state.workspace, ".vis", "extensions") if _state.workspace else None


def config_extension_dir() -> str | None:
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


# -- loading ------------------------------------------------------------------------------


def _module_name(c: Candidate) -> str:
    return "_vis_ext_%s_%s" % (c.source.replace(" ", "_"), c.name)


def _import_candidate(c: Candidate) -> None:
    if c.source == "bundled":
        sys.modules.pop(c.target, None)
        importlib.import_module(c.target)
    elif c.source == "entry point":
        obj = c.target.load()
        if not isinstance(obj, types.ModuleType) and callable(obj):
            obj()
    else:
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


def _where(c: Candidate) -> str:
    if c.source in ("workspace", "config"):
        return str(c.target)
    if c.source == "entry point":
        return "entry point %s = %s" % (c.name, c.target.value)
    return "bundled with vis"


def _taken_names() -> dict[tuple[str, bool], str]:
    """(name, is_namespace) -> who registered it, for duplicate checks."""
    taken: dict[tuple[str, bool], str] = {}
    for e in registry.core_entries + registry.page_entries + registry.skill_entries:
        taken[(e["name"], e["kind"] == "namespace")] = "the core prelude"
    for ext in registry.loaded.values():
        for e in ext.entries:
            taken[(e["name"], e["kind"] == "namespace")] = "extension `%s`" % ext.name
    return taken


def load_one(c: Candidate) -> None:
    """Loads one extension; any failure is recorded, never raised."""
    global loading
    from vis import _native

    status: dict[str, Any] = {"source": c.source, "path": _where(c)}
    if c.shadows:
        status["shadows"] = list(c.shadows)
    registry.status[c.name] = status
    try:
        _native.validate_name(c.name, "namespace")
    except ValueError as e:
        status["error"] = "invalid extension name: %s" % e
        registry.notices.append(_broken_line(c.name, status))
        return
    current = Loading(c.name)
    loading = current
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
    except BaseException as e:  # noqa: BLE001 (a broken extension never breaks the runtime)
        status["error"] = _short_error(e)
        registry.notices.append(_broken_line(c.name, status))
        return
    finally:
        loading = None
    registry.loaded[c.name] = current


def _broken_line(name: str, status: dict[str, Any]) -> str:
    return "[vis] extension `%s` failed to load and is skipped (%s): %s" % (
        name,
        status.get("path", status.get("source")),
        status.get("error"),
    )


def _denied(name: str) -> bool:
    from vis import _native

    return _native.denied(name)


def load_extensions() -> None:
    for name, c in sorted(discover().items()):
        if _denied(name):
            continue
        load_one(c)


def reload_extension(name: str) -> None:
    """Drops extension `name` and loads it again from its current best source."""
    registry.loaded.pop(name, None)
    registry.status.pop(name, None)
    registry.reported.pop(name, None)
    c = discover(also=name).get(name)
    if c is not None and not _denied(name):
        load_one(c)
    rebuild()


# -- core entries, pages, skills --------------------------------------------------------------


class _Raw:
    """Shows a string annotation without quotes (`path: str`, not `path: 'str'`)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def signature_text(obj: Any) -> str:
    """`(a, b: int = 1) -> str` for a callable (string annotations unquoted); "" if unknown."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""

    def raw(annotation: Any) -> Any:
        return _Raw(annotation) if isinstance(annotation, str) else annotation

    params = [p.replace(annotation=raw(p.annotation)) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=raw(sig.return_annotation)))


_signature = signature_text


def collect_core() -> None:
    import vis

    entries = []
    names = []
    for name in vis.__all__:
        obj = getattr(vis, name, None)
        if obj is None or inspect.isclass(obj) or not callable(obj):
            continue
        names.append(name)
        entries.append(
            {
                "name": name,
                "kind": "function",
                "signature": _signature(obj),
                "doc": inspect.getdoc(obj) or "",
                "pinned": True,
                "origin": "core",
            }
        )
    registry.core_entries = entries
    registry.core_names = names
    embedded = sys.modules.get("_vis_embedded")
    files: dict[str, str] = getattr(embedded, "FILES", {}) if embedded else {}
    pages = []
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


def front_matter(text: str) -> dict[str, str]:
    """`key: value` pairs of a leading `---` block (the subset of YAML SKILL.md files use)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    out: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return out
        if ":" in line and not line[:1].isspace():
            key, value = line.split(":", 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            out[key.strip()] = value
    return {}


def collect_skills() -> None:
    from vis import _native

    roots = []
    if _state.workspace:
        roots.append(os.path.join(_state.workspace, ".vis", "skills"))
    if _state.config_dir:
        roots.append(os.path.join(_state.config_dir, "skills"))
    skills: dict[str, dict[str, Any]] = {}
    for root in roots:
        if not os.path.isdir(root):
            continue
        for entry in sorted(os.listdir(root)):
            path = os.path.join(root, entry, "SKILL.md")
            if entry.startswith(".") or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                meta = front_matter(text)
                name = meta.get("name", "").strip()
                if not name:
                    raise ValueError("no `name:` in its front matter (a leading --- block)")
                if not meta.get("description", "").strip():
                    raise ValueError("no `description:` in its front matter")
                _native.validate_name(name, "skill")
            except (OSError, UnicodeDecodeError, ValueError) as e:
                registry.notices.append("[vis] skill %s is skipped: %s" % (path, e))
                continue
            if name in skills:
                continue  # the workspace's skill wins over the user's
            skills[name] = {
                "name": name,
                "kind": "skill",
                "summary": meta["description"],
                "doc": text,
                "origin": "core",
            }
    registry.skill_entries = list(skills.values())


# -- the manifest and the model's namespace -----------------------------------------------


def all_entries() -> list[dict[str, Any]]:
    entries = list(registry.core_entries) + list(registry.page_entries) + list(registry.skill_entries)
    for name in sorted(registry.loaded):
        entries.extend(registry.loaded[name].entries)
    from vis import _mcp

    entries.extend(_mcp.entries())
    return entries


def build_manifest() -> Any:
    from vis import _native

    try:
        return _native.Manifest(all_entries())
    except (TypeError, KeyError, ValueError) as e:
        # Should not happen (duplicates are checked per extension); keep the prelude usable.
        registry.notices.append("[vis] the manifest could not be built: %s; extensions are disabled" % e)
        registry.loaded.clear()
        return _native.Manifest(all_entries())


class Namespace:
    """A namespace in the model's namespace (`git`, `slack.admin`): attributes are its members;
    calling it calls the function of the same path, if there is one."""

    __slots__ = ("_path", "_function", "_members")

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_function", None)
        object.__setattr__(self, "_members", {})

    def __getattr__(self, attr: str) -> Any:
        members = object.__getattribute__(self, "_members")
        if attr in members:
            return members[attr]
        path = object.__getattribute__(self, "_path")
        raise AttributeError(
            "namespace '%s' has no attribute '%s'; doc('%s') lists its members" % (path, attr, path)
        )

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError("namespace '%s' is read-only" % self._path)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._function is None:
            raise TypeError(
                "namespace '%s' is not callable; doc('%s') lists its members" % (self._path, self._path)
            )
        return self._function(*args, **kwargs)

    def __dir__(self) -> list[str]:
        return sorted(self._members)

    def __repr__(self) -> str:
        n = len(self._members)
        return "<namespace %s: %d member%s; doc('%s') lists them>" % (self._path, n, "" if n == 1 else "s", self._path)


def _build_objects(manifest: Any) -> dict[str, Any]:
    """Top-level name -> object for every visible extension function."""
    functions: dict[str, Callable[..., Any]] = {}
    for ext in registry.loaded.values():
        functions.update(ext.functions)
    from vis import _mcp

    functions.update(_mcp.functions())
    visible = [n for n in manifest.function_names() if n in functions]
    spaces: dict[str, Namespace] = {}

    def space(path: str) -> Namespace:
        ns = spaces.get(path)
        if ns is None:
            ns = spaces[path] = Namespace(path)
            if "." in path:
                parent, leaf = path.rsplit(".", 1)
                space(parent)._members[leaf] = ns
        return ns

    for name in visible:
        if "." in name:
            space(name.rsplit(".", 1)[0])
    top: dict[str, Any] = {}
    for name in visible:
        fn = functions[name]
        if name in spaces:
            object.__setattr__(spaces[name], "_function", fn)
        elif "." in name:
            parent, leaf = name.rsplit(".", 1)
            spaces[parent]._members[leaf] = fn
        else:
            top[name] = fn
    for path, obj in spaces.items():
        if "." not in path:
            top[path] = obj
    return top


def rebuild() -> None:
    """Rebuilds the manifest and the model's namespace objects after a change."""
    registry.manifest = build_manifest()
    registry.manifest_changed = True
    ns = registry.ns
    if ns is None:
        return
    for name, obj in list(registry.installed.items()):
        if ns.get(name) is obj:
            del ns[name]
    registry.installed = _build_objects(registry.manifest)
    for name, obj in registry.installed.items():
        ns[name] = obj
    for name in registry.core_names:
        if _denied(name) and name in ns:
            del ns[name]


def install(ns: dict[str, Any]) -> None:
    """Start-up: core entries, pages, skills, extensions; then the namespace objects."""
    registry.ns = ns
    collect_core()
    collect_skills()
    load_extensions()
    rebuild()
    registry.manifest_changed = False


def manifest() -> Any:
    if registry.manifest is None:
        registry.manifest = build_manifest()
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
        return obj._path
    for ext in registry.loaded.values():
        for name, fn in ext.functions.items():
            if fn is obj:
                return name
    from vis import _mcp

    for name, fn in _mcp.functions().items():
        if fn is obj:
            return name
    for name in registry.core_names:
        import vis

        if getattr(vis, name, None) is obj:
            return name
    return None


# -- before every block -------------------------------------------------------------------


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
                error = "context provider failed: %s" % _short_error(e)
                value = {"error": error}
                if registry.reported.get(name) != error:
                    registry.reported[name] = error
                    lines.append("[vis] extension `%s`: %s (session[\"extensions\"][%r] holds the error)" % (name, error, name))
        out[name] = value
    session["extensions"] = out
    from vis import _mcp

    _mcp.before_block(session)
    for line in lines:
        print(line)
