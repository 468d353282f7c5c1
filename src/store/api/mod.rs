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
//!
//! The record types are in `rows`, leases in `leases`, and the backend-neutral copy of
//! every row (`vis store copy`) in `copy`; this file holds the traits and [`SessionStore`].

mod copy;
mod leases;
mod rows;

use std::path::Path;

use super::Result;
use crate::catalog::Snapshot;
use crate::protocol::{
    IterationRecord, IterationRow, Measurement, PersistedDef, TurnKind, TurnRow, TurnStatus,
};

pub use copy::{
    session_column, RecordCopy, StoredValue, TableRows, SESSION_TABLES, SHARED_TABLES, TURN_TABLES,
};
pub(crate) use leases::claim_or_holder;
pub use leases::{LeaseClaim, LeaseFence, LeaseHolder, LeaseNode, Leases};
pub use rows::{
    ChatPrefix, ChildLink, ChildRow, Counts, FoldRow, ForkCopied, ForkRequest, HistoryKind,
    HistoryRow, InputLimit, NewHistoryItem, RequestRecord, RequestTotals, SessionModel, SessionRow,
    SessionSummary, ToolAnswer, TurnRange,
};

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

/// Declares [`SessionStore`] as the sum of the store's concerns and implements it for every
/// type that implements them all, from one list (a concern added is added to both).
macro_rules! session_store {
    ($(#[$doc:meta])* $($concern:path),+ $(,)?) => {
        $(#[$doc])*
        pub trait SessionStore: $($concern +)+ Send {}

        impl<T> SessionStore for T where T: $($concern +)+ Send {}
    };
}

session_store!(
    /// A complete store backend: every concern above. Implemented for every type that
    /// implements them all.
    SessionRecords,
    Conversation,
    FoldRecords,
    CatalogSnapshots,
    McpRecords,
    ChildRecords,
    Leases,
    ImageStore,
    RecordCopy,
);

/// The store callers hold: any backend.
pub type Store = dyn SessionStore;
