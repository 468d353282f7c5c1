"""Stubs for `vis._native`, the Rust functions compiled into the vis binary."""

VERSION: str

def cap_text(raw: bytes, limit: int, artifact: str | None = None) -> tuple[str, int, int]:
    """Cap `raw` like block output: returns (text, total_chars, cut_chars)."""

def interrupt_pending() -> bool:
    """True when the host asked to interrupt the block now running."""

def host_call(method: str, params_json: str) -> str:
    """Call the host that owns the session; returns its JSON answer."""
