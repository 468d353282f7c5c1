//! Supervising one session's worker from async code: start, restore, run a block with its
//! deadlines, interrupt, kill, restart.
//!
//! [`Supervisor`] owns the session's persisted definitions while it runs (the store is the
//! source of truth across processes; the caller hands them in and persists the changes each
//! outcome reports) and restarts a dead worker lazily before the next block. What a block's
//! worker reports it defined is kept only as the host's own cut of the block's source
//! (`runtime::defs`); restores go through `runtime::restore`. Every way a
//! block can end becomes a [`BlockResult`] the model can read; `Err` is kept for blocks that
//! could not run at all.
//!
//! Running a block is one `select!` loop over the worker's messages, the timeout, the
//! caller's stop signal and, once an interrupt went out, the kill deadline: no thread waits
//! per block, and host calls the block makes are handed to the caller's [`HostCallSink`]
//! while the loop goes on.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::channel::{HostCallSink, Incoming};
use super::restore::{await_restored, Outcome, RestorePlan, Stop, MAX_RESTORE_ATTEMPTS};
use super::spawn::WorkerProcess;
use crate::catalog::{Manifest, ManifestEntry};
use crate::protocol::{
    Block, BlockResult, ExitInfo, McpFunction, McpNamespace, PersistedDef, RestoreNotice,
    RestoreReport, Status,
};
use crate::runtime::defs::{keep_reported, Dialect};
use crate::runtime::output::{cap_file, cap_output};
use crate::runtime::wire::{HostMessage, Isolation, WorkerMessage};
use crate::runtime::RuntimeError;

/// Default block timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default cap on the worker's address space.
pub const DEFAULT_MEMORY_LIMIT_MB: u64 = 4096;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The `vis` binary (the worker is the same binary in worker mode).
    pub program: std::path::PathBuf,
    pub memory_limit_mb: u64,
    /// Used by the worker to find a `.venv` whose packages blocks can import.
    pub workspace: Option<std::path::PathBuf>,
    pub startup_timeout: Duration,
    pub restore_timeout: Duration,
    /// How long an interrupted block gets to stop before the worker is killed.
    pub interrupt_grace: Duration,
    /// The user's config directory (its `extensions/` and `skills/` are loaded); `None`
    /// loads nothing from a user config.
    pub config_dir: Option<std::path::PathBuf>,
    /// Denied names and namespaces (`[permissions] deny`): omitted from the manifest and
    /// absent from the model's namespace.
    pub deny: Vec<String>,
    /// Environment variables passed to the worker beyond the allow-list (`[sandbox] env`).
    pub env: Vec<String>,
    /// The user trusts the workspace (see `trust`): its own code may load at start.
    pub trusted: bool,
    /// The sandbox (mode, network, extra writable paths, the session's own directories,
    /// what to hide). The filesystem view is planned from it when a worker starts.
    pub sandbox: crate::sandbox::Policy,
    /// Vis's data directory (`$VIS_HOME`): hidden from blocks.
    pub data_dir: Option<std::path::PathBuf>,
    /// Vis's cache directory (see `runtime::cache`): the worker reads it, the host writes what
    /// the worker rebuilt; `None` caches nothing. Defaults to [`crate::runtime::cache::cache_dir`].
    pub cache_dir: Option<std::path::PathBuf>,
}

impl WorkerOptions {
    pub fn new(program: std::path::PathBuf) -> Self {
        WorkerOptions {
            program,
            memory_limit_mb: DEFAULT_MEMORY_LIMIT_MB,
            workspace: None,
            startup_timeout: Duration::from_secs(30),
            restore_timeout: Duration::from_secs(60),
            interrupt_grace: Duration::from_secs(2),
            config_dir: None,
            deny: Vec::new(),
            env: Vec::new(),
            trusted: false,
            sandbox: crate::sandbox::Policy::default(),
            data_dir: None,
            cache_dir: crate::runtime::cache::cache_dir(),
        }
    }

    /// The cache directory this options' workers read and the host fills for them: their
    /// workspace's own under Vis's cache directory, one for while it is trusted and one for
    /// while it is not (its code may run in the worker before the worker reports what it
    /// cached; see `runtime::cache`); Vis's cache directory itself without a workspace.
    pub fn worker_cache_dir(&self) -> Option<std::path::PathBuf> {
        let dir = self.cache_dir.as_ref()?;
        Some(match &self.workspace {
            Some(workspace) => crate::runtime::cache::workspace_dir(dir, workspace, self.trusted),
            None => dir.clone(),
        })
    }
}

impl WorkerOptions {
    /// Adds a session's own places to the sandbox: its artifacts directory (writable in every
    /// mode), its workspace roots beyond the first, and the files of the store it is kept in
    /// (`config::store_files`: the database and its log, the serve token, other sessions'
    /// artifacts), which no block may see.
    pub fn add_session(
        &mut self,
        store_files: Vec<std::path::PathBuf>,
        artifact_dir: &std::path::Path,
        roots: &[String],
    ) {
        let _ = std::fs::create_dir_all(artifact_dir);
        let policy = &mut self.sandbox;
        policy.session_dirs.push(artifact_dir.to_path_buf());
        policy
            .extra_roots
            .extend(roots.iter().skip(1).map(std::path::PathBuf::from));
        policy.private.extend(store_files);
    }
}

/// Supervises one session's worker.
pub struct Supervisor {
    opts: WorkerOptions,
    worker: Option<WorkerProcess>,
    defs: Vec<PersistedDef>,
    restart_reason: Option<String>,
    pending_notice: Option<RestoreNotice>,
    next_exec_id: u64,
    /// The visible manifest the worker last reported (empty before the first start).
    manifest: Vec<ManifestEntry>,
    /// Bumped whenever `manifest` is replaced, so callers can tell a change cheaply.
    manifest_version: u64,
    isolation: Isolation,
    /// The MCP servers' tools as namespaces and functions (sent to every new worker).
    mcp: Option<(Vec<McpNamespace>, Vec<McpFunction>)>,
}

impl Supervisor {
    /// A supervisor for a session whose persisted definitions are `defs` (in definition
    /// order). The worker starts on first use.
    pub fn new(opts: WorkerOptions, defs: Vec<PersistedDef>) -> Supervisor {
        Supervisor {
            opts,
            worker: None,
            defs,
            restart_reason: None,
            pending_notice: None,
            next_exec_id: 1,
            manifest: Vec::new(),
            manifest_version: 0,
            isolation: Isolation::default(),
            mcp: None,
        }
    }

    pub fn options(&self) -> &WorkerOptions {
        &self.opts
    }

    pub fn defs(&self) -> &[PersistedDef] {
        &self.defs
    }

    pub fn python_version(&self) -> Option<&str> {
        self.worker.as_ref().map(|w| w.python_version.as_str())
    }

    /// The visible manifest entries as the worker last reported them (at start and whenever
    /// a block changed them), deny list applied. Empty before the worker first started.
    pub fn manifest_entries(&self) -> &[ManifestEntry] {
        &self.manifest
    }

    /// Changes whenever the visible manifest may have changed (a new worker, a block that
    /// loaded an extension).
    pub fn manifest_version(&self) -> u64 {
        self.manifest_version
    }

    /// The visible manifest, built for `apropos`, `doc` and catalog rendering.
    pub fn manifest(&self) -> Result<Manifest, crate::catalog::CatalogError> {
        Manifest::new(self.manifest.clone())
    }

    /// The pid of the worker process the host started (its launcher when the worker runs in
    /// a PID namespace).
    pub fn worker_pid(&self) -> Option<i32> {
        self.worker.as_ref().map(|w| w.pid)
    }

    /// The isolation the last started worker reported.
    pub fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    pub fn is_running(&self) -> bool {
        self.worker.is_some()
    }

    /// Starts the worker (if none is running) and restores the persisted definitions.
    pub async fn start(&mut self) -> Result<(), RuntimeError> {
        if self.worker.is_some() {
            return Ok(());
        }
        // An extension that kills or hangs the worker while it loads must not lock the
        // session out: start again with only the bundled extensions and say why.
        // The definitions go with the start, so the worker restores them right after `ready`.
        let mut plan = RestorePlan::new(&self.defs, self.opts.workspace.as_deref());
        let (mut worker, extensions_skipped) =
            match WorkerProcess::spawn(&self.opts, false, plan.message()).await {
                Ok(worker) => (worker, None),
                Err(RuntimeError::WorkerStart(first)) => {
                    match WorkerProcess::spawn(&self.opts, true, plan.message()).await {
                        Ok(worker) => (worker, Some(first)),
                        Err(e) => {
                            return Err(RuntimeError::WorkerStart(format!(
                                "{first}; with only the bundled extensions: {e}"
                            )))
                        }
                    }
                }
                Err(e) => return Err(e),
            };
        let safe_mode = extensions_skipped.is_some();
        let report = self.restore(&mut worker, &mut plan, safe_mode).await?;
        self.pending_notice = Some(RestoreNotice {
            restart_reason: self.restart_reason.take(),
            report,
            extensions_skipped,
        });
        self.manifest = std::mem::take(&mut worker.manifest);
        self.manifest_version += 1;
        self.isolation = worker.isolation.clone();
        self.worker = Some(worker);
        if self.mcp.is_some() {
            self.send_mcp().await?;
        }
        Ok(())
    }

    /// Waits for `worker` to restore `plan`. A definition that kills or hangs the worker, or
    /// makes it break the protocol, must not make the session unusable: that worker is killed,
    /// the definition is skipped (and reported), and a new worker restores the rest, up to
    /// [`MAX_RESTORE_ATTEMPTS`] workers; then none are restored. The first loss blames
    /// nothing: a careful worker (no cache file, reporting progress) tries the same ones.
    async fn restore(
        &self,
        worker: &mut WorkerProcess,
        plan: &mut RestorePlan,
        safe_mode: bool,
    ) -> Result<RestoreReport, RuntimeError> {
        if plan.is_empty() {
            return Ok(RestoreReport::default());
        }
        let cache_dir = self.opts.worker_cache_dir();
        let mut attempts = 0;
        loop {
            let outcome = await_restored(
                worker,
                plan,
                cache_dir.as_deref(),
                self.opts.restore_timeout,
            )
            .await;
            let (during, stop) = match outcome {
                Outcome::Restored(report) => return Ok(plan.report(report, &self.defs)),
                Outcome::Stopped { during, what } => (during, what),
            };
            let exit = match stop {
                Stop::Died => worker.wait_exit().await,
                _ => worker.kill().await,
            };
            if !plan.is_careful() {
                // The same definitions again, compiled this time (the cache file may be what
                // broke the worker) and saying where the worker is, so the next loss can be
                // pinned on one definition.
                plan.be_careful();
            } else {
                attempts += 1;
                if during.is_none() || attempts >= MAX_RESTORE_ATTEMPTS {
                    plan.skip(None, true, &stop.why_all(exit));
                    *worker = WorkerProcess::spawn(&self.opts, safe_mode, None).await?;
                    return Ok(plan.report(RestoreReport::default(), &self.defs));
                }
                plan.skip(during, false, &stop.why(exit));
            }
            *worker = WorkerProcess::spawn(&self.opts, safe_mode, plan.message()).await?;
        }
    }

    /// Sets the MCP servers' tools (namespaces and functions) the model's namespace has. A
    /// running worker gets them now (between blocks), a new worker when it starts; either way
    /// the manifest changes (and so `manifest_version`).
    pub async fn set_mcp_tools(
        &mut self,
        namespaces: Vec<McpNamespace>,
        functions: Vec<McpFunction>,
    ) -> Result<(), RuntimeError> {
        let same = self
            .mcp
            .as_ref()
            .is_some_and(|(n, f)| *n == namespaces && *f == functions);
        if same {
            return Ok(());
        }
        self.mcp = Some((namespaces, functions));
        if self.worker.is_some() {
            self.send_mcp().await?;
        }
        Ok(())
    }

    /// Sends the MCP tools to the running worker and takes the manifest it answers with.
    async fn send_mcp(&mut self) -> Result<(), RuntimeError> {
        let (Some((namespaces, functions)), Some(worker)) = (&self.mcp, self.worker.as_mut())
        else {
            return Ok(());
        };
        worker.channel.send(HostMessage::McpTools {
            namespaces: namespaces.clone(),
            functions: functions.clone(),
        });
        let answer = tokio::time::timeout(self.opts.startup_timeout, async {
            loop {
                match worker.channel.recv().await {
                    Incoming::Message(WorkerMessage::Manifest { entries }) => break Ok(entries),
                    Incoming::Message(WorkerMessage::Fatal { message }) => {
                        break Err(RuntimeError::Worker(message))
                    }
                    // Nothing else is in flight between blocks.
                    Incoming::Message(_) => {}
                    Incoming::Invalid(detail) => break Err(RuntimeError::Protocol(detail)),
                    Incoming::Closed => {
                        break Err(RuntimeError::Worker(
                            "the worker exited while loading the MCP tools".into(),
                        ))
                    }
                }
            }
        })
        .await;
        match answer {
            Ok(Ok(entries)) => {
                self.manifest = entries;
                self.manifest_version += 1;
                Ok(())
            }
            Ok(Err(e)) => {
                self.kill_worker("after loading the MCP tools failed").await;
                Err(e)
            }
            Err(_) => {
                self.kill_worker("after loading the MCP tools hung").await;
                Err(RuntimeError::Worker(
                    "the worker did not load the MCP tools in time".into(),
                ))
            }
        }
    }

    /// Kills the worker (variables are lost); the next block starts a new one and restores
    /// the definitions.
    pub async fn kill_worker(&mut self, reason: &str) -> Option<ExitInfo> {
        let mut worker = self.worker.take()?;
        let exit = worker.kill().await;
        self.restart_reason = Some(reason.to_string());
        Some(exit)
    }

    /// Runs one block. Host calls the block makes go to `calls` (answer each one; the block
    /// waits for it). Cancelling `stop` interrupts the block; if it was cancelled before the
    /// block could start, the block does not run.
    ///
    /// `Err` means the block could not be run at all (bad input, a worker that cannot start);
    /// everything that happens to a running block is an `Ok` result.
    pub async fn exec(
        &mut self,
        mut block: Block,
        calls: HostCallSink,
        stop: CancellationToken,
    ) -> Result<BlockResult, RuntimeError> {
        validate_code(&block.code)?;
        if let Some(path) = block.paths().find(|p| p.to_str().is_none()) {
            return Err(RuntimeError::NonUtf8Path(path.to_path_buf()));
        }
        let started = std::time::Instant::now();
        self.start().await?;
        if stop.is_cancelled() {
            let mut result = settle(Ending::NotSent, None, &block, &self.opts).result;
            result.wall = started.elapsed();
            return Ok(result);
        }
        let notice = self.pending_notice.take();
        block.session.restored = notice.as_ref().map(RestoreNotice::to_json);
        let mut sandbox = self.isolation.to_json();
        if let Value::Object(s) = &mut sandbox {
            s.insert("network".into(), Value::Bool(self.opts.sandbox.network));
            s.insert("trusted".into(), Value::Bool(self.opts.trusted));
        }
        block.session.sandbox = Some(sandbox);
        let id = self.next_exec_id;
        self.next_exec_id += 1;
        let grace = self.opts.interrupt_grace;
        let Some(worker) = self.worker.as_mut() else {
            return Err(RuntimeError::Worker("no worker".into()));
        };
        worker.channel.route_calls(calls);
        worker.channel.send(HostMessage::Exec {
            id,
            block: Box::new(block.clone()),
        });
        let waited = wait_for_result(worker, id, &block, &stop, grace).await;
        worker.channel.clear_calls();
        let (ending, cause) = match waited {
            Ok(w) => w,
            Err(e) => {
                // The worker's state is unknown after a protocol failure: replace it.
                self.kill_worker("after a protocol error").await;
                return Err(e);
            }
        };
        let Settled {
            mut result,
            trailer,
            lost_because,
        } = settle(ending, cause, &block, &self.opts);
        if let Some(reason) = lost_because {
            self.worker = None;
            self.restart_reason = Some(reason);
        }
        // The worker is not trusted to say what the block defined: what is persisted is the
        // host's own cut of the block's source (a forged result could otherwise plant code
        // that runs in every new worker).
        for name in &result.defs_deleted {
            self.defs.retain(|d| &d.name != name);
        }
        let kept = keep_reported(&block.code, &result.defs_set, &self.defs, Dialect::linked());
        for def in &kept.defs {
            self.defs.retain(|d| d.name != def.name);
            self.defs.push(def.clone());
        }
        result.defs_set = kept.defs;
        if let Some(manifest) = result.manifest.take() {
            self.manifest = manifest;
            self.manifest_version += 1;
        }
        let mut output = String::new();
        for line in notice.iter().flat_map(RestoreNotice::lines) {
            output.push_str(&line);
            output.push('\n');
        }
        output.push_str(&result.output);
        for note in &kept.notes {
            push_line(&mut output, note);
        }
        if let Some(trailer) = trailer {
            push_line(&mut output, &trailer);
        }
        result.output = output;
        result.restored = notice;
        result.wall = started.elapsed();
        Ok(result)
    }

    /// Stops the worker and everything it started.
    pub async fn shutdown(&mut self) {
        if let Some(mut worker) = self.worker.take() {
            worker.channel.send(HostMessage::Shutdown);
            worker.kill().await;
        }
    }
}

/// Why the host interrupted a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Timeout,
    Stop,
}

/// How waiting for a block's result ended: facts only; [`settle`] decides what they mean.
#[derive(Debug)]
enum Ending {
    /// The block was stopped before it was sent.
    NotSent,
    /// The worker sent the block's result (its status is one a worker may report).
    Reported(BlockResult),
    /// The worker broke the protocol and was killed; `captured` is what the block printed.
    ProtocolBroken {
        detail: String,
        exit: ExitInfo,
        captured: BlockResult,
    },
    /// The worker's pipe closed while the block ran: it died.
    Died {
        exit: ExitInfo,
        captured: BlockResult,
    },
    /// The block did not stop within the grace period after an interrupt: the worker was
    /// killed.
    Killed {
        exit: ExitInfo,
        captured: BlockResult,
    },
}

/// Waits for block `id`'s result, interrupting it at its timeout or when `stop` is
/// cancelled, and killing the worker when it does not stop within `grace`. Returns how the
/// wait ended and why the block was interrupted, if it was.
async fn wait_for_result(
    worker: &mut WorkerProcess,
    id: u64,
    block: &Block,
    stop: &CancellationToken,
    grace: Duration,
) -> Result<(Ending, Option<Cause>), RuntimeError> {
    let timeout_at = Instant::now() + block.timeout;
    // Set once an interrupt (timeout or stop) went out: when the grace period ends.
    let mut kill_at: Option<Instant> = None;
    let mut cause = None;
    // Far enough never to fire; used while a deadline is not armed.
    let never = Instant::now() + Duration::from_secs(100 * 365 * 86_400);
    loop {
        tokio::select! {
            incoming = worker.channel.recv() => match incoming {
                Incoming::Message(WorkerMessage::Result { id: got, result }) if got == id => {
                    if result.status.reportable_by_worker() {
                        return Ok((Ending::Reported(*result), cause));
                    }
                    let exit = worker.kill().await;
                    let detail = format!(
                        "a result with status `{}`, which only the host decides",
                        result.status.as_str()
                    );
                    let captured = captured_output(worker, block);
                    return Ok((Ending::ProtocolBroken { detail, exit, captured }, cause));
                }
                Incoming::Message(WorkerMessage::Fatal { message }) => {
                    return Err(RuntimeError::Worker(message));
                }
                // A result for another block, or a start-up message: not for now.
                Incoming::Message(_) => {}
                Incoming::Invalid(detail) => {
                    let exit = worker.kill().await;
                    let captured = captured_output(worker, block);
                    return Ok((Ending::ProtocolBroken { detail, exit, captured }, cause));
                }
                Incoming::Closed => {
                    let exit = worker.wait_exit().await;
                    let captured = captured_output(worker, block);
                    return Ok((Ending::Died { exit, captured }, cause));
                }
            },
            _ = tokio::time::sleep_until(timeout_at), if kill_at.is_none() => {
                cause = Some(Cause::Timeout);
                worker.channel.send(HostMessage::Interrupt { id });
                kill_at = Some(Instant::now() + grace);
            }
            _ = stop.cancelled(), if kill_at.is_none() => {
                cause = Some(Cause::Stop);
                worker.channel.send(HostMessage::Interrupt { id });
                kill_at = Some(Instant::now() + grace);
            }
            _ = tokio::time::sleep_until(kill_at.unwrap_or(never)), if kill_at.is_some() => {
                let exit = worker.kill().await;
                let captured = captured_output(worker, block);
                return Ok((Ending::Killed { exit, captured }, cause));
            }
        }
    }
}

/// A block's result with its final status, the line the host adds to its output, and why
/// the next worker is started when this one was lost.
struct Settled {
    result: BlockResult,
    trailer: Option<String>,
    lost_because: Option<String>,
}

/// **The one place a block's status is decided.** The worker's report is a claim about what
/// the interpreter saw (ok, error or interrupted: `wait_for_result` lets no other status
/// through); only the host knows whether it interrupted the block for its timeout or on
/// request, and whether the worker died, broke the protocol or had to be killed.
fn settle(ending: Ending, cause: Option<Cause>, block: &Block, opts: &WorkerOptions) -> Settled {
    let lost = |mut captured: BlockResult, status, exit, trailer: String, because: String| {
        captured.status = status;
        captured.worker_lost = Some(exit);
        captured.ran = true;
        Settled {
            result: captured,
            trailer: Some(trailer),
            lost_because: Some(because),
        }
    };
    match ending {
        Ending::NotSent => {
            let mut result = BlockResult::new(Status::Interrupted);
            result.output =
                "[vis] interrupted before the block started; it did not run.\n".into();
            Settled {
                result,
                trailer: None,
                lost_because: None,
            }
        }
        Ending::Reported(mut result) => {
            result.ran = true;
            let trailer = match (result.status, cause) {
                // A block interrupted for its timeout ends in KeyboardInterrupt, or in another
                // error when its own code catches that and raises something else.
                (Status::Interrupted | Status::Error, Some(Cause::Timeout)) => {
                    result.status = Status::Timeout;
                    Some(format!(
                        "[vis] timeout: the block ran longer than {} and was interrupted; the worker and its variables are intact.",
                        seconds(block.timeout)
                    ))
                }
                (Status::Interrupted, _) => Some(
                    "[vis] interrupted: the block was stopped on request; the worker and its variables are intact.".into(),
                ),
                _ => None,
            };
            Settled {
                result,
                trailer,
                lost_because: None,
            }
        }
        Ending::ProtocolBroken {
            detail,
            exit,
            captured,
        } => lost(
            captured,
            Status::Crashed,
            exit,
            format!(
                "[vis] crashed: the worker sent a message that is not part of the protocol ({detail}), so it was killed; variables are lost and definitions are restored before the next block."
            ),
            "after the previous one broke the protocol".into(),
        ),
        Ending::Died { exit, captured } => {
            let mut trailer = format!(
                "[vis] crashed: the worker {exit} while running this block; variables are lost and definitions are restored before the next block."
            );
            if exit == ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()) {
                trailer.push_str(&format!(
                    " (SIGKILL often means memory ran out; the worker's limit is {} MiB.)",
                    opts.memory_limit_mb
                ));
            }
            lost(
                captured,
                Status::Crashed,
                exit,
                trailer,
                format!("after a crash: the previous one {exit}"),
            )
        }
        Ending::Killed { exit, captured } => {
            let (status, what, why) = match cause {
                Some(Cause::Timeout) => (
                    Status::Timeout,
                    format!(
                        "timeout: the block ran longer than {} and",
                        seconds(block.timeout)
                    ),
                    "timeout",
                ),
                _ => (
                    Status::Interrupted,
                    "interrupted: the block".to_string(),
                    "interrupt",
                ),
            };
            lost(
                captured,
                status,
                exit,
                format!(
                    "[vis] {what} did not stop within {} of the interrupt, so the worker was killed; variables are lost and definitions are restored before the next block.",
                    seconds(opts.interrupt_grace)
                ),
                format!("after a {why}: the previous one was killed"),
            )
        }
    }
}

/// What a block whose worker was lost printed before, capped (its status is settled later).
fn captured_output(worker: &WorkerProcess, block: &Block) -> BlockResult {
    let (capped, saved) = cap_file(
        worker.capture(),
        block.output_limit,
        &block.artifact_path,
        block.artifact_quota,
    )
    .unwrap_or_else(|_| (cap_output(b"", block.output_limit, None), Ok(false)));
    let mut result = BlockResult::new(Status::Crashed);
    result.output = capped.text;
    result.cut_chars = capped.cut_chars;
    result.total_chars = capped.total_chars;
    result.artifact = matches!(saved, Ok(true)).then(|| block.artifact_path.clone());
    result
}

/// Appends `line` to `output` on a line of its own.
fn push_line(output: &mut String, line: &str) {
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(line);
    output.push('\n');
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", s as u64)
    } else {
        format!("{s:.1} s")
    }
}

/// Rejects blocks that cannot be meaningful code; the message is for the model or user.
pub fn validate_code(code: &str) -> Result<(), RuntimeError> {
    if code.trim().is_empty() {
        return Err(RuntimeError::InvalidBlock(
            "the block is empty: send Python code to run (for example `print(1)`)".into(),
        ));
    }
    if let Some(pos) = code.find('\0') {
        let line = code[..pos].matches('\n').count() + 1;
        return Err(RuntimeError::InvalidBlock(format!(
            "the block contains a NUL byte (line {line}, byte {pos}); remove it — Python source cannot hold NUL"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_nul_blocks_are_rejected_with_the_cause() {
        let e = validate_code("  \n\t").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = validate_code("x = 1\ny = '\0'").unwrap_err().to_string();
        assert!(e.contains("NUL byte (line 2"), "{e}");
        assert!(validate_code("print(1)").is_ok());
    }

    fn settle_block() -> Block {
        Block {
            code: "pass".into(),
            filename: "<t1/i1>".into(),
            session: crate::protocol::SessionInfo::new(
                "s",
                1,
                1,
                crate::protocol::SessionCounts::default(),
                crate::protocol::Utilization::without_requests(),
            ),
            workspace_roots: vec![],
            output_limit: 100,
            artifact_path: "/nowhere/a.txt".into(),
            artifact_dir: "/nowhere".into(),
            artifact_quota: 0,
            timeout: Duration::from_secs(3),
        }
    }

    fn reported(status: Status) -> Ending {
        let mut result = BlockResult::new(status);
        result.output = "out\n".into();
        Ending::Reported(result)
    }

    #[test]
    fn settle_decides_every_status_in_one_table() {
        let block = settle_block();
        let mut opts = WorkerOptions::new("vis".into());
        opts.memory_limit_mb = 64;
        let status = |ending, cause| settle(ending, cause, &block, &opts);
        // What the worker reports stands unless the host interrupted the block for its
        // timeout: then an interrupt or an error is the timeout.
        for (got, cause, want) in [
            (Status::Ok, None, Status::Ok),
            (Status::Error, None, Status::Error),
            (Status::Interrupted, None, Status::Interrupted),
            (Status::Interrupted, Some(Cause::Stop), Status::Interrupted),
            (Status::Error, Some(Cause::Stop), Status::Error),
            (Status::Interrupted, Some(Cause::Timeout), Status::Timeout),
            (Status::Error, Some(Cause::Timeout), Status::Timeout),
            (Status::Ok, Some(Cause::Timeout), Status::Ok),
        ] {
            let s = status(reported(got), cause);
            assert_eq!(s.result.status, want, "{got:?} {cause:?}");
            assert!(s.result.ran && s.lost_because.is_none() && s.result.worker_lost.is_none());
            assert_eq!(s.result.output, "out\n");
            let trailer = s.trailer.unwrap_or_default();
            match want {
                Status::Timeout => assert!(trailer.contains("longer than 3 s"), "{trailer}"),
                Status::Interrupted => assert!(trailer.contains("stopped on request"), "{trailer}"),
                _ => assert!(trailer.is_empty(), "{trailer}"),
            }
        }
        let s = status(Ending::NotSent, Some(Cause::Stop));
        assert_eq!(s.result.status, Status::Interrupted);
        assert!(!s.result.ran && s.result.output.contains("did not run"));
        // A lost worker: the host's verdict, whatever was printed before.
        let captured = || BlockResult::new(Status::Ok);
        let s = status(
            Ending::Died {
                exit: ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()),
                captured: captured(),
            },
            None,
        );
        assert_eq!(s.result.status, Status::Crashed);
        assert_eq!(
            s.result.worker_lost,
            Some(ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()))
        );
        assert!(s.trailer.unwrap().contains("limit is 64 MiB"));
        assert!(s.lost_because.unwrap().starts_with("after a crash"));
        let s = status(
            Ending::ProtocolBroken {
                detail: "a result with status `timeout`".into(),
                exit: ExitInfo::Code(0),
                captured: captured(),
            },
            Some(Cause::Timeout),
        );
        assert_eq!(s.result.status, Status::Crashed);
        assert!(s
            .trailer
            .unwrap()
            .contains("not part of the protocol (a result with status `timeout`)"));
        for (cause, want) in [
            (Some(Cause::Timeout), Status::Timeout),
            (Some(Cause::Stop), Status::Interrupted),
        ] {
            let s = status(
                Ending::Killed {
                    exit: ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()),
                    captured: captured(),
                },
                cause,
            );
            assert_eq!(s.result.status, want);
            assert!(s.trailer.unwrap().contains("did not stop within"));
            assert!(s.lost_because.unwrap().contains("was killed"));
        }
    }

    #[test]
    fn restore_notice_lines() {
        let quiet = RestoreNotice {
            restart_reason: None,
            report: RestoreReport::default(),
            extensions_skipped: None,
        };
        assert_eq!(quiet.line(), None);
        let n = RestoreNotice {
            restart_reason: Some("after a crash".into()),
            report: RestoreReport {
                ok: vec!["a".into(), "b".into()],
                failed: vec![("c".into(), "NameError: x".into())],
                unkept: vec![],
            },
            extensions_skipped: None,
        };
        assert_eq!(
            n.line().unwrap(),
            "[vis] new worker (after a crash): restored 2 definitions: a, b; 1 failed: c (NameError: x)"
        );
        let many: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        let n = RestoreNotice {
            restart_reason: None,
            report: RestoreReport {
                ok: many,
                failed: vec![],
                unkept: vec![],
            },
            extensions_skipped: Some("the worker exited with code 7".into()),
        };
        assert!(n.line().unwrap().ends_with("f11, +8 more"));
        let lines = n.lines();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].starts_with("[vis] only the bundled extensions are loaded: the worker did not start with the others (the worker exited with code 7)"));
        assert_eq!(quiet.lines(), Vec::<String>::new());
        let n = RestoreNotice {
            restart_reason: None,
            report: RestoreReport {
                ok: vec!["nums".into()],
                failed: vec![],
                unkept: vec![("nums".into(), vec!["cache".into(), "seen".into()])],
            },
            extensions_skipped: None,
        };
        assert_eq!(
            n.line().unwrap(),
            "[vis] new worker: restored 1 definition: nums; not kept across the restart: nums reads cache, seen (define them again before calling)"
        );
    }
}
