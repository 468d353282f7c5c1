"""`apropos` and `doc`: find functions, namespaces, documentation pages and skills by name.

Both run over the session's manifest in Rust (`vis._native.Manifest`); results print as plain
text, and the objects also expose the data (`.rows`, `.total`, `.next_offset`, ...).
"""
from __future__ import annotations


from vis import _extensions

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Iterator


class AproposResult:
    """One page of `apropos` results. Prints as one row per match and a status line;
    `.rows` holds dicts (name, kind, line); `.total`, `.remaining`, `.next_offset` paginate."""

    def __init__(self, text: str, rows: list[tuple[str, str, str]], total: int, remaining: int, next_offset: int | None) -> None:
        self.text = text
        self.rows = [{"name": n, "kind": k, "line": line} for n, k, line in rows]
        self.total = total
        self.remaining = remaining
        self.next_offset = next_offset

    @property
    def names(self) -> list[str]:
        """The names on this page, in manifest order."""
        return [r["name"] for r in self.rows]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return self.text.rstrip("\n")

    __str__ = __repr__


class DocText(str):
    """Documentation text; its repr is the text itself, so it reads well at the end of a block."""

    def __repr__(self) -> str:
        return str(self).rstrip("\n")


def apropos(pattern: str = ".", namespace: str | None = None, limit: int = 50, offset: int = 0) -> AproposResult:
    """Filter public names (functions, namespaces, documentation pages, skills) with a regex.

    The pattern is matched against names only (not docs), unanchored and case-insensitive
    (`(?-i)` makes it case-sensitive); e.g. `apropos('diff')`, `apropos('^git\\.')`,
    `apropos('.', namespace='git')`. Results come in manifest order, `limit` per page; the
    last line says how many remain and gives the exact call for the next page. Each row shows
    the call form and first doc line. `doc(name)` shows the full documentation.
    """
    if not isinstance(pattern, str):
        raise TypeError("apropos() pattern must be a string (a regular expression), got %s" % type(pattern).__name__)
    if namespace is not None and not isinstance(namespace, str):
        name = _extensions.name_of(namespace)
        if name is None:
            raise TypeError("apropos() namespace must be a dotted name such as 'git', got %r" % (namespace,))
        namespace = name
    for arg, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("apropos() %s must be an integer, got %r" % (arg, value))
    text, rows, total, remaining, next_offset = _extensions.manifest().apropos(pattern, namespace, limit, offset)
    return AproposResult(text, rows, total, remaining, next_offset)


def doc(name: Any) -> DocText:
    """Show the documentation of a function, namespace, documentation page or skill.

    `name` is a dotted name (`doc('git.diff')`, `doc('git')`, `doc('vis.addresses')`) or the
    object itself (`doc(git.diff)`). A namespace shows its summary and members; an unknown name
    suggests the closest ones. Start with `doc('vis')` for the documentation pages.
    """
    if not isinstance(name, str):
        found = _extensions.name_of(name)
        if found is None:
            raise TypeError("doc() takes a name such as 'git.diff' (or a vis function), got %r" % (name,))
        name = found
    return DocText(_extensions.manifest().doc(name))
