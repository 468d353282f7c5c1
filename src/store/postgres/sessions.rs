//! Sessions in the PostgreSQL store: turns and iterations with their definitions, the running
//! turns and who owns them, counts, listings and deletion ([`SessionRecords`]).
//!
//! A turn's owner is `pid:start time@host`: processes on other machines share the database,
//! and a pid means something only on its own host. A turn owned on another host counts as
//! live here (whether that node still runs is for its lease to say, not for this machine's
//! process table).

use std::path::Path;

use tokio_postgres::Transaction;

use super::{
    fenced_lock, json_column, lock_session, named, next_number, run, touch_session, PostgresStore,
};
use crate::protocol::{IterationRecord, IterationRow, PersistedDef, TurnKind, TurnRow, TurnStatus};
use crate::store::api::{
    session_column, Counts, ForkCopied, ForkRequest, SessionRecords, SessionRow, SessionSummary,
    ToolAnswer, TurnRange, SESSION_TABLES,
};
use crate::store::decode::{iteration_row, session_summary, turn_row};
use crate::store::{now_millis, process_identity, Result};

const INTERRUPTED_OUTPUT: &str = "[vis] interrupted: the process running this block stopped before it finished; the block's effects are unknown.";

/// This machine's name, as the kernel has it.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// `pid:start time@host` of this process.
fn this_owner() -> Option<String> {
    process_identity(std::process::id() as i32).map(|id| format!("{id}@{}", host_name()))
}

/// True while the process that recorded `owner` may still run: it runs here, or it is on
/// another host.
fn owner_alive(owner: &str) -> bool {
    let (identity, host) = owner.rsplit_once('@').unwrap_or((owner, ""));
    if host != host_name() {
        return true;
    }
    let Some(pid) = identity
        .split(':')
        .next()
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return false;
    };
    process_identity(pid).as_deref() == Some(identity)
}

fn roots_json(roots: &[String]) -> String {
    serde_json::to_string(roots).unwrap_or_else(|_| "[]".into())
}

impl PostgresStore {
    /// Running turns with their owners.
    async fn running_with_owners(
        &self,
        session_id: &str,
    ) -> Result<Vec<(i64, TurnKind, Option<String>)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT turn, kind, owner FROM turns WHERE session_id = $1 AND status = 'running' ORDER BY turn",
                &[&session_id],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, named(r, 1, TurnKind::parse)?, r.try_get(2)?)))
            .collect()
    }
}

impl SessionRecords for PostgresStore {
    fn location(&self) -> &Path {
        &self.url
    }

    fn schema_version(&self) -> Result<u32> {
        run(async {
            let client = self.client().await?;
            super::migrations::read_version(&**client, &self.shown).await
        })
    }

    fn session(&self, id: &str) -> Result<Option<SessionRow>> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT id, created_at, updated_at, workspace_roots FROM sessions WHERE id = $1",
                    &[&id],
                )
                .await?;
            row.map(|r| {
                Ok(SessionRow {
                    id: r.try_get(0)?,
                    created_at: r.try_get(1)?,
                    updated_at: r.try_get(2)?,
                    workspace_roots: json_column(&r, 3)?,
                })
            })
            .transpose()
        })
    }

    fn ensure_session(&self, id: &str, roots: &[String]) -> Result<SessionRow> {
        // Fenced for a sub-session a block starts: a node that lost the lease starts none.
        run(self.fenced_execute(
            id,
            "INSERT INTO sessions (id, created_at, updated_at, workspace_roots) VALUES ($1, $2, $2, $3)
             ON CONFLICT (id) DO NOTHING",
            &[&id, &now_millis(), &roots_json(roots)],
        ))?;
        self.require_session(id)
    }

    fn set_workspace_roots(&self, id: &str, roots: &[String]) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "UPDATE sessions SET workspace_roots = $2, updated_at = $3 WHERE id = $1",
                    &[&id, &roots_json(roots), &now_millis()],
                )
                .await?;
            Ok(())
        })
    }

    fn list_sessions(&self) -> Result<Vec<SessionSummary>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT s.id, s.created_at, s.updated_at, s.workspace_roots,
                            (SELECT count(*) FROM turns t WHERE t.session_id = s.id),
                            (SELECT count(*) FROM iterations i WHERE i.session_id = s.id),
                            (SELECT count(*) FROM defs d WHERE d.session_id = s.id),
                            s.parent_session
                     FROM sessions s ORDER BY s.updated_at DESC, s.id",
                    &[],
                )
                .await?;
            rows.iter().map(session_summary).collect()
        })
    }

    fn delete_session(&mut self, session_id: &str) -> Result<()> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            lock_session(&tx, session_id).await?;
            // Rows that refer to others first, the session's own row last.
            for table in SESSION_TABLES.iter().rev() {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE {} = $1", session_column(table)),
                    &[&session_id],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn counts(&self, session_id: &str) -> Result<Counts> {
        run(async {
            let client = self.client().await?;
            let r = client
                .query_one(
                    "SELECT (SELECT count(*) FROM turns WHERE session_id = $1),
                            (SELECT count(*) FROM iterations WHERE session_id = $1),
                            (SELECT count(*) FROM folds WHERE session_id = $1 AND absorbed_by IS NULL)",
                    &[&session_id],
                )
                .await?;
            Ok(Counts {
                turns: r.try_get(0)?,
                iterations: r.try_get(1)?,
                folds: r.try_get(2)?,
            })
        })
    }

    fn begin_turn(
        &mut self,
        session_id: &str,
        kind: TurnKind,
        user_text: Option<&str>,
    ) -> Result<i64> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            fenced_lock(&tx, session_id, self.fence_for(session_id).as_ref()).await?;
            let turn = next_number(&tx, "turns", "turn", session_id).await?;
            tx.execute(
                "INSERT INTO turns (session_id, turn, kind, user_text, status, started_at, owner)
                 VALUES ($1, $2, $3, $4, 'running', $5, $6)",
                &[
                    &session_id,
                    &turn,
                    &kind.as_str(),
                    &user_text,
                    &now_millis(),
                    &this_owner(),
                ],
            )
            .await?;
            touch_session(&tx, session_id).await?;
            tx.commit().await?;
            Ok(turn)
        })
    }

    fn end_turn(&self, session_id: &str, turn: i64, status: TurnStatus) -> Result<()> {
        let Some(fence) = self.fence_for(session_id) else {
            run(self.fenced_execute(
                session_id,
                "UPDATE turns SET status = $3, finished_at = $4 WHERE session_id = $1 AND turn = $2",
                &[&session_id, &turn, &status.as_str(), &now_millis()],
            ))?;
            return Ok(());
        };
        run(self.fenced_statement(
            &fence,
            "WITH fence AS (SELECT 1 FROM session_leases
                 WHERE session_id = $5 AND instance = $6 AND epoch = $7
                   AND expires_at > (extract(epoch from clock_timestamp()) * 1000)::BIGINT
                 FOR SHARE),
             ended AS (UPDATE turns SET status = $3, finished_at = $4
                 WHERE session_id = $1 AND turn = $2 AND EXISTS (SELECT 1 FROM fence))
             SELECT EXISTS (SELECT 1 FROM fence)",
            &[
                &session_id,
                &turn,
                &status.as_str(),
                &now_millis(),
                &fence.session_id,
                &fence.instance,
                &fence.epoch,
            ],
        ))
    }

    fn running_turns(&self, session_id: &str) -> Result<Vec<(i64, TurnKind)>> {
        // Fenced, this store holds the session's lease: a turn still running was begun under
        // an earlier holder, alive or not, and the epoch keeps that one from writing.
        let fenced = self.fence_for(session_id).is_some();
        let rows = run(self.running_with_owners(session_id))?;
        Ok(rows
            .into_iter()
            .filter(|(_, _, owner)| fenced || !owner.as_deref().is_some_and(owner_alive))
            .map(|(turn, kind, _)| (turn, kind))
            .collect())
    }

    fn close_dangling_turns(&self, session_id: &str) -> Result<usize> {
        let dangling = self.running_turns(session_id)?;
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            for (turn, _) in &dangling {
                tx.execute(
                    "UPDATE iterations SET status = 'interrupted', output = $3
                     WHERE session_id = $1 AND turn = $2 AND status = 'running'",
                    &[&session_id, turn, &INTERRUPTED_OUTPUT],
                )
                .await?;
                tx.execute(
                    "UPDATE turns SET status = 'interrupted', finished_at = $3 WHERE session_id = $1 AND turn = $2",
                    &[&session_id, turn, &now_millis()],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })?;
        Ok(dangling.len())
    }

    fn turns_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<TurnRow>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT turn, kind, user_text, status, started_at, finished_at FROM turns
                     WHERE session_id = $1 AND turn BETWEEN $2 AND $3 ORDER BY turn",
                    &[&session_id, &range.first, &range.last],
                )
                .await?;
            rows.iter().map(turn_row).collect()
        })
    }

    fn next_iteration(&self, session_id: &str, turn: i64) -> Result<i64> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT COALESCE(MAX(iteration), 0) + 1 FROM iterations WHERE session_id = $1 AND turn = $2",
                    &[&session_id, &turn],
                )
                .await?;
            Ok(row.try_get(0)?)
        })
    }

    fn begin_iteration(
        &self,
        session_id: &str,
        turn: i64,
        iteration: i64,
        code: &str,
        started_at: i64,
    ) -> Result<()> {
        // Again for a running iteration: the same row, untouched when its code is there.
        let Some(fence) = self.fence_for(session_id) else {
            run(self.fenced_execute(
                session_id,
                "INSERT INTO iterations (session_id, turn, iteration, code, output, status, started_at, duration_ms, exec_us)
                 VALUES ($1, $2, $3, $4, '', 'running', $5, 0, 0)
                 ON CONFLICT (session_id, turn, iteration) DO UPDATE SET code = excluded.code
                 WHERE iterations.status = 'running' AND iterations.code IS DISTINCT FROM excluded.code",
                &[&session_id, &turn, &iteration, &code, &started_at],
            ))?;
            return Ok(());
        };
        run(self.fenced_statement(
            &fence,
            "WITH fence AS (SELECT 1 FROM session_leases
                 WHERE session_id = $6 AND instance = $7 AND epoch = $8
                   AND expires_at > (extract(epoch from clock_timestamp()) * 1000)::BIGINT
                 FOR SHARE),
             begun AS (INSERT INTO iterations (session_id, turn, iteration, code, output, status, started_at, duration_ms, exec_us)
                 SELECT $1::TEXT, $2::BIGINT, $3::BIGINT, $4::TEXT, '', 'running', $5::BIGINT, 0, 0
                 WHERE EXISTS (SELECT 1 FROM fence)
                 ON CONFLICT (session_id, turn, iteration) DO UPDATE SET code = excluded.code
                 WHERE iterations.status = 'running' AND iterations.code IS DISTINCT FROM excluded.code)
             SELECT EXISTS (SELECT 1 FROM fence)",
            &[
                &session_id,
                &turn,
                &iteration,
                &code,
                &started_at,
                &fence.session_id,
                &fence.instance,
                &fence.epoch,
            ],
        ))
    }

    fn finish_iteration(
        &mut self,
        rec: &IterationRecord<'_>,
        answers: Option<&ToolAnswer>,
    ) -> Result<Option<i64>> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            fenced_lock(&tx, rec.session_id, self.fence_for(rec.session_id).as_ref()).await?;
            tx.execute(
                "DELETE FROM iterations WHERE session_id = $1 AND turn = $2 AND iteration = $3 AND status = 'running'",
                &[&rec.session_id, &rec.turn, &rec.iteration],
            )
            .await?;
            insert_iteration(&tx, rec).await?;
            let seq = match answers {
                Some(answer) => Some(super::chat::answer_call(&tx, rec, answer).await?),
                None => None,
            };
            tx.commit().await?;
            Ok(seq)
        })
    }

    fn iterations_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<IterationRow>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT turn, iteration, code, output, status, started_at, duration_ms, exec_us, artifact, worker_exit
                     FROM iterations WHERE session_id = $1 AND turn BETWEEN $2 AND $3 ORDER BY turn, iteration",
                    &[&session_id, &range.first, &range.last],
                )
                .await?;
            rows.iter().map(iteration_row).collect()
        })
    }

    fn turn_in_progress(&self, session_id: &str) -> Result<Option<i64>> {
        let rows = run(self.running_with_owners(session_id))?;
        Ok(rows
            .into_iter()
            .find(|(_, _, owner)| owner.as_deref().is_some_and(owner_alive))
            .map(|(turn, _, _)| turn))
    }

    fn truncate_from_turn(&mut self, session_id: &str, from: i64) -> Result<()> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            lock_session(&tx, session_id).await?;
            super::fork::truncate_from_turn(&tx, session_id, from).await?;
            touch_session(&tx, session_id).await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn load_defs(&self, session_id: &str) -> Result<Vec<PersistedDef>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT name, kind, source, signature, doc FROM defs WHERE session_id = $1 ORDER BY seq",
                    &[&session_id],
                )
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(PersistedDef {
                        name: r.try_get(0)?,
                        kind: r.try_get(1)?,
                        source: r.try_get(2)?,
                        signature: r.try_get(3)?,
                        doc: r.try_get(4)?,
                    })
                })
                .collect()
        })
    }

    fn record_worker_event(&self, session_id: &str, event: &str, detail: &str) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO worker_events (session_id, at, event, detail) VALUES ($1, $2, $3, $4)",
                    &[&session_id, &now_millis(), &event, &detail],
                )
                .await?;
            Ok(())
        })
    }

    fn turn_owners(&self, session_id: &str) -> Result<Vec<(i64, Option<String>)>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT turn, owner FROM turns WHERE session_id = $1 ORDER BY turn",
                    &[&session_id],
                )
                .await?;
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect()
        })
    }

    fn fork_session(&mut self, fork: &ForkRequest<'_>) -> Result<ForkCopied> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let copied = super::fork::fork_session(&tx, fork).await?;
            tx.commit().await?;
            Ok(copied)
        })
    }

    fn def_changes_of(
        &self,
        session_id: &str,
        turn: i64,
        iteration: i64,
    ) -> Result<(Vec<PersistedDef>, Vec<String>)> {
        run(async {
            let client = self.client().await?;
            super::fork::def_changes_of(&**client, session_id, turn, iteration).await
        })
    }

    fn forked_from(&self, session_id: &str) -> Result<Option<String>> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT forked_from FROM sessions WHERE id = $1",
                    &[&session_id],
                )
                .await?;
            Ok(match row {
                Some(r) => r.try_get(0)?,
                None => None,
            })
        })
    }

    fn prompt_cache_key(&self, session_id: &str) -> Result<String> {
        run(async {
            let client = self.client().await?;
            super::fork::prompt_cache_key(&**client, session_id).await
        })
    }
}

/// Inserts an iteration and applies its definition changes, inside the caller's transaction
/// (which holds the session's row).
async fn insert_iteration(tx: &Transaction<'_>, rec: &IterationRecord<'_>) -> Result<()> {
    tx.execute(
        "INSERT INTO iterations (session_id, turn, iteration, code, output, status, started_at, duration_ms, exec_us, artifact, worker_exit)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        &[
            &rec.session_id, &rec.turn, &rec.iteration, &rec.code, &rec.output, &rec.status.as_str(),
            &rec.started_at, &rec.duration_ms, &rec.exec_us, &rec.artifact, &rec.worker_exit,
        ],
    )
    .await?;
    for name in rec.defs_deleted {
        let removed = tx
            .execute(
                "DELETE FROM defs WHERE session_id = $1 AND name = $2",
                &[&rec.session_id, name],
            )
            .await?;
        if removed > 0 {
            super::fork::log_def_change(tx, rec, name, None).await?;
        }
    }
    for def in rec.defs_set {
        let seq = next_number(tx, "defs", "seq", rec.session_id).await?;
        tx.execute(
            "INSERT INTO defs (session_id, name, kind, source, signature, doc, seq, turn, iteration)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
             ON CONFLICT (session_id, name) DO UPDATE SET kind = excluded.kind, source = excluded.source,
                signature = excluded.signature, doc = excluded.doc, seq = excluded.seq,
                turn = excluded.turn, iteration = excluded.iteration",
            &[
                &rec.session_id, &def.name, &def.kind, &def.source, &def.signature, &def.doc, &seq,
                &rec.turn, &rec.iteration,
            ],
        )
        .await?;
        super::fork::log_def_change(tx, rec, &def.name, Some(def)).await?;
    }
    touch_session(tx, rec.session_id).await
}
