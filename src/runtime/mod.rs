//! The embedded interpreter and its supervision.
//!
//! Each live session's CPython runs in a child process of the same binary (`vis worker`),
//! because a block can hang, `os._exit`, segfault or exhaust memory, and the host must
//! survive all of it.
//!
//! - `supervisor`: the async host side (start, restore, run a block with deadlines, interrupt,
//!   kill, restart); `host` wraps it for synchronous callers;
//! - `process`: spawning a worker and killing it with everything it started;
//! - `channel`: the host's end of the pipes (one reader, host calls routed by id);
//! - `wire` and `frame`: the messages and their framing;
//! - `worker` and `launcher`: the other end (the PID namespace, the embedded interpreter);
//! - `output` caps what a block prints; `env` keeps secrets out of the worker;
//! - `cache`: Vis's cache directory, written by the host for workers (which only read it);
//! - `defs`: what a block may persist (the host's own cut of its source) and the size limits;
//!   `restore`: bringing the definitions back in a new worker.
//!
//! A block is a [`crate::protocol::Block`] and ends as a [`crate::protocol::BlockResult`]: the
//! same two types from the caller through the pipe into Python and back (see
//! `crate::protocol` for who fills in what). The runtime owns no look-alikes of them.

pub mod cache;
pub mod channel;
pub mod defs;
mod env;
pub mod frame;
mod host;
mod launcher;
mod native;
mod output;
mod process;
mod promote;
mod restore;
mod supervisor;
mod wire;
mod worker;

pub use cache::cache_dir;
pub use channel::{CallAnswer, CallError, HostCall, HostCallSink};
pub use host::{HostHandler, Interrupter, NoHostCalls, Runtime};
pub use output::{group_thousands, DEFAULT_ARTIFACT_QUOTA, DEFAULT_OUTPUT_LIMIT};
pub use process::kill_tree;
pub use supervisor::{
    validate_code, Supervisor, WorkerOptions, DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIMEOUT,
};
pub use wire::Isolation;
pub use worker::{run_worker, WorkerArgs};

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
    #[error("the path {0:?} is not valid UTF-8, so it cannot be sent to the worker; use a workspace and data directory whose paths are UTF-8")]
    NonUtf8Path(std::path::PathBuf),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}
