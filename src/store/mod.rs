//! The session store: sessions, turns, iterations, definitions, the conversation, request
//! health, folds, catalog snapshots and MCP records. The gateway process owns it; workers
//! never touch it.
//!
//! Every SQL statement of the project lives under this module. Callers see only the traits in
//! [`api`] (a [`Store`] is `dyn SessionStore`), so the backend is a choice made in one place,
//! [`open`]: SQLite in WAL mode for a file path ([`SqliteStore`]), PostgreSQL for a
//! `postgres://` or `postgresql://` URL ([`PostgresStore`], see `docs/scaling.md`).
//! [`resolve_location`] decides which a `--db` names, and refuses a scheme Vis does not know.
//! What the two backends share beside their SQL is written once here: reading a record from
//! a row (`decode`), the statements of a fork (`fork`), and checking content-addressed
//! records (`addressed`).
//!
//! Opening never overwrites data it does not recognize: a corrupt file, a foreign database or
//! one written by a newer Vis is refused with an error that says what to do. A PostgreSQL
//! URL's password never appears in a message ([`shown_location`]).

mod addressed;
mod api;
mod cost;
mod decode;
mod fork;
mod postgres;
mod sqlite;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub use api::{
    CatalogSnapshots, ChatPrefix, ChildLink, ChildRecords, ChildRow, Conversation, Counts,
    FoldRecords, FoldRow, ForkCopied, ForkRequest, HistoryKind, HistoryRow, ImageStore, InputLimit,
    LeaseClaim, LeaseFence, LeaseHolder, LeaseNode, Leases, McpRecords, NewHistoryItem, RecordCopy,
    RequestRecord, RequestTotals, SessionModel, SessionRecords, SessionRow, SessionStore,
    SessionSummary, Store, StoredValue, TableRows, ToolAnswer, TurnRange, SESSION_TABLES,
    SHARED_TABLES,
};
pub use cost::CostTotals;
// The records the store keeps for turns and iterations are protocol types (every layer
// speaks them); re-exported so store callers find them here too.
pub use crate::protocol::{IterationRecord, IterationRow, IterationStatus, TurnKind, TurnRow};
pub use postgres::{is_postgres_url, redact as redact_url, state_key, PostgresStore};
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
    #[error("--db {given}: {reason}; give a file path (SQLite) or a postgres://USER@HOST/DATABASE URL (PostgreSQL)")]
    BadLocation { given: String, reason: String },
    #[error("cannot connect to PostgreSQL at {location}: {detail}; check that the server runs and accepts this URL (--db or VIS_DB)")]
    Unreachable { location: String, detail: String },
    #[error("the connection to PostgreSQL was lost ({0}); the server rolled back the transaction in progress, so nothing of it was written — run the command again (it reconnects)")]
    ConnectionLost(String),
    #[error("PostgreSQL cancelled a statement that ran past its statement_timeout ({0}); its transaction was rolled back and nothing of it was written — retry, or raise statement_timeout (`options=-c statement_timeout=60s` in the URL)")]
    StatementTimeout(String),
    #[error("PostgreSQL error: {0}")]
    Postgres(String),
    /// A fenced write (see [`Leases::set_lease_fence`]) found the session's lease no longer
    /// this node's: it aborts the turn without retry, and the node drops the session.
    #[error("session '{session}' is run by another node now: this node's lease on it (epoch {epoch}) was lost while it was paused or cut off, so the write was refused and nothing of it was written; the request can be sent again, and goes to the node that holds the lease")]
    LeaseLost { session: String, epoch: i64 },
}

impl StoreError {
    /// True for [`StoreError::LeaseLost`].
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, StoreError::LeaseLost { .. })
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Milliseconds since the Unix epoch: the one timestamp unit of the store.
pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Opens the store at `path` (creating it if needed) and brings its schema up to date: a
/// PostgreSQL database when `path` is a `postgres://` URL (as [`resolve_location`] leaves
/// it), else a SQLite file.
pub fn open(path: &Path) -> Result<Box<Store>> {
    if let Some(url) = path.to_str().filter(|p| is_postgres_url(p)) {
        return Ok(Box::new(PostgresStore::open(url)?));
    }
    Ok(Box::new(SqliteStore::open(path)?))
}

/// [`open`], on a connection no other store of this process shares (PostgreSQL: a pool of its
/// own; SQLite: every store has its own connection anyway). For work that must not wait
/// behind the rest of the process's store calls: a node's lease renewals.
pub fn open_private(path: &Path) -> Result<Box<Store>> {
    if let Some(url) = path.to_str().filter(|p| is_postgres_url(p)) {
        return Ok(Box::new(PostgresStore::open_private(url)?));
    }
    Ok(Box::new(SqliteStore::open(path)?))
}

/// What a `--db` (or `VIS_DB`) names: a PostgreSQL URL, kept as given; or a SQLite file,
/// made absolute (against the current directory). A `SCHEME://…` with another scheme is
/// refused, unless a file by that name exists: `postgres://…` must never become a SQLite
/// file under a directory named `postgres:`. A path with a colon and no `://` is a path.
pub fn resolve_location(given: &Path) -> Result<PathBuf> {
    let Some(text) = given.to_str() else {
        return absolute(given);
    };
    if is_postgres_url(text) {
        return Ok(given.to_path_buf());
    }
    if given.exists() {
        return absolute(given);
    }
    let shown = redact_url(text);
    if let Some((scheme, _)) = text.split_once("://") {
        let is_scheme = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if is_scheme {
            return Err(StoreError::BadLocation {
                given: shown,
                reason: format!(
                    "Vis does not know the scheme `{scheme}://` (it stores sessions in SQLite or PostgreSQL)"
                ),
            });
        }
    }
    let lower = text.to_ascii_lowercase();
    if lower.starts_with("postgres:") || lower.starts_with("postgresql:") {
        return Err(StoreError::BadLocation {
            given: shown,
            reason: "a PostgreSQL URL starts with postgres:// (or postgresql://)".into(),
        });
    }
    absolute(given)
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| StoreError::BadLocation {
        given: path.display().to_string(),
        reason: format!("cannot resolve the path ({e})"),
    })
}

/// Whether there is a database at `path` to read: a SQLite file that exists, or any
/// PostgreSQL URL (the server says, when it is opened).
pub fn location_exists(path: &Path) -> bool {
    path.to_str().is_some_and(is_postgres_url) || path.exists()
}

/// `path` as messages show it: a PostgreSQL URL without its password, a file path as is.
pub fn shown_location(path: &Path) -> String {
    match path.to_str() {
        Some(text) if is_postgres_url(text) => redact_url(text),
        _ => path.display().to_string(),
    }
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
