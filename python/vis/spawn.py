"""`spawn` and `subs`: hand a sub-task to a sub-session with a fresh context.

A sub-session is a chat session of its own that the host runs beside this one: the same
provider and workspace, its own worker and conversation (the system prompt, the catalog and the
task). `spawn()` returns at once; `Sub.wait()` returns the child's final answer. Only what a
block prints enters this session's context: the child's work never does. Fan-out is plain
Python: `answers = [s.wait() for s in [spawn(f"review {p}") for p in paths]]` runs the children
at the same time. See doc('vis.spawn') for limits, records and edits to the same files.
"""
from __future__ import annotations


from vis import _native

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Iterable

#: Names a child always has, whatever `tools` says (reading documentation).
ALWAYS = ("doc", "apropos", "vis")


class SubSessionError(RuntimeError):
    """A sub-session ended without an answer: `.status` says how ("failed: …", "cancelled",
    "iteration limit", "interrupted"), `.id` names it, `.answer` holds its last words if any."""

    def __init__(self, id: str, status: str, answer: str | None) -> None:
        self.id = id
        self.status = status
        self.answer = answer
        message = "sub-session %s ended without an answer: %s" % (id, status)
        if answer:
            message += "; its last words: %s" % _first_line(answer)
        message += " (vis sessions show %s has its records)" % id
        super().__init__(message)


class Sub:
    """A running or finished sub-session. `.id` is its session id, `.task` its task;
    `.status` is "queued", "running", "done", "failed: …", "cancelled", "iteration limit" or
    "interrupted" (its gateway stopped); `.wait(timeout=None)` returns its final answer;
    `.cancel()` stops it (its model request dropped, its block interrupted)."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.id: str = str(info.get("id", ""))
        self.task: str = str(info.get("task", ""))
        self.model: str | None = info.get("model")
        self._status: str = str(info.get("status", "queued"))
        self._answer: str | None = info.get("answer")

    def _update(self, info: dict[str, Any]) -> None:
        self._status = str(info.get("status", self._status))
        self._answer = info.get("answer", self._answer)

    def _ended(self) -> bool:
        return self._status not in ("queued", "running")

    @property
    def status(self) -> str:
        """How the sub-session stands now (asks the host unless it has ended)."""
        if not self._ended():
            self._update(_native.host_call("sub.status", {"id": self.id}))
        return self._status

    @property
    def answer(self) -> str | None:
        """The final answer once it is done (None before)."""
        self.status
        return self._answer

    def wait(self, timeout: float | None = None) -> str:
        """Blocks until the sub-session ends and returns its final answer (its last message).
        Raises TimeoutError when `timeout` seconds pass first (it keeps running: wait again or
        cancel()), SubSessionError when it ended without an answer (failed, cancelled, the
        iteration limit). Ctrl-C or the block's timeout interrupt the wait and cancel the
        children this block started."""
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0):
            raise ValueError("Sub.wait(timeout): a number of seconds of at least 0, or None to wait until it ends")
        if not self._ended():
            params: dict[str, Any] = {"id": self.id, "timeout": None if timeout is None else float(timeout)}
            self._update(_native.host_call("sub.wait", params))
        if not self._ended():
            raise TimeoutError(
                "sub-session %s is still %s after %ss; call wait() again, or cancel()" % (self.id, self._status, timeout)
            )
        if self._status != "done":
            raise SubSessionError(self.id, self._status, self._answer)
        return self._answer or ""

    def cancel(self) -> str:
        """Stops the sub-session if it still runs (a queued one never starts); returns its
        status. Cancelling one that ended changes nothing."""
        self._update(_native.host_call("sub.cancel", {"id": self.id}))
        return self._status

    def __repr__(self) -> str:
        status = self._status if self._ended() else self.status
        text = "<Sub %s %s: %s" % (self.id, status, _first_line(self.task, 60))
        if status == "done" and self._answer:
            text += " -> %s" % _first_line(self._answer, 60)
        return text + ">"

    __str__ = __repr__


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _names_to_deny(allowed: Iterable[str]) -> list[str]:
    """The visible names a child leaves out so that only `allowed` (and ALWAYS) remain."""
    from vis._extensions.manifest import all_entries, manifest

    visible = manifest()
    keep = list(allowed) + list(ALWAYS)
    unknown = [n for n in allowed if not visible.visible(n)]
    if unknown:
        raise ValueError(
            "spawn: tools names %s, not a public name here; apropos() lists the names a block can use"
            % ", ".join(repr(n) for n in unknown)
        )

    def kept(name: str) -> bool:
        # The name is allowed, lies in an allowed namespace, or is a namespace on the way to one.
        return any(name == k or name.startswith(k + ".") or k.startswith(name + ".") for k in keep)

    deny: list[str] = []
    for name in sorted({str(e["name"]) for e in all_entries()}):
        if kept(name) or not visible.visible(name):
            continue
        if any(name.startswith(d + ".") for d in deny):
            continue
        deny.append(name)
    return deny


def spawn(task: str, *, model: str | None = None, tools: str | Iterable[str] = "all", max_iterations: int = 50) -> Sub:
    """Start a sub-session on `task` and return its Sub at once (it runs on the host, beside
    this block). It gets the system prompt, the catalog and the task in a fresh context, the same
    workspace, and a worker of its own; its final answer comes back through Sub.wait(). Only
    what this block prints enters this session's context.

    `model`: None for this session's model, or a model `[spawn] models` lists in config.toml
    ("gpt-4.1-mini" or "openai/gpt-4.1-mini"). `tools`: "all", or the public names and
    namespaces the child may call (e.g. ["cat", "grep"]; doc and apropos always remain); the
    rest are left out of its worker like `[permissions] deny`. `max_iterations`: its tool
    calls (1-1000). At most `[spawn] max_parallel` children of a session run at once (more
    wait, status "queued"); a child may spawn its own down to `[spawn] max_depth`.
    Example: children = [spawn(f"review {p}; answer with a list of bugs") for p in paths];
    for s in children: print(s.id, s.wait())
    """
    if not isinstance(task, str):
        raise TypeError("spawn(task): the task is a string saying what the sub-session should do")
    if not task.strip():
        raise ValueError("spawn: the task is empty; say what the sub-session should do, e.g. spawn('review src/app.py for bugs')")
    if model is not None and not isinstance(model, str):
        raise TypeError("spawn(model=...): a configured model's name, or None for this session's model")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
        raise TypeError("spawn(max_iterations=...): a whole number of tool calls, e.g. 50")
    if not 1 <= max_iterations <= 1000:
        raise ValueError("spawn: max_iterations must be between 1 and 1000, got %d; it bounds the child's tool calls" % max_iterations)
    allowed: list[str] | None
    if isinstance(tools, str):
        if tools != "all":
            raise ValueError('spawn(tools=...): "all", or a list of public names such as ["cat", "grep"]; got %r' % tools)
        allowed = None
    else:
        try:
            allowed = list(tools)
        except TypeError:
            raise TypeError('spawn(tools=...): "all", or a list of public names such as ["cat", "grep"]') from None
        if not all(isinstance(n, str) for n in allowed):
            raise TypeError("spawn(tools=...): every name is a string, e.g. ['cat', 'git.log']")
    deny = [] if allowed is None else _names_to_deny(allowed)
    params: dict[str, Any] = {
        "task": task,
        "model": model,
        "tools": allowed,
        "deny": deny,
        "max_iterations": max_iterations,
    }
    return Sub(_native.host_call("spawn", params))


def subs() -> list[Sub]:
    """This session's sub-sessions, oldest first (also those of earlier turns and of a
    gateway that stopped: their status says "interrupted")."""
    return [Sub(info) for info in _native.host_call("sub.list", {})]
