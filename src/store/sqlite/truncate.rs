//! A rewind's cut of the conversation: everything from one turn on goes, so the next request
//! is the one that would have been sent before that turn.

use rusqlite::{params, Transaction};

use crate::store::api::TURN_TABLES;
use crate::store::Result;

pub fn truncate_from_turn(tx: &Transaction<'_>, session_id: &str, from: i64) -> Result<()> {
    // Folds made from the turn on go; those they absorbed stand again.
    tx.execute(
        "UPDATE folds SET absorbed_by = NULL WHERE session_id = ?1 AND absorbed_by IN
            (SELECT id FROM folds WHERE session_id = ?1 AND turn >= ?2)",
        params![session_id, from],
    )?;
    for table in TURN_TABLES.iter().rev() {
        tx.execute(
            &format!("DELETE FROM {table} WHERE session_id = ?1 AND turn >= ?2"),
            params![session_id, from],
        )?;
    }
    // `defs` holds each name's latest version only: the set as it was before the cut comes
    // from the log of changes (a name redefined or deleted from the turn on is back).
    tx.execute("DELETE FROM defs WHERE session_id = ?1", [session_id])?;
    super::fork::write_defs_at(tx, session_id, session_id, from - 1)?;
    Ok(())
}
