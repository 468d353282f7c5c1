//! A backend-neutral copy of what is stored, as `vis store copy` carries it from one backend
//! to another: rows with their column names, the tables they come from, and the trait each
//! backend implements to export and import them.

use crate::store::Result;

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

/// The column that names the session in each of [`SESSION_TABLES`].
pub fn session_column(table: &str) -> &'static str {
    if table == "sessions" {
        "id"
    } else {
        "session_id"
    }
}

/// The tables whose rows belong to a turn (`turns` first: the others refer to it): what a
/// fork copies through its turn, and what a rewind's cut removes from its turn on (in
/// reverse).
pub const TURN_TABLES: &[&str] = &[
    "turns",
    "iterations",
    "history",
    "requests",
    "folds",
    "def_changes",
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
