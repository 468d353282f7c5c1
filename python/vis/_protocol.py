"""The shapes of what the host sends a block: the `session` dict, host-call replies, blocks,
definitions and restore reports, as `TypedDict`s.

They mirror the Rust types in `src/protocol/` (named beside each class); a unit test there
(`protocol::python_types`) reads this file with Python's own parser and fails when a field is
added, removed or changes kind on either side. Import it only for type checking (under
`if TYPE_CHECKING:`): building these classes at start would cost every worker time.
"""
from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, Union


class SessionCounts(TypedDict):
    """How much the session holds (`protocol::SessionCounts`)."""

    turns: int
    iterations: int
    folds: int


class PendingMeasurement(TypedDict):
    """A group of folds waiting for the next response (`protocol::Measurement::Pending`)."""

    status: Literal["pending"]
    fold_count: int
    folds: list[int]
    before_input_tokens: int | None
    before_provider: str
    before_model: str
    before_turn: int


class MeasuredFolds(TypedDict):
    """What the response after a group of folds measured (`protocol::Measurement::Measured`)."""

    status: Literal["measured"]
    fold_count: int
    folds: list[int]
    before_input_tokens: int
    after_input_tokens: int
    #: Positive: the request got smaller.
    net_reduction_tokens: int


class UnmeasuredFolds(TypedDict):
    """Why a group of folds could not be measured (`protocol::Measurement::Unavailable`)."""

    status: Literal["unavailable"]
    fold_count: int
    folds: list[int]
    reason: str


Measurement = Union[PendingMeasurement, MeasuredFolds, UnmeasuredFolds]


class FoldCandidate(TypedDict):
    """A settled range worth folding, priced in cache-weighted tokens (`protocol::FoldCandidate`)."""

    key: str
    #: Tokens requests carry for it now.
    tokens: int
    #: What the next request pays to write the tokens after it to the cache again.
    recache_cost: int
    #: What every later request saves (its tokens would have been cache reads).
    saving_per_request: int
    break_even_requests: int | None
    #: saving_per_request × expected_requests − recache_cost.
    value: int


class FoldHint(TypedDict):
    """`session["utilization"]["fold_hint"]`: the folds worth making now, best first
    (`protocol::FoldHint`)."""

    #: "warm", or "cold" (nothing cached: folding re-caches nothing extra).
    cache: str
    cache_note: str | None
    expected_requests: int
    candidates: list[FoldCandidate]
    #: The advice in one line, also appended to block output; None when there is none.
    text: str | None


class Utilization(TypedDict):
    """`session["utilization"]` (`protocol::Utilization`)."""

    last_request_tokens: int | None
    estimated: bool
    auto_compress_above: int
    input_limit: int | None
    saturation: float | None
    headroom_tokens: int | None
    #: "normal", "hint", "urgent" or "required".
    level: str | None
    fold_measurement: Measurement | None
    fold_hint: FoldHint | None


class FailedRestore(TypedDict):
    name: str
    error: str


class UnkeptRestore(TypedDict):
    name: str
    #: Module-level names the definition reads that the new worker does not have.
    reads: list[str]


class Restored(TypedDict):
    """`session["restored"]` on the first block after a (re)start (`protocol::RestoreNotice`)."""

    restart_reason: str | None
    ok: list[str]
    failed: list[FailedRestore]
    unkept: list[UnkeptRestore]
    extensions_skipped: str | None


class McpStatus(TypedDict):
    """`session["mcp"]`: MCP servers by namespace, and those that could not be installed."""

    servers: dict[str, Any]
    skipped: list[Any]


class Sandbox(TypedDict):
    """`session["sandbox"]`: the layers in force (`sandbox::Layers`), the network, trust."""

    mode: str | None
    user_namespace: bool
    pid_namespace: bool
    mount_namespace: bool
    private_proc: bool
    network_off: bool
    read_only_root: bool
    private_tmp: bool
    hidden: list[str]
    protected: list[str]
    no_terminal: bool
    no_capabilities: bool
    unix_sockets_off: bool
    landlock: str | None
    seccomp: bool
    rlimits: bool
    missing: list[str]
    network: bool
    trusted: bool


class JobsSettings(TypedDict):
    """`session["jobs"]`: what `sh.background` may do (`[jobs]` in the config)."""

    #: Jobs running at once in the session.
    max: int
    #: The id the next job gets (ids are never reused in a session).
    next_id: int
    #: The most output one job's artifact keeps, in bytes.
    output_bytes: int


class Session(TypedDict):
    """The `session` dict a block reads (`protocol::SessionInfo`)."""

    id: str
    turn: int
    iteration: int
    counts: SessionCounts
    utilization: Utilization
    #: What each loaded extension contributes (filled in by the runner).
    extensions: dict[str, Any]
    restored: Restored | None
    mcp: McpStatus
    sandbox: Sandbox | None
    jobs: NotRequired[JobsSettings | None]
    #: Added by the runner from the block's own `workspace_roots`.
    workspace_roots: NotRequired[list[str]]


class FoldReceipt(TypedDict):
    """What `fold_session` answers (`protocol::FoldReceipt`)."""

    fold: int
    key: str
    selected: list[str]
    widened: bool
    absorbed: list[int]
    tokens_removed: int
    gist_tokens: int
    estimated_net_tokens: int
    recache_tokens: int
    #: Cache-weighted tokens: what re-caching costs the next request, what each later
    #: request saves, and after how many requests the fold has paid for itself.
    recache_cost: int
    saving_per_request: int
    break_even_requests: int | None
    recache_note: str
    fold_count: int
    automatic: bool
    measurement: str


class SessionRead(TypedDict):
    """What `read_session` answers (`protocol::SessionRead`)."""

    off: bool
    text: str


class Written(TypedDict):
    """What `write_extension` answers (`protocol::HostReply::Written`)."""

    path: str


class Block(TypedDict):
    """One block, as the worker hands it to the runner (`protocol::Block`)."""

    code: str
    filename: str
    #: The runner adds `workspace_roots` and `extensions` to it.
    session: Session
    workspace_roots: list[str]
    output_limit: int
    artifact_path: str
    artifact_dir: str
    artifact_quota: int
    #: Seconds.
    timeout: float


class Definition(TypedDict):
    """A persisted top-level definition (`protocol::PersistedDef`)."""

    name: str
    kind: str
    source: str
    signature: str
    doc: str


class RestoreReport(TypedDict):
    """Which definitions came back in a new worker (`protocol::RestoreReport`)."""

    ok: list[str]
    failed: list[tuple[str, str]]
    #: (definition, module-level names it reads that the new worker does not have)
    unkept: list[tuple[str, list[str]]]
