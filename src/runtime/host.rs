//! The host side: starting, feeding, interrupting, killing and restarting workers.
//!
//! `Runtime` supervises one session's worker. It owns the session's persisted definitions
//! while it runs (the store is the source of truth across processes; the caller hands them
//! in and persists the changes each result reports), restarts a dead worker lazily before the
//! next block, and turns every way a block can end into a `BlockOutcome` the model can read.

use std::fs::OpenOptions;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::env::worker_env;
use super::frame::{write_frame, FrameReader, ReadOutcome};
use super::output::{cap_file, cap_output};
use super::protocol::{
    ExecRequest, ExecResult, HostMessage, PersistedDef, RestoreReport, Status, WorkerMessage,
};
use super::RuntimeError;
use crate::catalog::{Manifest, ManifestEntry};

/// Default block timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default cap on the worker's address space.
pub const DEFAULT_MEMORY_LIMIT_MB: u64 = 4096;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The `vis` binary (the worker is the same binary in worker mode).
    pub program: PathBuf,
    pub memory_limit_mb: u64,
    /// Used by the worker to find a `.venv` whose packages blocks can import.
    pub workspace: Option<PathBuf>,
    pub startup_timeout: Duration,
    pub restore_timeout: Duration,
    /// How long an interrupted block gets to stop before the worker is killed.
    pub interrupt_grace: Duration,
    /// The user's config directory (its `extensions/` and `skills/` are loaded); `None`
    /// loads nothing from a user config.
    pub config_dir: Option<PathBuf>,
    /// Denied names and namespaces (`[permissions] deny`): omitted from the manifest and
    /// absent from the model's namespace.
    pub deny: Vec<String>,
}

impl WorkerOptions {
    pub fn new(program: PathBuf) -> Self {
        WorkerOptions {
            program,
            memory_limit_mb: DEFAULT_MEMORY_LIMIT_MB,
            workspace: None,
            startup_timeout: Duration::from_secs(30),
            restore_timeout: Duration::from_secs(60),
            interrupt_grace: Duration::from_secs(2),
            config_dir: None,
            deny: Vec::new(),
        }
    }
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitInfo {
    Code(i32),
    Signal(i32),
    Unknown,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitInfo::Code(c) => write!(f, "exited with code {c}"),
            ExitInfo::Signal(s) => write!(f, "was killed by signal {s} ({})", signal_name(*s)),
            ExitInfo::Unknown => write!(f, "ended"),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "signal",
    }
}

/// One live worker process.
struct WorkerProcess {
    child: Child,
    pid: i32,
    stdin: ChildStdin,
    reader: FrameReader<ChildStdout>,
    /// fd 1 and 2 of the worker; removed when the worker is dropped.
    capture: tempfile::NamedTempFile,
    python_version: String,
    manifest: Vec<ManifestEntry>,
}

enum Received {
    Message(WorkerMessage),
    TimedOut,
    Exited,
}

impl WorkerProcess {
    fn spawn(opts: &WorkerOptions, safe_mode: bool) -> Result<WorkerProcess, RuntimeError> {
        let capture = tempfile::Builder::new()
            .prefix("vis-worker-")
            .suffix(".out")
            .tempfile()
            .map_err(RuntimeError::Io)?;
        let stderr = OpenOptions::new()
            .append(true)
            .open(capture.path())
            .map_err(RuntimeError::Io)?;
        let mut cmd = Command::new(&opts.program);
        cmd.arg("worker")
            .arg("--capture")
            .arg(capture.path())
            .arg("--memory-limit-mb")
            .arg(opts.memory_limit_mb.to_string());
        if let Some(ws) = &opts.workspace {
            cmd.arg("--workspace").arg(ws);
            cmd.current_dir(ws);
        }
        if let Some(dir) = &opts.config_dir {
            cmd.arg("--config-dir").arg(dir);
        }
        for name in &opts.deny {
            cmd.arg("--deny").arg(name);
        }
        if safe_mode {
            cmd.arg("--safe-mode");
        }
        cmd.env_clear()
            .envs(worker_env())
            .env("VIS_WORKER", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            // Its own process group: a terminal Ctrl-C reaches the host only, and a kill
            // takes the block's child processes along.
            .process_group(0);
        let mut child = cmd.spawn().map_err(|source| RuntimeError::Spawn {
            program: opts.program.clone(),
            source,
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(RuntimeError::Worker("worker pipes missing".into()));
        };
        let pid = child.id() as i32;
        let mut worker = WorkerProcess {
            child,
            pid,
            stdin,
            reader: FrameReader::new(stdout),
            capture,
            python_version: String::new(),
            manifest: Vec::new(),
        };
        let deadline = Instant::now() + opts.startup_timeout;
        match worker.recv(Some(deadline))? {
            Received::Message(WorkerMessage::Ready {
                python_version,
                manifest,
                ..
            }) => {
                worker.python_version = python_version;
                worker.manifest = manifest;
                Ok(worker)
            }
            Received::Message(WorkerMessage::Fatal { message }) => {
                Err(RuntimeError::WorkerStart(message))
            }
            Received::Message(other) => Err(RuntimeError::Protocol(format!(
                "expected ready from the worker, got {other:?}"
            ))),
            Received::TimedOut => {
                worker.kill();
                Err(RuntimeError::WorkerStart(format!(
                    "no ready signal within {:?}; output: {}",
                    opts.startup_timeout,
                    worker.capture_text()
                )))
            }
            Received::Exited => {
                let exit = worker.wait_exit();
                Err(RuntimeError::WorkerStart(format!(
                    "the worker {exit}: {}",
                    worker.capture_text().trim()
                )))
            }
        }
    }

    fn send(&mut self, msg: &HostMessage) -> Result<(), RuntimeError> {
        let payload = serde_json::to_vec(msg).map_err(|e| RuntimeError::Protocol(e.to_string()))?;
        match write_frame(&mut self.stdin, &payload) {
            Ok(()) => Ok(()),
            // A dead worker shows up as a closed pipe; the next recv reports the exit.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(RuntimeError::Io(e)),
        }
    }

    fn recv(&mut self, deadline: Option<Instant>) -> Result<Received, RuntimeError> {
        match self
            .reader
            .read_frame_until(deadline)
            .map_err(RuntimeError::Io)?
        {
            ReadOutcome::Frame(bytes) => serde_json::from_slice(&bytes)
                .map(Received::Message)
                .map_err(|e| RuntimeError::Protocol(format!("bad message from the worker: {e}"))),
            ReadOutcome::TimedOut => Ok(Received::TimedOut),
            ReadOutcome::Closed => Ok(Received::Exited),
        }
    }

    /// What the worker printed (used when it fails to start).
    fn capture_text(&self) -> String {
        let raw = std::fs::read(self.capture.path()).unwrap_or_default();
        String::from_utf8_lossy(&raw).into_owned()
    }

    /// Waits for a worker that closed its pipe to finish exiting (killing it if it lingers).
    fn wait_exit(&mut self) -> ExitInfo {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return exit_info(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                _ => return self.kill(),
            }
        }
    }

    /// Kills the worker's whole process group and reaps it.
    fn kill(&mut self) -> ExitInfo {
        // SAFETY: signalling a process group we created; errors (already gone) are fine.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
        }
        match self.child.wait() {
            Ok(status) => exit_info(status),
            Err(_) => ExitInfo::Unknown,
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitInfo::Code(c),
        (None, Some(s)) => ExitInfo::Signal(s),
        _ => ExitInfo::Unknown,
    }
}

/// Answers the calls a block makes back into the host while it runs.
pub trait HostHandler {
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String>;
}

/// For callers that offer no host calls (e.g. `vis exec` before the gateway exists).
pub struct NoHostCalls;

impl HostHandler for NoHostCalls {
    fn call(&mut self, method: &str, _params: Value) -> Result<Value, String> {
        Err(format!("the host offers no '{method}' call in this mode"))
    }
}

/// Interrupts the running block from another thread (e.g. a Ctrl-C handler).
#[derive(Clone)]
pub struct Interrupter {
    pid: Arc<AtomicI32>,
    requested: Arc<AtomicBool>,
}

impl Interrupter {
    pub fn interrupt(&self) {
        self.requested.store(true, Ordering::SeqCst);
        let pid = self.pid.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: sending SIGUSR2 to our worker; the worker forwards it as SIGINT.
            unsafe {
                libc::kill(pid, libc::SIGUSR2);
            }
        }
    }
}

/// What the first block after a (re)start is told about the new worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreNotice {
    /// Why there is a new worker: `None` for a first start, else e.g. "after a crash".
    pub restart_reason: Option<String>,
    pub report: RestoreReport,
    /// Set when the worker could only start without the non-bundled extensions: why.
    pub extensions_skipped: Option<String>,
}

impl RestoreNotice {
    pub fn to_json(&self) -> Value {
        json!({
            "restart_reason": self.restart_reason,
            "ok": self.report.ok,
            "failed": self.report.failed.iter()
                .map(|(n, e)| json!({"name": n, "error": e}))
                .collect::<Vec<_>>(),
            "extensions_skipped": self.extensions_skipped,
        })
    }

    /// What the first block after a start is told, one line each (maybe nothing).
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.line().into_iter().collect();
        if let Some(why) = &self.extensions_skipped {
            lines.push(format!(
                "[vis] only the bundled extensions are loaded: the worker did not start with the others ({}); fix or remove the extension, and the next new worker loads them again",
                why.trim()
            ));
        }
        lines
    }

    /// The one line shown at the top of the block's output, if there is anything to say.
    pub fn line(&self) -> Option<String> {
        let total = self.report.ok.len() + self.report.failed.len();
        let reason = match &self.restart_reason {
            Some(r) => format!(" ({r})"),
            None if total == 0 => return None,
            None => String::new(),
        };
        let mut line = format!("[vis] new worker{reason}: ");
        if total == 0 {
            line.push_str("no definitions to restore; variables from earlier blocks are gone");
        } else {
            let noun = if self.report.ok.len() == 1 {
                "definition"
            } else {
                "definitions"
            };
            line.push_str(&format!("restored {} {noun}", self.report.ok.len()));
            if !self.report.ok.is_empty() {
                line.push_str(": ");
                line.push_str(&short_list(&self.report.ok, 12));
            }
            if !self.report.failed.is_empty() {
                let failed: Vec<String> = self
                    .report
                    .failed
                    .iter()
                    .map(|(n, e)| format!("{n} ({e})"))
                    .collect();
                line.push_str(&format!(
                    "; {} failed: {}",
                    failed.len(),
                    short_list(&failed, 5)
                ));
            }
        }
        Some(line)
    }
}

fn short_list(items: &[String], max: usize) -> String {
    let mut out = items
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > max {
        out.push_str(&format!(", +{} more", items.len() - max));
    }
    out
}

/// One block to run.
#[derive(Debug, Clone)]
pub struct BlockRequest {
    pub code: String,
    /// e.g. `<t3/i1>`: tracebacks name it.
    pub filename: String,
    /// The `session` dict (`restored` is filled in by the runtime).
    pub session: Value,
    pub output_limit: usize,
    pub artifact_path: PathBuf,
    pub artifact_dir: PathBuf,
    pub workspace_roots: Vec<PathBuf>,
    pub timeout: Duration,
}

/// How a block ended, and everything the caller needs to record it.
#[derive(Debug, Clone)]
pub struct BlockOutcome {
    pub status: Status,
    /// Exactly what the model gets back.
    pub output: String,
    pub artifact: Option<String>,
    pub defs_set: Vec<PersistedDef>,
    pub defs_deleted: Vec<String>,
    /// Set on the first block after a worker start.
    pub restored: Option<RestoreNotice>,
    /// The worker died or was killed during this block.
    pub worker_lost: Option<ExitInfo>,
    pub exec_micros: u64,
    pub wall: Duration,
}

/// Supervises one session's worker.
pub struct Runtime {
    opts: WorkerOptions,
    worker: Option<WorkerProcess>,
    defs: Vec<PersistedDef>,
    restart_reason: Option<String>,
    pending_notice: Option<RestoreNotice>,
    pid: Arc<AtomicI32>,
    interrupt_requested: Arc<AtomicBool>,
    next_exec_id: u64,
    /// The visible manifest the worker last reported (empty before the first start).
    manifest: Vec<ManifestEntry>,
}

impl Runtime {
    /// A runtime for a session whose persisted definitions are `defs` (in definition order).
    /// The worker starts on first use.
    pub fn new(opts: WorkerOptions, defs: Vec<PersistedDef>) -> Runtime {
        Runtime {
            opts,
            worker: None,
            defs,
            restart_reason: None,
            pending_notice: None,
            pid: Arc::new(AtomicI32::new(0)),
            interrupt_requested: Arc::new(AtomicBool::new(false)),
            next_exec_id: 1,
            manifest: Vec::new(),
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

    /// The visible manifest (see [`Runtime::manifest_entries`]), built for `apropos`, `doc`
    /// and catalog rendering.
    pub fn manifest(&self) -> Result<Manifest, crate::catalog::CatalogError> {
        Manifest::new(self.manifest.clone())
    }

    pub fn worker_pid(&self) -> Option<i32> {
        self.worker.as_ref().map(|w| w.pid)
    }

    pub fn interrupter(&self) -> Interrupter {
        Interrupter {
            pid: self.pid.clone(),
            requested: self.interrupt_requested.clone(),
        }
    }

    /// Starts the worker (if none is running) and restores the persisted definitions.
    pub fn start(&mut self) -> Result<(), RuntimeError> {
        if self.worker.is_some() {
            return Ok(());
        }
        // An extension that kills or hangs the worker while it loads must not lock the
        // session out: start again with only the bundled extensions and say why.
        let (mut worker, extensions_skipped) = match WorkerProcess::spawn(&self.opts, false) {
            Ok(worker) => (worker, None),
            Err(RuntimeError::WorkerStart(first)) => match WorkerProcess::spawn(&self.opts, true) {
                Ok(worker) => (worker, Some(first)),
                Err(e) => {
                    return Err(RuntimeError::WorkerStart(format!(
                        "{first}; with only the bundled extensions: {e}"
                    )))
                }
            },
            Err(e) => return Err(e),
        };
        let safe_mode = extensions_skipped.is_some();
        self.pid.store(worker.pid, Ordering::SeqCst);
        let report = if self.defs.is_empty() {
            RestoreReport::default()
        } else {
            worker.send(&HostMessage::Restore {
                defs: self.defs.clone(),
            })?;
            let deadline = Instant::now() + self.opts.restore_timeout;
            match worker.recv(Some(deadline))? {
                Received::Message(WorkerMessage::Restored(report)) => report,
                Received::Message(other) => {
                    return Err(RuntimeError::Protocol(format!(
                        "expected restored, got {other:?}"
                    )))
                }
                Received::TimedOut | Received::Exited => {
                    // A definition that hangs or crashes at definition time must not make the
                    // session unusable: start clean and say which definitions were skipped.
                    let exit = worker.kill();
                    let mut fresh = WorkerProcess::spawn(&self.opts, safe_mode)?;
                    self.pid.store(fresh.pid, Ordering::SeqCst);
                    std::mem::swap(&mut worker, &mut fresh);
                    let why =
                        format!("restoring definitions stopped the worker ({exit}); none restored");
                    RestoreReport {
                        ok: vec![],
                        failed: self
                            .defs
                            .iter()
                            .map(|d| (d.name.clone(), why.clone()))
                            .collect(),
                    }
                }
            }
        };
        self.pending_notice = Some(RestoreNotice {
            restart_reason: self.restart_reason.take(),
            report,
            extensions_skipped,
        });
        self.manifest = std::mem::take(&mut worker.manifest);
        self.worker = Some(worker);
        Ok(())
    }

    /// Kills the worker (variables are lost); the next block starts a new one and restores
    /// the definitions.
    pub fn kill_worker(&mut self, reason: &str) -> Option<ExitInfo> {
        let mut worker = self.worker.take()?;
        self.pid.store(0, Ordering::SeqCst);
        let exit = worker.kill();
        self.restart_reason = Some(reason.to_string());
        Some(exit)
    }

    /// Runs one block. `Err` means the block could not be run at all (bad input, a worker
    /// that cannot start); everything that happens to a running block is an `Ok` outcome.
    pub fn exec(
        &mut self,
        req: BlockRequest,
        host: &mut dyn HostHandler,
    ) -> Result<BlockOutcome, RuntimeError> {
        validate_code(&req.code)?;
        let started = Instant::now();
        self.start()?;
        let notice = self.pending_notice.take();
        let mut session = req.session.clone();
        if let Value::Object(map) = &mut session {
            map.insert(
                "restored".into(),
                notice.as_ref().map(|n| n.to_json()).unwrap_or(Value::Null),
            );
        }
        let id = self.next_exec_id;
        self.next_exec_id += 1;
        let exec = ExecRequest {
            id,
            code: req.code.clone(),
            filename: req.filename.clone(),
            session,
            output_limit: req.output_limit,
            artifact_path: req.artifact_path.to_string_lossy().into_owned(),
            artifact_dir: req.artifact_dir.to_string_lossy().into_owned(),
            workspace_roots: req
                .workspace_roots
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
        };
        self.interrupt_requested.store(false, Ordering::SeqCst);
        let ctx = WaitContext {
            grace: self.opts.interrupt_grace,
            memory_limit_mb: self.opts.memory_limit_mb,
            interrupter: self.interrupter(),
            interrupt_requested: &self.interrupt_requested,
        };
        let worker = self
            .worker
            .as_mut()
            .ok_or_else(|| RuntimeError::Worker("no worker".into()))?;
        let waited = wait_for_result(worker, &exec, &req, host, ctx);
        let WaitEnd {
            status,
            mut result,
            lost,
            trailer,
        } = match waited {
            Ok(w) => w,
            Err(e) => {
                // The worker's state is unknown after a protocol failure: replace it.
                self.kill_worker("after a protocol error");
                return Err(e);
            }
        };
        let lost = lost.map(|(exit, reason)| {
            self.worker = None;
            self.pid.store(0, Ordering::SeqCst);
            self.restart_reason = Some(reason);
            exit
        });
        result.status = status;
        self.apply_def_changes(&result);
        if let Some(manifest) = result.manifest.take() {
            self.manifest = manifest;
        }
        let mut output = String::new();
        for line in notice.iter().flat_map(RestoreNotice::lines) {
            output.push_str(&line);
            output.push('\n');
        }
        output.push_str(&result.output);
        if let Some(trailer) = trailer {
            if !output.is_empty() && !output.ends_with('\n') {
                output.push('\n');
            }
            output.push_str(&trailer);
            output.push('\n');
        }
        Ok(BlockOutcome {
            status,
            output,
            artifact: result.artifact,
            defs_set: result.defs_set,
            defs_deleted: result.defs_deleted,
            restored: notice,
            worker_lost: lost,
            exec_micros: result.exec_micros,
            wall: started.elapsed(),
        })
    }

    fn apply_def_changes(&mut self, result: &ExecResult) {
        for name in &result.defs_deleted {
            self.defs.retain(|d| &d.name != name);
        }
        for def in &result.defs_set {
            self.defs.retain(|d| d.name != def.name);
            self.defs.push(def.clone());
        }
    }

    /// Stops the worker.
    pub fn shutdown(&mut self) {
        if let Some(mut worker) = self.worker.take() {
            let _ = worker.send(&HostMessage::Shutdown);
            worker.kill();
        }
        self.pid.store(0, Ordering::SeqCst);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// How waiting for a block's result ended.
struct WaitEnd {
    status: Status,
    result: ExecResult,
    /// The worker died or was killed: it must be replaced, for this reason.
    lost: Option<(ExitInfo, String)>,
    trailer: Option<String>,
}

struct WaitContext<'a> {
    grace: Duration,
    memory_limit_mb: u64,
    interrupter: Interrupter,
    interrupt_requested: &'a AtomicBool,
}

fn wait_for_result(
    worker: &mut WorkerProcess,
    exec: &ExecRequest,
    req: &BlockRequest,
    host: &mut dyn HostHandler,
    ctx: WaitContext<'_>,
) -> Result<WaitEnd, RuntimeError> {
    worker.send(&HostMessage::Exec(exec.clone()))?;
    let timeout_at = Instant::now() + req.timeout;
    // Set once an interrupt (timeout or user) has been sent: when the grace period ends.
    let mut kill_at: Option<Instant> = None;
    let mut timed_out = false;
    let poll_slice = Duration::from_millis(100);
    loop {
        let now = Instant::now();
        let mut next = now + poll_slice;
        if !timed_out {
            next = next.min(timeout_at);
        }
        if let Some(k) = kill_at {
            next = next.min(k);
        }
        match worker.recv(Some(next))? {
            Received::Message(WorkerMessage::Result(result)) if result.id == exec.id => {
                let (status, trailer) = match (result.status, timed_out) {
                    (Status::Interrupted, true) | (Status::Error, true) => (
                        Status::Timeout,
                        Some(format!(
                            "[vis] timeout: the block ran longer than {} and was interrupted; the worker and its variables are intact.",
                            seconds(req.timeout)
                        )),
                    ),
                    (Status::Interrupted, false) => (
                        Status::Interrupted,
                        Some("[vis] interrupted: the block was stopped on request; the worker and its variables are intact.".into()),
                    ),
                    (s, _) => (s, None),
                };
                return Ok(WaitEnd {
                    status,
                    result,
                    lost: None,
                    trailer,
                });
            }
            Received::Message(WorkerMessage::Request { id, method, params }) => {
                let reply = match host.call(&method, params) {
                    Ok(v) => HostMessage::Response {
                        id,
                        result: Some(v),
                        error: None,
                    },
                    Err(e) => HostMessage::Response {
                        id,
                        result: None,
                        error: Some(e),
                    },
                };
                worker.send(&reply)?;
            }
            Received::Message(WorkerMessage::Fatal { message }) => {
                return Err(RuntimeError::Worker(message));
            }
            Received::Message(_) => {}
            Received::TimedOut => {
                let now = Instant::now();
                if let Some(k) = kill_at {
                    if now >= k {
                        let exit = worker.kill();
                        let why = if timed_out { "timeout" } else { "interrupt" };
                        let status = if timed_out {
                            Status::Timeout
                        } else {
                            Status::Interrupted
                        };
                        let what = if timed_out {
                            format!(
                                "timeout: the block ran longer than {} and",
                                seconds(req.timeout)
                            )
                        } else {
                            "interrupted: the block".into()
                        };
                        let trailer = format!(
                            "[vis] {what} did not stop within {} of the interrupt, so the worker was killed; variables are lost and definitions are restored before the next block.",
                            seconds(ctx.grace)
                        );
                        let result = lost_result(exec, worker.capture.path(), req);
                        let reason = format!("after a {why}: the previous one was killed");
                        return Ok(WaitEnd {
                            status,
                            result,
                            lost: Some((exit, reason)),
                            trailer: Some(trailer),
                        });
                    }
                } else if now >= timeout_at {
                    timed_out = true;
                    ctx.interrupter.interrupt();
                    kill_at = Some(now + ctx.grace);
                } else if ctx.interrupt_requested.load(Ordering::SeqCst) {
                    kill_at = Some(now + ctx.grace);
                }
            }
            Received::Exited => {
                let exit = worker.wait_exit();
                let result = lost_result(exec, worker.capture.path(), req);
                let mut trailer = format!(
                    "[vis] crashed: the worker {exit} while running this block; variables are lost and definitions are restored before the next block."
                );
                if exit == ExitInfo::Signal(libc::SIGKILL) {
                    trailer.push_str(&format!(
                        " (SIGKILL often means memory ran out; the worker's limit is {} MiB.)",
                        ctx.memory_limit_mb
                    ));
                }
                let reason = format!("after a crash: the previous one {exit}");
                return Ok(WaitEnd {
                    status: Status::Crashed,
                    result,
                    lost: Some((exit, reason)),
                    trailer: Some(trailer),
                });
            }
        }
    }
}

/// The result of a block whose worker died: whatever it printed before, capped.
fn lost_result(exec: &ExecRequest, capture: &Path, req: &BlockRequest) -> ExecResult {
    let (capped, saved) = cap_file(capture, req.output_limit, &req.artifact_path)
        .unwrap_or_else(|_| (cap_output(b"", req.output_limit, None), false));
    let artifact = saved.then(|| exec.artifact_path.clone());
    ExecResult {
        id: exec.id,
        status: Status::Crashed,
        output: capped.text,
        cut_chars: capped.cut_chars,
        total_chars: capped.total_chars,
        artifact,
        defs_set: vec![],
        defs_deleted: vec![],
        exec_micros: 0,
        manifest: None,
    }
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
            },
            extensions_skipped: Some("the worker exited with code 7".into()),
        };
        assert!(n.line().unwrap().ends_with("f11, +8 more"));
        let lines = n.lines();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].starts_with("[vis] only the bundled extensions are loaded: the worker did not start with the others (the worker exited with code 7)"));
        assert_eq!(quiet.lines(), Vec::<String>::new());
    }
}
