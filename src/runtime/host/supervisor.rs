//! Supervising one session's worker from async code: its lifecycle (start, restore, kill,
//! restart, shut down) and what it last reported (manifest, isolation).
//!
//! [`Supervisor`] owns the session's persisted definitions while it runs (the store is the
//! source of truth across processes; the caller hands them in and persists the changes each
//! outcome reports) and restarts a dead worker lazily before the next block. Running a block
//! is `exec.rs` (the loop) and `settle.rs` (the status table); the MCP tools a worker gets
//! are `mcp_tools.rs`; restores go through `restore.rs`.

use super::jobs::Jobs;
use super::options::WorkerOptions;
use super::restore::{await_restored, Outcome, RestorePlan, Stop, MAX_RESTORE_ATTEMPTS};
use super::spawn::{Launched, WorkerProcess};
use crate::catalog::{Manifest, ManifestEntry};
use crate::protocol::{
    ExitInfo, McpFunction, McpNamespace, PersistedDef, RestoreNotice, RestoreReport,
};
use crate::runtime::wire::{HostMessage, Isolation};
use crate::runtime::RuntimeError;

/// Supervises one session's worker.
pub struct Supervisor {
    pub(super) opts: WorkerOptions,
    pub(super) worker: Option<WorkerProcess>,
    pub(super) defs: Vec<PersistedDef>,
    pub(super) restart_reason: Option<String>,
    pub(super) pending_notice: Option<RestoreNotice>,
    pub(super) next_exec_id: u64,
    /// The visible manifest the worker last reported (empty before the first start).
    pub(super) manifest: Vec<ManifestEntry>,
    /// Bumped whenever `manifest` is replaced, so callers can tell a change cheaply.
    pub(super) manifest_version: u64,
    pub(super) isolation: Isolation,
    /// The MCP servers' tools as namespaces and functions (sent to every new worker).
    pub(super) mcp: Option<(Vec<McpNamespace>, Vec<McpFunction>)>,
    /// A worker process launched before the options were known ([`Supervisor::adopt`]),
    /// started by the next [`Supervisor::start`].
    pub(super) launched: Option<Launched>,
    /// The session's background jobs (they outlive blocks, not workers). The table is the
    /// one owner of their state, lost ones included: see [`Jobs::lose_running`].
    pub(super) jobs: Jobs,
}

impl Supervisor {
    /// A supervisor for a session whose persisted definitions are `defs` (in definition
    /// order). The worker starts on first use.
    pub fn new(opts: WorkerOptions, defs: Vec<PersistedDef>) -> Supervisor {
        let opts_jobs_max = opts.jobs_max;
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
            launched: None,
            jobs: Jobs::new(opts_jobs_max),
        }
    }

    /// Takes a worker process launched early (`Launched::new` with these options, while the
    /// caller was still reading its session): the next start sends it its settings instead
    /// of starting another. One launched for other options is dropped (and killed) then.
    pub fn adopt(&mut self, launched: Launched) {
        self.launched = Some(launched);
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

    /// The session's background jobs (`sh.background`).
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    /// Marks the jobs of a worker that ended lost (`why` it ended), for the next block.
    pub(super) fn lose_jobs(&self, why: &str) {
        self.jobs.lose_running(why);
    }

    pub fn is_running(&self) -> bool {
        self.worker.is_some()
    }

    /// Starts the worker (if none is running) and restores the persisted definitions.
    pub async fn start(&mut self) -> Result<(), RuntimeError> {
        if self.worker.is_some() {
            return Ok(());
        }
        // Whatever ended the last worker ended its jobs.
        let why = self
            .restart_reason
            .clone()
            .unwrap_or_else(|| "the worker ended".to_string());
        self.lose_jobs(&why);
        // An extension that kills or hangs the worker while it loads must not lock the
        // session out: start again with only the bundled extensions and say why.
        // The definitions go with the start, so the worker restores them right after `ready`.
        let mut plan = RestorePlan::new(&self.defs, self.opts.workspace.as_deref());
        let cache_dir = self.opts.worker_cache_dir();
        let message = || plan.message(cache_dir.as_deref());
        let first = match self.launched.take().filter(|l| l.fits(&self.opts)) {
            Some(launched) => WorkerProcess::start(launched, &self.opts, false, message()).await,
            None => WorkerProcess::spawn(&self.opts, false, message()).await,
        };
        let (mut worker, extensions_skipped) = match first {
            Ok(worker) => (worker, None),
            Err(RuntimeError::WorkerStart(first)) => {
                match WorkerProcess::spawn(&self.opts, true, message()).await {
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
        worker.channel.route_jobs(self.jobs.clone());
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
            *worker =
                WorkerProcess::spawn(&self.opts, safe_mode, plan.message(cache_dir.as_deref()))
                    .await?;
        }
    }

    /// Kills the worker (variables are lost); the next block starts a new one and restores
    /// the definitions.
    pub async fn kill_worker(&mut self, reason: &str) -> Option<ExitInfo> {
        let mut worker = self.worker.take()?;
        let exit = worker.kill().await;
        self.restart_reason = Some(reason.to_string());
        self.lose_jobs(reason);
        Some(exit)
    }
    /// Stops the worker and everything it started.
    pub async fn shutdown(&mut self) {
        if let Some(mut worker) = self.worker.take() {
            worker.channel.send(HostMessage::Shutdown);
            worker.kill().await;
            self.lose_jobs("the session ended");
        }
    }

    /// Kills the worker now, without waiting, in a process that exits after its shutdown:
    /// for a caller that has other work to do before it shuts down (then
    /// [`Supervisor::shutdown`] only reaps what the kernel ended meanwhile). `vis exec` does
    /// this once its block ran, so the reaping it waits for before it exits costs next to
    /// nothing, and no process it started is left for another to reap; nor does its exit wait
    /// for the capture file's last close ([`WorkerProcess::end_before_exit`]).
    pub fn stop_worker(&mut self) {
        if let Some(worker) = self.worker.as_mut() {
            worker.end_before_exit();
        }
    }
}
