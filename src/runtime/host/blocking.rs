//! A synchronous face for the async [`Supervisor`], for callers without an event loop of their
//! own (tests, benchmarks, simple tools): it runs the supervisor on a private current-thread
//! tokio runtime and answers host calls with a [`HostHandler`].

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::options::WorkerOptions;
use super::supervisor::Supervisor;
use crate::catalog::{Manifest, ManifestEntry};
use crate::protocol::{Block, BlockResult, CallAnswer, ExitInfo, HostRequest, PersistedDef};
use crate::runtime::RuntimeError;

/// Answers the calls a block makes back into the host while it runs.
pub trait HostHandler {
    fn call(&mut self, request: HostRequest) -> CallAnswer;
}

/// For callers that offer no host calls.
pub struct NoHostCalls;

impl HostHandler for NoHostCalls {
    fn call(&mut self, request: HostRequest) -> CallAnswer {
        Err(format!(
            "the host offers no '{}' call in this mode",
            request.method()
        )
        .into())
    }
}

/// Answers one call: `promote()`'s write is the runtime's own (as in `runner`), the rest the
/// handler's.
fn answer(
    host: &mut dyn HostHandler,
    workspace: &Option<std::path::PathBuf>,
    request: HostRequest,
) -> CallAnswer {
    match request {
        HostRequest::WriteExtension { extension, text } => {
            super::promote::write_extension(workspace.as_deref(), &extension, &text)
        }
        other => host.call(other),
    }
}

/// Interrupts the running block from another thread (e.g. a Ctrl-C handler). An interrupt
/// that comes while no block runs applies to the next one, which then does not run.
#[derive(Clone)]
pub struct Interrupter {
    stop: Arc<Mutex<CancellationToken>>,
}

impl Interrupter {
    pub fn interrupt(&self) {
        if let Ok(stop) = self.stop.lock() {
            stop.cancel();
        }
    }
}

/// Supervises one session's worker, synchronously.
pub struct Runtime {
    tokio: tokio::runtime::Runtime,
    supervisor: Supervisor,
    stop: Arc<Mutex<CancellationToken>>,
}

impl Runtime {
    /// A runtime for a session whose persisted definitions are `defs` (in definition order).
    /// The worker starts on first use.
    ///
    /// # Panics
    /// If the operating system refuses to create the event loop's resources (out of file
    /// descriptors at start-up); nothing useful can run then.
    pub fn new(opts: WorkerOptions, defs: Vec<PersistedDef>) -> Runtime {
        #[allow(clippy::expect_used)]
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("cannot create the runtime's event loop");
        Runtime {
            tokio,
            supervisor: Supervisor::new(opts, defs),
            stop: Arc::new(Mutex::new(CancellationToken::new())),
        }
    }

    pub fn options(&self) -> &WorkerOptions {
        self.supervisor.options()
    }

    pub fn defs(&self) -> &[PersistedDef] {
        self.supervisor.defs()
    }

    pub fn python_version(&self) -> Option<&str> {
        self.supervisor.python_version()
    }

    pub fn manifest_entries(&self) -> &[ManifestEntry] {
        self.supervisor.manifest_entries()
    }

    pub fn manifest(&self) -> Result<Manifest, crate::catalog::CatalogError> {
        self.supervisor.manifest()
    }

    pub fn worker_pid(&self) -> Option<i32> {
        self.supervisor.worker_pid()
    }

    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    pub fn interrupter(&self) -> Interrupter {
        Interrupter {
            stop: self.stop.clone(),
        }
    }

    /// Starts the worker (if none is running) and restores the persisted definitions.
    pub fn start(&mut self) -> Result<(), RuntimeError> {
        let Runtime {
            tokio, supervisor, ..
        } = self;
        tokio.block_on(supervisor.start())
    }

    /// Kills the worker (variables are lost); the next block starts a new one.
    pub fn kill_worker(&mut self, reason: &str) -> Option<ExitInfo> {
        let Runtime {
            tokio, supervisor, ..
        } = self;
        tokio.block_on(supervisor.kill_worker(reason))
    }

    /// Runs one block; see [`Supervisor::exec`].
    pub fn exec(
        &mut self,
        block: Block,
        host: &mut dyn HostHandler,
    ) -> Result<BlockResult, RuntimeError> {
        let stop = match self.stop.lock() {
            Ok(stop) => stop.clone(),
            Err(_) => CancellationToken::new(),
        };
        let workspace = self.supervisor.options().workspace.clone();
        let Runtime {
            tokio, supervisor, ..
        } = self;
        let result = tokio.block_on(async {
            let (calls_tx, mut calls_rx) = tokio::sync::mpsc::unbounded_channel();
            let run = supervisor.exec(block, calls_tx, stop.clone());
            tokio::pin!(run);
            let outcome = loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(call) = calls_rx.recv() => {
                        let answer = answer(host, &workspace, call.request.clone());
                        call.reply(answer);
                    }
                }
            };
            // Calls still queued when the block ended are refused, as the runner does.
            while let Ok(call) = calls_rx.try_recv() {
                drop(call);
            }
            outcome
        });
        if stop.is_cancelled() {
            if let Ok(mut current) = self.stop.lock() {
                *current = CancellationToken::new();
            }
        }
        result
    }

    /// Stops the worker.
    pub fn shutdown(&mut self) {
        let Runtime {
            tokio, supervisor, ..
        } = self;
        tokio.block_on(supervisor.shutdown());
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}
