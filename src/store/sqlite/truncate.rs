//! A rewind's cut of the conversation: everything from one turn on goes, so the next request
//! is the one that would have been sent before that turn.

use rusqlite::{params, Transaction};

use crate::store::Result;

pub fn truncate_from_turn(tx: &Transaction<'_>, session_id: &str, from: i64) -> Result<()> {
    // Folds made from the turn on go; those they absorbed stand again.
    tx.execute(
        "UPDATE folds SET absorbed_by = NULL WHERE session_id = ?1 AND absorbed_by IN
            (SELECT id FROM folds WHERE session_id = ?1 AND turn >= ?2)",
        params![session_id, from],
    )?;
    for table in [
        "folds",
        "history",
        "requests",
        "iterations",
        "defs",
        "def_changes",
        "turns",
    ] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE session_id = ?1 AND turn >= ?2"),
            params![session_id, from],
        )?;
    }
    Ok(())
}
