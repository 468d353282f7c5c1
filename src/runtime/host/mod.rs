//! The runtime as the host sees it: everything that runs in the gateway's process.
//!
//! - `runner`: the one place a block runs in a session (chat, serve, exec and mcp alike):
//!   builds the block, answers its host calls in one `match`, cancels what it started,
//!   records the iteration; `dispatch` is that `match` (what each host call means, who
//!   answers it), `spec` what a run is given and gives back;
//! - `supervisor`: one session's worker: start, restore, kill, restart (async); `exec` runs a
//!   block with its deadlines and interrupts, `settle` decides its status in one table,
//!   `mcp_tools` forwards the MCP servers' tools; `blocking` wraps it all for synchronous
//!   callers (tests, benchmarks);
//! - `options`: how workers start ([`WorkerOptions`]);
//! - `spawn`: starting a worker process (launched early if the caller can, then told its
//!   workspace and sandbox, planned here; its capture file, its environment from `env`) and
//!   ending it;
//! - `channel`: the host's end of the pipes (one reader task, host calls routed by id);
//! - `restore`: bringing a session's definitions back in a new worker;
//! - `tail`: a running block's output as it arrives, for display (read by `exec`);
//! - `jobs`: the session's background jobs (`sh.background`) as the worker reports them;
//! - `promote`: the one file the host writes for `promote()`;
//! - `subs`: sub-sessions (`spawn()`) as the runner sees them ([`SubSessions`]).

mod blocking;
pub mod channel;
mod dispatch;
mod env;
mod exec;
pub mod jobs;
mod mcp_tools;
mod options;
mod promote;
mod restore;
mod runner;
mod settle;
mod show;
mod spawn;
mod spec;
mod subs;
mod supervisor;
mod tail;

pub use blocking::{HostHandler, Interrupter, NoHostCalls, Runtime};
pub use channel::{HostCall, HostCallSink};
pub use dispatch::{Answered, HostCalls, NoConversation, ToolFuture, ToolHub};
pub use exec::validate_code;
pub use jobs::{JobInfo, Jobs};
pub use options::{WorkerOptions, DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIMEOUT};
pub use runner::BlockRunner;
pub use spawn::Launched;
pub use spec::{BlockLimits, BlockSpec, Ran, RunError};
pub use subs::{CallOrigin, ShutdownFuture, SubSessions, Unavailable};
pub use supervisor::Supervisor;
pub use tail::{LiveOutput, OutputWatcher, LIVE_CHUNK_BYTES, LIVE_INTERVAL};
