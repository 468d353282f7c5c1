//! Sub-sessions as the runner sees them: `spawn()` and the calls on its `Sub` go to the
//! session's [`SubSessions`] (implemented by `gateway::children`: the runtime does not depend
//! on the gateway), and a block that is interrupted takes the children it started with it.

use tokio::sync::mpsc::UnboundedSender;

use std::future::Future;
use std::pin::Pin;

use crate::protocol::{CallAnswer, Event, HostRequest};

/// What a sub-session call answers, when it is ready (the runner's `ToolFuture` of it).
pub type SubFuture = Pin<Box<dyn Future<Output = CallAnswer> + Send + 'static>>;

/// The block a sub-session call comes from.
pub struct CallOrigin {
    pub turn: i64,
    pub iteration: i64,
    /// The parent turn's events (a child's start and end are reported there).
    pub live: Option<UnboundedSender<Event>>,
}

/// A session's children: answers `spawn`, `sub.wait`, `sub.status`, `sub.cancel`, `sub.list`.
pub trait SubSessions: Send + Sync {
    /// Answers one call; the block waits for the answer (a `sub.wait` until the child ends or
    /// its timeout passes; the task is aborted if the block ends first).
    fn answer(&self, origin: CallOrigin, request: HostRequest) -> SubFuture;
    /// The block `turn`/`iteration` was interrupted or timed out: the children it started
    /// and that still run are cancelled.
    fn block_interrupted(&self, turn: i64, iteration: i64);
}
