//! What a block run is given besides the session ([`BlockSpec`], [`BlockLimits`]) and what it
//! gives back ([`Ran`], or [`RunError`] when the store fails): the runner's inputs and
//! outputs, shared by every caller (`vis chat`, `vis serve`, `vis exec`, `vis mcp`).

use std::time::Duration;

use tokio::sync::mpsc;

use crate::images::ImageLimits;
use crate::protocol::{BlockResult, Event, IterationStatus, ShownImage, Utilization};
use crate::runtime::RuntimeError;
use crate::store::StoreError;

/// What a block gets besides its code.
#[derive(Debug, Clone)]
pub struct BlockLimits {
    pub output_limit: usize,
    pub timeout: Duration,
    pub artifact_quota: u64,
    /// `[images]`: what `show()` may attach.
    pub images: ImageLimits,
}

/// One block to run.
pub struct BlockSpec {
    pub turn: i64,
    pub iteration: i64,
    pub code: String,
    /// `session["utilization"]` (the conversation's owner knows it).
    pub utilization: Utilization,
    /// Where the block's output goes while it runs, as `Event::BlockOutput` (for display; the
    /// result is the same without it).
    pub live: Option<mpsc::UnboundedSender<Event>>,
}

/// How a block ended, as recorded.
#[derive(Debug)]
pub struct Ran {
    pub turn: i64,
    pub iteration: i64,
    pub status: IterationStatus,
    /// Exactly what the model gets back (after the owner's additions).
    pub output: String,
    pub wall: Duration,
    /// The block's result as the supervisor settled it (`None` when it could not run).
    pub result: Option<BlockResult>,
    /// The tool result's place in the conversation, when it answers a model call.
    pub seq: Option<i64>,
    /// Why the block could not run because the runtime failed (it is recorded as crashed).
    pub failure: Option<RuntimeError>,
    /// The block ran but recording it failed (a full disk): its output is all there is.
    pub unrecorded: Option<StoreError>,
    /// The images the block showed (`show()`), stored and attached to its tool result.
    pub images: Vec<ShownImage>,
}

/// Why a block could not be run or recorded: the store failed (the runtime's own failures
/// are part of [`Ran`]).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}
