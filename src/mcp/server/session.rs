//! One call of `python_execution`: the block runs in the session's worker and is recorded as
//! an iteration of the connection's turn, with MCP tool calls answered by the hub meanwhile.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{ServeError, ServeOptions};
use crate::protocol::{Block, Status, TurnKind};
use crate::runtime::{RuntimeError, Supervisor};
use crate::store::{now_millis, IterationRecord, Store, StoreError};

pub(super) struct Session {
    pub(super) store: Box<Store>,
    pub(super) supervisor: Supervisor,
    pub(super) opts: ServeOptions,
    /// This connection's turn, begun at its first call.
    pub(super) turn: Option<i64>,
    pub(super) seen_manifest: u64,
}

/// How one call ended, as the client gets it.
pub(super) struct CallOutcome {
    pub(super) text: String,
    pub(super) failed: bool,
}

impl Session {
    pub(super) fn close(&mut self) -> Result<(), StoreError> {
        if let Some(turn) = self.turn.take() {
            self.store.finish_turn(&self.opts.session_id, turn)?;
        }
        Ok(())
    }

    /// Picks up MCP tool-list changes before a block.
    async fn sync_mcp(&mut self) -> Result<(), RuntimeError> {
        let Some(hub) = self.opts.hub.clone() else {
            return Ok(());
        };
        if hub.refresh().await {
            let (namespaces, functions) = hub.functions();
            self.supervisor.set_mcp_tools(namespaces, functions).await?;
        }
        Ok(())
    }

    pub(super) async fn run(
        &mut self,
        code: String,
        stop: CancellationToken,
    ) -> Result<CallOutcome, ServeError> {
        if let Err(e) = crate::runtime::validate_code(&code) {
            return Ok(CallOutcome {
                text: format!("[vis] {e}\n[vis] status: rejected"),
                failed: true,
            });
        }
        let id = self.opts.session_id.clone();
        // A failure here leaves the previous tools in place; the block still runs and is told.
        let mcp_problem = self.sync_mcp().await.err().map(|e| {
            format!(
                "[vis] the MCP servers' tools could not be updated ({e}); the previous ones stay\n"
            )
        });
        let turn = match self.turn {
            Some(t) => t,
            None => {
                let t = self.store.begin_turn(&id, TurnKind::Mcp, None)?;
                self.turn = Some(t);
                t
            }
        };
        let iteration = self.store.next_iteration(&id, turn)?;
        let counts = self.store.counts(&id)?;
        let mut session = crate::session::session_dict(
            &id,
            turn,
            iteration,
            counts,
            crate::session::utilization_without_requests(),
        );
        if let Some(hub) = &self.opts.hub {
            session["mcp"] = hub.status_json();
        }
        let request = Block {
            code: code.clone(),
            filename: format!("<t{turn}/i{iteration}>"),
            session,
            output_limit: self.opts.output_limit,
            artifact_path: self
                .opts
                .artifact_dir
                .join(format!("t{turn}-i{iteration}.txt")),
            artifact_dir: self.opts.artifact_dir.clone(),
            workspace_roots: self.opts.roots.iter().map(PathBuf::from).collect(),
            timeout: self.opts.timeout,
            artifact_quota: self.opts.artifact_quota,
        };
        let started_at = now_millis();
        // The code is stored before the worker sees it.
        self.store
            .begin_iteration(&id, turn, iteration, &code, started_at)?;
        let hub = self.opts.hub.clone();
        let (calls_tx, mut calls) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        let outcome = {
            let run = self.supervisor.exec(request, calls_tx, stop);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(call) = calls.recv() => match crate::mcp::spawn_host_call(hub.as_ref(), call) {
                        Ok(task) => tasks.push(task),
                        Err(call) => {
                            let answer = answer_other(&call.method);
                            call.reply(answer);
                        }
                    },
                }
            }
        };
        while let Ok(call) = calls.try_recv() {
            if let Err(call) = crate::mcp::spawn_host_call(hub.as_ref(), call) {
                let answer = answer_other(&call.method);
                call.reply(answer);
            }
        }
        // Calls still in flight belong to a block that ended: cancel them at their servers.
        for task in tasks {
            task.abort();
        }
        let outcome = match outcome {
            Ok(o) => o,
            Err(RuntimeError::InvalidBlock(m)) => {
                return Ok(CallOutcome {
                    text: format!("[vis] {m}\n[vis] status: rejected"),
                    failed: true,
                })
            }
            Err(e) => {
                let text = format!("[vis] the block could not run: {e}");
                self.store.finish_iteration(&IterationRecord {
                    session_id: &id,
                    turn,
                    iteration,
                    code: &code,
                    output: &text,
                    status: Status::Crashed.into(),
                    started_at,
                    duration_ms: 0,
                    exec_us: 0,
                    artifact: None,
                    worker_exit: None,
                    defs_set: &[],
                    defs_deleted: &[],
                })?;
                return Ok(CallOutcome {
                    text: format!("{text}\n[vis] status: crashed"),
                    failed: true,
                });
            }
        };
        let worker_exit = outcome.worker_lost.map(|e| e.to_string());
        self.store.finish_iteration(&IterationRecord {
            session_id: &id,
            turn,
            iteration,
            code: &code,
            output: &outcome.output,
            status: outcome.status.into(),
            started_at,
            duration_ms: outcome.wall.as_millis() as i64,
            exec_us: outcome.exec_micros as i64,
            artifact: outcome
                .artifact
                .as_deref()
                .and_then(std::path::Path::to_str),
            worker_exit: worker_exit.as_deref(),
            defs_set: &outcome.defs_set,
            defs_deleted: &outcome.defs_deleted,
        })?;
        if let Some(exit) = &worker_exit {
            self.store
                .record_worker_event(&id, outcome.status.as_str(), exit)?;
        }
        if let Some(hub) = &self.opts.hub {
            for (server, fingerprint, tools) in hub.take_unsaved_tool_lists() {
                self.store.cache_mcp_tools(&server, &fingerprint, &tools)?;
            }
        }
        let mut text = mcp_problem.unwrap_or_default();
        if outcome.output.is_empty() {
            text.push_str("(no output)\n");
        } else {
            text.push_str(&outcome.output);
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[vis] status: {} (t{turn}/i{iteration}, {})",
            outcome.status.as_str(),
            millis(outcome.wall)
        ));
        Ok(CallOutcome {
            text,
            failed: outcome.status != Status::Ok,
        })
    }
}

fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

/// Host calls other than MCP's: folding needs the conversation, which the MCP client keeps.
fn answer_other(method: &str) -> crate::runtime::CallAnswer {
    match method {
        "fold_session" | "read_session" => Err(crate::runtime::CallError(format!(
            "{method}() is not available through `vis mcp`: the MCP client keeps the conversation, so Vis cannot fold it"
        ))),
        _ => Err(crate::runtime::CallError(format!(
            "'{method}' is not available in `vis mcp`; see doc('vis') for what blocks can call"
        ))),
    }
}
