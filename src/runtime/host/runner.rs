//! The block runner: the one place a block runs in a session, for `vis chat`, `vis serve`,
//! `vis exec` and `vis mcp` alike.
//!
//! [`BlockRunner::run_block`] does every step, in order:
//! 1. builds the [`Block`] (the `session` dict from the store's counts, the caller's
//!    utilization and the tools' status) and records the iteration's code before the worker
//!    sees it (whatever happens next, the code is in the history);
//! 2. runs it, answering the block's host calls in one `match` over [`HostRequest`] (and
//!    sending what it prints, as it prints it, to the caller's [`BlockSpec::live`]): MCP tools
//!    by the session's [`ToolHub`] (each call a task of its own, so a slow tool does not hold up
//!    the block's deadlines or other calls), `promote()`'s write here, and the conversation's
//!    calls (`fold_session`, `read_session`) by the caller's [`HostCalls`];
//! 3. cancels what the block started: MCP calls still running are aborted (cancelled at their
//!    servers) and their callers told so; calls still queued are refused the same way;
//! 4. records the iteration with its outcome and definition changes, together with the model
//!    call it answers, if any, in one transaction.
//!
//! Around each block, the session's checkpoints (`crate::checkpoints`) scan the workspace:
//! before (the baseline at the first block, changes made outside Vis) and after (what the
//! block changed).
//!
//! The runner owns the session's store, its worker ([`Supervisor`]), its MCP servers (behind
//! the [`ToolHub`] trait, which `mcp` implements: the runtime does not depend on it) and its
//! artifact directory.//!
//! What each host call means is in `dispatch`; what a run is given and gives back in `spec`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::channel::{ended, HostCall};
use super::dispatch::{dispatch, HostCalls, Origin, ToolHub};
use super::show::ImageShelf;
use super::spec::{BlockLimits, BlockSpec, Ran, RunError};
use super::subs::SubSessions;
use super::supervisor::Supervisor;
use super::tail::LiveOutput;
use crate::checkpoints::{
    rewind_session, CheckpointError, CheckpointSettings, Recorder, RewindOptions, RewindOutcome,
};
use crate::protocol::{
    Block, Event, IterationRecord, IterationStatus, SessionCounts, SessionInfo, Status, TurnStatus,
    Utilization,
};
use crate::runtime::RuntimeError;
use crate::store::{now_millis, Store, StoreError, ToolAnswer};

/// Runs the blocks of one session.
pub struct BlockRunner {
    session_id: String,
    store: Box<Store>,
    supervisor: Supervisor,
    tools: Option<Arc<dyn ToolHub>>,
    /// The session's children (`spawn()`); `None` where there is no model.
    subs: Option<Arc<dyn SubSessions>>,
    artifact_dir: PathBuf,
    roots: Vec<String>,
    limits: BlockLimits,
    /// The session's checkpoints (`None` for a store in memory).
    checkpoints: Option<Recorder>,
    /// The caller changes files itself between blocks (`vis mcp`'s client).
    client_edits_between_blocks: bool,
}

impl BlockRunner {
    pub fn new(
        session_id: &str,
        store: Box<Store>,
        supervisor: Supervisor,
        artifact_dir: PathBuf,
        roots: Vec<String>,
        limits: BlockLimits,
    ) -> BlockRunner {
        let db = store.location().to_path_buf();
        let checkpoints = (db != Path::new(":memory:"))
            .then(|| Recorder::new(&db, session_id, &roots, CheckpointSettings::default()));
        BlockRunner {
            checkpoints,
            client_edits_between_blocks: false,
            session_id: session_id.to_string(),
            store,
            supervisor,
            tools: None,
            subs: None,
            artifact_dir,
            roots,
            limits,
        }
    }

    /// Gives the session its MCP servers (their tools reach the worker when it starts).
    pub fn set_tools(&mut self, tools: Arc<dyn ToolHub>) {
        self.tools = Some(tools);
    }

    /// `[checkpoints]` settings for this session (the default until called).
    pub fn set_checkpoint_settings(&mut self, settings: CheckpointSettings) {
        let db = self.store.location().to_path_buf();
        if let Some(recorder) = &mut self.checkpoints {
            *recorder = Recorder::new(&db, &self.session_id, &self.roots, settings);
        }
    }

    /// For a caller that changes files itself between blocks (the client of `vis mcp`, an
    /// agent with editing tools of its own): what changed since the last block is recorded
    /// as made outside Vis before each block, and each block's own changes are recorded
    /// before its result is returned, so neither takes the other's (a rewind then refuses to
    /// overwrite the client's edits, as it does the person's).
    pub fn client_edits_between_blocks(&mut self) {
        self.client_edits_between_blocks = true;
    }

    /// This session's recorder, made by the caller (`vis exec` starts its turn's scan before
    /// the runner exists, while the worker starts).
    pub fn set_checkpoints(&mut self, recorder: Recorder) {
        if self.checkpoints.is_some() {
            self.checkpoints = Some(recorder);
        }
    }

    /// Takes the session's recorder out (a process about to exit hands it to
    /// [`Recorder::leave_at_exit`]); no checkpoints are recorded afterwards.
    pub fn take_checkpoints(&mut self) -> Option<Recorder> {
        self.checkpoints.take()
    }

    /// The session's checkpoints (a rewind in `vis chat` or `vis serve` goes through them).
    pub fn checkpoints_mut(&mut self) -> Option<&mut Recorder> {
        self.checkpoints.as_mut()
    }

    /// Gives the session its children: `spawn()` and `Sub` calls go to them.
    pub fn set_subs(&mut self, subs: Arc<dyn SubSessions>) {
        self.subs = Some(subs);
    }

    pub fn tools(&self) -> Option<&Arc<dyn ToolHub>> {
        self.tools.as_ref()
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn store(&self) -> &Store {
        &*self.store
    }

    pub fn store_mut(&mut self) -> &mut Store {
        &mut *self.store
    }

    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    pub fn supervisor_mut(&mut self) -> &mut Supervisor {
        &mut self.supervisor
    }

    pub fn artifact_dir(&self) -> &Path {
        &self.artifact_dir
    }

    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    pub fn limits(&self) -> &BlockLimits {
        &self.limits
    }

    /// Starts the worker, and the MCP servers with it: all of them (`eager`), or only those
    /// whose tools are not known yet (the rest start when a block calls them).
    pub async fn start(&mut self, eager: bool) -> Result<(), RuntimeError> {
        match self.tools.clone() {
            Some(tools) => {
                let (started, ()) = tokio::join!(self.supervisor.start(), tools.connect(eager));
                started?;
                let (namespaces, functions) = tools.functions();
                self.supervisor.set_mcp_tools(namespaces, functions).await?;
                // A tool list not kept is fetched again next time.
                let _ = self.keep_tool_lists();
                Ok(())
            }
            None => self.supervisor.start().await,
        }
    }

    /// Picks up MCP tool-list changes (a server's `list_changed`, a restart) and keeps new
    /// tool lists in the store.
    pub async fn sync_tools(&mut self) -> Result<(), RunError> {
        let Some(tools) = self.tools.clone() else {
            return Ok(());
        };
        if let Some((namespaces, functions)) = tools.refresh().await {
            self.supervisor.set_mcp_tools(namespaces, functions).await?;
        }
        self.keep_tool_lists()?;
        Ok(())
    }

    fn keep_tool_lists(&mut self) -> Result<(), StoreError> {
        if let Some(tools) = &self.tools {
            for (server, fingerprint, list) in tools.take_unsaved_tool_lists() {
                self.store.cache_mcp_tools(&server, &fingerprint, &list)?;
            }
        }
        Ok(())
    }

    /// Stops the sub-sessions, the worker and the MCP servers (and waits for the last
    /// checkpoint scan).
    pub async fn shutdown(&mut self) {
        if let Some(subs) = &self.subs {
            subs.shutdown().await;
        }
        self.settle_checkpoints();
        self.supervisor.shutdown().await;
        if let Some(tools) = &self.tools {
            tools.shutdown().await;
        }
    }

    /// Runs one block (see the module docs); `stop` interrupts it. `Err` only when the store
    /// fails: everything that happens to the block is in [`Ran`].
    pub async fn run_block(
        &mut self,
        spec: BlockSpec,
        host_calls: &mut dyn HostCalls,
        stop: CancellationToken,
    ) -> Result<Ran, RunError> {
        let BlockSpec {
            turn,
            iteration,
            code,
            utilization,
            live,
        } = spec;
        self.checkpoint(turn, iteration, false);
        let started_at = now_millis();
        let started = std::time::Instant::now();
        self.store
            .begin_iteration(&self.session_id, turn, iteration, &code, started_at)?;
        let block = self.block(turn, iteration, &code, utilization)?;
        if let Some(subs) = &self.subs {
            let supervisor = &self.supervisor;
            subs.parent_manifest(supervisor.manifest_version(), supervisor.manifest_entries());
        }
        // The block's own stop: its owner cancels it when the block spends a budget, which
        // interrupts the block and not the caller's turn.
        let block_stop = stop.child_token();
        let (calls_tx, mut calls) = mpsc::unbounded_channel::<HostCall>();
        let workspace = self.supervisor.options().workspace.clone();
        let mut shelf = ImageShelf::new(self.limits.images);
        let mut tasks: Vec<JoinHandle<()>> = Vec::new();
        let mut forward = |output: LiveOutput| {
            if let Some(live) = &live {
                let _ = live.send(Event::BlockOutput {
                    turn,
                    iteration,
                    text: output.text,
                    skipped_bytes: output.skipped_bytes,
                });
            }
        };
        let watch = live.is_some().then_some(&mut forward as _);
        let outcome = {
            let run = self
                .supervisor
                .exec_watched(block, calls_tx, block_stop.clone(), watch);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(call) = calls.recv() => {
                        if let Some(task) = dispatch(
                            call,
                            Origin {
                                turn,
                                iteration,
                                subs: self.subs.as_ref(),
                                live: live.as_ref(),
                                stop: &block_stop,
                            },
                            self.tools.as_ref(),
                            workspace.as_deref(),
                            &mut *self.store,
                            host_calls,
                            &mut shelf,
                        ) {
                            tasks.push(task);
                        }
                    }
                }
            }
        };
        // What the block started ends with it: MCP calls still running are cancelled at
        // their servers, and calls still queued are refused.
        for task in tasks {
            task.abort();
        }
        while let Ok(call) = calls.try_recv() {
            let method = call.request.method();
            call.reply(Err(ended(method)));
        }
        // A tool list not kept is fetched again next time.
        let _ = self.keep_tool_lists();
        let wall = started.elapsed();
        self.checkpoint(turn, iteration, true);
        if self.client_edits_between_blocks {
            // The result goes to a client that may edit files the moment it has it.
            self.settle_checkpoints();
        }
        // Children end with the block that started them when it is interrupted or times out.
        let cut_short = stop.is_cancelled()
            || outcome
                .as_ref()
                .is_ok_and(|r| matches!(r.status, Status::Interrupted | Status::Timeout));
        if let (true, Some(subs)) = (cut_short, &self.subs) {
            subs.block_interrupted(turn, iteration);
        }
        let (status, mut output, result, failure) = match outcome {
            Ok(result) => (
                IterationStatus::from(result.status),
                result.output.clone(),
                Some(result),
                None,
            ),
            Err(RuntimeError::InvalidBlock(message)) => (
                IterationStatus::Rejected,
                format!("[vis] {message}"),
                None,
                None,
            ),
            Err(e) => (
                IterationStatus::from(Status::Crashed),
                format!("[vis] the block could not run: {e}"),
                None,
                Some(e),
            ),
        };
        let images = shelf.into_images();
        let answers = host_calls.finish(&mut output, status, &images);
        let recorded_wall = result.as_ref().map_or(wall, |r| r.wall);
        let no_defs = Vec::new();
        let record = IterationRecord {
            session_id: &self.session_id,
            turn,
            iteration,
            code: &code,
            output: &output,
            status,
            started_at,
            duration_ms: recorded_wall.as_millis() as i64,
            exec_us: result.as_ref().map_or(0, |r| r.exec_micros as i64),
            artifact: result
                .as_ref()
                .and_then(|r| r.artifact.as_deref())
                .and_then(Path::to_str),
            worker_exit: None,
            defs_set: result.as_ref().map_or(&no_defs[..], |r| &r.defs_set),
            defs_deleted: result.as_ref().map_or(&[][..], |r| &r.defs_deleted),
        };
        let worker_exit = result
            .as_ref()
            .and_then(|r| r.worker_lost)
            .map(|e| e.to_string());
        let record = IterationRecord {
            worker_exit: worker_exit.as_deref(),
            ..record
        };
        let recorded = self
            .store
            .finish_iteration(&record, answers.as_ref())
            .and_then(|seq| {
                if let Some(exit) = &worker_exit {
                    self.store
                        .record_worker_event(&self.session_id, status.as_str(), exit)?;
                }
                Ok(seq)
            });
        let (seq, unrecorded) = match recorded {
            Ok(seq) => (seq, None),
            Err(e) => (None, Some(e)),
        };
        Ok(Ran {
            turn,
            iteration,
            status,
            output,
            wall: recorded_wall,
            result,
            seq,
            failure,
            unrecorded,
            images,
        })
    }

    /// Scans the workspace before (`after` false) or after a block. A checkpoint that cannot
    /// be recorded (a full disk) does not stop the block: it is noted among the session's
    /// worker events, and the next scan takes the changes up.
    fn checkpoint(&mut self, turn: i64, iteration: i64, after: bool) {
        let Some(recorder) = &mut self.checkpoints else {
            return;
        };
        let recorded = if after {
            recorder.after_block(turn, iteration)
        } else {
            recorder.before_block(turn, iteration, self.client_edits_between_blocks)
        };
        if let Err(e) = recorded {
            let _ = self.store.record_worker_event(
                &self.session_id,
                "checkpoint",
                &format!("t{turn}/i{iteration}: {e}"),
            );
        }
    }

    /// Rewinds the session's files to before `turn` (see `checkpoints::rewind_session`).
    /// When the conversation is cut, the worker stops (it holds what the cut turns defined)
    /// and restarts at the next block with the definitions that remain.
    pub async fn rewind(
        &mut self,
        turn: i64,
        options: RewindOptions,
    ) -> Result<RewindOutcome, CheckpointError> {
        let Some(recorder) = self.checkpoints.as_mut() else {
            return Err(CheckpointError::NoCheckpoints(self.session_id.clone()));
        };
        let outcome = rewind_session(&mut *self.store, recorder, &self.session_id, turn, options)?;
        if outcome.truncated {
            if let Ok(defs) = self.store.load_defs(&self.session_id) {
                self.supervisor.defs = defs;
            }
            self.supervisor.shutdown().await;
        }
        Ok(outcome)
    }

    /// A turn starts: its checkpoint scan for outside changes runs while the model answers.
    pub fn prepare_checkpoints(&mut self, turn: i64) {
        if let Some(recorder) = &mut self.checkpoints {
            recorder.prepare_turn(turn);
        }
    }

    /// Ends turn `turn` in the store once its last block's checkpoint scan is done: what
    /// anyone changes after being told the turn is over counts as made outside Vis (a rewind
    /// refuses to overwrite it).
    pub fn end_turn(&mut self, turn: i64, status: TurnStatus) -> Result<(), StoreError> {
        self.settle_checkpoints();
        self.store.end_turn(&self.session_id, turn, status)
    }

    /// Waits for the scan of the last block (it runs while the model answers); a failure is
    /// kept as a worker event.
    pub fn settle_checkpoints(&mut self) {
        if let Some(recorder) = &mut self.checkpoints {
            if let Err(e) = recorder.settle() {
                let _ =
                    self.store
                        .record_worker_event(&self.session_id, "checkpoint", &e.to_string());
            }
        }
    }

    /// Records an iteration that did not run (a call that was not a valid `python_execution`
    /// call, one past the turn's limit, one the person interrupted): its code and the note the
    /// model gets instead of a result.
    pub fn record_not_run(
        &mut self,
        turn: i64,
        iteration: i64,
        code: &str,
        output: &str,
        status: IterationStatus,
        answers: Option<&ToolAnswer>,
    ) -> Result<Option<i64>, StoreError> {
        let started_at = now_millis();
        self.store
            .begin_iteration(&self.session_id, turn, iteration, code, started_at)?;
        self.store.finish_iteration(
            &IterationRecord::not_run(
                &self.session_id,
                turn,
                iteration,
                code,
                output,
                status,
                started_at,
            ),
            answers,
        )
    }

    /// The block for `turn`/`iteration`, with its `session` dict.
    fn block(
        &self,
        turn: i64,
        iteration: i64,
        code: &str,
        utilization: Utilization,
    ) -> Result<Block, StoreError> {
        let counts = self.store.counts(&self.session_id)?;
        let mut session = SessionInfo::new(
            &self.session_id,
            turn,
            iteration,
            SessionCounts {
                turns: counts.turns,
                iterations: counts.iterations,
                folds: counts.folds,
            },
            utilization,
        );
        if let Some(tools) = &self.tools {
            session.mcp = tools.status();
        }
        Ok(Block {
            code: code.to_string(),
            filename: format!("<t{turn}/i{iteration}>"),
            session,
            output_limit: self.limits.output_limit,
            artifact_path: self.artifact_dir.join(format!("t{turn}-i{iteration}.txt")),
            artifact_dir: self.artifact_dir.clone(),
            workspace_roots: self.roots.iter().map(PathBuf::from).collect(),
            timeout: self.limits.timeout,
            artifact_quota: self.limits.artifact_quota,
        })
    }
}
