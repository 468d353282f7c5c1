//! Forks in the SQLite store: a new session made of an existing one's records through a turn
//! (`vis sessions fork`), and the log of definition changes that gives a fork the definitions
//! as they were at that turn.
//!
//! Rows are copied with every column the table has (read from the schema), so a column a later
//! migration adds travels with them; only the session id, and the few columns a fork must not
//! keep (a turn's owning process, a fold's absorption by a fold that was not copied), change.

use rusqlite::{params, OptionalExtension, Transaction};

use super::{next_number, SqliteStore};
use crate::protocol::{IterationRecord, PersistedDef};
use crate::store::api::{ForkCopied, ForkRequest, TURN_TABLES};
use crate::store::fork::{copy_rows_statement, fork_copied, ForkedSession};
use crate::store::Result;

/// Appends one definition change (`None`: deleted) to the session's log, inside the caller's
/// transaction.
pub(super) fn log_def_change(
    tx: &Transaction<'_>,
    rec: &IterationRecord<'_>,
    name: &str,
    def: Option<&PersistedDef>,
) -> Result<()> {
    let seq = next_number(tx, "def_changes", "seq", rec.session_id)?;
    tx.execute(
        "INSERT INTO def_changes (session_id, seq, turn, iteration, name, kind, source, signature, doc)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            rec.session_id,
            seq,
            rec.turn,
            rec.iteration,
            name,
            def.map(|d| &d.kind),
            def.map(|d| &d.source),
            def.map(|d| &d.signature),
            def.map(|d| &d.doc)
        ],
    )?;
    Ok(())
}

pub(super) fn fork_session(store: &mut SqliteStore, fork: &ForkRequest<'_>) -> Result<ForkCopied> {
    let tx = store.immediate()?;
    let row = ForkedSession::new(fork, prompt_cache_key_in(&tx, fork.source)?);
    copy_rows(
        &tx,
        "sessions",
        "id",
        &row.overrides(|v| v as &dyn rusqlite::ToSql, |v| v as &dyn rusqlite::ToSql),
        "id = ?1",
        fork,
    )?;
    let mut copied = [0i64; 6];
    for (table, count) in TURN_TABLES.iter().zip(copied.iter_mut()) {
        *count = copy_rows(
            &tx,
            table,
            "session_id",
            &[],
            "session_id = ?1 AND turn <= ?3",
            fork,
        )? as i64;
    }
    copy_rows(
        &tx,
        "chat_prefix",
        "session_id",
        &[],
        "session_id = ?1",
        fork,
    )?;
    // The fork's turns are not running in any process of its own.
    tx.execute(
        "UPDATE turns SET owner = NULL WHERE session_id = ?1",
        [fork.new_id],
    )?;
    // A fold absorbed by one made after the fork's turn is in force again, as it was then.
    tx.execute(
        "UPDATE folds SET absorbed_by = NULL WHERE session_id = ?1
           AND absorbed_by NOT IN (SELECT id FROM folds WHERE session_id = ?1)",
        [fork.new_id],
    )?;
    let defs = write_defs_at(&tx, fork.source, fork.new_id, fork.through)?;
    tx.commit()?;
    Ok(fork_copied(copied, defs as i64))
}

/// Copies the rows of `table` matching `filter` (`?1` the source session, `?3` the fork's
/// turn) to the new session: every column as it is, but `id_column` (the new id) and
/// `overrides`. Returns how many rows.
fn copy_rows(
    tx: &Transaction<'_>,
    table: &str,
    id_column: &str,
    overrides: &[(&str, &dyn rusqlite::ToSql)],
    filter: &str,
    fork: &ForkRequest<'_>,
) -> Result<usize> {
    let columns: Vec<String> = {
        let mut stmt = tx.prepare(&format!("PRAGMA table_info({table})"))?;
        let names = stmt.query_map([], |r| r.get::<_, String>(1))?;
        names.collect::<rusqlite::Result<_>>()?
    };
    let mut values: Vec<&dyn rusqlite::ToSql> = vec![&fork.source, &fork.new_id, &fork.through];
    let sql = copy_rows_statement(
        table,
        &columns,
        id_column,
        overrides,
        filter,
        &mut values,
        |n| format!("?{n}"),
    );
    // Every value given must have a place in the statement: ?1..?3 always do.
    let sql = format!("{sql} AND ?1 IS NOT NULL AND ?2 IS NOT NULL AND ?3 IS NOT NULL");
    Ok(tx.execute(&sql, values.as_slice())?)
}

/// The definitions of `session` at the end of turn `through`, in definition order, each with
/// the turn and iteration that made it: its log of changes replayed (a redefinition moves a
/// name to the end, as the store's own order does).
/// Writes into `target`'s (empty) `defs` the definitions `source` had at the end of turn
/// `through`, from its log of changes; returns how many. A fork and a rewind's cut share it.
pub(super) fn write_defs_at(
    tx: &Transaction<'_>,
    source: &str,
    target: &str,
    through: i64,
) -> Result<usize> {
    let defs = defs_at(tx, source, through)?;
    for (seq, (turn, iteration, def)) in defs.iter().enumerate() {
        tx.execute(
            "INSERT INTO defs (session_id, name, kind, source, signature, doc, seq, turn, iteration)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                target,
                def.name,
                def.kind,
                def.source,
                def.signature,
                def.doc,
                seq as i64 + 1,
                turn,
                iteration
            ],
        )?;
    }
    Ok(defs.len())
}

fn defs_at(
    tx: &Transaction<'_>,
    session: &str,
    through: i64,
) -> Result<Vec<(i64, i64, PersistedDef)>> {
    let mut stmt = tx.prepare(
        "SELECT turn, iteration, name, kind, source, signature, doc FROM def_changes
         WHERE session_id = ?1 AND turn <= ?2 ORDER BY seq",
    )?;
    let changes = stmt.query_map(params![session, through], |r| {
        let name: String = r.get(2)?;
        let kind: Option<String> = r.get(3)?;
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            name.clone(),
            match kind {
                Some(kind) => Some(PersistedDef {
                    name,
                    kind,
                    source: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                    signature: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                    doc: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
                }),
                None => None,
            },
        ))
    })?;
    let mut defs: Vec<(i64, i64, PersistedDef)> = Vec::new();
    for change in changes {
        let (turn, iteration, name, def) = change?;
        defs.retain(|(_, _, d)| d.name != name);
        if let Some(def) = def {
            defs.push((turn, iteration, def));
        }
    }
    Ok(defs)
}

pub(super) fn def_changes_of(
    store: &SqliteStore,
    session_id: &str,
    turn: i64,
    iteration: i64,
) -> Result<(Vec<PersistedDef>, Vec<String>)> {
    let changes = store.rows(
        "SELECT name, kind, source, signature, doc FROM def_changes
         WHERE session_id = ?1 AND turn = ?2 AND iteration = ?3 ORDER BY seq",
        params![session_id, turn, iteration],
        |r| {
            let name: String = r.get(0)?;
            Ok(match r.get::<_, Option<String>>(1)? {
                Some(kind) => Ok(PersistedDef {
                    name,
                    kind,
                    source: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                    signature: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                    doc: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                }),
                None => Err(name),
            })
        },
    )?;
    let (set, deleted): (Vec<_>, Vec<_>) = changes.into_iter().partition(|c| c.is_ok());
    Ok((
        set.into_iter().filter_map(|c| c.ok()).collect(),
        deleted.into_iter().filter_map(|c| c.err()).collect(),
    ))
}

pub(super) fn forked_from(store: &SqliteStore, session_id: &str) -> Result<Option<String>> {
    Ok(store
        .conn
        .query_row(
            "SELECT forked_from FROM sessions WHERE id = ?1",
            [session_id],
            |r| r.get::<_, Option<String>>(0),
        )
        .optional()?
        .flatten())
}

pub(super) fn prompt_cache_key(store: &SqliteStore, session_id: &str) -> Result<String> {
    prompt_cache_key_in(&store.conn, session_id)
}

fn prompt_cache_key_in(conn: &rusqlite::Connection, session_id: &str) -> Result<String> {
    Ok(conn
        .query_row(
            "SELECT COALESCE(cache_key, id) FROM sessions WHERE id = ?1",
            [session_id],
            |r| r.get::<_, String>(0),
        )
        .optional()?
        .unwrap_or_else(|| session_id.to_string()))
}

pub(super) fn turn_owners(
    store: &SqliteStore,
    session_id: &str,
) -> Result<Vec<(i64, Option<String>)>> {
    store.rows(
        "SELECT turn, owner FROM turns WHERE session_id = ?1 ORDER BY turn",
        [session_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

#[cfg(test)]
mod tests {
    use super::super::sessions::tests::first_iteration;
    use super::*;
    use crate::protocol::TurnKind;
    use crate::store::api::{FoldRecords, SessionRecords};

    fn def(name: &str, body: &str) -> PersistedDef {
        PersistedDef {
            name: name.into(),
            kind: "function".into(),
            source: format!("def {name}(): return {body}\n"),
            signature: format!("def {name}()"),
            doc: String::new(),
        }
    }

    /// Records turn `turn` of `s1` with one iteration setting `set` and deleting `deleted`.
    fn turn(store: &mut SqliteStore, set: &[PersistedDef], deleted: &[String]) {
        let t = store.begin_turn("s1", TurnKind::Exec, None).unwrap();
        store
            .finish_iteration(&first_iteration(t, "pass", set, deleted), None)
            .unwrap();
    }

    #[test]
    fn a_fork_has_the_definitions_of_its_turn_not_the_latest() {
        let mut store = SqliteStore::open_in_memory().unwrap();
        store.ensure_session("s1", &["/w".into()]).unwrap();
        turn(&mut store, &[def("a", "1"), def("b", "1")], &[]);
        turn(&mut store, &[def("a", "2")], &[]);
        turn(&mut store, &[def("c", "3")], &["b".to_string()]);
        let roots = ["/w2".to_string()];
        let copied = store
            .fork_session(&ForkRequest {
                source: "s1",
                through: 2,
                new_id: "s2",
                roots: &roots,
            })
            .unwrap();
        assert_eq!((copied.turns, copied.iterations, copied.defs), (2, 2, 2));
        let defs = store.load_defs("s2").unwrap();
        let names: Vec<_> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
        assert!(defs[1].source.contains("return 2"));
        assert_eq!(
            store.forked_from("s2").unwrap().as_deref(),
            Some("s1 at t2")
        );
        assert_eq!(store.prompt_cache_key("s2").unwrap(), "s1");
        assert_eq!(store.prompt_cache_key("s1").unwrap(), "s1");
        assert_eq!(store.session("s2").unwrap().unwrap().workspace_roots, roots);
        // The original is unchanged, and the fork goes on with its own numbers.
        assert_eq!(store.load_defs("s1").unwrap().len(), 2);
        assert_eq!(
            store.begin_turn("s2", TurnKind::Exec, None).unwrap(),
            3,
            "the fork's next turn follows its last"
        );
        assert_eq!(store.counts("s1").unwrap().turns, 3);
    }

    #[test]
    fn a_cut_brings_back_the_definitions_of_the_turn_before_it() {
        let mut store = SqliteStore::open_in_memory().unwrap();
        store.ensure_session("s1", &["/w".into()]).unwrap();
        turn(&mut store, &[def("a", "1"), def("b", "1")], &[]);
        turn(&mut store, &[def("a", "2")], &["b".to_string()]);
        store.truncate_from_turn("s1", 2).unwrap();
        let defs = store.load_defs("s1").unwrap();
        let names: Vec<_> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(defs[0].source.contains("return 1"), "{:?}", defs[0]);
    }

    #[test]
    fn a_fold_absorbed_after_the_fork_is_in_force_in_it() {
        let mut store = SqliteStore::open_in_memory().unwrap();
        store.ensure_session("s1", &["/w".into()]).unwrap();
        turn(&mut store, &[], &[]);
        turn(&mut store, &[], &[]);
        let fold = |id, turn| crate::store::FoldRow {
            id,
            turn,
            iteration: None,
            key: "t1".into(),
            spans: vec![],
            gist: "g".into(),
            automatic: false,
            absorbed_by: None,
            receipt: serde_json::from_value(serde_json::json!({ "fold": id })).unwrap(),
            group_id: id,
            measurement: crate::protocol::Measurement::Unavailable {
                fold_count: 1,
                folds: vec![id],
                reason: "test".into(),
            },
        };
        store.record_fold("s1", &fold(1, 1), &[]).unwrap();
        store.record_fold("s1", &fold(2, 2), &[1]).unwrap();
        store
            .fork_session(&ForkRequest {
                source: "s1",
                through: 1,
                new_id: "s2",
                roots: &["/w".to_string()],
            })
            .unwrap();
        let folds = store.folds("s2").unwrap();
        assert_eq!(folds.len(), 1);
        assert_eq!(folds[0].absorbed_by, None);
        assert_eq!(store.folds("s1").unwrap()[0].absorbed_by, Some(2));
    }
}
