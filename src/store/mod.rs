//! The session store: sessions, turns, iterations, definitions, the conversation, request
//! health, folds, catalog snapshots and MCP records. The gateway process owns it; workers
//! never touch it.
//!
//! Every SQL statement of the project lives under this module. Callers see only the traits in
//! [`api`] (a [`Store`] is `dyn SessionStore`), so the backend is a choice made in one place,
//! [`open`]. Today there is one backend, SQLite in WAL mode ([`SqliteStore`]); the plan for a
//! PostgreSQL one is in `docs/scaling.md`.
//!
//! Opening never overwrites a file it does not recognize: a corrupt file, a foreign SQLite
//! database or one written by a newer Vis is refused with an error that says what to do.

mod api;
mod cost;
mod sqlite;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub use api::{
    CatalogSnapshots, ChatPrefix, ChildLink, ChildRecords, ChildRow, Conversation, Counts,
    FoldRecords, FoldRow, ForkCopied, ForkRequest, HistoryKind, HistoryRow, ImageStore, InputLimit,
    LeaseClaim, LeaseHolder, LeaseNode, Leases, McpRecords, NewHistoryItem, RequestRecord,
    RequestTotals, SessionModel, SessionRecords, SessionRow, SessionStore, SessionSummary, Store,
    ToolAnswer, TurnRange,
};
pub use cost::CostTotals;
// The records the store keeps for turns and iterations are protocol types (every layer
// speaks them); re-exported so store callers find them here too.
pub use crate::protocol::{IterationRecord, IterationRow, IterationStatus, TurnKind, TurnRow};
pub use sqlite::{latest_version, process_identity, SqliteStore};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path} is not readable as SQLite ({detail}); it was left untouched — move it aside or pass --db with another path")]
    Corrupt { path: PathBuf, detail: String },
    #[error("database {path} is an SQLite file but not a Vis database; it was left untouched — pass --db with another path")]
    NotVis { path: PathBuf },
    #[error("database {path} has schema version {found}, newer than this vis understands ({supported}); upgrade vis")]
    TooNew {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("cannot write the database {path}: {detail}; choose a writable location with --db PATH or VIS_HOME")]
    Unwritable { path: PathBuf, detail: String },
    #[error("database {path} is an empty file (0 bytes): it is not a Vis database, and may be one that was cut short (a full disk?); it was left untouched — remove it to start a new one, or pass --db with another path")]
    Empty { path: PathBuf },
    #[error("no session '{0}' in this database; `vis sessions list` shows the sessions there are")]
    UnknownSession(String),
    #[error("catalog snapshot {hash} in the database is damaged ({reason}); it is ignored — the next request renders the catalog afresh")]
    CorruptSnapshot { hash: String, reason: String },
    #[error("a stored record is damaged: {0}; the database was left as it is — `vis sessions export` shows what is readable")]
    CorruptRecord(String),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Milliseconds since the Unix epoch: the one timestamp unit of the store.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Opens the store at `path` (creating it if needed) and brings its schema up to date.
pub fn open(path: &Path) -> Result<Box<Store>> {
    Ok(Box::new(SqliteStore::open(path)?))
}

/// A private in-memory store (tests, benchmarks).
pub fn open_in_memory() -> Result<Box<Store>> {
    Ok(Box::new(SqliteStore::open_in_memory()?))
}

impl dyn SessionStore {
    /// [`open`]: `Store::open(path)` reads as what it does at call sites.
    pub fn open(path: &Path) -> Result<Box<Store>> {
        open(path)
    }

    /// [`open_in_memory`].
    pub fn open_in_memory() -> Result<Box<Store>> {
        open_in_memory()
    }
}
