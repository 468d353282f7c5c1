//! Content-addressed snapshot storage in SQLite.
//!
//! A snapshot row is immutable: the key is `blake3(body)`, so storing the same rendering twice
//! is a no-op (`INSERT OR IGNORE`) and a loaded row is checked against its hash.

use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};

use super::error::{CatalogError, Result};
use super::snapshot::{parse_mode, Snapshot, SnapshotItem};

/// The table; put it in a numbered migration.
pub const CATALOG_SNAPSHOTS_SQL: &str = "CREATE TABLE IF NOT EXISTS catalog_snapshots (
    hash TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    body TEXT NOT NULL,
    entries_json TEXT NOT NULL,
    created_at INTEGER NOT NULL
);";

/// Stores `snapshot` unless a row with its hash exists. Returns true when a row was inserted.
pub fn store_snapshot(conn: &Connection, snapshot: &Snapshot) -> Result<bool> {
    let entries_json = serde_json::to_string(&snapshot.items)?;
    let created_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let n = conn.execute(
        "INSERT OR IGNORE INTO catalog_snapshots (hash, mode, body, entries_json, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            snapshot.hash,
            snapshot.mode.as_str(),
            snapshot.body,
            entries_json,
            created_at
        ],
    )?;
    Ok(n == 1)
}

/// Loads the snapshot with `hash`, verifying the content address. `None` when absent.
pub fn load_snapshot(conn: &Connection, hash: &str) -> Result<Option<Snapshot>> {
    let row: Option<(String, String, String)> = conn
        .query_row(
            "SELECT mode, body, entries_json FROM catalog_snapshots WHERE hash = ?1",
            params![hash],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((mode, body, entries_json)) = row else {
        return Ok(None);
    };
    let mode = parse_mode(hash, &mode)?;
    let items: Vec<SnapshotItem> = serde_json::from_str(&entries_json)?;
    let snapshot = Snapshot::new(mode, body, items);
    if snapshot.hash != hash {
        return Err(CatalogError::CorruptSnapshot {
            hash: hash.to_string(),
            reason: format!("its body hashes to `{}`", snapshot.hash),
        });
    }
    Ok(Some(snapshot))
}
