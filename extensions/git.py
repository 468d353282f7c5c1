"""Bundled extension `git`: status, diff, log and blame of the workspace's repository.

Where file lines are shown (`diff`, `blame`) they carry the same `LINE:HASH` addresses as
`cat`, so they can be pasted into `patch`.
"""
from __future__ import annotations

import os

from vis import _native, _safegit, _state
from vis.extension import context_provider, namespace, register

namespace(
    "git",
    "Git: status, diff, log and blame of the workspace repository (diff/blame lines carry addresses)",
)


class GitText(str):
    """Git output; prints as the text itself."""

    def __repr__(self) -> str:
        return str(self).rstrip("\n") or "(no output)"


def _root() -> str:
    return _state.workspace_roots[0] if _state.workspace_roots else (_state.workspace or os.getcwd())


def _git(*args: str, settings: tuple[tuple[str, str], ...] = ()) -> str:
    """`git ARGS` on the workspace's repository, run so that nothing in the repository's
    configuration can start a program (see `vis._safegit`)."""
    return _safegit.run(args, cwd=_root(), settings=settings).decode("utf-8", "replace")


@register
def status() -> GitText:
    """Show the branch and the changed, staged and untracked files (git status, compact).

    Each file line is `XY path` as in `git status --short` (X = staged, Y = unstaged;
    `??` untracked). The last line counts them.
    """
    out = _git("status", "--porcelain=v1", "--branch", "--ignore-submodules=dirty")
    lines = out.splitlines()
    branch = lines[0][3:] if lines and lines[0].startswith("## ") else "(unknown branch)"
    files = lines[1:] if lines and lines[0].startswith("## ") else lines
    if not files:
        return GitText("branch %s: clean\n" % branch)
    untracked = sum(1 for f in files if f.startswith("??"))
    staged = sum(1 for f in files if f[:1] not in (" ", "?"))
    text = "branch %s\n%s\n[%d changed: %d staged, %d untracked]\n" % (
        branch,
        "\n".join(files),
        len(files),
        staged,
        untracked,
    )
    return GitText(text)


def _addressed_diff(raw: str) -> str:
    out: list[str] = []
    new_line = 0
    in_hunk = False
    old_path = ""
    for line in raw.splitlines():
        if line.startswith("diff --git "):
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
            try:  # @@ -a,b +c,d @@ context
                new_line = int(line.split(" ")[2][1:].split(",")[0])
            except (IndexError, ValueError):
                new_line = 0
            out.append(line)
        elif not in_hunk:
            if line.startswith("--- "):
                old_path = line[6:] if line.startswith("--- a/") else line[4:]
            elif line.startswith("+++ "):
                target = line[6:] if line.startswith("+++ b/") else line[4:]
                out.append("=== %s" % (old_path + " (deleted)" if target == "/dev/null" else target))
            elif line.startswith(("new file", "rename from", "rename to", "Binary files")):
                out.append(line)
        elif line.startswith("+"):
            out.append("+ %s|%s" % (_native.line_address(new_line, line[1:]), line[1:]))
            new_line += 1
        elif line.startswith(" "):
            out.append("  %s|%s" % (_native.line_address(new_line, line[1:]), line[1:]))
            new_line += 1
        elif line.startswith("-"):
            out.append("- |%s" % line[1:])
        else:  # "\\ No newline at end of file"
            out.append(line)
    return "\n".join(out) + ("\n" if out else "")


@register
def diff(path: str | None = None, staged: bool = False, context: int = 3) -> GitText:
    """Show changes as a diff whose new-side lines carry `LINE:HASH` addresses.

    path: limit to a file or directory; staged: the index against HEAD instead of the working
    tree against the index; context: lines of context. Lines are `+ ADDR|text` (added),
    `  ADDR|text` (context) and `- |text` (removed, no address). Addresses of an unstaged diff
    are the working-tree file's, ready for `patch`.
    """
    # No program of the repository's (textconv, external diff); the parser's own prefixes.
    args = ["diff", "--no-color", "--no-ext-diff", "--no-textconv",
            "--no-relative", "--src-prefix=a/", "--dst-prefix=b/", "--ignore-submodules=dirty", "-U%d" % int(context)]
    if staged:
        args.append("--cached")
    if path is not None:
        args += ["--", os.fspath(path)]
    raw = _git(*args, settings=(("diff.suppressBlankEmpty", "false"),))
    if not raw.strip():
        return GitText("no %s changes%s\n" % ("staged" if staged else "unstaged", " in %s" % path if path else ""))
    return GitText(_addressed_diff(raw))


@register
def log(n: int = 10, path: str | None = None) -> GitText:
    """Show the last `n` commits (of `path`, if given): `hash date author  subject`."""
    args = ["log", "--no-show-signature", "-n", str(int(n)), "--date=short", "--format=%h %ad %an  %s"]
    if path is not None:
        args += ["--", os.fspath(path)]
    out = _git(*args)
    return GitText(out if out.strip() else "no commits yet\n")


@register
def blame(path: str, start: int | None = None, end: int | None = None) -> GitText:
    """Show who last changed each line of `path` (lines `start`..`end`, 1-based, inclusive).

    Each row is `commit author date  LINE:HASH|text`; the address is the working-tree line's,
    as `cat` prints it. Uncommitted lines show `uncommitted`.
    """
    args = ["blame", "--porcelain", "--no-textconv"]
    if start is not None or end is not None:
        args += ["-L", "%s,%s" % (int(start or 1), "" if end is None else int(end))]
    args += ["--", os.fspath(path)]
    raw = _git(*args)
    commits: dict[str, dict[str, str]] = {}
    rows: list[str] = []
    current: dict[str, str] = {}
    sha = ""
    final = 0
    expect_header = True
    for line in raw.split("\n"):
        if expect_header:
            parts = line.split(" ")
            if len(parts) < 3:
                continue
            sha, final = parts[0], int(parts[2])
            current = commits.setdefault(sha, {})
            expect_header = False
        elif line.startswith("\t"):
            text = line[1:]
            if set(sha) == {"0"}:
                who = "uncommitted"
            else:
                who = "%s %s %s" % (sha[:7], current.get("author", "?")[:16], current.get("date", ""))
            rows.append("%s  %s|%s" % (who, _native.line_address(final, text), text))
            expect_header = True
        else:
            key, _, value = line.partition(" ")
            if key == "author":
                current["author"] = value
            elif key == "author-time":
                import time

                current["date"] = time.strftime("%Y-%m-%d", time.gmtime(int(value)))
    return GitText("\n".join(rows) + "\n" if rows else "no lines\n")


@context_provider
def context() -> dict[str, object]:
    """The current branch (read from .git/HEAD, no subprocess)."""
    try:
        repo = _safegit.find_repository(_root())
    except RuntimeError:
        return {"repository": True}
    if repo is None:
        return {"repository": False}
    try:
        with open(os.path.join(repo.git_dir, "HEAD"), encoding="utf-8") as f:
            head = f.read().strip()
    except OSError:
        return {"repository": True}
    if head.startswith("ref: refs/heads/"):
        return {"repository": True, "branch": head[len("ref: refs/heads/") :]}
    return {"repository": True, "detached": head[:12]}
