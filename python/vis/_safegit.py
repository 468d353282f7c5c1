"""Running git on a repository that may be hostile (the bundled `git` extension's only way).

A cloned repository's configuration can make git start programs: `core.fsmonitor`, hooks
(also through `core.hooksPath`), `diff.*.textconv`, `diff.external`, `filter.*` drivers named by
`.gitattributes`, pagers and editors, `gpg.program` under `log.showSignature`, and the fetches of
a partial clone (`core.sshCommand`, the `ext::` transport, credential helpers, askpass), all of
which `include.path` can pull in from any file. `run` starts git so that none of them can:

- Environment: the worker's, minus every `GIT_*` variable and pager, editor and askpass
  variables; plus no system config or attributes, no prompts, no optional index writes (so no
  `post-index-change` hook either), no lazy fetches and no transport at all
  (`GIT_ALLOW_PROTOCOL` empty beats any `protocol.*.allow`). git still finds the repository
  itself, so its ownership check holds: a repository another user owns (say `/tmp/.git` above
  the workspace) is refused unless the user's `safe.directory` allows it.
- Command-line settings (`GIT_CONFIG_COUNT`, which win over every config file): fsmonitor off,
  hooks from `/dev/null`, pager `cat`, editors `:`, no credential helper or askpass, no
  signature display, no automatic gc or maintenance, no submodule recursion.
- Callers pass `--no-textconv` and `--no-ext-diff` where git would use them (flags beat config).
- Untrusted workspace: git never reads the repository's own config. It reads a copy holding
  only the settings needed to read the repository right (`KEPT_SETTINGS`: object format, file
  modes, line endings, branch tracking, …), from the user's global config and the repository's
  `.git/config` without its includes, through a shadow common directory (`GIT_COMMON_DIR`)
  whose entries link to the real ones except `config` and `hooks`; the user's
  `safe.directory` entries are passed on the command line (the only config git takes them
  from besides the global file). A denylist of program settings can never be complete (git
  keeps adding them); this list is safe by construction.
- Trusted workspace: git reads the config as it is (includes, worktree config), with the
  overrides above, and every filter driver it defines emptied (`filter.NAME.clean` = "", …).

Neither mode writes to `.git`, so a read-only `.git` is fine.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from collections.abc import Sequence

#: Seconds a git command may take before it is stopped.
TIMEOUT = 120

#: Settings given on git's command line (they beat every config file), in both modes.
OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value clears the list of helpers
    ("protocol.allow", "never"),
    ("log.showSignature", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("core.quotePath", "false"),
    ("color.ui", "false"),
)

#: The settings an untrusted repository's config (and the user's global config) may give git:
#: what reading the repository right needs, none of which names a program or a file to run.
KEPT_SETTINGS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.symlinks",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.autocrlf",
        "core.eol",
        "core.safecrlf",
        "core.checkstat",
        "core.trustctime",
        "core.abbrev",
        "core.bigfilethreshold",
        "extensions.objectformat",
        "extensions.refstorage",
        "diff.renames",
        "diff.renamelimit",
        "diff.algorithm",
        "diff.indentheuristic",
        "status.renames",
        "status.renamelimit",
        "status.showuntrackedfiles",
        "i18n.logoutputencoding",
        "i18n.commitencoding",
        "user.name",
        "user.email",
    }
)
#: Kept for every subsection: branch tracking (`status` shows ahead/behind).
KEPT_PER_SUBSECTION = frozenset({("branch", "remote"), ("branch", "merge"), ("remote", "fetch")})
#: Kept from the user's global config only: a file the user chose (the repository's own choice
#: of file is not read).
KEPT_FROM_USER = frozenset({"core.excludesfile"})

#: Entries of the common directory the shadow leaves out.
_NOT_LINKED = frozenset({"config", "config.worktree", "hooks"})

#: Inherited variables that name a program git would start, besides `GIT_*`.
_PROGRAM_VARIABLES = frozenset({"PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE"})


class Repository:
    """Where a repository is: its work tree, git directory and common directory (the git
    directory of the main work tree; the same one unless this is a linked work tree)."""

    def __init__(self, work_tree: str, git_dir: str, common_dir: str) -> None:
        self.work_tree = work_tree
        self.git_dir = git_dir
        self.common_dir = common_dir


def find_repository(start: str) -> Repository | None:
    """The repository whose work tree holds `start` (found upward, like git), or None.

    A `.git` file (`gitdir: PATH`, a linked work tree or submodule) is followed; a `commondir`
    file in the git directory names the common directory. Raises RuntimeError when a `.git`
    is there but points at no git directory.
    """
    d = os.path.abspath(start)
    while True:
        dot_git = os.path.join(d, ".git")
        git_dir = None
        if os.path.isdir(dot_git):
            git_dir = dot_git
        elif os.path.isfile(dot_git):
            git_dir = _follow_gitfile(dot_git)
        if git_dir is not None:
            common = git_dir
            try:
                with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as f:
                    common = os.path.normpath(os.path.join(git_dir, f.read().strip()))
            except OSError:
                pass
            if os.path.isfile(os.path.join(git_dir, "HEAD")) and os.path.isdir(os.path.join(common, "objects")):
                return Repository(d, git_dir, common)
            raise RuntimeError(
                "%s is not a usable git directory (no HEAD or objects); repair or remove it" % git_dir
            )
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _follow_gitfile(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            line = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise RuntimeError("cannot read %s (%s); repair or remove it" % (path, e)) from None
    if not line.startswith("gitdir:"):
        raise RuntimeError("%s does not start with `gitdir:`; repair or remove it" % path)
    return os.path.normpath(os.path.join(os.path.dirname(path), line[7:].strip()))


def git_program(roots: Sequence[str], trusted: bool) -> str:
    """The `git` on PATH; in an untrusted workspace, never one inside a workspace root (an
    activated `.venv/bin` there could hold its own `git`)."""
    inside = [os.path.realpath(r) + os.sep for r in roots] if not trusted else []
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not entry:
            continue
        if inside and any((os.path.realpath(entry) + os.sep).startswith(r) for r in inside):
            continue
        candidate = os.path.join(entry, "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError("git is not installed (no `git` on PATH); install git to use git.*")


def base_environment() -> dict[str, str]:
    """The worker's environment without what could point git at config or programs."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") and k not in _PROGRAM_VARIABLES
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_LAZY_FETCH="1",
        GIT_ALLOW_PROTOCOL="",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_EDITOR=":",
        GIT_SEQUENCE_EDITOR=":",
        GIT_ASKPASS="",
    )
    return env


def _with_settings(env: dict[str, str], settings: Sequence[tuple[str, str]]) -> dict[str, str]:
    env = dict(env)
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for i, (key, value) in enumerate(settings):
        env["GIT_CONFIG_KEY_%d" % i] = key
        env["GIT_CONFIG_VALUE_%d" % i] = value
    return env


def _config_entries(program: str, env: dict[str, str], args: Sequence[str]) -> list[tuple[str, str | None]]:
    """`git config --list` as (key, value) pairs; value None for a bare `key` (true). An
    unreadable file lists nothing."""
    import subprocess

    proc = subprocess.run(
        [program, "config", "--list", "--null", *args],
        cwd="/",  # outside any repository: nothing but the named file is read
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=TIMEOUT,
    )
    if proc.returncode != 0:
        return []
    entries: list[tuple[str, str | None]] = []
    for item in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if not item:
            continue
        key, newline, value = item.partition("\n")
        entries.append((key, value if newline else None))
    return entries


def _is_kept(key: str, from_user: bool) -> bool:
    if key in KEPT_SETTINGS or (from_user and key in KEPT_FROM_USER):
        return True
    section, _, rest = key.partition(".")
    subsection, _, name = rest.rpartition(".")
    return bool(subsection) and (section, name) in KEPT_PER_SUBSECTION


def _quote(text: str) -> str:
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def config_text(entries: Sequence[tuple[str, str | None]]) -> str:
    """A config file holding `entries` (keys as `git config --list` prints them)."""
    lines = []
    for key, value in entries:
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        lines.append("[%s %s]" % (section, _quote(subsection)) if subsection else "[%s]" % section)
        lines.append("\t%s" % name if value is None else "\t%s = %s" % (name, _quote(value)))
    return "\n".join(lines) + "\n"


def _sanitized_config(program: str, env: dict[str, str], repo: Repository) -> tuple[str, list[tuple[str, str]]]:
    """The config file an untrusted repository's git reads, and the user's `safe.directory`
    settings (honored only on the command line or in the user's own files)."""
    user = _config_entries(program, env, ["--global", "--includes"])
    own = _config_entries(program, env, ["--file", os.path.join(repo.common_dir, "config"), "--no-includes"])
    kept = [e for e in user if _is_kept(e[0], True)] + [e for e in own if _is_kept(e[0], False)]
    safe = [(key, value) for key, value in user if key == "safe.directory" and value is not None]
    return config_text(kept), safe


def _shadow_common_dir(repo: Repository, config: str) -> str:
    """A temporary common directory: links to the real entries, and `config` as given."""
    import tempfile

    shadow = tempfile.mkdtemp(prefix="vis-git-")
    try:
        for name in os.listdir(repo.common_dir):
            if name not in _NOT_LINKED:
                os.symlink(os.path.join(repo.common_dir, name), os.path.join(shadow, name))
        with open(os.path.join(shadow, "config"), "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(config)
    except OSError:
        _remove(shadow)
        raise
    return shadow


def _remove(shadow: str) -> None:
    import shutil

    shutil.rmtree(shadow, ignore_errors=True)  # unlinks the links; never follows them


def _emptied_filters(program: str, env: dict[str, str], repo: Repository) -> list[tuple[str, str]]:
    """Settings that empty every filter driver the config git reads defines (includes too)."""
    import subprocess

    proc = subprocess.run(
        [program, "config", "--list", "--null", "--name-only"],
        cwd=repo.work_tree,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=TIMEOUT,
    )
    drivers = []
    for key in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
        section, _, rest = key.partition(".")
        driver, _, name = rest.rpartition(".")
        if section == "filter" and driver and driver not in drivers:
            drivers.append(driver)
    settings = []
    for driver in drivers:
        for name in ("clean", "smudge", "process"):
            settings.append(("filter.%s.%s" % (driver, name), ""))
        settings.append(("filter.%s.required" % driver, "false"))
    return settings


def run(
    args: Sequence[str],
    cwd: str | None = None,
    trusted: bool | None = None,
    roots: Sequence[str] | None = None,
    timeout: float = TIMEOUT,
    settings: Sequence[tuple[str, str]] = (),
) -> bytes:
    """Runs `git ARGS` on the repository holding `cwd` (default: the first workspace root);
    returns its standard output. `settings` are more command-line settings (the caller's
    output format). Raises RuntimeError naming the cause: no repository, no git, a timeout, or
    git's own error. `trusted` and `roots` default to the worker's."""
    import subprocess

    from vis import _state

    roots = list(roots if roots is not None else _state.workspace_roots or [])
    cwd = cwd or (roots[0] if roots else (_state.workspace or os.getcwd()))
    trusted = _state.trusted if trusted is None else trusted
    repo = find_repository(cwd)
    if repo is None:
        raise RuntimeError("%s is not inside a git repository; git.* needs a git work tree (git init)" % cwd)
    program = git_program(roots or [repo.work_tree], trusted)
    base = base_environment()
    env = dict(base)
    settings = list(settings) + list(OVERRIDES)
    shadow = None
    try:
        if trusted:
            settings += _emptied_filters(program, _with_settings(env, settings), repo)
        else:
            config, safe_directories = _sanitized_config(program, base, repo)
            shadow = _shadow_common_dir(repo, config)
            env.update(GIT_COMMON_DIR=shadow, GIT_CONFIG_GLOBAL=os.devnull)
            settings += safe_directories
        proc = subprocess.run(
            [program, "--no-pager", *args],
            cwd=cwd,
            env=_with_settings(env, settings),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError("git %s took longer than %d s and was stopped" % (args[0] if args else "", timeout)) from None
    finally:
        if shadow is not None:
            _remove(shadow)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise RuntimeError("git %s failed (exit %d): %s" % (" ".join(args), proc.returncode, err))
    return proc.stdout
