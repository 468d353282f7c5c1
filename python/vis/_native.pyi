"""Stubs for `vis._native`, the Rust module compiled into the vis binary.

Registered by src/runtime/native.rs, src/text/python.rs and src/catalog/python.rs. Outside a
worker, `vis._outside` takes its place (same names; worker-only calls raise
`WorkerRequiredError`).
"""

from collections.abc import Iterator
from os import PathLike
from types import CodeType

from typing import Any

VERSION: str

# --- the runtime (src/runtime/native.rs) ---

def cap_text(raw: bytes, limit: int, artifact: str | None = None) -> tuple[str, int, int]:
    """Cap `raw` like block output: returns (text, total_chars, cut_chars)."""

def compile_expression(source: str, filename: str, flags: int) -> CodeType:
    """`compile(source, filename, "eval", flags, dont_inherit=True)` without the builtin's
    first-call cost (it makes every `ast` node type)."""

def interrupt_pending() -> bool:
    """True when the host asked to interrupt the block now running."""

def host_call(method: str, params: Any) -> Any:
    """Call the host that owns the session with JSON-like params (dicts with str keys, lists,
    tuples, str, int, float, bool, None); returns its answer as such values. Raises TypeError
    or ValueError for params JSON cannot hold, RuntimeError with the host's message, or
    KeyboardInterrupt when the running block is interrupted while the call waits."""

def read_cache(path: str) -> Any:
    """The JSON value of a file in Vis's cache directory (`entry-points/<8 hex>.json`,
    `signatures/<16 hex>.json`) as Python values; None when there is no cache directory or the
    file is unknown, missing, too large or not JSON."""

def digest(data: bytes) -> str:
    """A 128-bit digest (xxh3) of `data` as 32 hex digits, for cache keys."""

def embedded_paths() -> list[str]:
    """Every file embedded in the binary: the prelude's (`vis/x.py`, `vis/docs/x.md`), then the
    bundled extensions' package (`_vis_bundled/__init__.py`, `_vis_bundled/git.py`)."""

def embedded_source(path: str) -> str:
    """The text of an embedded file named as `embedded_paths` names it; KeyError for another."""

def embedded_bytecode(path: str) -> memoryview | None:
    """The build's bytecode of an embedded module (a read-only view of the binary's bytes), or
    None when there is none this Python reads (the source is compiled instead)."""

def restoring(index: int) -> None:
    """Tell the host which persisted definition (its index in the restore) the worker is about
    to compile or run, so one that kills or hangs the worker is skipped in the next one."""

def job_report(report: dict[str, Any]) -> None:
    """Tell the host a background job `started`, `finished` or was `observed` to end
    (`report["event"]`; see `runtime::host::jobs::JobReport` for the fields)."""

#: The largest source one persisted definition may have, in bytes.
MAX_DEFINITION_BYTES: int
#: The most source a session's persisted definitions may have in all, in bytes.
MAX_SESSION_DEFINITION_BYTES: int
#: The longest constant kept, in characters.
MAX_CONSTANT_CHARS: int

# --- the catalog (src/catalog/python.rs) ---

class Manifest:
    """The visible manifest: `entries` are dicts with `name` and `kind` (function, namespace,
    page, skill) and optionally `signature`, `summary`, `doc`, `namespace`, `pinned`, `origin`
    ("core", {"extension": name} or {"mcp": server}); the worker's deny list is applied."""

    def __init__(self, entries: list[dict[str, Any]]) -> None: ...
    def apropos(
        self, pattern: str, namespace: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[str, list[tuple[str, str, str]], int, int, int | None]:
        """(text, rows, total, remaining, next_offset); rows are (name, kind, line)."""
    def doc(self, name: str) -> str: ...
    def visible(self, name: str) -> bool: ...
    def callable(self, name: str) -> bool: ...
    def function_names(self) -> list[str]: ...
    def __len__(self) -> int: ...

def validate_name(name: str, kind: str = "function") -> None:
    """Raises ValueError naming the bad segment."""

def denied(name: str) -> bool:
    """True when the config's deny list denies `name` (it or a namespace containing it)."""

def line_address(line_no: int, text: str) -> str:
    """`LINE:HASH` of one line's content (line ending excluded), as `cat` prints it."""

def front_matter(text: str) -> dict[str, str]:
    """The top-level scalar fields of a SKILL.md's YAML front matter, in file order; ValueError
    says what is wrong and where."""

# --- text tools (src/text/python.rs; the documented wrappers are in vis/text.py) ---

class PatchError(ValueError):
    """A patch was rejected (stale or conflicting addresses, or a new syntax error)."""

class AddressError(PatchError):
    """An address (a patch edit's, or cat's start/end) is malformed, past the end, or stale."""

class FileChangedError(PatchError):
    """The file changed while patch worked on it, or is open for writing; nothing was written."""

class CatResult:
    @property
    def text(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def total_lines(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def lines(self) -> list[tuple[int, str, str]]: ...

class GrepMatch:
    @property
    def path(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def address(self) -> str: ...
    @property
    def text(self) -> str: ...

class GrepResult:
    @property
    def text(self) -> str: ...
    @property
    def matches(self) -> list[GrepMatch]: ...
    @property
    def count(self) -> int: ...
    @property
    def files(self) -> list[str]: ...
    def __len__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def __iter__(self) -> Iterator[GrepMatch]: ...

class PatchResult:
    @property
    def text(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def removed(self) -> int: ...
    @property
    def added(self) -> int: ...
    @property
    def lines_before(self) -> int: ...
    @property
    def lines_after(self) -> int: ...
    @property
    def changed(self) -> bool: ...
    @property
    def checked(self) -> str | None: ...
    @property
    def regions(self) -> list[tuple[int, int]]: ...

def text_cat(
    path: str | PathLike[str], start: int | str | None = None, end: int | str | None = None
) -> CatResult:
    """start/end: a line number (any size; an end past the file is clamped) or an address."""

def text_grep(
    pattern: str,
    paths: list[str | PathLike[str]],
    *,
    fixed: bool = False,
    ignore_case: bool = False,
    smart_case: bool = False,
    word: bool = False,
    globs: list[str] = ...,
    types: list[str] = ...,
    before: int = 0,
    after: int = 0,
    max_count: int | None = None,
    limit: int | None = 100,
    hidden: bool = False,
    no_ignore: bool = False,
) -> GrepResult: ...

def text_read_bytes(path: str, limit: int) -> bytes:
    """A file's bytes, confined like text_cat; over `limit` bytes is refused (ValueError)."""

def text_patch(
    path: str | PathLike[str],
    edits: list[tuple[str, ...]],
    *,
    check_syntax: bool = True,
    force: bool = False,
) -> PatchResult:
    """edits are canonical tuples from vis.text.patch; force edits read-only files."""
