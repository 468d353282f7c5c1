"""What `vis._native` is in a plain Python (no vis worker around it).

Inside a worker, `vis._native` is the Rust module compiled into the `vis` binary. Installed
with `pip install .`, the `vis` package can also be imported by a plain `python3`, e.g. by an
extension's unit tests; then this module takes `vis._native`'s place. It answers what does not
need the worker the same way (name validation, the exception types) and makes every call that
does need it raise `WorkerRequiredError`, saying which function needs the worker and why.
"""
from __future__ import annotations

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from types import CodeType
    from typing import Any, NoReturn

#: The distribution that installs this package (`pip install .`).
DISTRIBUTION = "vis-gateway"


class WorkerRequiredError(RuntimeError):
    """Raised outside a vis worker by a call that only the worker can answer."""


def _needs_worker(what: str, why: str) -> NoReturn:
    raise WorkerRequiredError(
        "%s needs the vis worker (%s), and this is a plain Python without one: vis._native, the "
        "Rust module inside the `vis` binary, is missing. Run it in a block (`vis exec`, "
        "`vis chat`), or keep it out of the code a unit test calls." % (what, why)
    )


_RUST = "it runs in vis's Rust core"
_HOST = "it calls the gateway that owns the session"


def __getattr__(name: str) -> Any:
    if name == "VERSION":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(DISTRIBUTION)
        except PackageNotFoundError:
            return "unknown (vis is not installed as a distribution)"
    raise AttributeError("module 'vis._native' has no attribute %r" % name)


class PatchError(ValueError):
    """A patch was rejected (stale or conflicting addresses, or a new syntax error)."""


class AddressError(PatchError):
    """An address (a patch edit's, or cat's start/end) is malformed, past the end, or stale."""


class FileChangedError(PatchError):
    """The file changed while patch worked on it; nothing was written."""


class _WorkerResult:
    """A result type only the worker creates."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _needs_worker(type(self).__name__, _RUST)


class CatResult(_WorkerResult):
    """What `cat` returns (only the worker creates one)."""


class GrepResult(_WorkerResult):
    """What `grep` returns (only the worker creates one)."""


class GrepMatch(_WorkerResult):
    """One match of a `GrepResult` (only the worker creates one)."""


class PatchResult(_WorkerResult):
    """What `patch` returns (only the worker creates one)."""


class Manifest(_WorkerResult):
    """The session's manifest, searched by `apropos` and `doc` (worker only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _needs_worker("apropos()/doc()", "the session's manifest is searched in vis's Rust core")


_KINDS = {"function": False, "namespace": False, "page": True, "skill": True, "deny": True}


def validate_name(name: str, kind: str = "function") -> None:
    """Raises ValueError naming the bad segment, as the worker does (same rules: every
    segment a Python identifier that is not a keyword; pages and skills may also use `-`)."""
    if kind not in _KINDS:
        raise ValueError("unknown kind `%s`: use function, namespace, page or skill" % kind)
    if not name:
        raise ValueError("empty name: a name is a dotted path of Python identifiers such as `git.diff`")
    dashes = _KINDS[kind]
    for segment in name.split("."):
        problem = _segment_problem(segment, dashes)
        if problem:
            extra = " (`-` is also allowed after the first character)" if dashes else ""
            raise ValueError(
                "invalid name `%s`: segment `%s` %s; each segment must be a Python identifier that "
                "is not a keyword%s; rename it (e.g. `%s`)" % (name, segment, problem, extra, _suggest(name, dashes))
            )


def iskeyword(word: str) -> bool:
    """`keyword.iskeyword`, imported when first needed (this module loads at every worker
    start, for `WorkerRequiredError`)."""
    import keyword

    return keyword.iskeyword(word)


def _suggest(name: str, dashes: bool) -> str:
    """A valid spelling close to `name`, as the worker suggests it."""
    fixed = []
    for segment in filter(None, name.split(".")):
        out = "".join(c if ("a" + c).isidentifier() or (dashes and c == "-") else "_" for c in segment)
        if not (out[0] == "_" or out[0].isidentifier()):
            out = "_" + out
        if iskeyword(out):
            out += "_"
        fixed.append(out)
    return ".".join(fixed) or "name"


def _segment_problem(segment: str, dashes: bool) -> str | None:
    if not segment:
        return "is empty (a leading, trailing or doubled `.`)"
    first = segment[0]
    if not (first == "_" or first.isidentifier()):
        return "starts with a digit" if "0" <= first <= "9" else "starts with `%s`" % first
    for c in segment[1:]:
        if not (("a" + c).isidentifier() or (dashes and c == "-")):
            return "contains whitespace" if c.isspace() else "contains `%s`" % c
    if iskeyword(segment):
        return "is a Python keyword"
    return None


def denied(name: str) -> bool:
    """No worker, so no config and no deny list: nothing is denied."""
    return False


def read_cache(path: str) -> Any:
    """No worker, so no cache directory: nothing is cached."""
    return None


def digest(data: bytes) -> str:
    """A 128-bit digest of `data` as 32 hex digits (not the worker's xxh3: only cache keys use
    it, and nothing is cached outside a worker)."""
    import hashlib

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def compile_expression(source: str, filename: str, flags: int) -> CodeType:
    """The builtin `compile` of one expression (a worker's own is faster at its first call)."""
    code: CodeType = compile(source, filename, "eval", flags=flags, dont_inherit=True)
    return code


def interrupt_pending() -> bool:
    """No worker, so no block to interrupt."""
    return False


def restoring(index: int) -> None:
    """No worker, so no restore to report on."""


def job_report(report: dict[str, Any]) -> None:
    """No worker, so no host keeps a job table."""


def embedded_paths() -> list[str]:
    """No worker binary, so nothing is embedded: the package's own files are imported."""
    return []


def embedded_source(path: str) -> str:
    """No worker binary, so nothing is embedded."""
    raise KeyError(path)


def embedded_bytecode(path: str) -> memoryview | None:
    """No worker binary, so nothing is embedded."""
    return None


# The limits on persisted definitions, as in the worker (`runtime::defs`); nothing is persisted
# outside one.
MAX_DEFINITION_BYTES = 64 * 1024
MAX_SESSION_DEFINITION_BYTES = 512 * 1024
MAX_CONSTANT_CHARS = 2000


def cap_text(raw: bytes, limit: int, artifact: str | None = None) -> tuple[str, int, int]:
    """Worker only (`sh` caps output in Rust)."""
    _needs_worker("sh()", _RUST)


def host_call(method: str, params: Any) -> Any:
    """Worker only (fold_session, read_session and MCP tools call the host)."""
    _needs_worker("%s (a host call)" % method, _HOST)


def text_cat(path: Any, start: Any = None, end: Any = None) -> CatResult:
    """Worker only."""
    _needs_worker("cat()", _RUST)


def text_grep(pattern: str, paths: Any, **options: Any) -> GrepResult:
    """Worker only."""
    _needs_worker("grep()", _RUST)


def text_patch(path: Any, edits: Any, **options: Any) -> PatchResult:
    """Worker only."""
    _needs_worker("patch()", _RUST)


def text_read_bytes(path: str, limit: int) -> bytes:
    """Worker only."""
    _needs_worker("show()", _RUST)


def line_address(line_no: int, text: str) -> str:
    """Worker only (line addresses use the hash of vis's Rust core)."""
    _needs_worker("line addresses (line_address)", _RUST)


def front_matter(text: str) -> dict[str, str]:
    """Worker only (skills' front matter is parsed by the YAML parser in Rust)."""
    _needs_worker("reading a skill's front matter", _RUST)
