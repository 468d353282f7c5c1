"""Stubs for `vis._native`, the Rust functions compiled into the vis binary."""

from typing import Any

VERSION: str

def cap_text(raw: bytes, limit: int, artifact: str | None = None) -> tuple[str, int, int]:
    """Cap `raw` like block output: returns (text, total_chars, cut_chars)."""

def interrupt_pending() -> bool:
    """True when the host asked to interrupt the block now running."""

def host_call(method: str, params: Any) -> Any:
    """Call the host that owns the session with JSON-like params (dicts with str keys, lists,
    tuples, str, int, float, bool, None); returns its answer as such values. Raises TypeError
    or ValueError for params JSON cannot hold, RuntimeError with the host's message, or
    KeyboardInterrupt when the running block is interrupted while the call waits."""

# --- the catalog (src/catalog/python.rs) ---

class Manifest:
    """The visible manifest: `entries` are dicts with `name` and `kind` (function, namespace,
    page, skill) and optionally `signature`, `summary`, `doc`, `namespace`, `pinned`, `origin`
    ("core", {"extension": name} or {"mcp": server}); the worker's deny list is applied."""

    def __init__(self, entries: list[dict[str, Any]]) -> None: ...
    def apropos(
        self, pattern: str, namespace: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[str, list[tuple[str, str, str]], int, int, int | None]: ...
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
    """`LINE:HASH` of one line, as `cat` prints it."""

# --- text tools (src/text/python.rs; the documented wrappers are in vis/text.py) ---

from os import PathLike

class PatchError(ValueError):
    """A patch was rejected (stale or conflicting addresses, or a new syntax error)."""

class AddressError(PatchError):
    """An address (a patch edit's, or cat's start/end) is malformed, past the end, or stale."""

class FileChangedError(PatchError):
    """The file changed while patch worked on it, or is open for writing; nothing was written."""

class CatResult:
    text: str
    path: str
    total_lines: int
    start: int
    end: int
    lines: list[tuple[int, str, str]]

class GrepMatch:
    path: str
    line: int
    address: str
    text: str

class GrepResult:
    text: str
    matches: list[GrepMatch]
    count: int
    files: list[str]
    def __len__(self) -> int: ...
    def __iter__(self): ...

class PatchResult:
    text: str
    path: str
    removed: int
    added: int
    lines_before: int
    lines_after: int
    changed: bool
    checked: str | None
    regions: list[tuple[int, int]]

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

def text_patch(
    path: str | PathLike[str],
    edits: list[tuple],
    *,
    check_syntax: bool = True,
    force: bool = False,
) -> PatchResult:
    """edits are canonical tuples from vis.text.patch; force edits read-only files."""
