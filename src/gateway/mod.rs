//! The gateway: a chat session with a model in the loop.
//!
//! A [`ChatSession`] has one session's [`BlockRunner`] (its store, its worker, its MCP
//! servers), its provider client and its [`Conversation`] (the one owner of what requests
//! carry). [`ChatSession::run_turn`] is the loop of SPEC §9: the person's message, then
//! requests and `python_execution` calls until the model answers without one (`turn`).
//! Everything a turn does is written to the store as it completes, so a gateway killed at any
//! moment resumes with every completed iteration ([`ChatSession::open`] repairs a turn that
//! was left running: `repair`).
//!
//! Data flow of one request:
//!
//! ```text
//! store ─► Conversation (history::Entry: items + token estimates, folds applied)
//!        ─► assemble::Assembler (cached encodings) ─► providers::Provider::stream
//!        ─► AssistantMessage ─► store ─► each call: runtime::BlockRunner::run_block
//!           (host calls: calls::ConversationCalls) ─► iteration + tool result ─► next request
//! ```
//!
//! - `session`: `impl ChatSession`, every method;
//! - `turn`: one turn's loop; `request`: one model request of it (its clock, its health record,
//!   what its finish reason means);
//! - `children`: the sub-sessions a block starts with `spawn()`;
//! - `conversation`: the conversation's state; `fold`: folding it; `calls`: what a block asks
//!   of it; `history`: its items; `assemble`: request bodies; `prompt`: the system text.

pub mod assemble;
mod calls;
mod children;
mod conversation;
pub mod fold;
pub mod history;
pub mod prompt;
mod repair;
mod request;
mod session;
mod turn;

use std::time::Duration;

use crate::catalog::CatalogError;
use crate::providers::CachePrices;
use crate::providers::{Provider, ProviderError, ProviderSettings};
use crate::runtime::{BlockRunner, RunError, RuntimeError, WorkerOptions};
use crate::store::StoreError;

pub use calls::MAX_GATEWAY_CALLS_PER_BLOCK;
pub use children::{sub_sessions_for, SpawnSettings, MAX_CHILD_ITERATIONS};
pub use conversation::Conversation;
pub use fold::{
    receipt_line, FoldError, LimitError, DEFAULT_GIST_MAX_TOKENS, MAX_FOLDS_PER_REQUEST,
};
pub use turn::{EventSink, ExecEnd, TurnEnd};

/// Default cap on iterations (tool calls) per turn.
pub const DEFAULT_MAX_ITERATIONS: u32 = 100;
/// Default `max_tokens` for Anthropic (it requires one).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 16_000;

/// Everything a chat session needs besides the store.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    pub provider: ProviderSettings,
    pub worker: WorkerOptions,
    pub max_iterations: u32,
    pub max_output_tokens: u32,
    /// Anthropic extended thinking, off when `None`.
    pub thinking_budget: Option<u32>,
    pub block_timeout: Duration,
    pub output_limit: usize,
    pub catalog_budget: usize,
    pub folding: FoldSettings,
    /// Relative prices of cached input for this provider and model (issue 24): health
    /// records weigh requests by them; fold receipts and hints price re-caching with them.
    pub cache_prices: CachePrices,
    /// `[checkpoints]` (issue 25): what the session records of its workspace.
    pub checkpoints: crate::checkpoints::CheckpointSettings,
    /// `[images]`: what `show()` may attach.
    pub images: crate::images::ImageLimits,
}

/// `[folding]` settings (and `vis chat --introspection`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldSettings {
    /// `read_session` returns originals only when this is on.
    pub introspection: bool,
    /// Gists longer than this many o200k tokens are rejected.
    pub gist_max_tokens: u64,
    /// Overrides of the model table (see `gateway::fold::measure`).
    pub input_limit: Option<u64>,
    pub auto_compress_above: Option<u64>,
}

impl Default for FoldSettings {
    fn default() -> Self {
        FoldSettings {
            introspection: false,
            gist_max_tokens: fold::DEFAULT_GIST_MAX_TOKENS,
            input_limit: None,
            auto_compress_above: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("the catalog: {0}")]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("the stored conversation is damaged at item {seq} ({detail}); it was left as it is — export it with `vis sessions export` and start a new session")]
    CorruptHistory { seq: i64, detail: String },
    #[error("the message is empty: type something for the model")]
    EmptyMessage,
    #[error("the workspace {0} of this session no longer exists; pass --workspace DIR to move the session")]
    WorkspaceGone(String),
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoints::CheckpointError),
}

/// A session with a model: the conversation, the block runner, the provider.
pub struct ChatSession {
    id: String,
    /// What its requests name their prompt cache by (a fork shares its original's).
    cache_key: String,
    /// The session's store, worker and MCP servers.
    runner: BlockRunner,
    conversation: Conversation,
    /// Made at the first request (so inspecting a session needs no API key).
    provider: Option<Provider>,
    settings: ChatSettings,
    /// Cancelled when the gateway shuts down: turns stop before their next request (the
    /// running block may finish).
    drain: tokio_util::sync::CancellationToken,
    /// Whether the MCP servers were started and asked for their tools yet.
    mcp_listed: bool,
    /// The context window the server told about (`None`: it did not, or was not asked).
    server_window: Option<crate::providers::ServerWindow>,
    /// Whether this session's start asked the server and recorded the limits it runs with.
    limits_settled: bool,
    /// The request bodies the prompt cache could reuse (for the expected cache reads).
    cache: request::CacheTracker,
    /// The sub-sessions its blocks start (`spawn()`).
    children: std::sync::Arc<children::Children>,
    /// How deep the session is among sub-sessions (0: no block spawned it).
    depth: u32,
}

/// `bytes` for a request body.
fn to_bytes(body: Vec<u8>) -> bytes::Bytes {
    bytes::Bytes::from(body)
}
