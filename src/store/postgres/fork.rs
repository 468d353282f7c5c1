//! Forks and rewinds in the PostgreSQL store: a new session made of an existing one's records
//! through a turn, the cut of a session back to before a turn, and the log of definition
//! changes both rebuild definitions from. Same rules as `sqlite::fork`: rows are copied with
//! every column the table has (read from the catalog), so a column a later migration adds
//! travels with them.

use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Transaction};

use super::{lock_session, next_number};
use crate::protocol::{IterationRecord, PersistedDef};
use crate::store::api::{ForkCopied, ForkRequest, TURN_TABLES};
use crate::store::fork::{copy_rows_statement, fork_copied, ForkedSession};
use crate::store::Result;

type Param<'a> = &'a (dyn ToSql + Sync);

/// Appends one definition change (`None`: deleted) to the session's log, inside the caller's
/// transaction.
pub(super) async fn log_def_change(
    tx: &Transaction<'_>,
    rec: &IterationRecord<'_>,
    name: &str,
    def: Option<&PersistedDef>,
) -> Result<()> {
    let seq = next_number(tx, "def_changes", "seq", rec.session_id).await?;
    tx.execute(
        "INSERT INTO def_changes (session_id, seq, turn, iteration, name, kind, source, signature, doc)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &rec.session_id,
            &seq,
            &rec.turn,
            &rec.iteration,
            &name,
            &def.map(|d| d.kind.as_str()),
            &def.map(|d| d.source.as_str()),
            &def.map(|d| d.signature.as_str()),
            &def.map(|d| d.doc.as_str()),
        ],
    )
    .await?;
    Ok(())
}

pub(super) async fn fork_session(
    tx: &Transaction<'_>,
    fork: &ForkRequest<'_>,
) -> Result<ForkCopied> {
    lock_session(tx, fork.source).await?;
    let row = ForkedSession::new(fork, prompt_cache_key(tx, fork.source).await?);
    copy_rows(
        tx,
        "sessions",
        "id",
        &row.overrides(|v| v as Param<'_>, |v| v as Param<'_>),
        "id = $1",
        fork,
    )
    .await?;
    let mut copied = [0i64; 6];
    for (table, count) in TURN_TABLES.iter().zip(copied.iter_mut()) {
        *count = copy_rows(
            tx,
            table,
            "session_id",
            &[],
            "session_id = $1 AND turn <= $3",
            fork,
        )
        .await? as i64;
    }
    copy_rows(
        tx,
        "chat_prefix",
        "session_id",
        &[],
        "session_id = $1",
        fork,
    )
    .await?;
    // The fork's turns are not running in any process of its own.
    tx.execute(
        "UPDATE turns SET owner = NULL WHERE session_id = $1",
        &[&fork.new_id],
    )
    .await?;
    // A fold absorbed by one made after the fork's turn is in force again, as it was then.
    tx.execute(
        "UPDATE folds SET absorbed_by = NULL WHERE session_id = $1
           AND absorbed_by NOT IN (SELECT id FROM folds WHERE session_id = $1)",
        &[&fork.new_id],
    )
    .await?;
    let defs = write_defs_at(tx, fork.source, fork.new_id, fork.through).await?;
    Ok(fork_copied(copied, defs as i64))
}

/// Copies the rows of `table` matching `filter` (`$1` the source session, `$3` the fork's
/// turn) to the new session: every column as it is, but `id_column` (`$2`, the new id) and
/// `overrides`. Returns how many rows.
async fn copy_rows(
    tx: &Transaction<'_>,
    table: &str,
    id_column: &str,
    overrides: &[(&str, Param<'_>)],
    filter: &str,
    fork: &ForkRequest<'_>,
) -> Result<u64> {
    let columns: Vec<String> = tx
        .query(
            "SELECT column_name::TEXT FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
            &[&table],
        )
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<std::result::Result<_, _>>()?;
    // Every parameter must appear in the statement (the server infers its type from it).
    let mut values: Vec<Param<'_>> = vec![&fork.source, &fork.new_id];
    if filter.contains("$3") {
        values.push(&fork.through);
    }
    let sql = copy_rows_statement(
        table,
        &columns,
        id_column,
        overrides,
        filter,
        &mut values,
        |n| format!("${n}"),
    );
    Ok(tx.execute(&sql, &values).await?)
}

/// Writes into `target`'s (empty) `defs` the definitions `source` had at the end of turn
/// `through`, from its log of changes; returns how many. A fork and a rewind's cut share it.
async fn write_defs_at(
    tx: &Transaction<'_>,
    source: &str,
    target: &str,
    through: i64,
) -> Result<usize> {
    let defs = defs_at(tx, source, through).await?;
    for (seq, (turn, iteration, def)) in defs.iter().enumerate() {
        tx.execute(
            "INSERT INTO defs (session_id, name, kind, source, signature, doc, seq, turn, iteration)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &target,
                &def.name,
                &def.kind,
                &def.source,
                &def.signature,
                &def.doc,
                &(seq as i64 + 1),
                turn,
                iteration,
            ],
        )
        .await?;
    }
    Ok(defs.len())
}

/// The definitions of `session` at the end of turn `through`, in definition order, each with
/// the turn and iteration that made it: its log of changes replayed.
async fn defs_at(
    tx: &Transaction<'_>,
    session: &str,
    through: i64,
) -> Result<Vec<(i64, i64, PersistedDef)>> {
    let rows = tx
        .query(
            "SELECT turn, iteration, name, kind, source, signature, doc FROM def_changes
             WHERE session_id = $1 AND turn <= $2 ORDER BY seq",
            &[&session, &through],
        )
        .await?;
    let mut defs: Vec<(i64, i64, PersistedDef)> = Vec::new();
    for r in &rows {
        let name: String = r.try_get(2)?;
        defs.retain(|(_, _, d)| d.name != name);
        if let Some(kind) = r.try_get::<_, Option<String>>(3)? {
            defs.push((
                r.try_get(0)?,
                r.try_get(1)?,
                PersistedDef {
                    name,
                    kind,
                    source: r.try_get::<_, Option<String>>(4)?.unwrap_or_default(),
                    signature: r.try_get::<_, Option<String>>(5)?.unwrap_or_default(),
                    doc: r.try_get::<_, Option<String>>(6)?.unwrap_or_default(),
                },
            ));
        }
    }
    Ok(defs)
}

/// A rewind's cut: turn `from` and every later one go, with everything made in them, inside
/// the caller's transaction (which holds the session's row).
pub(super) async fn truncate_from_turn(
    tx: &Transaction<'_>,
    session_id: &str,
    from: i64,
) -> Result<()> {
    // Folds made from the turn on go; those they absorbed stand again.
    tx.execute(
        "UPDATE folds SET absorbed_by = NULL WHERE session_id = $1 AND absorbed_by IN
            (SELECT id FROM folds WHERE session_id = $1 AND turn >= $2)",
        &[&session_id, &from],
    )
    .await?;
    for table in TURN_TABLES.iter().rev() {
        tx.execute(
            &format!("DELETE FROM {table} WHERE session_id = $1 AND turn >= $2"),
            &[&session_id, &from],
        )
        .await?;
    }
    // `defs` holds each name's latest version only: the set before the cut comes from the log.
    tx.execute("DELETE FROM defs WHERE session_id = $1", &[&session_id])
        .await?;
    write_defs_at(tx, session_id, session_id, from - 1).await?;
    Ok(())
}

pub(super) async fn def_changes_of(
    client: &impl GenericClient,
    session_id: &str,
    turn: i64,
    iteration: i64,
) -> Result<(Vec<PersistedDef>, Vec<String>)> {
    let rows = client
        .query(
            "SELECT name, kind, source, signature, doc FROM def_changes
             WHERE session_id = $1 AND turn = $2 AND iteration = $3 ORDER BY seq",
            &[&session_id, &turn, &iteration],
        )
        .await?;
    let mut set = Vec::new();
    let mut deleted = Vec::new();
    for r in &rows {
        let name: String = r.try_get(0)?;
        match r.try_get::<_, Option<String>>(1)? {
            Some(kind) => set.push(PersistedDef {
                name,
                kind,
                source: r.try_get::<_, Option<String>>(2)?.unwrap_or_default(),
                signature: r.try_get::<_, Option<String>>(3)?.unwrap_or_default(),
                doc: r.try_get::<_, Option<String>>(4)?.unwrap_or_default(),
            }),
            None => deleted.push(name),
        }
    }
    Ok((set, deleted))
}

pub(super) async fn prompt_cache_key(
    client: &impl GenericClient,
    session_id: &str,
) -> Result<String> {
    let row = client
        .query_opt(
            "SELECT COALESCE(cache_key, id) FROM sessions WHERE id = $1",
            &[&session_id],
        )
        .await?;
    Ok(match row {
        Some(r) => r.try_get(0)?,
        None => session_id.to_string(),
    })
}
