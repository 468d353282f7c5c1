//! The embedded interpreter and its supervision.
//!
//! Each live session's CPython runs in a child process of the same binary (`vis worker`),
//! because a block can hang, `os._exit`, segfault or exhaust memory, and the host must
//! survive all of it.
//!
//! The code is split by the side it runs on:
//! - `host/`: what runs in the gateway (supervisor, spawning, the channel, restore);
//! - `child/`: what runs in `vis worker` (the launcher and its sandbox, the interpreter
//!   threads, the native module);
//! - shared by both: `wire` (the messages and their frame codec), `output` (capping what a
//!   block prints), `cache` (Vis's cache directory: written by the host, read by workers),
//!   `defs` (what a block may persist: the host's own cut of its source, the size limits),
//!   `process` (killing a process and everything it started; ending like another process ended).
//!
//! A block is a [`crate::protocol::Block`] and ends as a [`crate::protocol::BlockResult`]: the
//! same two types from the caller through the pipe into Python and back (see
//! `crate::protocol` for who fills in what). The runtime owns no look-alikes of them.

pub mod cache;
pub mod child;
pub mod defs;
pub mod host;
mod output;
pub mod process;
pub mod wire;

pub use cache::cache_dir;
pub use child::run_worker;
pub use host::{
    validate_code, Answered, BlockLimits, BlockRunner, BlockSpec, CallOrigin, HostCall,
    HostCallSink, HostCalls, HostHandler, Interrupter, JobInfo, Jobs, Launched, LiveOutput,
    NoConversation, NoHostCalls, OutputWatcher, Ran, RunError, Runtime, ShutdownFuture,
    SubSessions, Supervisor, ToolFuture, ToolHub, Unavailable, WorkerOptions,
    DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIMEOUT, LIVE_CHUNK_BYTES, LIVE_INTERVAL,
};
pub use output::{group_thousands, DEFAULT_ARTIFACT_QUOTA, DEFAULT_OUTPUT_LIMIT};
pub use process::{exit_like, kill_tree};
pub use wire::{Isolation, WorkerArgs};

/// Errors of the runtime. `InvalidBlock` is for the model (it sent a block that cannot run);
/// the others mean the runtime itself failed and the caller should abort or retry.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    InvalidBlock(String),
    #[error("cannot start the worker {program}: {source}; check that vis-worker is installed beside vis and intact")]
    Spawn {
        program: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot start a worker in the workspace {path}: {source}; check that the directory exists"
    )]
    Workspace {
        path: std::path::PathBuf,
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
