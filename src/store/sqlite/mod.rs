//! The SQLite backend (WAL): one connection per [`SqliteStore`], transactions `IMMEDIATE`
//! where numbers are allocated, so concurrent processes never hand out the same turn,
//! iteration or sequence number.
//!
//! Opening, creating and migrating the database is here; each store trait is implemented in
//! its own file: `sessions` (turns, iterations, definitions), `chat` (the conversation),
//! `catalog` and `mcp`.

mod catalog;
mod chat;
mod children;
mod copy;
mod fork;
mod images;
mod leases;
mod mcp;
mod migrations;
mod sessions;
mod truncate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior};

use super::{now_millis, LeaseFence, Result, StoreError};
pub use migrations::latest_version;
pub use sessions::process_identity;

/// The SQLite store: one connection to one database file.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// The lease this store's session writes are made under (`Leases::set_lease_fence`).
    fence: std::sync::Mutex<Option<LeaseFence>>,
}

/// How long a connection waits for another's lock in all (then the statement fails with
/// "database is locked").
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// The pause before try `tries + 1` for a lock another connection holds, or `None` once the
/// pauses add up to [`LOCK_WAIT`]. SQLite's own busy timeout sleeps 1, 2, 5, 10 ms and longer
/// between tries, while the writes of this program hold the lock for a fraction of a
/// millisecond: a sub-session's first commits, waiting behind its parent's or a sibling's,
/// lost 4 ms each (`docs/spawn.md`). Short pauses first, then longer ones.
fn lock_pause(tries: i32) -> Option<Duration> {
    const SHORT: i32 = 40;
    const MEDIUM: i32 = SHORT + 100;
    let long_tries = ((LOCK_WAIT.as_millis() as i32) - 2 - 100) / 10;
    match tries {
        t if t < 0 => None,
        t if t < SHORT => Some(Duration::from_micros(50)),
        t if t < MEDIUM => Some(Duration::from_millis(1)),
        t if t < MEDIUM + long_tries => Some(Duration::from_millis(10)),
        _ => None,
    }
}

/// The connection's busy handler: waits [`lock_pause`], true to try again.
fn wait_for_lock(tries: i32) -> bool {
    match lock_pause(tries) {
        Some(pause) => {
            std::thread::sleep(pause);
            true
        }
        None => false,
    }
}

fn classify_open_error(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        Some(ErrorCode::ReadOnly)
        | Some(ErrorCode::CannotOpen)
        | Some(ErrorCode::PermissionDenied)
        | Some(ErrorCode::DiskFull)
        | Some(ErrorCode::SystemIoFailure) => StoreError::Unwritable {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        _ => StoreError::Sqlite(e),
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        if path.is_dir() {
            return Err(StoreError::Unwritable {
                path: path.to_path_buf(),
                detail: "it is a directory".into(),
            });
        }
        if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            // SQLite would take an empty file as a new database; one that exists but is empty
            // was not made by us, or was truncated.
            return Err(StoreError::Empty {
                path: path.to_path_buf(),
            });
        }
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| StoreError::Unwritable {
                path: path.to_path_buf(),
                detail: format!("cannot create {}: {e}", parent.display()),
            })?;
        }
        if !path.exists() {
            Self::create_fresh(path)?;
        }
        let conn = Connection::open(path).map_err(|e| classify_open_error(path, e))?;
        Self::init(conn, path)
    }

    /// Makes a new database beside `path` and links it into place, so no other process ever
    /// sees a half-made (empty) file there; if another one got there first, its database is
    /// used.
    fn create_fresh(path: &Path) -> Result<()> {
        let unwritable = |detail: String| StoreError::Unwritable {
            path: path.to_path_buf(),
            detail,
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "vis.db".into());
        // Unique per call, not just per process and millisecond: threads of one process (the
        // sessions `vis serve` opens at once) must never share a half-made file.
        static CREATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let temp = path.with_file_name(format!(
            ".{name}.new-{}-{}-{}",
            std::process::id(),
            now_millis(),
            CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        {
            let conn = Connection::open(&temp).map_err(|e| classify_open_error(&temp, e))?;
            Self::init(conn, &temp)?;
        }
        let linked = std::fs::hard_link(&temp, path);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", temp.display()));
        }
        match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(unwritable(format!("cannot create it: {e}"))),
        }
    }

    /// A private in-memory store (tests, benchmarks).
    pub fn open_in_memory() -> Result<SqliteStore> {
        let conn = Connection::open_in_memory()?;
        Self::init(conn, Path::new(":memory:"))
    }

    fn init(conn: Connection, path: &Path) -> Result<SqliteStore> {
        let classify = |e| classify_open_error(path, e);
        conn.busy_handler(Some(wait_for_lock)).map_err(classify)?;
        // Reading the schema is the first thing that touches the file: a non-database fails
        // here, before anything could be written.
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .map_err(classify)?;
        let version: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(classify)?;
        if version == 0 && tables > 0 {
            return Err(StoreError::NotVis {
                path: path.to_path_buf(),
            });
        }
        if version > 0 {
            let app: Option<String> = conn
                .query_row(
                    "SELECT value FROM vis_meta WHERE key = 'application'",
                    [],
                    |r| r.get(0),
                )
                .optional()
                .unwrap_or(None);
            if app.as_deref() != Some("vis") {
                return Err(StoreError::NotVis {
                    path: path.to_path_buf(),
                });
            }
        }
        if version > latest_version() {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                supported: latest_version(),
            });
        }
        if path != Path::new(":memory:") {
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(classify)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(StoreError::Unwritable {
                    path: path.to_path_buf(),
                    detail: format!("cannot switch to WAL journaling (got '{mode}')"),
                });
            }
            // The last connection to close would checkpoint the WAL into the database (two
            // fsyncs, a few ms at the end of every `vis exec`). Callers checkpoint while they
            // are idle instead (`settle_log`, while a worker starts), and SQLite's automatic
            // checkpoint remains; with `synchronous = NORMAL` what is durable stays the same.
            conn.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
                true,
            )
            .map_err(classify)?;
        }
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
            .map_err(classify)?;
        let mut store = SqliteStore {
            conn,
            path: path.to_path_buf(),
            fence: std::sync::Mutex::new(None),
        };
        store.migrate(version)?;
        Ok(store)
    }

    /// A write transaction that takes the write lock at once, so a number it reads stays
    /// unallocated by other processes until it commits.
    fn immediate(&mut self) -> Result<rusqlite::Transaction<'_>> {
        Ok(self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?)
    }

    /// The fence on writes to `session_id`, if this store has one for it.
    fn fence_for(&self, session_id: &str) -> Option<LeaseFence> {
        let fence = self.fence.lock().unwrap_or_else(|p| p.into_inner());
        fence.clone().filter(|f| f.guards() == session_id)
    }

    /// [`immediate`](Self::immediate), refused with `LeaseLost` when this store is fenced for
    /// `session_id` and the lease row no longer matches: the check and the writes share the
    /// write lock, which a takeover's `UPDATE session_leases` needs too.
    fn fenced(&mut self, session_id: &str) -> Result<rusqlite::Transaction<'_>> {
        let fence = self.fence_for(session_id);
        let tx = self.immediate()?;
        if let Some(fence) = fence {
            check_fence(&tx, &fence)?;
        }
        Ok(tx)
    }

    /// Runs `write` (statements on `&self`), inside an immediate transaction with the fence
    /// checked when this store is fenced for `session_id`; unfenced, as it is (autocommit).
    fn fenced_write<T>(
        &self,
        session_id: &str,
        write: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<T> {
        let Some(fence) = self.fence_for(session_id) else {
            return write(&self.conn);
        };
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let out = check_fence(&self.conn, &fence).and_then(|()| write(&self.conn));
        let ended = match out {
            Ok(_) => self.conn.execute_batch("COMMIT"),
            Err(_) => self.conn.execute_batch("ROLLBACK"),
        };
        if ended.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        let value = out?;
        ended?;
        Ok(value)
    }

    /// Every row `sql` yields, mapped.
    fn rows<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.conn.prepare(sql)?;
        let rows = stmt.query_map(params, map)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn migrate(&mut self, from: u32) -> Result<()> {
        let path = self.path.clone();
        for (version, sql) in migrations::MIGRATIONS.iter().filter(|(v, _)| *v > from) {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| classify_open_error(&path, e))?;
            // Another process may have migrated while we waited for the lock.
            let current: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if current >= *version {
                continue;
            }
            tx.execute_batch(sql)
                .map_err(|e| classify_open_error(&path, e))?;
            tx.execute_batch(&format!("PRAGMA user_version = {version}"))?;
            tx.commit().map_err(|e| classify_open_error(&path, e))?;
        }
        Ok(())
    }
}

/// The number after the highest `column` of the session's rows in `table` (1 for none), read
/// inside the caller's [`SqliteStore::immediate`] transaction.
fn next_number(
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    column: &str,
    session_id: &str,
) -> Result<i64> {
    Ok(tx.query_row(
        &format!("SELECT COALESCE(MAX({column}), 0) + 1 FROM {table} WHERE session_id = ?1"),
        [session_id],
        |r| r.get(0),
    )?)
}

/// Refuses the caller's write transaction unless the lease row still has the fence's instance
/// and epoch and is unexpired.
fn check_fence(conn: &Connection, fence: &LeaseFence) -> Result<()> {
    // Prepared once per connection: every fenced write runs it.
    let held: Option<i64> = conn
        .prepare_cached(
            "SELECT 1 FROM session_leases
             WHERE session_id = ?1 AND instance = ?2 AND epoch = ?3 AND expires_at > ?4",
        )?
        .query_row(
            rusqlite::params![fence.session_id, fence.instance, fence.epoch, now_millis()],
            |r| r.get(0),
        )
        .optional()?;
    match held {
        Some(_) => Ok(()),
        None => Err(StoreError::LeaseLost {
            session: fence.session_id.clone(),
            epoch: fence.epoch,
        }),
    }
}

/// Marks the session as used now, inside the caller's transaction.
fn touch_session(tx: &rusqlite::Transaction<'_>, session_id: &str) -> Result<()> {
    tx.execute(
        "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
        rusqlite::params![session_id, now_millis()],
    )?;
    Ok(())
}

/// A column holding a name (a kind or a status), parsed; an unknown name is an error naming
/// the column and the value, never a default.
pub(super) fn named<T>(
    row: &rusqlite::Row<'_>,
    idx: usize,
    parse: fn(&str) -> Option<T>,
) -> rusqlite::Result<T> {
    let text: String = row.get(idx)?;
    parse(&text).ok_or_else(|| {
        let name = row.as_ref().column_name(idx).unwrap_or("?").to_string();
        rusqlite::Error::FromSqlConversionFailure(
            idx,
            rusqlite::types::Type::Text,
            format!("column `{name}` holds `{text}`, which this vis does not know").into(),
        )
    })
}

/// A column holding JSON, parsed; a damaged value is an error naming the column, never a
/// silent default.
pub(super) fn json_column<T: serde::de::DeserializeOwned>(
    row: &rusqlite::Row<'_>,
    idx: usize,
) -> rusqlite::Result<T> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(|e| {
        let name = row.as_ref().column_name(idx).unwrap_or("?").to_string();
        rusqlite::Error::FromSqlConversionFailure(
            idx,
            rusqlite::types::Type::Text,
            format!("column `{name}` does not hold the JSON it should ({e})").into(),
        )
    })
}

impl super::decode::Columns for rusqlite::Row<'_> {
    type Error = rusqlite::Error;

    fn get<T: super::decode::Column>(&self, idx: usize) -> rusqlite::Result<T> {
        rusqlite::Row::get(self, idx)
    }

    fn named<T>(&self, idx: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
        named(self, idx, parse)
    }

    fn json<T: serde::de::DeserializeOwned>(&self, idx: usize) -> rusqlite::Result<T> {
        json_column(self, idx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_pauses_start_short_and_add_up_to_the_lock_wait() {
        let pauses: Vec<Duration> = (0..).map_while(lock_pause).collect();
        assert!(pauses[0] < Duration::from_millis(1), "{:?}", pauses[0]);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
        let total: Duration = pauses.iter().sum();
        assert!(
            total >= LOCK_WAIT - Duration::from_millis(20) && total <= LOCK_WAIT,
            "{total:?}"
        );
        assert_eq!(lock_pause(-1), None);
    }

    #[test]
    fn a_write_waits_for_another_connections_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vis.db");
        let holder = SqliteStore::open(&path).unwrap();
        let waiter = SqliteStore::open(&path).unwrap();
        holder
            .conn
            .execute_batch(
                "BEGIN IMMEDIATE; INSERT INTO vis_meta (key, value) VALUES ('held', '1');",
            )
            .unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            holder.conn.execute_batch("COMMIT").unwrap();
        });
        waiter
            .conn
            .execute(
                "INSERT INTO vis_meta (key, value) VALUES ('waited', '1')",
                [],
            )
            .unwrap();
        release.join().unwrap();
        let rows: i64 = waiter
            .conn
            .query_row(
                "SELECT count(*) FROM vis_meta WHERE key IN ('held', 'waited')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 2);
    }
}
