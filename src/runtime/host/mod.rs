//! The runtime as the host sees it: everything that runs in the gateway's process.
//!
//! - `supervisor`: start, restore, run a block with its deadlines, interrupt, kill, restart
//!   (async); `blocking` wraps it for synchronous callers (tests, benchmarks);
//! - `spawn`: starting a worker process (its sandbox planned, its capture file, its
//!   environment from `env`) and ending it;
//! - `channel`: the host's end of the pipes (one reader task, host calls routed by id);
//! - `restore`: bringing a session's definitions back in a new worker;
//! - `promote`: the one file the host writes for `promote()`.

mod blocking;
pub mod channel;
mod env;
mod promote;
mod restore;
mod spawn;
mod supervisor;

pub use blocking::{HostHandler, Interrupter, NoHostCalls, Runtime};
pub use channel::{CallAnswer, CallError, HostCall, HostCallSink};
pub use supervisor::{
    validate_code, Supervisor, WorkerOptions, DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIMEOUT,
};
