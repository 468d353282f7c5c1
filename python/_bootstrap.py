"""Worker start-up: make the embedded prelude importable and set up sys for blocks.

Run once by the worker, after it registered `vis._native`. The embedded files (the prelude
`vis/...`, the bundled extensions `_vis_bundled/...`) and their bytecode (compiled by the
build's Python; none when this Python reads another format) stay in the binary:
`vis._native.embedded_source(path)` and `embedded_bytecode(path)` hand one over when it is asked
for, so a start allocates nothing for what it does not read. The worker runs this file from the
build's bytecode too, when it can.

Only the standard modules the interpreter has already loaded are used here: start-up time is
what this file is about (`importlib.machinery` would import `importlib` and `warnings`; its
`ModuleSpec` is the frozen import system's own, already loaded).
"""
import marshal
import os
import sys

from _collections_abc import Mapping  # loaded by `os` already (`collections.abc` is not)

ModuleSpec = sys.modules["_frozen_importlib"].ModuleSpec
_native = sys.modules["vis._native"]


class EmbeddedFiles(Mapping):
    """The embedded files under `prefix` by their path below it (`vis/x.py`, `git.py`): a
    read-only mapping whose texts are made Python strings only when they are read."""

    def __init__(self, prefix=""):
        self.prefix = prefix
        self.paths = [p[len(prefix):] for p in _native.embedded_paths() if p.startswith(prefix)]
        self.known = frozenset(self.paths)

    def __getitem__(self, path):
        if path not in self.known:
            raise KeyError(path)
        return _native.embedded_source(self.prefix + path)

    def __iter__(self):
        return iter(self.paths)

    def __len__(self):
        return len(self.paths)


class EmbeddedPrelude:
    """Imports the `vis` package (and `_vis_bundled`) from sources compiled into the binary.

    A module's code comes from the build's bytecode when this Python has the same magic number,
    else it is compiled from the embedded source; either way its file name is `<vis>/PATH`.
    """

    def __init__(self, files):
        self.files = files
        self.modules = {}
        for path in files:
            if not path.endswith(".py"):
                continue
            parts = path[:-3].split("/")
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            self.modules[".".join(parts)] = (path, is_package)

    def find_spec(self, fullname, path=None, target=None):
        entry = self.modules.get(fullname)
        if entry is None:
            return None
        spec = ModuleSpec(fullname, self, origin="<vis>/" + entry[0], is_package=entry[1])
        return spec

    def get_source(self, fullname):
        return self.files[self.modules[fullname][0]]

    def get_code(self, fullname):
        path = self.modules[fullname][0]
        blob = _native.embedded_bytecode(path)
        if blob is not None:
            try:
                return marshal.loads(blob)
            except (EOFError, ValueError, TypeError):
                pass  # unreadable bytecode: the source is the truth
        return compile(self.files[path], "<vis>/" + path, "exec", dont_inherit=True)

    def is_package(self, fullname):
        return self.modules[fullname][1]

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.get_code(module.__name__), module.__dict__)


def _find_venv(workspace):
    candidates = []
    if os.environ.get("VIRTUAL_ENV"):
        candidates.append(os.environ["VIRTUAL_ENV"])
    if workspace:
        candidates.append(os.path.join(workspace, ".venv"))
    for venv in candidates:
        if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
            return venv
    return None


def _setup(files):
    """The prelude becomes importable; sys.path is left alone (see `extend_path`)."""
    sys.meta_path.insert(0, EmbeddedPrelude(files))
    sys.argv = [""]
    ver = "python%d.%d" % sys.version_info[:2]
    # Embedded, sys.executable would be the vis binary; blocks expect a Python. A venv's
    # own Python is chosen in `extend_path`, once trust is known.
    for name in (ver, "python3"):
        exe = os.path.join(sys.base_exec_prefix, "bin", name)
        if os.path.exists(exe):
            sys.executable = exe
            break


def extend_path(workspace, trusted):
    """Makes the workspace (and its venv) importable, after the standard library.

    Called by the worker once the prelude has imported what it needs, so a workspace file
    named like a standard module (`logging.py`, `json.py`) never replaces it. A venv's `.pth`
    files run code, so they are processed only in a trusted workspace; an untrusted venv's
    packages are still importable, plainly.
    """
    venv = _find_venv(workspace)
    if venv:
        site_packages = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
        venv_in_workspace = bool(workspace) and os.path.realpath(venv).startswith(os.path.realpath(workspace) + os.sep)
        if trusted or not venv_in_workspace:
            import site

            site.addsitedir(site_packages)
            # Its Python starts its `.pth` files too: only for a venv whose code may run.
            sys.executable = os.path.join(venv, "bin", "python")
        elif os.path.isdir(site_packages) and site_packages not in sys.path:
            sys.path.append(site_packages)
    if workspace and workspace not in sys.path:
        sys.path.append(workspace)


def syntax_tree_made():
    """True once this interpreter has made the `ast` node types: importing `_ast` does, and so
    does the builtin `compile`'s first call (it checks whether its argument is a tree)."""
    return any(c.__name__ == "AST" and c.__module__ == "ast" for c in object.__subclasses__())


def _embed():
    """The embedded files, importable (`EmbeddedPrelude`): the prelude is the package `vis`,
    the bundled extensions the package `_vis_bundled`; all of them (prelude pages included)
    stay readable through the module `_vis_embedded` (`FILES`, and `BUNDLED` for the bundled
    extensions by their path under `extensions/`)."""
    files = EmbeddedFiles()
    embedded = type(sys)("_vis_embedded")
    embedded.FILES = files
    embedded.BUNDLED = EmbeddedFiles("_vis_bundled/")
    embedded.extend_path = extend_path
    #: The modules loaded before the prelude (the interpreter's start, `site` and its `.pth`
    #: files): what the prelude's own start imports is the rest (a test keeps it small).
    embedded.MODULES_BEFORE_PRELUDE = frozenset(sys.modules)
    embedded.syntax_tree_made = syntax_tree_made
    #: Whether the interpreter's start made the `ast` node types (a test keeps the prelude's
    #: start, and a first block of one expression, from making them: a millisecond).
    embedded.SYNTAX_TREE_BEFORE_PRELUDE = syntax_tree_made()
    sys.modules["_vis_embedded"] = embedded
    return files


_setup(_embed())
