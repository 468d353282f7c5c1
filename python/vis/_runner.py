"""Runs the model's blocks with REPL semantics and records their top-level definitions.

The worker calls `Runner.run` once per block and, after a start, `Runner.prepare_restore` then
`Runner.restore` (all compiled before anything runs; see `runtime::restore`). They take and
return plain dicts that the worker converts to and from its Rust types (`protocol::Block`,
`protocol::BlockResult`, `protocol::PersistedDef`, `protocol::RestoreReport`) with pyo3, never
JSON text (`prepare_restore` returns a `PreparedRestore` the worker hands back to `restore`). Output goes to fd 1 (the worker's capture file); `sys.stdout` and `sys.stderr` are
one shared line-buffered stream so their order is kept.
"""
from __future__ import annotations

import builtins
import faulthandler
import io
import os
# `_signal`, not `signal`: the same function without the enums `signal` builds on import
# (milliseconds at every worker start).
import _signal  # type: ignore[import-not-found]  # (no stubs; the same calls as `signal`)
import sys
from time import monotonic as _monotonic

from vis import _codecache, _extensions, _native, _state
from vis.defs import DefRegistry, code_names, compile_definition, describe, parse_module, set_current_registry

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    # Types for checkers only: building TypedDicts costs a worker start for nothing.
    import asyncio
    import types
    from typing import Any, TypedDict

    from vis._protocol import Block, Definition, RestoreReport

    class Report(TypedDict):
        """What the runner says about a block; the worker adds its output, the host decides the
        final status (`protocol::BlockResult`)."""

        #: "ok", "error" or "interrupted": what the interpreter saw.
        status: str
        defs_set: list[Definition]
        defs_deleted: list[str]
        #: The visible manifest (`vis._native.Manifest`) when the block changed it, else None.
        manifest: Any

#: `ast.PyCF_ALLOW_TOP_LEVEL_AWAIT` (the same in every CPython since 3.8; a test checks it):
#: compiling a block that is one expression needs no syntax tree, nor the module `_ast`.
_TOP_LEVEL_AWAIT = 0x2000
#: Frames from files named like this belong to Vis itself and are left out of tracebacks.
_PRELUDE_PREFIX = "<vis>/"
#: `inspect.CO_COROUTINE`: a code object that must run on an event loop (top-level await).
_CO_COROUTINE = 0x0080
#: How many library frames (not the model's code) a traceback keeps.
_LIBRARY_FRAMES_KEPT = 2


def _future_flags() -> int:
    """Compiler flags of every `from __future__ import …` feature (carried from a block's
    first statements to the rest); `__future__` is imported only by a block that uses it."""
    import __future__

    flags = 0
    for feature in __future__.all_feature_names:
        flags |= getattr(__future__, feature).compiler_flag
    return flags


#: Prelude names whose module is imported on first use (`vis.LAZY`), and the names through
#: which code can reach the block's namespace without naming what it takes from it: code that
#: names any of them gets the lazy names bound first.
_DYNAMIC_NAMES = frozenset({"globals", "locals", "vars", "dir", "eval", "exec", "help", "breakpoint", "__main__"})


#: Words that begin a statement, never an expression.
_STATEMENT_WORDS = frozenset(
    "import from def class for while if with try return del pass raise global nonlocal assert"
    " async break continue elif else except finally".split()
)


def _assigns(line: str) -> bool:
    """True when `line` has an `=` outside brackets that is not part of a comparison: an
    assignment (`x = 1`, `a[0] += 2`), or a default outside a call (`lambda x=1: x`)."""
    if "=" not in line:
        return False
    depth = 0
    previous = ""
    for i, ch in enumerate(line):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "=" and depth == 0 and previous not in "=!<>" and line[i + 1 : i + 2] != "=":
            return True
        previous = ch
    return False


def _one_expression(code: str, filename: str) -> tuple[list[tuple[Any, types.CodeType]], types.CodeType | None] | None:
    """A block of one line that is one expression (`grep(...)`, `f(x)[0]`), compiled as that
    expression without a syntax tree; None for anything else (which `Runner._compile`
    parses). Only a line that may be one is tried (no statement word first, no assignment):
    a failed attempt would cost a statement block a second parse."""
    line = code.strip()
    if not line or "\n" in line or ";" in line or _assigns(line):
        return None
    end = 0
    while end < len(line) and (line[end].isalnum() or line[end] == "_"):
        end += 1
    if line[:end] in _STATEMENT_WORDS:
        return None
    try:
        return [], _native.compile_expression(code, filename, _TOP_LEVEL_AWAIT)
    except SyntaxError:
        return None


class _Interrupts:
    armed = False


def _on_interrupt(signum: int, frame: Any) -> None:
    # Only a running block is interrupted; a late signal must not break the runner itself.
    if _Interrupts.armed:
        raise KeyboardInterrupt


class Runner:
    def __init__(self) -> None:
        main = type(sys)("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        self.ns: dict[str, Any] = main.__dict__
        self.registry = DefRegistry()
        set_current_registry(self.registry)
        stream = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        sys.stdout = sys.stderr = stream
        self.stream = stream
        faulthandler.enable(file=stream, all_threads=True)
        _signal.signal(_signal.SIGINT, _on_interrupt)
        # Created (and asyncio imported) by the first block that awaits at top level.
        self.loop: asyncio.AbstractEventLoop | None = None
        import vis

        #: Prelude names not bound yet: bound before the first code that may read them.
        self.lazy: dict[str, tuple[str, str]] = dict(vis.LAZY)
        for name in vis.__all__:
            if name not in self.lazy:
                self.ns[name] = getattr(vis, name)
        self.ns["session"] = _state.session
        # The prelude's functions are the registry's first source (extensions, pages, skills
        # and MCP tools are the others); their modules are imported when first used.
        core = _extensions.CoreFunctions(vis.FUNCTIONS, lambda name: getattr(vis, name), vis.loaded)
        _extensions.install(self.ns, core, vis.__all__)
        # A function the deny list covers is never bound (`rebuild` took the bound ones out).
        for name in vis.FUNCTIONS:
            if name in self.lazy and _extensions.denied(name):
                del self.lazy[name]

    def _bind_lazy(self, names: frozenset[str] | set[str]) -> None:
        """Imports and binds the lazy prelude names (`cat`, `Path`, ...) that code about to
        run names, or all of them when it can reach the namespace without naming them
        (`globals()`, `eval`...). Each is bound once: a block may rebind or delete it
        afterwards."""
        import vis

        # The code's few names are looked up in the table, not the table's forty in them: a
        # restore calls this once per definition.
        wanted = list(self.lazy) if not names.isdisjoint(_DYNAMIC_NAMES) else [n for n in names if n in self.lazy]
        for name in wanted:
            del self.lazy[name]
            # The package imports it (`vis.__getattr__`): one object per name, in both places.
            self.ns[name] = getattr(vis, name)

    # -- blocks -------------------------------------------------------------------------

    def run(self, block: Block) -> Report:
        """Runs one block; never raises (everything the block raises is in its output)."""
        session = block["session"]
        roots = block["workspace_roots"]
        session["workspace_roots"] = list(roots)
        _state.session.clear()
        _state.session.update(session)
        self.ns["session"] = _state.session
        _state.artifact_dir = block["artifact_dir"]
        _state.output_limit = block["output_limit"]
        _state.artifact_seq = 0
        _state.block_deadline = _monotonic() + block["timeout"]
        if roots and roots != _state.workspace_roots:
            _state.workspace_roots = list(roots)
            try:
                os.chdir(roots[0])
            except OSError as e:
                print("[vis] cannot enter the workspace %s: %s" % (roots[0], e))
        try:
            _extensions.before_block(_state.session)
            if "vis._mcp" in sys.modules:
                # Imported by the first MCP install (`McpTools`): before that there is
                # nothing it could report, and its import is a tenth of a millisecond of
                # every start.
                from vis import _mcp

                _mcp.before_block(_state.session)
            status, changes = self._run(block["code"], block["filename"])
        finally:
            self.stream.flush()
            # Writes through the interpreter's original streams belong to this block too.
            for original in (sys.__stdout__, sys.__stderr__):
                try:
                    if original is not None:
                        original.flush()
                except (OSError, ValueError):
                    pass
            _state.block_deadline = None
        return {
            "status": status,
            "defs_set": changes["set"],
            "defs_deleted": changes["deleted"],
            "manifest": _extensions.take_manifest_update(),
        }

    def _run(self, code: str, filename: str) -> tuple[str, dict[str, Any]]:
        self.registry.begin_block(code)
        compiled = _one_expression(code, filename)
        if compiled is not None:
            remember_source(filename, code)
        else:
            compiled = self._compile(code, filename)
            if compiled is None:
                return "error", self.registry.take_changes()
        statements, tail = compiled
        if self.lazy:
            names: set[str] = set()
            for _, statement in statements:
                names |= code_names(statement)
            if tail is not None:
                names |= code_names(tail)
            self._bind_lazy(names)
        status = "ok"
        try:
            _Interrupts.armed = True
            try:
                # An interrupt the host sent just before the handler was armed.
                if _native.interrupt_pending():
                    raise KeyboardInterrupt
                # Statement by statement, so definitions are recorded as soon as they exist:
                # `defs()` later in the same block lists them, and a failure keeps those before.
                for node, statement in statements:
                    self._eval(statement)
                    self.registry.record_statement(node, self.ns, statement)
                if tail is not None:
                    value = self._eval(tail)
                    if value is not None:
                        self.ns["_"] = value
                        print(repr(value))
            finally:
                _Interrupts.armed = False
        except KeyboardInterrupt as e:
            status = "interrupted"
            print(_format_exception(e), end="")
        except SystemExit as e:
            status = "error"
            print(
                "SystemExit: %r — sys.exit() ends only the block; the worker and its variables are kept."
                % (e.code,)
            )
        except BaseException as e:  # noqa: BLE001 (the model sees every failure)
            status = "error"
            print(_format_exception(e), end="")
            if isinstance(e, MemoryError):
                print("[vis] the worker's memory limit was reached; free memory (del big objects) or work in chunks.")
        return status, self.registry.take_changes()

    def _compile(self, code: str, filename: str) -> tuple[list[tuple[Any, types.CodeType]], types.CodeType | None] | None:
        """Every top-level statement of `code` compiled on its own, and the last one apart when
        it is an expression (its value is shown); None, with the error printed, when it does
        not compile. Every statement is compiled before any runs, so a block that cannot
        compile (e.g. 'return' outside a function) runs nothing. Its source is kept for
        tracebacks once it parses."""
        import _ast

        try:
            tree = parse_module(code, filename)
        except SyntaxError as e:
            print(_format_syntax_error(e), end="")
            return None
        remember_source(filename, code)
        last = tree.body[-1] if tree.body else None
        if isinstance(last, _ast.Expr):
            tree.body.pop()
        else:
            last = None
        flags = _TOP_LEVEL_AWAIT
        try:
            # Only `from __future__` needs the whole block compiled: for where it may stand
            # and the features it turns on.
            if any(isinstance(n, _ast.ImportFrom) and n.module == "__future__" for n in tree.body):
                whole = compile(tree, filename, "exec", flags=flags, dont_inherit=True)
                flags |= whole.co_flags & _future_flags()
            statements = [
                (node, compile(_ast.Module([node], []), filename, "exec", flags=flags, dont_inherit=True))
                for node in tree.body
            ]
            tail = None
            if last is not None:
                tail = compile(_ast.Expression(last.value), filename, "eval", flags=flags, dont_inherit=True)
        except SyntaxError as e:
            print(_format_syntax_error(e), end="")
            return None
        return statements, tail

    def _eval(self, code: types.CodeType) -> Any:
        result = eval(code, self.ns)
        if code.co_flags & _CO_COROUTINE:
            import asyncio

            if self.loop is None or self.loop.is_closed():
                self.loop = asyncio.new_event_loop()
            result = self.loop.run_until_complete(result)
        return result

    # -- restore ------------------------------------------------------------------------

    def prepare_restore(
        self, defs: list[Definition], cached: tuple[str, list[bytes]] | None, progress: bool = False
    ) -> PreparedRestore:
        """Step one of a restore: every definition checked and compiled (`compile_definition`),
        or its code taken from what the host sent from its cache (`cached`: the magic number
        it was compiled for and one marshalled code object per definition), before any of
        them runs. The worker hands `fresh` (new code, for the host to cache) to the host
        before step two. With `progress`, the host is told which definition is being
        compiled, then run (`_native.restoring`), so one that kills or hangs the worker can be
        skipped."""
        codes: list[types.CodeType | None] = list(_codecache.load(cached, defs) or [])
        errors: dict[str, str] = {}
        fresh: list[bytes] | None = None
        if not codes:
            for index, d in enumerate(defs):
                if progress:
                    _native.restoring(index)
                try:
                    codes.append(compile_definition(dict(d)))
                except BaseException as e:  # noqa: BLE001
                    errors[d["name"]] = "%s: %s" % (type(e).__name__, e)
                    codes.append(None)
            compiled = [c for c in codes if c is not None]
            if defs and len(compiled) == len(defs) and _state.cache_dir:
                fresh = _codecache.encode(compiled)
        return PreparedRestore(defs, codes, errors, fresh, progress)

    def restore(self, prepared: PreparedRestore, skipped: list[Definition]) -> RestoreReport:
        """Step two: re-creates the prepared definitions, in order; says which came back and
        why others did not. `skipped` are those the host did not send (over a size limit, or
        they stopped an earlier worker): `defs()` lists them as not restored."""
        defs = prepared.defs
        errors = dict(prepared.errors)
        ok: list[str] = []
        pending = list(enumerate(zip(defs, prepared.codes)))
        # Two passes: a definition may need one defined after it (a decorator, a base class).
        for _ in range(2):
            retry: list[tuple[int, tuple[Definition, types.CodeType | None]]] = []
            for index, (d, code) in pending:
                remember_source("<def %s>" % d["name"], d["source"])
                if code is not None:
                    if prepared.progress:
                        _native.restoring(index)
                    try:
                        self.registry.note_code(d["source"], code)
                        if self.lazy:
                            self._bind_lazy(self.registry.names_of(d["source"]) or frozenset())
                        exec(code, self.ns)
                    except BaseException as e:  # noqa: BLE001
                        errors[d["name"]] = "%s: %s" % (type(e).__name__, e)
                        retry.append((index, (d, code)))
                    else:
                        errors.pop(d["name"], None)
                        ok.append(d["name"])
                self.registry.add(d, restored=d["name"] not in errors)
            pending = retry
            if not pending:
                break
        for d in skipped:
            self.registry.add(d, restored=False)
        self.stream.flush()
        order = {d["name"]: i for i, d in enumerate(defs)}
        ok.sort(key=lambda n: order.get(n, 0))
        failed = [(n, errors[n]) for n in sorted(errors, key=lambda n: order.get(n, 0))]
        return {"ok": ok, "failed": failed, "unkept": self._unkept(defs, set(ok))}

    def _unkept(self, defs: list[Definition], restored: set[str]) -> list[tuple[str, list[str]]]:
        """For each restored function or class, the module-level names it reads that this
        worker does not have (they were never kept), so the report can name them."""
        from vis.defs import _globals_read

        out: list[tuple[str, list[str]]] = []
        for d in defs:
            if d["name"] not in restored or d["kind"] == "import":
                continue
            candidates = self.registry.names_of(d["source"])
            if candidates is not None and all(n in self.ns or hasattr(builtins, n) for n in candidates):
                continue  # everything its code could read is here: no symbol table needed
            missing = sorted(
                n for n in _globals_read(d["source"]) if n not in self.ns and not hasattr(builtins, n)
            )
            if missing:
                out.append((d["name"], missing))
        return out


class PreparedRestore:
    """Definitions compiled for a restore, not run yet (`Runner.prepare_restore`)."""

    def __init__(
        self,
        defs: list[Definition],
        codes: list[types.CodeType | None],
        errors: dict[str, str],
        fresh: list[bytes] | None,
        progress: bool,
    ) -> None:
        self.defs = defs
        #: One per definition; None where it did not compile or failed the check.
        self.codes = codes
        self.errors = errors
        #: The code just compiled (marshalled), when every definition compiled.
        self.fresh = fresh
        #: This Python's bytecode magic number (hex): the cached code is only valid for it.
        self.magic = _codecache.magic()
        #: Tell the host which definition runs (`_native.restoring`).
        self.progress = progress


# Sources of blocks and restored definitions, for tracebacks and `inspect.getsource`. They
# wait here until something imports `linecache` (which imports `tokenize`: a millisecond or
# more of every worker start otherwise); `_LinecacheFiller` hands them over at that import.
_pending_sources: dict[str, str] = {}


def _cache_entry(filename: str, text: str) -> tuple[int, None, list[str], str]:
    """`text` as a `linecache.cache` entry for `filename`."""
    return (len(text), None, text.splitlines(True), filename)


def remember_source(filename: str, text: str) -> None:
    """Makes `text` the source `linecache` shows for `filename`."""
    loaded = sys.modules.get("linecache")
    if loaded is not None:
        loaded.cache[filename] = _cache_entry(filename, text)
    else:
        _pending_sources[filename] = text


class _LinecacheFiller:
    """A meta path finder that, when `linecache` is first imported, fills its cache with the
    remembered sources right after the module runs, then steps aside."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        if name != "linecache":
            return None
        if _LinecacheFiller in sys.meta_path:
            sys.meta_path.remove(_LinecacheFiller)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run_module(module)
            module.cache.update((name, _cache_entry(name, text)) for name, text in _pending_sources.items())
            _pending_sources.clear()

        loader.exec_module = exec_module
        return spec


if "linecache" not in sys.modules:
    sys.meta_path.insert(0, _LinecacheFiller)


def _format_syntax_error(e: SyntaxError) -> str:
    import traceback

    return "".join(traceback.format_exception_only(type(e), e))


def _format_exception(exc: BaseException) -> str:
    """A compact traceback: the model's own frames, the last library frames, the error."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_PRELUDE_PREFIX)]
    own = [f.filename.startswith("<t") or f.filename.startswith("<def ") for f in frames]
    last_own = max((i for i, o in enumerate(own) if o), default=-1)
    lines = ["Traceback (most recent call last):\n"]
    skipped = 0
    for i, frame in enumerate(frames):
        keep = own[i] or i > len(frames) - 1 - _LIBRARY_FRAMES_KEPT or i == last_own + 1
        if not keep:
            skipped += 1
            continue
        if skipped:
            lines.append("  … %d frame%s in library code\n" % (skipped, "" if skipped == 1 else "s"))
            skipped = 0
        lines.append('  File "%s", line %s, in %s\n' % (frame.filename, frame.lineno, frame.name))
        if frame.line:
            lines.append("    %s\n" % frame.line.strip())
    if len(lines) == 1:
        lines = []
    lines.extend(traceback.format_exception_only(type(exc), exc))
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None:
        lines.append("  (%s: %s)\n" % (type(cause).__name__, cause))
    hint = network_hint(exc)
    if hint:
        lines.append(hint + "\n")
    return "".join(lines)


def network_hint(exc: BaseException) -> str | None:
    """A line saying the network is off, when `exc` is a failure to reach the network and the
    sandbox has it off (a refused connection to a local server is not one)."""
    import errno
    import socket

    sandbox = _state.session.get("sandbox") or {}
    if sandbox.get("network", True):
        return None
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, socket.gaierror) or (
            isinstance(e, OSError) and e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EAI_AGAIN if hasattr(errno, "EAI_AGAIN") else -1)
        ):
            return (
                "[vis] the network is off in this sandbox (mode %s): only 127.0.0.1 is reachable; the person can allow it with --network or [sandbox] network = true"
                % sandbox.get("mode", "workspace-write")
            )
        for nxt in (e.__cause__, e.__context__, getattr(e, "reason", None)):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return None


__all__ = ["PreparedRestore", "Runner", "describe"]
