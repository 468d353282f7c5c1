"""`sh`: shell commands from a block, capped like block output."""
from __future__ import annotations

import os
import time

from vis import _state

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    import subprocess
    from typing import IO


class ShellResult:
    """The result of `sh`: `.code` (exit code, None if killed by the timeout), `.output`
    (stdout and stderr interleaved, capped), `.ok`, `.timed_out`. Prints as a status line
    followed by the output."""

    def __init__(self, cmd: str, code: int | None, output: str, seconds: float, timed_out: bool) -> None:
        self.cmd = cmd
        self.code = code
        self.output = output
        self.seconds = seconds
        self.timed_out = timed_out

    @property
    def ok(self) -> bool:
        return self.code == 0

    def __repr__(self) -> str:
        if self.timed_out:
            head = "[killed: timeout after %.0f s]" % self.seconds
        else:
            head = "[exit %s]" % self.code
        return head + ("\n" + self.output.rstrip("\n") if self.output else "")

    __str__ = __repr__


def sh(cmd: str, timeout: float = 120) -> ShellResult:
    """Run a shell command in the workspace; returns its exit code and output.

    stdout and stderr are captured together (in order) and capped like block output; a cut
    output is saved in full as an artifact whose path the marker names. After `timeout`
    seconds the command's whole process group is killed. Example: `sh("cargo test -q")`.

    `sh.background(cmd, timeout=None)` starts a command that outlives the block and returns
    a `Job` at once (`.tail()`, `.wait()`, `.kill()`; `jobs()` lists them): see `doc('vis.jobs')`.
    """
    if not isinstance(cmd, str) or not cmd.strip():
        raise ValueError("sh() needs a non-empty command string, e.g. sh('ls -la')")
    if timeout is None or timeout <= 0:
        raise ValueError("sh() timeout must be a positive number of seconds, got %r" % (timeout,))
    code, artifact, seconds, timed_out = run_to_file(cmd, timeout, "sh", shell=True)
    with open(artifact, "rb") as f:
        raw = f.read()
    from vis import _native

    text, _total, cut = _native.cap_text(raw, _state.output_limit, artifact)
    if not cut:
        os.unlink(artifact)
    if code not in (0, None):
        hint = _network_hint(text)
        if hint:
            text = text.rstrip("\n") + "\n" + hint + "\n"
    return ShellResult(cmd, code, text, seconds, timed_out)


_NETWORK_FAILURES = (
    "could not resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "network is unreachable",
    "no address associated with hostname",
    "getaddrinfo",
    "eai_again",
    "enetunreach",
)


def _network_hint(output: str) -> str | None:
    """The sandbox's network line when a failed command's output says it could not reach the
    network and the network is off."""
    sandbox = _state.session.get("sandbox") or {}
    if sandbox.get("network", True):
        return None
    lower = output.lower()
    if not any(marker in lower for marker in _NETWORK_FAILURES):
        return None
    return (
        "[vis] the network is off in this sandbox (mode %s): only 127.0.0.1 is reachable; the person can allow it with --network or [sandbox] network = true"
        % sandbox.get("mode", "workspace-write")
    )


def run_to_file(
    cmd: str | list[str], timeout: float, prefix: str, shell: bool = False, env: dict[str, str] | None = None
) -> tuple[int | None, str, float, bool]:
    """Runs `cmd` in the workspace with stdout and stderr (in order) going to a fresh artifact
    file; after `timeout` seconds its whole process group is killed. Returns (exit code or
    None if killed, artifact path, seconds, timed out). For `sh` and extensions."""
    import subprocess

    artifact = _state.next_artifact(prefix)
    os.makedirs(os.path.dirname(artifact) or ".", exist_ok=True)
    started = time.monotonic()
    timed_out = False
    with open(artifact, "wb") as out:
        proc = start_process(cmd, out, shell=shell, env=env)
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()
            code, timed_out = None, True
        except BaseException:
            kill_group(proc.pid)
            proc.wait()
            raise
    return code, artifact, time.monotonic() - started, timed_out


def start_process(
    cmd: str | list[str], stdout: "int | IO[bytes]", shell: bool = False, env: dict[str, str] | None = None
) -> "subprocess.Popen[bytes]":
    """Starts `cmd` in the workspace (its first root) in a process group of its own, stdin
    `/dev/null`, stdout and stderr together into `stdout` (a file or `subprocess.PIPE`), with
    the machine's memory limit rather than the worker's. For `sh`, `sh.background` and
    extensions; `kill_group(proc.pid)` ends it with everything it started."""
    import resource
    import subprocess

    cwd = _state.workspace_roots[0] if _state.workspace_roots else None
    # The worker's memory cap is a soft limit; commands get the machine's limit back.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    try:
        return subprocess.Popen(
            cmd,
            shell=shell,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def kill_group(pid: int) -> None:
    """SIGKILL to the process group `pid` leads (one `start_process` started); a group that is
    gone already is no error."""
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _attach_background() -> None:
    from vis.jobs import background

    # `sh` stays a plain function (its signature and doc are the catalog's); the attribute
    # makes `sh.background(...)` work.
    setattr(sh, "background", background)


_attach_background()
