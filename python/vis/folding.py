"""`fold_session` and `read_session`: keep the conversation small by folding settled work.

Both are calls to the gateway that owns the session (`vis chat`, `vis serve`, `vis mcp`);
`vis exec` has no model and answers them with an error.
"""
from __future__ import annotations


from vis import _native

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


class FoldReceipt(dict):  # type: ignore[type-arg]
    """What a fold did. A dict (`fold`, `selected`, `widened`, `absorbed`, `tokens_removed`,
    `gist_tokens`, `estimated_net_tokens`, `recache_tokens`, `recache_cost`,
    `saving_per_request`, `break_even_requests`, `recache_note`, `fold_count`, `automatic`,
    `measurement`) that prints as one line.

    Prices are in cache-weighted tokens (an uncached input token is 1): `recache_cost` is what
    the next request pays to write the tokens after the fold to the prompt cache again
    (0 while the cache is cold, or when a fold since the last request already re-caches from
    before this one), `saving_per_request` what every later request saves, and
    `break_even_requests` after how many requests the fold has paid for itself."""

    def __repr__(self) -> str:
        net = self.get("estimated_net_tokens", 0)
        parts = [
            "fold %s replaces %s" % (self.get("fold"), ", ".join(self.get("selected", []))),
            "removes ~%s tokens, gist %s, net ~%s" % (
                format(self.get("tokens_removed", 0), ","),
                format(self.get("gist_tokens", 0), ","),
                format(net, ","),
            ),
            "re-caching costs %s, saves %s a request%s" % (
                format(self.get("recache_cost", 0), ","),
                format(self.get("saving_per_request", 0), ","),
                ""
                if self.get("break_even_requests") is None
                else ", paid back after %s requests" % self["break_even_requests"],
            ),
            "fold_count %s, measurement %s" % (self.get("fold_count"), self.get("measurement")),
        ]
        if self.get("widened"):
            parts.append("widened to whole responses")
        if self.get("absorbed"):
            parts.append("absorbed fold %s" % ", ".join(str(a) for a in self["absorbed"]))
        return "; ".join(parts)

    __str__ = __repr__


class SessionText(str):
    """Text from the conversation; its repr is the text itself."""

    def __repr__(self) -> str:
        return str(self).rstrip("\n")


def _call(method: str, params: dict[str, Any]) -> Any:
    return _native.host_call(method, params)


def fold_session(key: str, gist: str) -> FoldReceipt:
    """Replace settled steps in later requests with `gist` (they stay stored).

    Keys: "t2" a whole turn, "t2/i4" one iteration, "t2/i4-i5" a range, "-t3" everything
    through turn 3, "-t3/i9" everything through t3/i9; several separated by commas. An
    iteration is folded with the whole response it belongs to. A bad key, an unknown turn or
    iteration, or anything that includes the running iteration is rejected (RuntimeError) and
    nothing is folded. Returns the receipt; its measurement comes with the next request (see
    session["utilization"]["fold_measurement"]). At most 32 folds wait for that measurement
    (more are refused until the next request), and a block that keeps calling past 256 calls
    is stopped. Example:
    fold_session("t2/i1-i6", "total() in src/app.py ignored qty (42:kodu); fixed; tests pass").
    """
    if not isinstance(key, str) or not isinstance(gist, str):
        raise TypeError("fold_session(key, gist) takes two strings, e.g. fold_session('t2', 'what t2 found')")
    return FoldReceipt(_call("fold_session", {"key": key, "gist": gist}))


def read_session(key: str) -> SessionText:
    """The original content of a range of the conversation (folded or not), keys as in
    `fold_session`. Only when the session's introspection toggle is on; otherwise it says so
    and returns nothing else."""
    if not isinstance(key, str):
        raise TypeError("read_session(key) takes a key such as 't2' or 't2/i4-i5'")
    answer = _call("read_session", {"key": key})
    return SessionText(answer.get("text", ""))
