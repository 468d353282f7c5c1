//! What the store keeps, as traits over the records it holds: the interface every caller
//! (the gateway, the commands, `vis mcp`, `vis serve`) is written against.
//!
//! The interface is split by concern, one trait each, and [`SessionStore`] is all of them:
//! a backend implements the six traits (`Leases` since issue 26) and is a `SessionStore` by
//! the blanket impl. Callers hold a [`Store`] (`dyn SessionStore`), so a second backend (PostgreSQL, see
//! `docs/scaling.md`) is a new implementation plus a case in [`open`](super::open), not a
//! change to any caller.
//!
//! Contracts every backend keeps (the SQLite backend's tests check them):
//! - turn, iteration, history, request and fold numbers are allocated without gaps or
//!   duplicates, also across processes writing the same session;
//! - a completed iteration, its definition changes and (for chat) its place in the
//!   conversation are written in one transaction: after a crash either all are there or none;
//! - timestamps are milliseconds since the Unix epoch, everywhere;
//! - a catalog snapshot is content-addressed: its key is the blake3 hash of its body, a
//!   second save of the same snapshot is a no-op, and a loaded snapshot is checked against its
//!   key.

use std::path::Path;

use serde::Serialize;

use super::Result;
use crate::catalog::Snapshot;
use crate::protocol::{
    FoldReceipt, FoldSpan, IterationRecord, IterationRow, IterationStatus, Measurement,
    PersistedDef, TurnKind, TurnRow, TurnStatus,
};

/// Turns `first..=last`: what a page of a session's records covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRange {
    pub first: i64,
    pub last: i64,
}

impl TurnRange {
    /// Every turn.
    pub const ALL: TurnRange = TurnRange {
        first: i64::MIN,
        last: i64::MAX,
    };
}

/// A session as stored.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRow {
    pub id: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub workspace_roots: Vec<String>,
}

/// A session with its counts, for listings.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub workspace_roots: Vec<String>,
    pub turns: i64,
    pub iterations: i64,
    pub defs: i64,
    /// The session whose block spawned this one (`None`: not a sub-session).
    pub parent_session: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    pub turns: i64,
    pub iterations: i64,
    /// Folds in force (absorbed ones not counted).
    pub folds: i64,
}

/// The prefix every request of a chat session starts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatPrefix {
    pub system: String,
    /// JSON: `{"name", "description", "parameters"}`.
    pub tool: String,
    pub catalog_hash: String,
    pub agents_md: Option<String>,
    pub tokens: i64,
}

/// Which model a session talks to (never its key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionModel {
    pub provider: String,
    pub model: String,
    pub base_url: Option<String>,
}

/// The input limit a chat session ran with, and where the figure came from (shown by
/// `vis sessions show`, so a guess is seen as one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputLimit {
    pub tokens: i64,
    /// `from the model table`, `the server's window of 8,192 tokens (llama.cpp /props n_ctx)`,
    /// `default for an unknown model; set [folding] input_limit`, …
    pub source: String,
}

/// The kinds of conversation items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryKind {
    User,
    Assistant,
    ToolResult,
    Notice,
}

impl HistoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryKind::User => "user",
            HistoryKind::Assistant => "assistant",
            HistoryKind::ToolResult => "tool_result",
            HistoryKind::Notice => "notice",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "user" => HistoryKind::User,
            "assistant" => HistoryKind::Assistant,
            "tool_result" => HistoryKind::ToolResult,
            "notice" => HistoryKind::Notice,
            _ => return None,
        })
    }
}

/// One conversation item as stored. For a tool result, `body` is the iteration's output and
/// `status` its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryRow {
    pub seq: i64,
    pub turn: i64,
    pub kind: HistoryKind,
    pub iteration: Option<i64>,
    pub call_id: Option<String>,
    pub body: String,
    pub status: Option<IterationStatus>,
    pub tokens: i64,
    pub meta: Option<String>,
    /// A tool result's images (`show()`), in order; their bytes by [`ImageStore::image`].
    pub images: Vec<crate::protocol::ImageRef>,
}

/// A conversation item to append (tool results go through
/// [`SessionRecords::finish_iteration`]).
#[derive(Debug, Clone)]
pub struct NewHistoryItem<'a> {
    pub turn: i64,
    pub kind: HistoryKind,
    pub body: &'a str,
    pub tokens: i64,
    pub meta: Option<&'a str>,
}

/// One model request's health record.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestRecord {
    pub seq: i64,
    pub turn: i64,
    pub provider: String,
    pub model: String,
    pub started_at: i64,
    pub latency_ms: i64,
    pub ttft_ms: Option<i64>,
    pub retries: i64,
    pub input_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub cache_creation_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub estimate_tokens: i64,
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub fold_measurement: Option<String>,
    /// Why the answer ended (`stop`, `tool_calls`, `length`, `end_turn`, `max_tokens`, …) as
    /// the provider sent it; `None` for a failed request or a provider that sent none.
    pub finish_reason: Option<String>,
    /// The input split by price (`providers::InputCost`); `None`: the provider did not report
    /// its cache reads (or the record predates schema 7).
    pub uncached_tokens: Option<i64>,
    /// Tokens written to the cache (0 for OpenAI-compatible servers, which charge nothing).
    pub cache_write_tokens: Option<i64>,
    /// The input's cost in uncached-token units at the session's cache prices.
    pub weighted_tokens: Option<f64>,
    /// How many input tokens should have come from the cache (the prefix shared with the
    /// previous answered request, see `providers::pricing::expected_cached`); `None`: no
    /// previous request to compare with in this process.
    pub expected_cached_tokens: Option<i64>,
    /// The cache reads fell far below the expected ones: a prefix bug (`None`: not judged).
    pub cache_miss: Option<bool>,
}

/// Totals of a session's model requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RequestTotals {
    /// Reported input tokens (cached included).
    pub input_tokens: i64,
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub requests: i64,
    pub failed: i64,
    /// The weighted input over the requests that have it (`None`: none has).
    pub weighted_tokens: Option<f64>,
    /// Requests flagged as cache misses.
    pub cache_misses: i64,
}

/// One fold as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoldRow {
    pub id: i64,
    pub turn: i64,
    pub iteration: Option<i64>,
    pub key: String,
    pub spans: Vec<FoldSpan>,
    pub gist: String,
    pub automatic: bool,
    pub absorbed_by: Option<i64>,
    pub receipt: FoldReceipt,
    pub group_id: i64,
    pub measurement: Measurement,
}

/// The model call an iteration answers: the call's id and the tool result's size (o200k
/// tokens) in the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAnswer {
    pub call_id: String,
    pub tokens: i64,
    /// Images the block showed; their bytes are already stored ([`ImageStore::put_image`]).
    pub images: Vec<crate::protocol::ImageRef>,
}

/// What [`SessionRecords::fork_session`] copies: session `source` through turn `through`
/// (inclusive) into the new session `new_id`, whose workspace is `roots`.
#[derive(Debug, Clone)]
pub struct ForkRequest<'a> {
    pub source: &'a str,
    pub through: i64,
    pub new_id: &'a str,
    pub roots: &'a [String],
}

/// What a fork copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ForkCopied {
    pub turns: i64,
    pub iterations: i64,
    pub history: i64,
    pub folds: i64,
    pub defs: i64,
}

/// One stored value, as `vis store copy` carries it between backends.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredValue {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    /// Binary data (the bytes of an image).
    Bytes(Vec<u8>),
}

/// Rows of one table, with their column names: a backend-neutral copy of what is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TableRows {
    pub table: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<StoredValue>>,
}

/// The tables that hold one session's records (`sessions` first: the others refer to it).
pub const SESSION_TABLES: &[&str] = &[
    "sessions",
    "turns",
    "iterations",
    "defs",
    "def_changes",
    "worker_events",
    "chat_prefix",
    "history",
    "folds",
    "requests",
];

/// The tables shared by every session (content-addressed or keyed by workspace and server).
pub const SHARED_TABLES: &[&str] = &["catalog_snapshots", "mcp_approvals", "mcp_tools", "images"];

/// Every row as stored, for copying a database to another backend (`vis store copy`).
pub trait RecordCopy {
    /// The rows of `session` in each of [`SESSION_TABLES`] (`None`: the rows of
    /// [`SHARED_TABLES`]), every column.
    fn export_rows(&self, session: Option<&str>) -> Result<Vec<TableRows>>;
    /// Writes `tables` in one transaction: every row, a shared row already there (same key)
    /// kept as it is. A session row already there is an error and nothing is written.
    fn import_rows(&mut self, tables: &[TableRows]) -> Result<()>;
}

/// Sessions, turns, iterations, persisted definitions and worker events.
pub trait SessionRecords {
    /// Where the data lives (a file path; `:memory:` for a private store), for messages and
    /// for placing artifacts beside it.
    fn location(&self) -> &Path;
    /// The schema version the data is at.
    fn schema_version(&self) -> Result<u32>;
    /// Folds what was written so far into the main data, without waiting for anyone, so the
    /// next process to open the store starts fast. Meant for idle moments (while a worker
    /// starts); a backend without such a log does nothing.
    fn settle_log(&self) -> Result<()> {
        Ok(())
    }

    fn session(&self, id: &str) -> Result<Option<SessionRow>>;
    /// The session, or [`StoreError::UnknownSession`](super::StoreError::UnknownSession).
    fn require_session(&self, id: &str) -> Result<SessionRow> {
        self.session(id)?
            .ok_or_else(|| super::StoreError::UnknownSession(id.to_string()))
    }
    /// Creates the session if it does not exist (concurrent callers are fine); returns it.
    fn ensure_session(&self, id: &str, roots: &[String]) -> Result<SessionRow>;
    fn set_workspace_roots(&self, id: &str, roots: &[String]) -> Result<()>;
    /// Every session, most recently used first.
    fn list_sessions(&self) -> Result<Vec<SessionSummary>>;
    /// Removes a session and everything recorded for it, in one transaction.
    fn delete_session(&mut self, session_id: &str) -> Result<()>;
    fn counts(&self, session_id: &str) -> Result<Counts>;

    /// Allocates the next turn number (no gaps or duplicates across concurrent processes) and
    /// records the turn as running, owned by this process.
    fn begin_turn(
        &mut self,
        session_id: &str,
        kind: TurnKind,
        user_text: Option<&str>,
    ) -> Result<i64>;
    /// Sets how a turn ended.
    fn end_turn(&self, session_id: &str, turn: i64, status: TurnStatus) -> Result<()>;
    /// Turns still marked running whose process is gone (it stopped without ending them),
    /// as `(turn, kind)`; turns another live process is running are left out.
    fn running_turns(&self, session_id: &str) -> Result<Vec<(i64, TurnKind)>>;
    /// Closes the turns [`running_turns`](Self::running_turns) returns (their running
    /// iterations become interrupted); returns how many.
    fn close_dangling_turns(&self, session_id: &str) -> Result<usize>;
    fn turns(&self, session_id: &str) -> Result<Vec<TurnRow>> {
        self.turns_in(session_id, TurnRange::ALL)
    }
    /// The turns of `range`, in order.
    fn turns_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<TurnRow>>;

    /// The number the next iteration of `turn` gets.
    fn next_iteration(&self, session_id: &str, turn: i64) -> Result<i64>;
    /// Records an iteration as running, with its code, before its block is sent to the
    /// worker: whatever the worker does (or the host, when it dies), the code is in the
    /// history. Beginning a running iteration again keeps the one row.
    fn begin_iteration(
        &self,
        session_id: &str,
        turn: i64,
        iteration: i64,
        code: &str,
        started_at: i64,
    ) -> Result<()>;
    /// Completes an iteration recorded by [`begin_iteration`](Self::begin_iteration) (or
    /// records it whole), with its definition changes and, when it answers a model call,
    /// its place in the conversation, in one transaction. Returns that place's `seq`.
    fn finish_iteration(
        &mut self,
        rec: &IterationRecord<'_>,
        answers: Option<&ToolAnswer>,
    ) -> Result<Option<i64>>;
    fn iterations(&self, session_id: &str) -> Result<Vec<IterationRow>> {
        self.iterations_in(session_id, TurnRange::ALL)
    }
    /// The iterations of the turns of `range`, in order.
    fn iterations_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<IterationRow>>;

    /// A turn being run now by a live process (`vis chat`, `vis serve`, …), if any.
    fn turn_in_progress(&self, session_id: &str) -> Result<Option<i64>>;
    /// Cuts the session back to before turn `from` (a rewind): that turn and every later one
    /// go, with their iterations, conversation items, requests, folds (a fold they absorbed
    /// stands again) and the definitions made in them, in one transaction.
    fn truncate_from_turn(&mut self, session_id: &str, from: i64) -> Result<()>;

    /// Persisted definitions in definition order.
    fn load_defs(&self, session_id: &str) -> Result<Vec<PersistedDef>>;
    fn record_worker_event(&self, session_id: &str, event: &str, detail: &str) -> Result<()>;

    /// Which process ran each turn (`pid:start time`, `None` when not known), in turn order:
    /// consecutive turns with different owners ran in different workers.
    fn turn_owners(&self, session_id: &str) -> Result<Vec<(i64, Option<String>)>>;
    /// Creates session `fork.new_id` as a copy of `fork.source` through turn `fork.through`,
    /// in one transaction: turns, iterations, the conversation, request records, folds (one
    /// absorbed by a fold of a later turn is in force again), the request prefix and model,
    /// and the definitions as they were at the end of that turn. The caller checks that the
    /// source and the turn exist and the new id is free; any failure leaves nothing behind.
    fn fork_session(&mut self, fork: &ForkRequest<'_>) -> Result<ForkCopied>;
    /// The definition changes iteration `turn`/`iteration` made, as recorded: the
    /// definitions it set and the names it deleted (empty for iterations recorded before the
    /// log of changes existed).
    fn def_changes_of(
        &self,
        session_id: &str,
        turn: i64,
        iteration: i64,
    ) -> Result<(Vec<PersistedDef>, Vec<String>)>;
    /// `ID at tN` when the session was forked from turn N of session ID.
    fn forked_from(&self, session_id: &str) -> Result<Option<String>>;
    /// The key the session's requests name their prompt cache by: its id, or for a fork the
    /// key of the session it was forked from (their requests share a prefix, so they share
    /// the cache; also what makes a fork's next request the one the original would send).
    fn prompt_cache_key(&self, session_id: &str) -> Result<String>;
}

/// Chat sessions: the fixed request prefix, the conversation in order, request health.
///
/// The conversation is append-only and ordered by `seq`. A tool result's text is not copied
/// into it: the item points at the iteration that holds the output.
pub trait Conversation {
    fn chat_prefix(&self, session_id: &str) -> Result<Option<ChatPrefix>>;
    /// Records the prefix of a session's first request (a second call keeps the first).
    fn save_chat_prefix(&self, session_id: &str, prefix: &ChatPrefix) -> Result<()>;
    /// The provider, model and base URL the session last used.
    fn session_model(&self, session_id: &str) -> Result<Option<SessionModel>>;
    fn set_session_model(
        &self,
        session_id: &str,
        provider: &str,
        model: &str,
        base_url: &str,
    ) -> Result<()>;
    /// The input limit the session last ran with (`None` before a turn recorded one).
    fn input_limit(&self, session_id: &str) -> Result<Option<InputLimit>>;
    fn set_input_limit(&self, session_id: &str, limit: &InputLimit) -> Result<()>;
    /// The most recently used chat session whose first workspace root is `root` (sub-sessions
    /// are not resumed this way: they belong to their parents).
    fn latest_chat_session(&self, root: &str) -> Result<Option<String>>;

    /// Appends one item; returns its `seq`.
    fn append_history(&mut self, session_id: &str, item: &NewHistoryItem<'_>) -> Result<i64>;
    /// The whole conversation in order, tool results with their outputs.
    fn history(&self, session_id: &str) -> Result<Vec<HistoryRow>> {
        self.history_in(session_id, TurnRange::ALL)
    }
    /// The conversation items of the turns of `range`, in order.
    fn history_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<HistoryRow>>;

    /// Stores a request's health record; `seq` is assigned here and returned.
    fn record_request(&mut self, session_id: &str, rec: &RequestRecord) -> Result<i64>;
    fn requests(&self, session_id: &str) -> Result<Vec<RequestRecord>> {
        self.requests_in(session_id, TurnRange::ALL)
    }
    /// The requests made in the turns of `range`, in order.
    fn requests_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<RequestRecord>>;
    fn request_totals(&self, session_id: &str) -> Result<RequestTotals>;
}

/// Folds: which ranges of the conversation a gist replaces in requests (the originals stay).
pub trait FoldRecords {
    /// Records a fold and marks the folds it absorbs, in one transaction.
    fn record_fold(&mut self, session_id: &str, fold: &FoldRow, absorbs: &[i64]) -> Result<()>;
    /// Every fold of the session, absorbed ones included, by id.
    fn folds(&self, session_id: &str) -> Result<Vec<FoldRow>> {
        self.folds_in(session_id, TurnRange::ALL)
    }
    /// The folds made in the turns of `range`, by id.
    fn folds_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<FoldRow>>;
    /// Sets the measurement of every fold of a group.
    fn set_fold_measurement(
        &self,
        session_id: &str,
        group_id: i64,
        measurement: &Measurement,
    ) -> Result<()>;
}

/// Rendered catalogs, content-addressed.
pub trait CatalogSnapshots {
    /// Stores `snapshot` unless one with its hash exists; true when it was new.
    fn save_catalog_snapshot(&self, snapshot: &Snapshot) -> Result<bool>;
    /// The snapshot with `hash`, checked against it; `None` when absent.
    fn catalog_snapshot(&self, hash: &str) -> Result<Option<Snapshot>>;
}

/// MCP: approvals of workspace-declared servers, and the tool list each server last
/// reported (so `vis exec` can offer a server's tools without starting it).
pub trait McpRecords {
    /// Records the approval of a workspace server as it is declared now.
    fn approve_mcp_server(
        &self,
        workspace: &str,
        server: &str,
        fingerprint: &str,
        launch: &str,
    ) -> Result<()>;
    /// Whether exactly this declaration of `server` was approved for `workspace`.
    fn mcp_server_approved(&self, workspace: &str, server: &str, fingerprint: &str)
        -> Result<bool>;
    /// The tool list `server` (running what `fingerprint` says) last reported, as JSON.
    fn cached_mcp_tools(&self, server: &str, fingerprint: &str) -> Result<Option<String>>;
    fn cache_mcp_tools(&self, server: &str, fingerprint: &str, tools_json: &str) -> Result<()>;
}

/// Where a sub-session came from: the block that spawned it (issue 27 §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChildLink {
    pub child: String,
    pub parent: String,
    pub turn: i64,
    pub iteration: i64,
    pub task: String,
}

/// A sub-session as its parent lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChildRow {
    pub link: ChildLink,
    /// `queued`, `running`, `done`, `failed: …`, `cancelled`, `iteration limit` or
    /// `interrupted` (its gateway stopped while it ran).
    pub status: String,
    /// The final answer (`None` until it ends).
    pub answer: Option<String>,
    /// Reported tokens over its requests.
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub requests: i64,
}

/// Sub-sessions: the parent link of a session a block spawned, and how it stands.
pub trait ChildRecords {
    /// Marks the existing session `link.child` as a sub-session of `link.parent`, `queued`.
    fn link_child(&self, link: &ChildLink) -> Result<()>;
    /// Records how the sub-session stands (and its answer, once it has one).
    fn set_child_state(&self, child: &str, status: &str, answer: Option<&str>) -> Result<()>;
    /// The sub-sessions `parent` spawned, oldest first, with their token totals.
    fn children_of(&self, parent: &str) -> Result<Vec<ChildRow>>;
    /// The sub-session `child` as its parent lists it (`None`: not a sub-session).
    fn child(&self, child: &str) -> Result<Option<ChildRow>>;
}

/// A node of `vis serve` as a lease holder: its configured id, this process (a restarted
/// node is a new instance), and where other nodes reach it.
#[derive(Debug, Clone, Copy)]
pub struct LeaseNode<'a> {
    pub node_id: &'a str,
    pub instance: &'a str,
    pub address: &'a str,
}

/// Who holds a session's lease now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseHolder {
    pub node_id: String,
    pub instance: String,
    pub address: String,
    pub epoch: i64,
    /// Milliseconds until it expires, on the store's clock (always positive).
    pub expires_in_ms: i64,
}

/// What [`Leases::acquire_lease`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseClaim {
    /// The caller holds the lease until the ttl passes (unless renewed), with this epoch.
    Granted { epoch: i64 },
    /// Another instance holds an unexpired lease.
    Held(LeaseHolder),
}

/// The lease a store's writes to one session are made under: a node's instance and the
/// epoch it got the lease with (a fencing token, docs/scaling.md "Fencing").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseFence {
    /// The session whose lease row is checked: the one the node holds.
    pub session_id: String,
    pub instance: String,
    pub epoch: i64,
    /// The sub-session whose writes the fence guards when it is not `session_id` itself: a
    /// child (`spawn()`), at any depth, writes under the lease of the session the node holds.
    pub sub_session: Option<String>,
}

impl LeaseFence {
    /// The fence of the leased session `session_id` itself.
    pub fn new(session_id: &str, instance: &str, epoch: i64) -> LeaseFence {
        LeaseFence {
            session_id: session_id.to_string(),
            instance: instance.to_string(),
            epoch,
            sub_session: None,
        }
    }

    /// The session whose writes this fence guards.
    pub fn guards(&self) -> &str {
        self.sub_session.as_deref().unwrap_or(&self.session_id)
    }

    /// The same lease, guarding the writes of sub-session `child` instead.
    pub fn for_sub_session(&self, child: &str) -> LeaseFence {
        LeaseFence {
            sub_session: Some(child.to_string()),
            ..self.clone()
        }
    }
}

/// Session leases: which `vis serve` node runs a session (docs/serve.md, "Many nodes").
///
/// Every operation is an atomic compare-and-set on one row per session. Expiry is computed and
/// compared on the store's clock (the database server's for PostgreSQL; for SQLite, whose
/// processes share one machine, that machine's), never on the nodes' clocks, so clock skew
/// between nodes does not matter; a holder stays safe by measuring its own margin from before
/// it sent the renewal. The epoch grows by one at each change of holder, so it can serve as a
/// fencing token.
pub trait Leases {
    /// Takes (or, for its holder, extends) the lease of `session_id` for `ttl`. Granted when
    /// there is none, it expired or was released, `me` holds it, or its epoch is
    /// `replacing_epoch` (a holder the caller knows to be dead); else who holds it.
    fn acquire_lease(
        &self,
        session_id: &str,
        me: &LeaseNode<'_>,
        ttl: std::time::Duration,
        replacing_epoch: Option<i64>,
    ) -> Result<LeaseClaim>;
    /// Extends every unexpired lease of `instance` by `ttl` from now; returns those it holds
    /// still, as `(session, epoch)` (one missing from the answer was lost).
    fn renew_leases(&self, instance: &str, ttl: std::time::Duration) -> Result<Vec<(String, i64)>>;
    /// Ends the lease if `instance` still holds it with `epoch`; true when it did.
    fn release_lease(&self, session_id: &str, instance: &str, epoch: i64) -> Result<bool>;
    /// The unexpired holder of the lease, if any.
    fn lease_holder(&self, session_id: &str) -> Result<Option<LeaseHolder>>;
    /// Fences this store's writes to `fence.guards()` (`None`: unfenced, the default, for
    /// every command that runs a session without a lease). While fenced, `begin_turn`,
    /// `end_turn`, `begin_iteration`, `finish_iteration`, `append_history`, `record_request`,
    /// `record_fold` and, for a sub-session, `ensure_session`, `link_child` and
    /// `set_child_state` check, in the transaction that writes, that the lease row of
    /// `fence.session_id` still has this instance and epoch and is unexpired, and fail with
    /// [`StoreError::LeaseLost`] (nothing written) when it does not: a node frozen past its
    /// ttl cannot write into a session another node has taken over, nor into its children. A
    /// fenced store also takes every running turn of the guarded session for dangling
    /// (`running_turns`): the lease says no one else runs it.
    ///
    /// [`StoreError::LeaseLost`]: crate::store::StoreError::LeaseLost
    fn set_lease_fence(&self, fence: Option<LeaseFence>);
    /// The fence set by [`Leases::set_lease_fence`], if any (a session's children write
    /// under it).
    fn lease_fence(&self) -> Option<LeaseFence>;
}

/// Images blocks showed the model, content-addressed: one row per distinct image (its blake3
/// hash), shared by every history item (and fork) that shows it.
pub trait ImageStore {
    /// Stores `data` under `meta.hash` (already there: nothing changes).
    fn put_image(&mut self, meta: &crate::protocol::ImageRef, data: &[u8]) -> Result<()>;
    /// The stored image `hash` if a tool result of session `session_id` shows it: its format
    /// and bytes (`None`: no such image in that session; hashes of other sessions stay theirs).
    fn image(
        &self,
        session_id: &str,
        hash: &str,
    ) -> Result<Option<(crate::protocol::ImageFormat, Vec<u8>)>>;
}

/// A complete store backend: every concern above. Implemented for every type that implements
/// them all.
pub trait SessionStore:
    SessionRecords
    + Conversation
    + FoldRecords
    + CatalogSnapshots
    + McpRecords
    + ChildRecords
    + Leases
    + ImageStore
    + RecordCopy
    + Send
{
}

impl<T> SessionStore for T where
    T: SessionRecords
        + Conversation
        + FoldRecords
        + CatalogSnapshots
        + McpRecords
        + ChildRecords
        + Leases
        + ImageStore
        + RecordCopy
        + Send
{
}

/// The store callers hold: any backend.
pub type Store = dyn SessionStore;
