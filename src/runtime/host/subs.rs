//! Sub-sessions as the runner sees them: `spawn()` and the calls on its `Sub` go to the
//! session's [`SubSessions`] (implemented by `gateway::children`: the runtime does not depend
//! on the gateway), and a block that is interrupted takes the children it started with it.

use tokio::sync::mpsc::UnboundedSender;

use std::future::Future;
use std::pin::Pin;

use crate::catalog::ManifestEntry;
use crate::protocol::{CallAnswer, CallError, Event, HostRequest};

/// What a sub-session call answers, when it is ready (the runner's `ToolFuture` of it).
pub type SubFuture = Pin<Box<dyn Future<Output = CallAnswer> + Send + 'static>>;

/// The end of a session's children (see [`SubSessions::shutdown`]).
pub type ShutdownFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The block a sub-session call comes from.
pub struct CallOrigin {
    pub turn: i64,
    pub iteration: i64,
    /// The parent turn's events (a child's start and end are reported there).
    pub live: Option<UnboundedSender<Event>>,
    /// The lease fence the parent's writes are made under (`vis serve` nodes): its children
    /// write under the same lease (docs/scaling.md, "Fencing").
    pub fence: Option<crate::store::LeaseFence>,
}

/// A session's children: answers `spawn`, `sub.wait`, `sub.status`, `sub.cancel`, `sub.list`.
pub trait SubSessions: Send + Sync {
    /// Answers one call; the block waits for the answer (a `sub.wait` until the child ends or
    /// its timeout passes; the task is aborted if the block ends first).
    fn answer(&self, origin: CallOrigin, request: HostRequest) -> SubFuture;
    /// The block `turn`/`iteration` was interrupted or timed out: the children it started
    /// and that still run are cancelled.
    fn block_interrupted(&self, turn: i64, iteration: i64);
    /// The parent's manifest as its worker last reported it (`version` changes with it), told
    /// before each block: a child renders its catalog from it, so that its first request
    /// does not wait for its own worker.
    fn parent_manifest(&self, version: u64, entries: &[ManifestEntry]);
    /// The session is shutting down: every child still running is cancelled, and the future
    /// ends when they have stopped (their workers with them).
    fn shutdown(&self) -> ShutdownFuture<'_>;
}

/// For a host that has no model for sub-sessions (`vis mcp` without a configured provider):
/// every call is refused with the cause and the fix.
pub struct Unavailable {
    /// Why, and what to configure (after `METHOD: `).
    pub why: String,
}

impl SubSessions for Unavailable {
    fn answer(&self, _origin: CallOrigin, request: HostRequest) -> SubFuture {
        let refusal = Err(CallError(format!("{}: {}", request.method(), self.why)));
        Box::pin(async move { refusal })
    }

    fn block_interrupted(&self, _turn: i64, _iteration: i64) {}

    fn parent_manifest(&self, _version: u64, _entries: &[ManifestEntry]) {}

    fn shutdown(&self) -> ShutdownFuture<'_> {
        Box::pin(async {})
    }
}
