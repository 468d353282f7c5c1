//! Catalog snapshots in SQLite, content-addressed.
//!
//! A snapshot row is immutable: the key is `blake3(body)`, so storing the same rendering twice
//! is a no-op (`INSERT OR IGNORE`) and a loaded row is checked against its hash.

use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::catalog::Snapshot;
use crate::store::addressed::{checked_snapshot, entries_json};
use crate::store::api::CatalogSnapshots;
use crate::store::{now_millis, Result};

/// The table (migration 2).
pub const CATALOG_SNAPSHOTS_SQL: &str = "CREATE TABLE IF NOT EXISTS catalog_snapshots (
    hash TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    body TEXT NOT NULL,
    entries_json TEXT NOT NULL,
    created_at INTEGER NOT NULL
);";

impl CatalogSnapshots for SqliteStore {
    fn save_catalog_snapshot(&self, snapshot: &Snapshot) -> Result<bool> {
        let entries_json = entries_json(snapshot)?;
        let n = self.conn.execute(
            "INSERT OR IGNORE INTO catalog_snapshots (hash, mode, body, entries_json, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                snapshot.hash,
                snapshot.mode.as_str(),
                snapshot.body,
                entries_json,
                now_millis()
            ],
        )?;
        Ok(n == 1)
    }

    fn catalog_snapshot(&self, hash: &str) -> Result<Option<Snapshot>> {
        let row: Option<(String, String, String)> = self
            .conn
            .query_row(
                "SELECT mode, body, entries_json FROM catalog_snapshots WHERE hash = ?1",
                params![hash],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((mode, body, entries_json)) = row else {
            return Ok(None);
        };
        checked_snapshot(hash, &mode, body, &entries_json).map(Some)
    }
}
