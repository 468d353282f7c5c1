"""Read and edit files by line address.

Every line that ``cat`` and ``grep`` print carries an address ``LINE:HASH``::

    42:kodu|    return x

``patch`` takes those addresses back, so an edit never repeats the old text. An address stays
valid until its line changes; ``patch`` rejects stale addresses instead of guessing.
"""

from __future__ import annotations

import os

from vis import _native

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Iterable, Sequence, Union

    PathArg = Union[str, "os.PathLike[str]"]

__all__ = [
    "cat",
    "grep",
    "patch",
    "PatchError",
    "AddressError",
    "FileChangedError",
    "CatResult",
    "GrepResult",
    "GrepMatch",
    "PatchResult",
]

PatchError = _native.PatchError
AddressError = _native.AddressError
FileChangedError = _native.FileChangedError
CatResult = _native.CatResult
GrepResult = _native.GrepResult
GrepMatch = _native.GrepMatch
PatchResult = _native.PatchResult


def _line_arg(name: str, value: object) -> int | str | None:
    """Check the type of cat's start/end: a line number, an address string ('42:kodu'), or None.

    Values are checked natively: an address must match the file (a stale or malformed one is
    an AddressError showing the current line), a number below 1 is a ValueError, and a huge
    end is clamped to the last line.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{name} must be a line number or an address like '42:kodu', got {value!r}")


def cat(path: PathArg, start: int | str | None = None, end: int | str | None = None) -> CatResult:
    """Show a file with an address on every line: ``LINE:HASH|content``.

    path: file to read (relative to the workspace). start, end: optional 1-based inclusive
    line range, as numbers or as addresses like '42:kodu'. An address must still be current:
    a stale or malformed one raises AddressError showing the line's fresh address (it is never
    silently read as its number). A number end past the last line is clamped; a start past it,
    or a number below 1, raises ValueError.
    The header gives the path and line count. Binary files are refused; text that is not valid
    UTF-8 is shown with U+FFFD and the header says so. Lines over 1000 characters are shown
    cut (their address still covers the whole line).

    Returns a CatResult that prints as the text; ``.lines`` gives (line, address, text)
    tuples and ``.total_lines`` the file's length. Use the addresses with ``patch``.

    Example: ``cat("src/app.py", 40, 60)``
    """
    return _native.text_cat(path, _line_arg("start", start), _line_arg("end", end))


# Counts above this behave as "unlimited" (and fit the native integer types).
_MAX_COUNT = 2**62


def _optional_count_arg(name: str, value: object) -> int | None:
    """Like `_count_arg`, but None (no limit) is allowed."""
    return None if value is None else _count_arg(name, value)


def _count_arg(name: str, value: object) -> int:
    """A non-negative count for grep (context lines, limits); huge values are capped."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    if value < 0:
        raise ValueError(f"{name}={value}: must be 0 or more")
    return min(value, _MAX_COUNT)


def _str_list(name: str, value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    items = list(value)
    if not all(isinstance(v, str) for v in items):
        raise TypeError(f"{name} must be a string or a list of strings, got {value!r}")
    return items


def grep(
    pattern: str,
    path: PathArg | Sequence[PathArg] = ".",
    *,
    fixed: bool = False,
    ignore_case: bool = False,
    smart_case: bool = False,
    word: bool = False,
    glob: str | Sequence[str] | None = None,
    type: str | Sequence[str] | None = None,
    context: int = 0,
    before: int | None = None,
    after: int | None = None,
    max_count: int | None = None,
    limit: int | None = 100,
    hidden: bool = False,
    no_ignore: bool = False,
) -> GrepResult:
    """Search files like ripgrep; every printed line carries its ``LINE:HASH`` address.

    pattern: a regex (Rust syntax, like ripgrep), or literal text with ``fixed=True``.
    path: a file, a directory (searched recursively), or a list of them; default the workspace.
    ignore_case / smart_case (insensitive unless the pattern has uppercase) / word (whole
    words only). glob: ripgrep globs such as "*.py" or "!tests/**". type: ripgrep type names
    such as "py", "rust", "js". context / before / after: lines of context around matches,
    printed as ``LINE:HASH-text`` (matches use ``|``), with ``--`` between gaps.
    max_count: stop a file after this many matches. limit: at most this many matches shown
    in total (None = all); the output then says how many more exist and in how many files.
    Like ripgrep, .gitignore'd, hidden and binary files are skipped unless hidden=True /
    no_ignore=True. Counts must be 0 or more (ValueError otherwise).

    Output is grouped under one header per file, files sorted by path. The GrepResult prints
    as that text; ``.matches`` gives GrepMatch objects (path, line, address, text) for
    filtering without printing, ``.count`` the total number of matches, ``.files`` the paths.

    Example: ``grep(r"def \\w+_user", "src", type="py", context=1)``
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a string, got {pattern!r}")
    if isinstance(path, (str, os.PathLike)):
        paths = [path]
    else:
        paths = list(path)
    return _native.text_grep(
        pattern,
        paths,
        fixed=fixed,
        ignore_case=ignore_case,
        smart_case=smart_case,
        word=word,
        globs=_str_list("glob", glob),
        types=_str_list("type", type),
        before=_count_arg("context", context) if before is None else _count_arg("before", before),
        after=_count_arg("context", context) if after is None else _count_arg("after", after),
        max_count=_optional_count_arg("max_count", max_count),
        limit=_optional_count_arg("limit", limit),
        hidden=hidden,
        no_ignore=no_ignore,
    )


class Insert:
    """An insertion for ``patch``; make one with patch.insert_before/after/at_start/at_end."""

    __slots__ = ("kind", "address", "text")

    def __init__(self, kind: str, address: str | None, text: str) -> None:
        self.kind = kind
        self.address = address
        self.text = text

    def __repr__(self) -> str:
        where = {"before": "insert_before", "after": "insert_after"}.get(self.kind)
        if where:
            return f"patch.{where}({self.address!r}, {self.text!r})"
        return f"patch.insert_at_{self.kind}({self.text!r})"


def _text_arg(value: object, edit: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise TypeError(f"the text of {edit!r} must be a string (or a list of lines), got {value!r}")


def _addr_arg(value: object) -> str:
    # Non-strings are passed on as text so the error report names them with everything else.
    return value if isinstance(value, str) else repr(value)


def _canonical(edit: object) -> tuple[str, ...]:
    if isinstance(edit, Insert):
        text = _text_arg(edit.text, edit)
        if edit.kind in ("before", "after"):
            return (edit.kind, _addr_arg(edit.address), text)
        return (edit.kind, text)
    if isinstance(edit, tuple) and len(edit) == 2:
        return ("replace", _addr_arg(edit[0]), _addr_arg(edit[0]), _text_arg(edit[1], edit))
    if isinstance(edit, tuple) and len(edit) == 3:
        return ("replace", _addr_arg(edit[0]), _addr_arg(edit[1]), _text_arg(edit[2], edit))
    raise TypeError(
        "each edit must be (addr, text), (first, last, text) or patch.insert_before/"
        f"insert_after/insert_at_start/insert_at_end(...); got {edit!r}"
    )


class _Patch:
    """Edit one file by address: ``patch(path, edits)``.

    edits is a list (or a single edit) of:
      (addr, text)           replace the line at addr
      (first, last, text)    replace lines first..last inclusive
      patch.insert_before(addr, text) / patch.insert_after(addr, text)
      patch.insert_at_start(text) / patch.insert_at_end(text)
    Addresses are ``LINE:HASH`` as printed by cat/grep. Empty text deletes. text is split on
    "\\n" (a trailing newline is optional; "\\n" alone is one empty line); new lines get the
    file's line ending (CRLF files stay CRLF), and BOM, final newline, file mode (setuid/setgid
    too) and owner are kept. A "\\r" that is not part of "\\r\\n" is refused.

    All addresses refer to the file before this call, so list every edit of the batch with
    the addresses you read; do not adjust line numbers for earlier edits in the same batch.
    The batch is all or nothing: a malformed, stale (line changed) or past-the-end address,
    overlapping edits, or a new syntax error (Python, JSON, TOML, Rust, JS/TS) raises
    AddressError/PatchError listing every problem with the current lines and fresh
    addresses, and the file is not touched. Edits are never moved to where a hash appears now.

    Only new syntax errors in or next to the edited lines count: a file that was already
    broken (or that the checker half-understands, such as Flow) can still be edited.

    Read-only files (no write permission in their mode, even for root) raise PermissionError
    unless force=True. If another process changes the file while patch works on it, or has it
    open for writing (an unclosed file object of your own counts), the batch raises
    FileChangedError and nothing is written: re-read the file (close the writer) and try again.

    Returns a PatchResult that prints a summary (lines removed/added, syntax check) and the
    changed region with fresh addresses; use those for the next patch.

    Example::

        patch("app.py", [("12:kodu", "    return y"),
                         ("20:bate", "24:sifo", ""),
                         patch.insert_after("30:mexa", "log(x)")])
    """

    def __call__(self, path: PathArg, edits: object, force: bool = False) -> PatchResult:
        if isinstance(edits, (tuple, Insert)) and not (
            isinstance(edits, tuple) and edits and isinstance(edits[0], (tuple, Insert))
        ):
            edits = [edits]
        if not isinstance(edits, (list, tuple)):
            raise TypeError(f"edits must be a list of edits, got {edits!r}")
        if not isinstance(force, bool):
            raise TypeError(f"force must be True or False, got {force!r}")
        return _native.text_patch(path, [_canonical(e) for e in edits], force=force)

    @staticmethod
    def insert_before(addr: str, text: str) -> Insert:
        """Insert text (one or more lines) before the line at addr."""
        return Insert("before", addr, text)

    @staticmethod
    def insert_after(addr: str, text: str) -> Insert:
        """Insert text (one or more lines) after the line at addr."""
        return Insert("after", addr, text)

    @staticmethod
    def insert_at_start(text: str) -> Insert:
        """Insert text at the start of the file (after a BOM, if any)."""
        return Insert("start", None, text)

    @staticmethod
    def insert_at_end(text: str) -> Insert:
        """Insert text at the end of the file."""
        return Insert("end", None, text)

    def __repr__(self) -> str:
        return "<function patch(path, edits, force=False)>"


patch = _Patch()
patch.__doc__ = _Patch.__doc__
