"""Persisted definitions: the functions, classes and imports a session's blocks defined.

Top-level `def`, `async def` and `class` statements (and the imports they rely on) are kept as
source with the session and re-created whenever a new worker starts, so helpers outlive
crashes and restarts. Redefining replaces; `del name` or rebinding the name to a value removes.

A kept definition may read module-level names. Those that are simple constants are kept with
it: `NAME = <literal>` with an immutable value (numbers, strings, bytes, tuples, frozensets,
None, booleans), or `NAME = mod.func(<literals>)` where `mod` is a kept import (for example
`PAT = re.compile(r"\d+")`). Any other global it reads (a list, a loaded file, a name set by a
loop) is not kept, and the block that defines or uses it is told so, by name.

What is kept is capped: one definition's source at `_native.MAX_DEFINITION_BYTES`, all of a
session's at `_native.MAX_SESSION_DEFINITION_BYTES`. A larger one still works in this worker;
the block says it is not kept (and an earlier definition of the same name is dropped, so a
restart does not bring back a stale one).

The host does not take this worker's word for any of it: it keeps only definitions that are
top-level statements of the block's own source, cut out by itself (`runtime::defs`), and a new
worker runs a stored source only once Python's parser reads it as exactly one statement of its
kind binding its name (`compile_definition`).
"""
from __future__ import annotations

import builtins

from vis import _native

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    # `_ast`: the node types, without the module `ast` (which imports `enum` and
    # `contextlib`: milliseconds at every worker start). `ast` itself is imported by the few
    # statements that need `ast.literal_eval` (see `_literal`).
    import _ast as ast
    from types import CodeType
    from typing import Any, Iterator, Mapping
else:
    # Not `type(compile(...))`: the first `compile()` makes every `ast` node type (about a
    # millisecond of each worker start).
    CodeType = type((lambda: None).__code__)

    class _LazyAst:
        """`_ast`, imported at the first use of one of its names: making its node types costs
        a worker's start a millisecond or more, and a start whose definitions come from the
        cache and whose first block is one expression never parses anything."""

        def __getattr__(self, name):
            import _ast

            globals()["ast"] = _ast  # from now on the module itself
            return getattr(_ast, name)

    ast = _LazyAst()

#: Immutable values a literal constant may have (a mutable one would come back as it was
#: first written, not as the blocks left it).
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset)

#: Longest constant statement kept (larger data belongs in a file).
_MAX_CONSTANT_CHARS: int = _native.MAX_CONSTANT_CHARS


def _plain_annotation() -> tuple[type, ...]:
    """Nodes an annotation of a kept constant may have: names, attributes, subscripts,
    literals, tuples and `|` (nothing that calls or computes)."""
    return (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.BinOp, ast.BitOr, ast.Load)


def parse_module(source: str, filename: str) -> ast.Module:
    """`ast.parse(source, filename)`, without importing `ast`."""
    # The flag typed as a plain int: `compile` is then typed to return anything.
    only_ast: int = ast.PyCF_ONLY_AST
    tree: ast.Module = compile(source, filename, "exec", only_ast, dont_inherit=True)
    return tree


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk`: `node` and every node below it, breadth first (the same order)."""
    todo = [node]
    index = 0
    while index < len(todo):
        node = todo[index]
        index += 1
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                todo.append(value)
            elif isinstance(value, list):
                todo.extend(item for item in value if isinstance(item, ast.AST))
        yield node


def _unparse_import(node: ast.Import | ast.ImportFrom) -> str:
    """`ast.unparse` of an import statement (the same text), without importing `ast`."""
    names = ", ".join(a.name + (" as " + a.asname if a.asname else "") for a in node.names)
    if isinstance(node, ast.Import):
        return "import " + names
    return "from " + "." * (node.level or 0) + (node.module or "") + " import " + names


def describe(obj: Any, name: str) -> tuple[str, str]:
    """(signature, first doc line) of a function or class, for listings."""
    import inspect

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


def source_lines(code: str) -> list[str]:
    """`code` split into lines as Python's tokenizer counts them (only `\\r\\n`, `\\r` and
    `\\n` end a line, and each ends in `\\n` here), so `ast` line numbers index it."""
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _segment(lines: list[str], node: ast.stmt, start_line: int, start_col: int | None = None) -> str:
    """Source of a top-level statement, decorators included: from byte `start_col` of its first
    line (or the line's first character that is not white space), to its last token. The host
    cuts the same text out of the block (`runtime::defs`)."""
    end_line = node.end_lineno or start_line
    chunk = lines[start_line - 1 : end_line]
    if chunk and node.end_col_offset is not None:
        last = chunk[-1].encode("utf-8")[: node.end_col_offset].decode("utf-8", "replace")
        chunk[-1] = last
    if chunk:
        if start_col is None:
            chunk[0] = chunk[0].lstrip(" \t\f")
        else:
            chunk[0] = chunk[0].encode("utf-8")[start_col:].decode("utf-8", "replace")
    text = "".join(chunk)
    return text if text.endswith("\n") else text + "\n"


def _import_entries(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    """(bound name, one-alias source) for each name an import statement binds."""
    for alias in node.names:
        stmt: ast.Import | ast.ImportFrom
        if isinstance(node, ast.Import):
            stmt = ast.Import(names=[alias])
            bound = alias.asname or alias.name.split(".")[0]
        else:
            stmt = ast.ImportFrom(module=node.module, names=[alias], level=node.level)
            bound = alias.asname or alias.name
            if bound == "*":
                bound = "%s.*" % (node.module or "")
        yield bound, _unparse_import(stmt) + "\n"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        for sub in _walk(t):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return names


def _globals_read(source: str) -> set[str]:
    """Module-level names a definition reads, when defined (decorators, defaults, bases) or
    when called (bodies, nested functions and lambdas)."""
    try:
        import symtable

        top = symtable.symtable(source, "<def>", "exec")
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    tables = [top]
    while tables:
        table = tables.pop()
        names.update(s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced())
        tables.extend(table.get_children())
    return names


def code_names(code: CodeType) -> frozenset[str]:
    """Every name `code` and the code nested in it (bodies, lambdas, comprehensions, class
    bodies) load by name or attribute: a superset of the globals its source reads, found
    without parsing it again. Checking this first spares a symbol table for most definitions."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= code_names(const)
    return frozenset(names)


def _stored_names(node: ast.stmt) -> set[str]:
    """Every name a top-level statement that is not itself a definition may bind globally."""
    names: set[str] = set()
    for sub in _walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return names


def _binds(node: ast.stmt, kind: str) -> str | None:
    """The name `node` binds as a persisted definition of `kind`, or None when it is not one."""
    if kind == "function" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name
    if kind == "class" and isinstance(node, ast.ClassDef):
        return node.name
    if kind == "import" and isinstance(node, (ast.Import, ast.ImportFrom)) and len(node.names) == 1:
        if isinstance(node, ast.ImportFrom) and (node.level or node.module == "__future__"):
            return None
        return next(_import_entries(node))[0]
    if kind == "constant":
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            return node.targets[0].id
        if isinstance(node, ast.AnnAssign) and node.simple and node.value is not None and isinstance(node.target, ast.Name):
            return node.target.id
    return None


def compile_definition(record: dict[str, Any]) -> CodeType:
    """The code of a persisted definition (`name`, `kind`, `source`), once Python's own parser
    has read the source as exactly one statement of that kind binding that name. Raises
    ValueError otherwise (and SyntaxError when it does not parse): a stored source that holds
    anything more is never run."""
    name, kind = record["name"], record["kind"]
    filename = "<def %s>" % name
    tree = parse_module(record["source"], filename)
    if len(tree.body) != 1:
        problem = "it holds %d statements" % len(tree.body)
    else:
        bound = _binds(tree.body[0], kind)
        if bound == name:
            return compile(tree, filename, "exec", dont_inherit=True)
        problem = "it binds %s" % bound if bound else "it is a %s statement" % type(tree.body[0]).__name__
    raise ValueError(
        "the stored source is not one %s statement that defines %s (%s), so it was not run; define it again" % (kind, name, problem)
    )


def _size_problem(name: str, size: int, total: int) -> str | None:
    """Why a definition of `size` bytes is not kept, when the session's would total `total`
    with it (the host says the same when it refuses one: `runtime::defs`)."""
    if size > _native.MAX_DEFINITION_BYTES:
        return (
            "[vis] `%s` is not kept across restarts: its source is %s bytes, over the %s limit for one "
            "definition; keep large data in a file and read it when called, or split the code into smaller "
            "definitions" % (name, format(size, ","), format(_native.MAX_DEFINITION_BYTES, ","))
        )
    if total > _native.MAX_SESSION_DEFINITION_BYTES:
        return (
            "[vis] `%s` is not kept across restarts: the session's definitions would total %s bytes, over "
            "the %s limit; drop ones no longer needed (`del name`) or keep data in files"
            % (name, format(total, ","), format(_native.MAX_SESSION_DEFINITION_BYTES, ","))
        )
    return None


def _maybe_literal() -> tuple[type, ...]:
    """Nodes `ast.literal_eval` may accept besides a constant (every other node it refuses)."""
    return (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.UnaryOp, ast.BinOp, ast.Call)


def _literal(node: ast.expr) -> bool:
    """True when `ast.literal_eval(node)` gives an immutable value. A constant (most of them)
    and a node it refuses are answered without importing `ast`."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, _IMMUTABLE)
    if not isinstance(node, _maybe_literal()):
        return False
    import ast as full_ast

    try:
        return isinstance(full_ast.literal_eval(node), _IMMUTABLE)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


class DefRegistry:
    """The worker's copy of the session's persisted definitions, in definition order."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}
        #: UTF-8 size of each entry's source (what the limits count).
        self._sizes: dict[str, int] = {}
        self._lines: list[str] = []
        self._changed: dict[str, dict[str, Any] | None] = {}
        #: Constants blocks of this worker assigned, by name: kept once a definition reads one.
        self._constants: dict[str, dict[str, Any]] = {}
        #: Names blocks of this worker bound by anything else (values a new worker lacks).
        self._unkept: set[str] = set()
        self._reads: dict[str, set[str]] = {}
        #: Source -> `code_names` of its compiled code, for the definitions compiled here.
        self._names: dict[str, frozenset[str]] = {}

    def note_code(self, source: str, code: CodeType) -> None:
        """Remembers what the compiled `code` of a definition's `source` may read."""
        self._names[source] = code_names(code)

    def names_of(self, source: str) -> frozenset[str] | None:
        """`code_names` of the definition `source`, if it was compiled here."""
        return self._names.get(source)

    def may_read(self, source: str, names: set[str] | frozenset[str]) -> bool:
        """False only when the definition `source` certainly reads none of `names`."""
        candidates = self._names.get(source)
        return candidates is None or not candidates.isdisjoint(names)

    def add(self, record: Mapping[str, Any], restored: bool = True) -> None:
        self.entries.pop(record["name"], None)
        entry = dict(record)
        entry["restored"] = restored
        self.entries[record["name"]] = entry
        self._sizes[record["name"]] = len(record["source"].encode("utf-8"))

    def _drop(self, name: str) -> None:
        """Removes `name` and records the removal for the host."""
        del self.entries[name]
        self._sizes.pop(name, None)
        self._changed[name] = None

    def begin_block(self, code: str) -> None:
        """Starts collecting the changes of a block whose source is `code`."""
        self._lines = source_lines(code)
        self._changed = {}

    def record_statement(self, node: ast.stmt, ns: dict[str, Any], code: CodeType | None = None) -> None:
        """Records what a top-level statement that just ran (compiled as `code`) defined,
        imported or removed."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            obj = ns.get(node.name)
            if obj is None:
                return
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            sig, doc = describe(obj, node.name)
            source = _segment(self._lines, node, start)
            if code is not None:
                self.note_code(source, code)
            self._set(
                {
                    "name": node.name,
                    "kind": kind,
                    "source": source,
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
                    self._drop(name)
            stored = _stored_names(node)
            constant = self._constant(node)
            for name in stored:
                self._constants.pop(name, None)
            if constant is not None:
                self._constants[constant["name"]] = constant
                stored.discard(constant["name"])
            self._unkept |= stored

    def _constant(self, node: ast.stmt) -> dict[str, Any] | None:
        """The record of `NAME = <simple constant>`, or None when `node` is something else."""
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None and node.simple:
            target, value = node.target, node.value
        else:
            return None
        if not isinstance(target, ast.Name):
            return None
        plain = _plain_annotation()
        if isinstance(node, ast.AnnAssign) and not all(
            isinstance(n, plain) and (not isinstance(n, ast.BinOp) or isinstance(n.op, ast.BitOr))
            for n in _walk(node.annotation)
        ):
            return None
        # The size first: a large literal is not worth evaluating a second time.
        source = _segment(self._lines, node, node.lineno, node.col_offset)
        if len(source) > _MAX_CONSTANT_CHARS or not self._simple_value(value):
            return None
        return {"name": target.id, "kind": "constant", "source": source, "signature": _clip(source.strip(), 70), "doc": ""}

    def _simple_value(self, value: ast.expr) -> bool:
        if _literal(value):
            return True
        if not isinstance(value, ast.Call):
            return False
        root = value.func
        while isinstance(root, ast.Attribute):
            root = root.value
        kept_import = isinstance(root, ast.Name) and self.entries.get(root.id, {}).get("kind") == "import"
        return (
            kept_import
            and all(_literal(a) for a in value.args)
            and all(k.arg is not None and _literal(k.value) for k in value.keywords)
        )

    def _reads_of(self, record: dict[str, Any]) -> set[str]:
        source = record["source"]
        if source not in self._reads:
            self._reads[source] = _globals_read(source) - set(dir(builtins)) - {record["name"]}
        return self._reads[source]

    def _keep_constants(self) -> dict[str, list[str]]:
        """Keeps the constants kept definitions read; returns, per definition this block set,
        the globals it reads that a new worker will not have."""
        changed = {n for n, r in self._changed.items() if r is not None and r["kind"] != "constant"}
        dropped = {n for n, r in self._changed.items() if r is None}
        # What an unchanged definition reads matters only for a known constant or a name this
        # block dropped; without either, its reads are not computed (after a restore that
        # spares the first block a symbol table per restored definition).
        others_matter = bool(self._constants) or bool(dropped & self._unkept)
        # Only these names can change the outcome (for a definition this block set, or for
        # any other); a definition whose code names none of them needs no symbol table.
        watched_by_changed = set(self._constants) | self._unkept
        watched_by_others = set(self._constants) | (dropped & self._unkept)
        missing: dict[str, list[str]] = {}
        for record in list(self.entries.values()):
            if record["kind"] not in ("function", "class"):
                continue
            is_changed = record["name"] in changed
            if not others_matter and not is_changed:
                continue
            if not self.may_read(record["source"], watched_by_changed if is_changed else watched_by_others):
                continue
            for name in sorted(self._reads_of(record)):
                if name in self.entries:
                    continue
                constant = self._constants.get(name)
                if constant is not None:
                    self._set(constant)
                elif name in self._unkept and (record["name"] in changed or name in dropped):
                    missing.setdefault(record["name"], []).append(name)
        return missing

    def _set(self, record: dict[str, Any]) -> None:
        name = record["name"]
        size = len(record["source"].encode("utf-8"))
        total = size + sum(s for n, s in self._sizes.items() if n != name)
        problem = _size_problem(name, size, total)
        if problem is not None:
            print(problem)
            if name in self.entries:
                self._drop(name)
            return
        self.add(record)
        self._changed[name] = record

    def take_changes(self) -> dict[str, list[Any]]:
        """The block's changes, for the host to persist: {"set": [...], "deleted": [...]}.

        Also tells the block (in its output) which globals its new definitions read that are
        not kept, so a restart would end in `NameError`."""
        for name, reads in self._keep_constants().items():
            listed = ", ".join(reads)
            print(
                "[vis] %s reads %s, which a new worker will not have: only definitions, imports and "
                "simple constants are kept; pass it as an argument, or make it a constant "
                "(NAME = literal, or NAME = module.func(literals))" % (name, listed)
            )
        changed, self._changed = self._changed, {}
        return {
            "set": [r for r in changed.values() if r is not None],
            "deleted": [name for name, r in changed.items() if r is None],
        }

    def listing(self) -> "DefList":
        return DefList(dict(e) for e in self.entries.values())


if TYPE_CHECKING:
    _Entries = list[dict[str, Any]]
else:
    _Entries = list  # the same class as `list[dict[str, Any]]`, without `typing` at start-up


class DefList(_Entries):
    """The result of `defs()`: a list of dicts that prints as a compact listing."""

    def __repr__(self) -> str:
        funcs = [d for d in self if d["kind"] in ("function", "class")]
        imports = [d["name"] for d in self if d["kind"] == "import"]
        constants = [d["name"] for d in self if d["kind"] == "constant"]
        if not funcs and not imports and not constants:
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
        if constants:
            lines.append("constants: " + ", ".join(constants))
        return "\n".join(lines)

    __str__ = __repr__


def defs() -> DefList:
    """List the helper functions and classes defined in this session (kept across restarts).

    Top-level `def`/`class` statements in blocks are saved as source with the session and
    re-created when a new worker starts; redefining replaces, `del name` removes. The imports
    they use are kept too, and the simple constants they read (`NAME = literal` with an
    immutable value, or `NAME = module.func(literals)` such as `PAT = re.compile(r"\d+")`). Each entry
    is a dict with name, kind, signature, doc (first line) and source; the list prints as a
    compact listing.

    A definition is kept up to 64 KiB of source, and a session's up to 512 KiB in all: a larger
    one still works until the worker restarts, and the block says it is not kept (keep big data
    in files). Entries marked `[not restored]` failed to come back; redefine them, or drop one
    with `name = None`.
    """
    return _current.listing() if _current is not None else DefList()


#: The registry of this worker's runner (None outside a worker).
_current: DefRegistry | None = None


def set_current_registry(registry: DefRegistry) -> None:
    """Makes `registry` the one `defs()` lists (the worker's runner calls it at start)."""
    global _current
    _current = registry


def current_registry() -> DefRegistry | None:
    """The registry `defs()` lists, if a runner set one."""
    return _current
