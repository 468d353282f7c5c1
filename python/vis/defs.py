"""Persisted definitions: the functions, classes and imports a session's blocks defined.

Top-level `def`, `async def` and `class` statements (and the imports they rely on) are kept as
source with the session and re-created whenever a new worker starts, so helpers outlive
crashes and restarts. Redefining replaces; `del name` or rebinding the name to a value removes.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any, Iterator

_DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def describe(obj: Any, name: str) -> tuple[str, str]:
    """(signature, first doc line) of a function or class, for listings."""
    try:
        if inspect.isclass(obj):
            sig = "class %s%s" % (name, inspect.signature(obj))
        else:
            prefix = "async def " if inspect.iscoroutinefunction(obj) else "def "
            sig = prefix + name + str(inspect.signature(obj))
    except (TypeError, ValueError):
        sig = ("class " if inspect.isclass(obj) else "def ") + name + "(...)"
    doc = inspect.getdoc(obj) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    return sig, first


def _segment(lines: list[str], node: ast.AST, start_line: int) -> str:
    """Source of a top-level statement, decorators included."""
    end_line = node.end_lineno or start_line
    chunk = lines[start_line - 1 : end_line]
    if chunk and node.end_col_offset is not None:
        last = chunk[-1].encode("utf-8")[: node.end_col_offset].decode("utf-8", "replace")
        chunk[-1] = last
    text = "".join(chunk)
    return text if text.endswith("\n") else text + "\n"


def _import_entries(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    """(bound name, one-alias source) for each name an import statement binds."""
    for alias in node.names:
        if isinstance(node, ast.Import):
            stmt = ast.Import(names=[alias])
            bound = alias.asname or alias.name.split(".")[0]
        else:
            stmt = ast.ImportFrom(module=node.module, names=[alias], level=node.level)
            bound = alias.asname or alias.name
            if bound == "*":
                bound = "%s.*" % (node.module or "")
        yield bound, ast.unparse(stmt) + "\n"


def _rebound_names(node: ast.stmt) -> list[str]:
    """Names a plain assignment or `del` at top level rebinds or removes."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
        targets = [node.target]
    elif isinstance(node, ast.Delete):
        targets = node.targets
    names = []
    for t in targets:
        for sub in ast.walk(t):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return names


class DefRegistry:
    """The worker's copy of the session's persisted definitions, in definition order."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        self._lines: list[str] = []
        self._changed: dict[str, dict[str, Any] | None] = {}

    def add(self, record: dict[str, Any], restored: bool = True) -> None:
        self.entries.pop(record["name"], None)
        entry = dict(record)
        entry["restored"] = restored
        self.entries[record["name"]] = entry

    def begin_block(self, code: str) -> None:
        """Starts collecting the changes of a block whose source is `code`."""
        self._lines = code.splitlines(True)
        self._changed = {}

    def record_statement(self, node: ast.stmt, ns: dict[str, Any]) -> None:
        """Records what a top-level statement that just ran defined, imported or removed."""
        if isinstance(node, _DEF_NODES):
            obj = ns.get(node.name)
            if obj is None:
                return
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            sig, doc = describe(obj, node.name)
            self._set(
                {
                    "name": node.name,
                    "kind": kind,
                    "source": _segment(self._lines, node, start),
                    "signature": sig,
                    "doc": doc,
                }
            )
        elif isinstance(node, ast.Import) or (
            # __future__ imports steer the compiler of one block; there is nothing to restore.
            isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__"
        ):
            for bound, source in _import_entries(node):
                self._set({"name": bound, "kind": "import", "source": source, "signature": source.strip(), "doc": ""})
        else:
            for name in _rebound_names(node):
                if name in self.entries:
                    del self.entries[name]
                    self._changed[name] = None

    def _set(self, record: dict[str, Any]) -> None:
        self.add(record)
        self._changed[record["name"]] = record

    def take_changes(self) -> dict[str, list[Any]]:
        """The block's changes, for the host to persist: {"set": [...], "deleted": [...]}."""
        changed, self._changed = self._changed, {}
        return {
            "set": [r for r in changed.values() if r is not None],
            "deleted": [name for name, r in changed.items() if r is None],
        }

    def listing(self) -> "DefList":
        return DefList(dict(e) for e in self.entries.values())


class DefList(list):
    """The result of `defs()`: a list of dicts that prints as a compact listing."""

    def __repr__(self) -> str:
        funcs = [d for d in self if d["kind"] != "import"]
        imports = [d["name"] for d in self if d["kind"] == "import"]
        if not funcs and not imports:
            return "no definitions yet: top-level def/class statements in blocks are kept here"
        noun = "definition" if len(funcs) == 1 else "definitions"
        lines = ["%d %s (kept across restarts):" % (len(funcs), noun)]
        for d in funcs:
            line = "  " + d["signature"]
            if d.get("doc"):
                line += "  — " + d["doc"]
            if not d.get("restored", True):
                line += "  [not restored]"
            lines.append(line)
        if imports:
            lines.append("imports: " + ", ".join(imports))
        return "\n".join(lines)

    __str__ = __repr__


def defs() -> DefList:
    """List the helper functions and classes defined in this session (kept across restarts).

    Top-level `def`/`class` statements in blocks are saved as source with the session and
    re-created when a new worker starts; redefining replaces, `del name` removes. Each entry
    is a dict with name, kind, signature, doc (first line) and source; the list prints as a
    compact listing.
    """
    import vis

    registry = vis._registry
    return registry.listing() if registry is not None else DefList()
