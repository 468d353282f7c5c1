"""Background jobs: `sh.background(cmd)` starts a shell command that outlives the block.

A job runs in the workspace in its own process group, inside the worker's sandbox and PID
namespace, so it ends with the worker: a restart, a crash, or the end of the session kill it
(the next block is told which jobs were lost). Its output (stdout and stderr, in order) goes to
an artifact file that `cat`/`grep` can read while it runs, up to the `[jobs] output_mb` cap.
The host keeps the session's job table: when a job ends and no block saw it end, the next model
request carries one line saying so (`[vis] job 3 finished: exit 0, 1,204 lines (artifact …)`).
"""
from __future__ import annotations

import _thread
import os
import time

from vis import _native, _state

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    import subprocess

#: How often a job's thread looks at its process when it prints nothing (seconds).
_POLL = 0.2
#: This worker's jobs by id (jobs of an earlier worker died with it).
_JOBS: dict[int, "Job"] = {}
_next_id = 1
_lock = _thread.allocate_lock()  # (`threading` is imported by the first job)


class Job:
    """A shell command running in the background (`sh.background(cmd)` starts one).

    `.id` (a small number, unique in the session), `.cmd`, `.artifact` (the file its output
    goes to: read it with `cat`/`grep` while it runs), `.running`, `.exit_code` (None while it
    runs or when a signal ended it), `.tail(n=20)` (its last lines), `.wait(timeout)` (its exit
    code, or None if it still runs), `.kill()`. `jobs()` lists them.
    """

    def __init__(self, job_id: int, cmd: str, artifact: str, proc: "subprocess.Popen[bytes]", timeout: float | None) -> None:
        self.id = job_id
        self.cmd = cmd
        self.artifact = artifact
        self._proc = proc
        self._timeout = timeout
        self._started = time.monotonic()
        import threading

        self._ended: float | None = None
        self._done = threading.Event()
        self._killed = False
        self._timed_out = False
        self._lines = 0
        self._bytes = 0
        self._dropped = 0
        self._observed = False

    # -- what a block reads ----------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the command runs."""
        if self._done.is_set():
            self._observe()
            return False
        return True

    @property
    def exit_code(self) -> int | None:
        """The command's exit code once it ended; None while it runs or when a signal (a
        timeout, `kill()`) ended it."""
        if not self._done.is_set():
            return None
        self._observe()
        code = self._proc.returncode
        return code if code is not None and code >= 0 else None

    @property
    def lines(self) -> int:
        """Lines of output so far."""
        return self._lines

    def tail(self, n: int = 20) -> str:
        """The last `n` lines of the job's output so far (all of it is in `.artifact`)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError("tail(n) needs a whole number of lines >= 0, got %r; e.g. job.tail(50)" % (n,))
        if n == 0:
            return ""
        try:
            with open(self.artifact, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                chunk = 8192
                data = b""
                while size > 0 and data.count(b"\n") <= n:
                    step = min(chunk, size)
                    size -= step
                    f.seek(size)
                    data = f.read(step) + data
                    chunk *= 2
        except FileNotFoundError:
            return ""
        lines = data.decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])

    def wait(self, timeout: float | None = None) -> int | None:
        """Waits up to `timeout` seconds (None: until it ends) for the job to end; returns its
        exit code (negative: the signal that ended it), or None if it still runs.

        Ctrl-C and the block's timeout interrupt the wait (the job goes on). A wait never
        outlasts the block: when the block's own timeout comes first, it returns None about a
        second before it, and the job goes on."""
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
                raise ValueError("wait(timeout) needs a number of seconds >= 0 or None, got %r; e.g. job.wait(60)" % (timeout,))
        if self._killed and not self._done.is_set():
            self._done.wait(5)
        limit = _block_time_left()
        if timeout is None or (limit is not None and limit < timeout):
            timeout = limit
        # `Event.wait` is interruptible: the block's SIGINT raises KeyboardInterrupt here.
        if not self._done.wait(timeout):
            return None
        self._observe()
        return self._proc.returncode

    def kill(self) -> None:
        """Kills the job's whole process group (SIGKILL) and waits for it to end. Killing an
        ended job does nothing."""
        if self._done.is_set():
            self._observe()
            return
        self._killed = True
        _kill_group(self._proc.pid)
        self._done.wait(5)
        self._observe()

    def __repr__(self) -> str:
        ended = self._done.is_set()
        seconds = (self._ended if ended and self._ended is not None else time.monotonic()) - self._started
        if not ended:
            state = "running %s" % _duration(seconds)
        elif self._timed_out:
            state = "killed by its timeout after %s" % _duration(seconds)
        elif self._killed:
            state = "killed after %s" % _duration(seconds)
        else:
            code = self._proc.returncode
            state = ("exit %s" % code if code is not None and code >= 0 else "killed by signal %s" % -(code or 0)) + " after %s" % _duration(seconds)
        cmd = self.cmd if len(self.cmd) <= 60 else self.cmd[:57] + "..."
        return "<job %d %s: %r, %s line%s in %s>" % (
            self.id, state, cmd, "{:,}".format(self._lines), "" if self._lines == 1 else "s", self.artifact,
        )

    __str__ = __repr__

    # -- the job's own thread --------------------------------------------------------------

    def _observe(self) -> None:
        """The block saw the job end: the host need not announce it."""
        if not self._observed:
            self._observed = True
            _report({"event": "observed", "id": self.id})

    def _relay(self, cap: int) -> None:
        """Copies the output to the artifact (up to `cap` bytes), enforces the timeout, and
        reports the end."""
        import select

        proc = self._proc
        stream = proc.stdout
        assert stream is not None
        fd = stream.fileno()
        deadline = None if self._timeout is None else self._started + self._timeout
        try:
            with open(self.artifact, "ab", buffering=0) as out:
                while True:
                    ready, _, _ = select.select([fd], [], [], _POLL)
                    if ready:
                        data = os.read(fd, 65536)
                        if not data:
                            break
                        self._bytes += len(data)
                        self._lines += data.count(b"\n")
                        room = cap - (self._bytes - len(data) - self._dropped)
                        if room >= len(data):
                            out.write(data)
                        else:
                            if room > 0:
                                out.write(data[:room])
                            self._dropped += len(data) - max(room, 0)
                        continue
                    # Quiet: a process that exited is done even if a child of it keeps the
                    # pipe open.
                    if proc.poll() is not None:
                        break
                    if deadline is not None and time.monotonic() >= deadline and not self._timed_out:
                        self._timed_out = True
                        _kill_group(proc.pid)
                if self._dropped:
                    out.write(b"\n[vis] output over the cap of %d bytes: %d bytes not kept\n" % (cap, self._dropped))
        finally:
            stream.close()
            proc.wait()
            self._ended = time.monotonic()
            code = proc.returncode
            _report(
                {
                    "event": "finished",
                    "id": self.id,
                    "exit_code": code if code is not None and code >= 0 else None,
                    "signal": -code if code is not None and code < 0 else None,
                    "lines": self._lines,
                    "bytes": self._bytes,
                    "dropped_bytes": self._dropped,
                    "timed_out": self._timed_out,
                    "killed": self._killed,
                }
            )
            # Set after the report, so an `observed` report always follows its `finished`.
            self._done.set()


def background(cmd: str, timeout: float | None = None) -> Job:
    """Start a shell command in the background and return its `Job` at once; the command goes
    on after the block ends (it ends with the worker: a restart or the end of the session).

    Its output (stdout and stderr, in order) goes to the file `job.artifact`: read it while it
    runs with `job.tail(50)`, `cat(job.artifact)` or `grep(...)`. `timeout` (seconds) kills its
    process group when it expires. When it ends and no block saw it end, your next request says
    so in one line. At most `[jobs] max` jobs (default 8) run at once; `jobs()` lists them.
    Example: `job = sh.background("cargo test 2>&1"); ...; job.wait(600)`.
    """
    import subprocess
    import threading

    from vis.shell import start_process

    global _next_id
    if not isinstance(cmd, str) or not cmd.strip():
        raise ValueError("sh.background() needs a non-empty command string, e.g. sh.background('make test')")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
        raise ValueError(
            "sh.background() timeout must be a positive number of seconds or None (no timeout), got %r" % (timeout,)
        )
    settings = _state.session.get("jobs") or {}
    cap = int(settings.get("max", 8))
    with _lock:
        running = [j for j in _JOBS.values() if not j._done.is_set()]
        if len(running) >= cap:
            raise RuntimeError(
                "%d jobs are running, the most this session allows ([jobs] max = %d): wait for one or kill one "
                "(jobs() lists them), or raise [jobs] max in config.toml" % (len(running), cap)
            )
        job_id = max(_next_id, int(settings.get("next_id", 1)))
        _next_id = job_id + 1
        artifact = "%s/job-%d.txt" % (_state.artifact_dir, job_id)
        os.makedirs(_state.artifact_dir or ".", exist_ok=True)
        open(artifact, "wb").close()
        proc = start_process(cmd, subprocess.PIPE, shell=True)
        job = Job(job_id, cmd, artifact, proc, timeout)
        _JOBS[job_id] = job
    _report({"event": "started", "id": job_id, "command": cmd, "artifact": artifact})
    output_cap = int(settings.get("output_bytes", 64 * 1024 * 1024))
    threading.Thread(target=job._relay, args=(output_cap,), name="vis-job-%d" % job_id, daemon=True).start()
    return job


def jobs() -> list[Job]:
    """The session's background jobs this worker started (`sh.background`), oldest first,
    running or ended; each prints as one line (`<job 2 running 41 s: 'make', 120 lines in …>`).
    Jobs an earlier worker ran died with it: the block after the restart named them."""
    return [_JOBS[i] for i in sorted(_JOBS)]


def _block_time_left() -> float | None:
    """Seconds until a second before the running block's timeout; None outside a block."""
    deadline = _state.block_deadline
    if deadline is None:
        return None
    return max(0.0, deadline - 1.0 - time.monotonic())


def _kill_group(pid: int) -> None:
    # Imported here: `vis.shell` imports this module when it loads.
    from vis.shell import kill_group

    kill_group(pid)


def _report(report: dict[str, object]) -> None:
    try:
        _native.job_report(report)
    except RuntimeError:
        pass  # no host to tell (the pipe is gone: the worker is ending)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return "%.0f s" % seconds
    return "%d min %02d s" % (seconds // 60, seconds % 60)
