//! A catalog snapshot as both backends store it: its entries encoded as JSON, and a row read
//! back checked against its key (the blake3 hash of its body), so a damaged snapshot is
//! refused the same way whichever backend held it.

use super::{Result, StoreError};
use crate::catalog::{RenderMode, Snapshot, SnapshotItem};

/// The `entries_json` column of `snapshot`.
pub(super) fn entries_json(snapshot: &Snapshot) -> Result<String> {
    serde_json::to_string(&snapshot.items).map_err(|e| {
        StoreError::CorruptRecord(format!("catalog snapshot entries cannot be encoded: {e}"))
    })
}

/// The snapshot stored under `hash` as `mode`, `body` and `entries_json`, checked: an
/// unknown mode, unreadable entries or a body that does not hash to `hash` is
/// [`StoreError::CorruptSnapshot`].
pub(super) fn checked_snapshot(
    hash: &str,
    mode: &str,
    body: String,
    entries_json: &str,
) -> Result<Snapshot> {
    let corrupt = |reason: String| StoreError::CorruptSnapshot {
        hash: hash.to_string(),
        reason,
    };
    let mode = RenderMode::parse(mode)
        .ok_or_else(|| corrupt(format!("unknown rendering mode `{mode}`")))?;
    let items: Vec<SnapshotItem> = serde_json::from_str(entries_json)
        .map_err(|e| corrupt(format!("its entries are not valid JSON: {e}")))?;
    let snapshot = Snapshot::new(mode, body, items);
    if snapshot.hash != hash {
        return Err(corrupt(format!("its body hashes to `{}`", snapshot.hash)));
    }
    Ok(snapshot)
}
