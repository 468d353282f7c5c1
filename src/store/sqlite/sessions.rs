//! Sessions in the SQLite store: turns and iterations with their definitions, the running
//! turns and who owns them, counts, listings and deletion ([`SessionRecords`]).

use std::path::Path;

use rusqlite::{params, OptionalExtension};

use super::{chat, json_column, named, next_number, touch_session, SqliteStore};
use crate::protocol::{IterationRecord, IterationRow, PersistedDef, TurnKind, TurnRow, TurnStatus};
use crate::store::api::{
    session_column, Counts, ForkCopied, ForkRequest, SessionRecords, SessionRow, SessionSummary,
    ToolAnswer, TurnRange, SESSION_TABLES,
};
use crate::store::decode::{iteration_row, session_summary, turn_row};
use crate::store::{now_millis, Result};

impl SessionRecords for SqliteStore {
    fn location(&self) -> &Path {
        &self.path
    }

    fn schema_version(&self) -> Result<u32> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    fn settle_log(&self) -> Result<()> {
        // PASSIVE: copies the WAL's frames into the database and never waits for other
        // connections. Closing does not checkpoint (see `open`), so without this every opener
        // would rebuild the WAL index from a log that only grows until the automatic
        // checkpoint, on its own start-up path; after it the next write restarts the log.
        let _busy: i64 = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(0))?;
        Ok(())
    }

    fn session(&self, id: &str) -> Result<Option<SessionRow>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, created_at, updated_at, workspace_roots FROM sessions WHERE id = ?1",
                [id],
                |r| {
                    Ok(SessionRow {
                        id: r.get(0)?,
                        created_at: r.get(1)?,
                        updated_at: r.get(2)?,
                        workspace_roots: json_column(r, 3)?,
                    })
                },
            )
            .optional()?)
    }

    /// Creates the session if it does not exist (concurrent callers are fine); returns it.
    fn ensure_session(&self, id: &str, roots: &[String]) -> Result<SessionRow> {
        let now = now_millis();
        let roots_json = serde_json::to_string(roots).unwrap_or_else(|_| "[]".into());
        // Fenced for a sub-session a block starts: a node that lost the lease starts none.
        self.fenced_write(id, |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO sessions (id, created_at, updated_at, workspace_roots) VALUES (?1, ?2, ?2, ?3)",
                params![id, now, roots_json],
            )?;
            Ok(())
        })?;
        self.require_session(id)
    }

    fn set_workspace_roots(&self, id: &str, roots: &[String]) -> Result<()> {
        let roots_json = serde_json::to_string(roots).unwrap_or_else(|_| "[]".into());
        self.conn.execute(
            "UPDATE sessions SET workspace_roots = ?2, updated_at = ?3 WHERE id = ?1",
            params![id, roots_json, now_millis()],
        )?;
        Ok(())
    }

    /// Allocates the next turn number (no gaps or duplicates across concurrent processes).
    fn begin_turn(
        &mut self,
        session_id: &str,
        kind: TurnKind,
        user_text: Option<&str>,
    ) -> Result<i64> {
        let tx = self.fenced(session_id)?;
        let turn = next_number(&tx, "turns", "turn", session_id)?;
        tx.execute(
            "INSERT INTO turns (session_id, turn, kind, user_text, status, started_at, owner) VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6)",
            params![session_id, turn, kind.as_str(), user_text, now_millis(), process_identity(std::process::id() as i32)],
        )?;
        touch_session(&tx, session_id)?;
        tx.commit()?;
        Ok(turn)
    }

    /// The number the next iteration of `turn` gets.
    fn next_iteration(&self, session_id: &str, turn: i64) -> Result<i64> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(MAX(iteration), 0) + 1 FROM iterations WHERE session_id = ?1 AND turn = ?2",
            params![session_id, turn],
            |r| r.get(0),
        )?)
    }

    /// Records an iteration as running, with its code, before its block is sent to the worker:
    /// whatever the worker does (or the host, when it dies), the code is in the history.
    fn begin_iteration(
        &self,
        session_id: &str,
        turn: i64,
        iteration: i64,
        code: &str,
        started_at: i64,
    ) -> Result<()> {
        // Again for a running iteration (a caller may record the code early, while the worker
        // starts, and the runner before it sends the block): the same row, not a second one,
        // and untouched when its code is already there (nothing written, nothing to commit,
        // right before the block is sent).
        self.fenced_write(session_id, |conn| {
            conn.execute(
                "INSERT INTO iterations (session_id, turn, iteration, code, output, status, started_at, duration_ms, exec_us)
                 VALUES (?1, ?2, ?3, ?4, '', 'running', ?5, 0, 0)
                 ON CONFLICT (session_id, turn, iteration) DO UPDATE SET code = excluded.code
                 WHERE iterations.status = 'running' AND iterations.code IS NOT excluded.code",
                params![session_id, turn, iteration, code, started_at],
            )?;
            Ok(())
        })
    }

    /// Completes an iteration recorded by [`Store::begin_iteration`] (or records it whole),
    /// with its definition changes and the model call it answers, in one transaction.
    fn finish_iteration(
        &mut self,
        rec: &IterationRecord<'_>,
        answers: Option<&ToolAnswer>,
    ) -> Result<Option<i64>> {
        let tx = self.fenced(rec.session_id)?;
        tx.execute(
            "DELETE FROM iterations WHERE session_id = ?1 AND turn = ?2 AND iteration = ?3 AND status = 'running'",
            params![rec.session_id, rec.turn, rec.iteration],
        )?;
        insert_iteration(&tx, rec)?;
        let seq = match answers {
            Some(answer) => Some(chat::answer_call(&tx, rec, answer)?),
            None => None,
        };
        tx.commit()?;
        Ok(seq)
    }

    /// Closes turns whose process stopped without ending them (their running iterations
    /// become interrupted); returns how many.
    fn close_dangling_turns(&self, session_id: &str) -> Result<usize> {
        let dangling = self.running_turns(session_id)?;
        for (turn, _) in &dangling {
            self.conn.execute(
                "UPDATE iterations SET status = 'interrupted',
                    output = '[vis] interrupted: the process running this block stopped before it finished; the block''s effects are unknown.'
                 WHERE session_id = ?1 AND turn = ?2 AND status = 'running'",
                params![session_id, turn],
            )?;
            self.conn.execute(
                "UPDATE turns SET status = 'interrupted', finished_at = ?3 WHERE session_id = ?1 AND turn = ?2",
                params![session_id, turn, now_millis()],
            )?;
        }
        Ok(dangling.len())
    }

    fn turn_owners(&self, session_id: &str) -> Result<Vec<(i64, Option<String>)>> {
        super::fork::turn_owners(self, session_id)
    }

    fn fork_session(&mut self, fork: &ForkRequest<'_>) -> Result<ForkCopied> {
        super::fork::fork_session(self, fork)
    }

    fn def_changes_of(
        &self,
        session_id: &str,
        turn: i64,
        iteration: i64,
    ) -> Result<(Vec<PersistedDef>, Vec<String>)> {
        super::fork::def_changes_of(self, session_id, turn, iteration)
    }

    fn forked_from(&self, session_id: &str) -> Result<Option<String>> {
        super::fork::forked_from(self, session_id)
    }

    fn prompt_cache_key(&self, session_id: &str) -> Result<String> {
        super::fork::prompt_cache_key(self, session_id)
    }

    fn turn_in_progress(&self, session_id: &str) -> Result<Option<i64>> {
        let rows = self.rows(
            "SELECT turn, owner FROM turns WHERE session_id = ?1 AND status = 'running' ORDER BY turn",
            [session_id],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)),
        )?;
        Ok(rows
            .into_iter()
            .find(|(_, owner)| owner.as_deref().is_some_and(owner_alive))
            .map(|(turn, _)| turn))
    }

    fn truncate_from_turn(&mut self, session_id: &str, from: i64) -> Result<()> {
        let tx = self.immediate()?;
        super::truncate::truncate_from_turn(&tx, session_id, from)?;
        touch_session(&tx, session_id)?;
        tx.commit()?;
        Ok(())
    }

    fn record_worker_event(&self, session_id: &str, event: &str, detail: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO worker_events (session_id, at, event, detail) VALUES (?1, ?2, ?3, ?4)",
            params![session_id, now_millis(), event, detail],
        )?;
        Ok(())
    }

    /// Persisted definitions in definition order.
    fn load_defs(&self, session_id: &str) -> Result<Vec<PersistedDef>> {
        self.rows(
"SELECT name, kind, source, signature, doc FROM defs WHERE session_id = ?1 ORDER BY seq",
[session_id], |r| {
            Ok(PersistedDef {
                name: r.get(0)?,
                kind: r.get(1)?,
                source: r.get(2)?,
                signature: r.get(3)?,
                doc: r.get(4)?,
            })
        },
)
    }

    fn counts(&self, session_id: &str) -> Result<Counts> {
        let turns = self.conn.query_row(
            "SELECT count(*) FROM turns WHERE session_id = ?1",
            [session_id],
            |r| r.get(0),
        )?;
        let iterations = self.conn.query_row(
            "SELECT count(*) FROM iterations WHERE session_id = ?1",
            [session_id],
            |r| r.get(0),
        )?;
        let folds = self.conn.query_row(
            "SELECT count(*) FROM folds WHERE session_id = ?1 AND absorbed_by IS NULL",
            [session_id],
            |r| r.get(0),
        )?;
        Ok(Counts {
            turns,
            iterations,
            folds,
        })
    }

    fn list_sessions(&self) -> Result<Vec<SessionSummary>> {
        self.rows(
            "SELECT s.id, s.created_at, s.updated_at, s.workspace_roots,
                    (SELECT count(*) FROM turns t WHERE t.session_id = s.id),
                    (SELECT count(*) FROM iterations i WHERE i.session_id = s.id),
                    (SELECT count(*) FROM defs d WHERE d.session_id = s.id),
                    s.parent_session
             FROM sessions s ORDER BY s.updated_at DESC, s.id",
            [],
            |r| session_summary(r),
        )
    }

    fn turns_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<TurnRow>> {
        self.rows(
            "SELECT turn, kind, user_text, status, started_at, finished_at FROM turns
             WHERE session_id = ?1 AND turn BETWEEN ?2 AND ?3 ORDER BY turn",
            params![session_id, range.first, range.last],
            |r| turn_row(r),
        )
    }

    /// Sets how a turn ended.
    fn end_turn(&self, session_id: &str, turn: i64, status: TurnStatus) -> Result<()> {
        self.fenced_write(session_id, |conn| {
            conn.execute(
                "UPDATE turns SET status = ?3, finished_at = ?4 WHERE session_id = ?1 AND turn = ?2",
                params![session_id, turn, status.as_str(), now_millis()],
            )?;
            Ok(())
        })
    }

    /// Turns still marked running whose process is gone (it stopped without ending them);
    /// turns another live process is running are left alone.
    fn running_turns(&self, session_id: &str) -> Result<Vec<(i64, TurnKind)>> {
        let fenced = self.fence_for(session_id).is_some();
        let rows = self.rows(
            "SELECT turn, kind, owner FROM turns WHERE session_id = ?1 AND status = 'running' ORDER BY turn",
            [session_id],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    named(r, 1, TurnKind::parse)?,
                    r.get::<_, Option<String>>(2)?,
                ))
            },
        )?;
        Ok(rows
            .into_iter()
            // Fenced, this store holds the session's lease: a turn still running was begun
            // under an earlier holder, alive or not, and the epoch keeps that one from writing.
            .filter(|(_, _, owner)| fenced || !owner.as_deref().is_some_and(owner_alive))
            .map(|(turn, kind, _)| (turn, kind))
            .collect())
    }

    /// Removes a session and everything recorded for it.
    fn delete_session(&mut self, session_id: &str) -> Result<()> {
        let tx = self.immediate()?;
        // Rows that refer to others first, the session's own row last.
        for table in SESSION_TABLES.iter().rev() {
            tx.execute(
                &format!("DELETE FROM {table} WHERE {} = ?1", session_column(table)),
                [session_id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn iterations_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<IterationRow>> {
        self.rows(
"SELECT turn, iteration, code, output, status, started_at, duration_ms, exec_us, artifact, worker_exit
             FROM iterations WHERE session_id = ?1 AND turn BETWEEN ?2 AND ?3 ORDER BY turn, iteration",
params![session_id, range.first, range.last], |r| iteration_row(r),
)
    }
}

/// `pid:start time` of a process (the start time tells a reused pid apart), or `None` when
/// the process does not exist.
pub fn process_identity(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name; the start time is field 22 of the whole line.
    let rest = stat.rsplit_once(')')?.1;
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid}:{start}"))
}

/// True while the process that recorded `owner` still runs.
fn owner_alive(owner: &str) -> bool {
    let Some(pid) = owner.split(':').next().and_then(|p| p.parse::<i32>().ok()) else {
        return false;
    };
    process_identity(pid).as_deref() == Some(owner)
}

/// Inserts an iteration and applies its definition changes, inside the caller's transaction.
fn insert_iteration(tx: &rusqlite::Transaction<'_>, rec: &IterationRecord<'_>) -> Result<()> {
    tx.execute(
        "INSERT INTO iterations (session_id, turn, iteration, code, output, status, started_at, duration_ms, exec_us, artifact, worker_exit)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            rec.session_id, rec.turn, rec.iteration, rec.code, rec.output, rec.status.as_str(),
            rec.started_at, rec.duration_ms, rec.exec_us, rec.artifact, rec.worker_exit
        ],
    )?;
    for name in rec.defs_deleted {
        let removed = tx.execute(
            "DELETE FROM defs WHERE session_id = ?1 AND name = ?2",
            params![rec.session_id, name],
        )?;
        if removed > 0 {
            super::fork::log_def_change(tx, rec, name, None)?;
        }
    }
    for def in rec.defs_set {
        let seq = next_number(tx, "defs", "seq", rec.session_id)?;
        tx.execute(
            "INSERT OR REPLACE INTO defs (session_id, name, kind, source, signature, doc, seq, turn, iteration)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![rec.session_id, def.name, def.kind, def.source, def.signature, def.doc, seq, rec.turn, rec.iteration],
        )?;
        super::fork::log_def_change(tx, rec, &def.name, Some(def))?;
    }
    touch_session(tx, rec.session_id)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::protocol::{IterationStatus, Status};
    use crate::store::StoreError;

    fn def(name: &str) -> PersistedDef {
        PersistedDef {
            name: name.into(),
            kind: "function".into(),
            source: format!("def {name}(): pass\n"),
            signature: format!("def {name}()"),
            doc: String::new(),
        }
    }

    /// Iteration 1 of `turn` in session `s1`, ended ok.
    pub(in crate::store::sqlite) fn first_iteration<'a>(
        turn: i64,
        code: &'a str,
        defs_set: &'a [PersistedDef],
        defs_deleted: &'a [String],
    ) -> IterationRecord<'a> {
        IterationRecord {
            session_id: "s1",
            turn,
            iteration: 1,
            code,
            output: "",
            status: IterationStatus::Ended(Status::Ok),
            started_at: 0,
            duration_ms: 1,
            exec_us: 1,
            artifact: None,
            worker_exit: None,
            defs_set,
            defs_deleted,
        }
    }

    #[test]
    fn turns_iterations_and_defs_round_trip() {
        let mut store = SqliteStore::open_in_memory().unwrap();
        store.ensure_session("s1", &["/w".into()]).unwrap();
        let t = store.begin_turn("s1", TurnKind::Exec, None).unwrap();
        assert_eq!(t, 1);
        assert_eq!(store.next_iteration("s1", t).unwrap(), 1);
        let set = [def("a"), def("b")];
        store
            .finish_iteration(&first_iteration(t, "def a(): pass", &set, &[]), None)
            .unwrap();
        store.end_turn("s1", t, TurnStatus::Done).unwrap();
        let t2 = store.begin_turn("s1", TurnKind::Exec, None).unwrap();
        store
            .finish_iteration(
                &first_iteration(t2, "del a; def a(): 1", &[def("a")], &["b".to_string()]),
                None,
            )
            .unwrap();
        let names: Vec<_> = store
            .load_defs("s1")
            .unwrap()
            .into_iter()
            .map(|d| d.name)
            .collect();
        // Redefinition moves `a` after everything defined before it.
        assert_eq!(names, ["a"]);
        let counts = store.counts("s1").unwrap();
        assert_eq!((counts.turns, counts.iterations), (2, 2));
        assert!(matches!(
            store.require_session("nope"),
            Err(StoreError::UnknownSession(_))
        ));
    }

    #[test]
    fn threads_creating_one_new_database_at_once_all_open_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vis.db");
        let opened: Vec<_> = (0..16)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let store = SqliteStore::open(&path)?;
                    store.ensure_session(&format!("s{i}"), &["/w".to_string()])?;
                    Ok::<_, crate::store::StoreError>(())
                })
            })
            .collect();
        for handle in opened {
            handle.join().unwrap().unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.list_sessions().unwrap().len(), 16);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".new-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
