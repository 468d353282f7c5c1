//! The embedded interpreter and its supervision.
//!
//! Each live session's CPython runs in a child process of the same binary (`vis worker`),
//! because a block can hang, `os._exit`, segfault or exhaust memory, and the host must
//! survive all of it. `host` is the Rust API that starts, feeds, interrupts, kills and
//! restarts workers; `worker` is the other end; `protocol` and `frame` are the wire between
//! them; `output` caps what a block prints; `env` keeps secrets out of the worker.

pub mod env;
pub mod frame;
pub mod host;
mod native;
pub mod output;
pub mod protocol;
pub mod worker;

pub use host::{
    BlockOutcome, BlockRequest, ExitInfo, HostHandler, Interrupter, NoHostCalls, RestoreNotice,
    Runtime, WorkerOptions, DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIMEOUT,
};
pub use output::DEFAULT_OUTPUT_LIMIT;
pub use protocol::{PersistedDef, RestoreReport, Status};

/// Errors of the runtime. `InvalidBlock` is for the model (it sent a block that cannot run);
/// the others mean the runtime itself failed and the caller should abort or retry.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    InvalidBlock(String),
    #[error("cannot start the worker {program}: {source}; check that the vis binary is intact")]
    Spawn {
        program: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("the Python worker failed to start: {0}")]
    WorkerStart(String),
    #[error("worker: {0}")]
    Worker(String),
    #[error("worker protocol: {0}")]
    Protocol(String),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}
