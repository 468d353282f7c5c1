"""Bundled extension `tests`: detect and run the workspace's test runner (cargo, pytest, npm)
and return a compact pass/fail summary with the failing tests' output capped."""
from __future__ import annotations

import os
import sys

from vis import _state
from vis.extension import namespace, register

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any

namespace("tests", "Run the workspace's tests (cargo, pytest, npm) and summarize pass/fail")

#: Runners in the order they are tried.
RUNNERS = ("cargo", "pytest", "npm")


def _root() -> str:
    return _state.workspace_roots[0] if _state.workspace_roots else (_state.workspace or os.getcwd())


#: Exit status of `_PYTEST_MAIN` when the interpreter has no pytest.
_NO_PYTEST = 121

#: How pytest starts (`python -c`): the workspace (the first entry of `sys.path`, as for
#: `python -m pytest`) goes after the standard library and pytest, so no workspace file named
#: like a standard module (`contextlib.py`) is imported in its place; test modules can still
#: import the project's own modules.
_PYTEST_MAIN = """\
import sys
if not getattr(sys.flags, "safe_path", False):
    del sys.path[0]
import importlib.util
if importlib.util.find_spec("pytest") is None:
    print("[vis] pytest is not installed for " + sys.executable)
    sys.exit(%d)
import os
import pytest
sys.path.append(os.getcwd())
sys.exit(pytest.main())
""" % _NO_PYTEST


def _inside(path: str, root: str) -> bool:
    """True when the file `path` lies under `root` (its directory resolved: a venv's
    `bin/python` is a link to the interpreter it was made from)."""
    return os.path.realpath(os.path.dirname(path)).startswith(os.path.realpath(root) + os.sep)


def _python() -> tuple[str, str]:
    """The interpreter for pytest and a note saying why, when it is not the workspace's venv.

    The worker's `sys.executable` is the workspace's `.venv` Python only in a trusted
    workspace. In an untrusted one that venv is the repository's code (its `.pth` files, even
    its `bin/python`), so the tests run with a Python outside the workspace instead."""
    exe = sys.executable
    roots = list(_state.workspace_roots) or ([_state.workspace] if _state.workspace else [])
    if _state.trusted:
        return exe, ""
    venvs = [
        os.path.join(r, ".venv", "bin", "python")
        for r in roots
        if os.path.isfile(os.path.join(r, ".venv", "pyvenv.cfg"))
    ]
    skipped = venvs[0] if venvs else exe
    candidates = [exe] + [
        os.path.join(sys.base_exec_prefix, "bin", name)
        for name in ("python%d.%d" % sys.version_info[:2], "python3")
    ]
    for base in candidates:
        if os.path.isfile(base) and os.access(base, os.X_OK) and not any(_inside(base, r) for r in roots):
            if not venvs and base == exe:
                return exe, ""
            return base, (
                "ran with %s, not the workspace's venv (%s): the workspace is not trusted; "
                "`vis trust %s` lets tests.run() use it" % (base, skipped, roots[0])
            )
    raise RuntimeError(
        "no Python outside the untrusted workspace to run pytest with (looked in %s/bin); "
        "`vis trust %s` lets tests.run() use the workspace's venv (%s)" % (sys.base_exec_prefix, roots[0], skipped)
    )


def _has_python_tests(root: str) -> bool:
    for name in ("pytest.ini", "conftest.py"):
        if os.path.exists(os.path.join(root, name)):
            return True
    for name in ("pyproject.toml", "setup.cfg", "tox.ini"):
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                if "pytest" in f.read():
                    return True
        except OSError:
            pass
    for d in ("tests", "test"):
        path = os.path.join(root, d)
        if os.path.isdir(path) and any(
            n.startswith("test_") and n.endswith(".py") for n in os.listdir(path)
        ):
            return True
    return any(n.startswith("test_") and n.endswith(".py") for n in os.listdir(root))


def _npm_has_tests(root: str) -> bool:
    import json  # here, not at the top: the extension loads at every worker start

    try:
        with open(os.path.join(root, "package.json"), encoding="utf-8") as f:
            script = json.load(f).get("scripts", {}).get("test", "")
    except (OSError, ValueError, AttributeError):
        return False
    return bool(script) and "no test specified" not in script


@register
def detect() -> list[str]:
    """List the test runners this workspace uses (cargo, pytest, npm).

    "cargo" when there is a Cargo.toml, "pytest" for a pytest config or test_*.py files,
    "npm" for a package.json with a test script."""
    root = _root()
    found = []
    if os.path.isfile(os.path.join(root, "Cargo.toml")):
        found.append("cargo")
    if _has_python_tests(root):
        found.append("pytest")
    if _npm_has_tests(root):
        found.append("npm")
    return found


class TestReport:
    """The result of `tests.run`: `.ok`, `.runner`, `.passed`, `.failed`, `.failures`
    (list of {"name", "output"}), `.code`, `.artifact` (full output), `.interpreter` (the
    Python pytest ran with; "" for other runners), `.note` (e.g. why not the workspace's
    venv). Prints compactly."""

    def __init__(self, runner: str, code: int | None, passed: int, failed: int, failures: list[dict[str, str]], seconds: float, artifact: str, tail: str, timed_out: bool, interpreter: str = "", note: str = "") -> None:
        self.runner = runner
        self.code = code
        self.passed = passed
        self.failed = failed
        self.failures = failures
        self.seconds = seconds
        self.artifact = artifact
        self.tail = tail
        self.timed_out = timed_out
        self.interpreter = interpreter
        self.note = note

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.timed_out

    def __repr__(self) -> str:
        verdict = "ok" if self.ok else ("TIMEOUT" if self.timed_out else "FAILED")
        head = "%s: %s — %d passed, %d failed (%.1f s)" % (self.runner, verdict, self.passed, self.failed, self.seconds)
        lines = [head]
        if self.note:
            lines.append("[%s]" % self.note)
        if self.failures:
            lines.append("failed: " + ", ".join(f["name"] for f in self.failures))
            for f in self.failures:
                if f["output"].strip():
                    lines.append("---- %s ----" % f["name"])
                    lines.append(f["output"].rstrip("\n"))
        elif not self.ok and self.tail.strip():
            lines.append(self.tail.rstrip("\n"))
        if not self.ok:
            lines.append("[full output: %s]" % self.artifact)
        return "\n".join(lines)

    __str__ = __repr__


def _cap(text: str, max_lines: int) -> str:
    lines = text.splitlines()
    if len(lines) <= max_lines:
        return text
    keep_head = max_lines // 4  # the end of a failure (the assertion) matters most
    keep_tail = max_lines - keep_head
    cut = len(lines) - max_lines
    return "\n".join(lines[:keep_head] + ["… %d lines cut …" % cut] + lines[-keep_tail:]) + "\n"


def _execute(cmd: list[str], timeout: float) -> tuple[int | None, str, float, bool, str]:
    # Here, not at the top: `vis.shell` (and `vis.jobs` behind it) would cost every worker's
    # start a fraction of a millisecond for a call most sessions never make.
    from vis.shell import run_to_file

    env = dict(os.environ)
    env.setdefault("CARGO_TERM_COLOR", "never")
    env["NO_COLOR"] = "1"
    env["RUST_BACKTRACE"] = "0"  # a compact summary: the panic message, not the stack
    code, artifact, seconds, timed_out = run_to_file(cmd, timeout, "tests", env=env)
    with open(artifact, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return code, text, seconds, timed_out, artifact


def _parse_cargo(text: str, max_lines: int) -> tuple[int, int, list[dict[str, str]]]:
    import re  # here, not at the top: the extension loads at every worker start

    passed = sum(int(m) for m in re.findall(r"test result: \w+\. (\d+) passed", text))
    failed = sum(int(m) for m in re.findall(r"; (\d+) failed", text))
    sections = dict(
        (m.group(1), m.group(2))
        for m in re.finditer(r"^---- (\S+) stdout ----\n(.*?)(?=^---- \S+ stdout ----|^failures:$|\Z)", text, re.M | re.S)
    )
    names = []
    for block in re.findall(r"^failures:\n((?:    \S+\n)+)", text, re.M):
        names += [n.strip() for n in block.splitlines() if n.strip()]
    if not names:
        names = list(sections)
    failures = [{"name": n, "output": _cap(sections.get(n, ""), max_lines)} for n in dict.fromkeys(names)]
    return passed, failed, failures


def _parse_pytest(text: str, max_lines: int) -> tuple[int, int, list[dict[str, str]]]:
    import re  # here, not at the top: the extension loads at every worker start

    summary = ""
    for line in reversed(text.splitlines()):
        if re.search(r"\d+ (passed|failed|error)", line):
            summary = line
            break
    def count(word: str) -> int:
        m = re.search(r"(\d+) %s" % word, summary)
        return int(m.group(1)) if m else 0
    passed, failed = count("passed"), count("failed") + count("error")
    sections = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^_{3,} (.+?) _{3,}\n(.*?)(?=^_{3,} |^={3,} |\Z)", text, re.M | re.S)
    }
    names = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    failures = []
    for n in dict.fromkeys(names):
        short = n.split("::")[-1]
        failures.append({"name": n, "output": _cap(sections.get(short, sections.get(n, "")), max_lines)})
    return passed, failed, failures


def _parse_npm(text: str, code: int | None, max_lines: int) -> tuple[int, int, list[dict[str, str]]]:
    """Counts and failures from what `npm test` printed: node's test runner (TAP), Jest or
    Mocha; otherwise only the exit code is known."""
    import re  # here, not at the top: the extension loads at every worker start

    tap_pass = re.findall(r"^# pass (\d+)$", text, re.M)
    if tap_pass:
        failed = sum(int(n) for n in re.findall(r"^# fail (\d+)$", text, re.M))
        failures = [
            {"name": m.group(1).strip(), "output": _cap(m.group(2), max_lines)}
            for m in re.finditer(r"^\s*not ok \d+ - (.+)\n((?:\s+.*\n)*?)\s*\.\.\.$", text, re.M)
        ]
        # Node nests subtests; keep the innermost failing names once.
        failures = list({f["name"]: f for f in failures}.values())
        return sum(int(n) for n in tap_pass), failed, failures
    jest = re.search(r"^Tests:\s+(.*\d+ total)", text, re.M)
    if jest:
        def count(word: str) -> int:
            m = re.search(r"(\d+) %s" % word, jest.group(1))
            return int(m.group(1)) if m else 0
        names = re.findall(r"^\s*● (.+)$", text, re.M)
        failures = [{"name": n.strip(), "output": ""} for n in dict.fromkeys(names)]
        return count("passed"), count("failed"), failures
    mocha = re.search(r"^\s*(\d+) passing", text, re.M)
    if mocha:
        failing = re.search(r"^\s*(\d+) failing", text, re.M)
        return int(mocha.group(1)), int(failing.group(1)) if failing else 0, []
    return 0, 0 if code == 0 else 1, []


@register
def run(filter: str | None = None, runner: str | None = None, timeout: float = 600, max_failure_lines: int = 40) -> TestReport:
    """Run the workspace's tests and summarize: `tests.run()`, `tests.run("parse")`.

    runner: "cargo", "pytest" or "npm" (default: the first `tests.detect()` finds). filter:
    a test-name filter (cargo's filter, pytest's -k; ignored by npm). Prints one verdict line
    with counts, the failing tests' names, and each failure's output capped to
    `max_failure_lines` lines; the full output is saved as an artifact whose path is shown.
    pytest runs with the workspace's `.venv` only when the workspace is trusted; otherwise
    with the worker's own Python, and the report says so.
    """
    found = detect()
    if runner is None:
        if not found:
            raise RuntimeError(
                "no test runner found in %s: expected Cargo.toml, pytest tests (test_*.py, pytest.ini) "
                "or package.json with a test script; use sh(...) for anything else" % _root()
            )
        runner = found[0]
    if runner not in RUNNERS:
        raise ValueError("unknown runner %r: use one of %s" % (runner, ", ".join(RUNNERS)))
    python, note = "", ""
    if runner == "cargo":
        cmd = ["cargo", "test", "--color", "never"] + ([filter] if filter else [])
    elif runner == "pytest":
        python, note = _python()
        cmd = [python, "-c", _PYTEST_MAIN, "-q", "-rfE", "--color=no", "-p", "no:cacheprovider"] + (["-k", filter] if filter else [])
    else:
        cmd = ["npm", "test", "--silent"]
    try:
        code, text, seconds, timed_out, artifact = _execute(cmd, timeout)
    except FileNotFoundError:
        raise RuntimeError("%s is not installed (not on PATH)" % cmd[0]) from None
    if runner == "pytest" and code == _NO_PYTEST and text.startswith("[vis] pytest is not installed"):
        if note:
            fix = "or trust the workspace (`vis trust %s`) so tests.run() uses its venv" % _root()
        else:
            fix = "or add it to the workspace's .venv"
        raise RuntimeError("pytest is not installed for %s; install it (pip install pytest) %s" % (python, fix))
    if runner == "cargo":
        passed, failed, failures = _parse_cargo(text, max_failure_lines)
    elif runner == "pytest":
        passed, failed, failures = _parse_pytest(text, max_failure_lines)
    else:
        passed, failed, failures = _parse_npm(text, code, max_failure_lines)
    tail = _cap("\n".join(text.splitlines()[-max_failure_lines:]), max_failure_lines)
    return TestReport(runner, code, passed, failed, failures, seconds, artifact, tail, timed_out, python, note)
