//! The records the store's traits take and give: sessions and their counts, the chat
//! prefix, conversation items, request health, folds, forks and sub-session links. Plain
//! data, serializable for the commands that print them; no behaviour beyond small helpers.

use serde::Serialize;

use crate::protocol::{FoldReceipt, FoldSpan, IterationStatus, Measurement};

/// Turns `first..=last`: what a page of a session's records covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRange {
    pub first: i64,
    pub last: i64,
}

impl TurnRange {
    /// Every turn.
    pub const ALL: TurnRange = TurnRange {
        first: i64::MIN,
        last: i64::MAX,
    };
}

/// A session as stored.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRow {
    pub id: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub workspace_roots: Vec<String>,
}

/// A session with its counts, for listings.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub workspace_roots: Vec<String>,
    pub turns: i64,
    pub iterations: i64,
    pub defs: i64,
    /// The session whose block spawned this one (`None`: not a sub-session).
    pub parent_session: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    pub turns: i64,
    pub iterations: i64,
    /// Folds in force (absorbed ones not counted).
    pub folds: i64,
}

/// The prefix every request of a chat session starts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatPrefix {
    pub system: String,
    /// JSON: `{"name", "description", "parameters"}`.
    pub tool: String,
    pub catalog_hash: String,
    pub agents_md: Option<String>,
    pub tokens: i64,
}

/// Which model a session talks to (never its key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionModel {
    pub provider: String,
    pub model: String,
    pub base_url: Option<String>,
}

/// The input limit a chat session ran with, and where the figure came from (shown by
/// `vis sessions show`, so a guess is seen as one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputLimit {
    pub tokens: i64,
    /// `from the model table`, `the server's window of 8,192 tokens (llama.cpp /props n_ctx)`,
    /// `default for an unknown model; set [folding] input_limit`, …
    pub source: String,
}

/// The kinds of conversation items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryKind {
    User,
    Assistant,
    ToolResult,
    Notice,
}

impl HistoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryKind::User => "user",
            HistoryKind::Assistant => "assistant",
            HistoryKind::ToolResult => "tool_result",
            HistoryKind::Notice => "notice",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "user" => HistoryKind::User,
            "assistant" => HistoryKind::Assistant,
            "tool_result" => HistoryKind::ToolResult,
            "notice" => HistoryKind::Notice,
            _ => return None,
        })
    }
}

/// One conversation item as stored. For a tool result, `body` is the iteration's output and
/// `status` its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryRow {
    pub seq: i64,
    pub turn: i64,
    pub kind: HistoryKind,
    pub iteration: Option<i64>,
    pub call_id: Option<String>,
    pub body: String,
    pub status: Option<IterationStatus>,
    pub tokens: i64,
    pub meta: Option<String>,
    /// A tool result's images (`show()`), in order; their bytes by
    /// [`ImageStore::image`](super::ImageStore::image).
    pub images: Vec<crate::protocol::ImageRef>,
}

/// A conversation item to append (tool results go through
/// [`SessionRecords::finish_iteration`](super::SessionRecords::finish_iteration)).
#[derive(Debug, Clone)]
pub struct NewHistoryItem<'a> {
    pub turn: i64,
    pub kind: HistoryKind,
    pub body: &'a str,
    pub tokens: i64,
    pub meta: Option<&'a str>,
}

/// One model request's health record.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestRecord {
    pub seq: i64,
    pub turn: i64,
    pub provider: String,
    pub model: String,
    pub started_at: i64,
    pub latency_ms: i64,
    pub ttft_ms: Option<i64>,
    pub retries: i64,
    pub input_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub cache_creation_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub estimate_tokens: i64,
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub fold_measurement: Option<String>,
    /// Why the answer ended (`stop`, `tool_calls`, `length`, `end_turn`, `max_tokens`, …) as
    /// the provider sent it; `None` for a failed request or a provider that sent none.
    pub finish_reason: Option<String>,
    /// The input split by price (`providers::InputCost`); `None`: the provider did not report
    /// its cache reads (or the record predates schema 7).
    pub uncached_tokens: Option<i64>,
    /// Tokens written to the cache (0 for OpenAI-compatible servers, which charge nothing).
    pub cache_write_tokens: Option<i64>,
    /// The input's cost in uncached-token units at the session's cache prices.
    pub weighted_tokens: Option<f64>,
    /// How many input tokens should have come from the cache (the prefix shared with the
    /// previous answered request, see `providers::pricing::expected_cached`); `None`: no
    /// previous request to compare with in this process.
    pub expected_cached_tokens: Option<i64>,
    /// The cache reads fell far below the expected ones: a prefix bug (`None`: not judged).
    pub cache_miss: Option<bool>,
}

/// Totals of a session's model requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RequestTotals {
    /// Reported input tokens (cached included).
    pub input_tokens: i64,
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub requests: i64,
    pub failed: i64,
    /// The weighted input over the requests that have it (`None`: none has).
    pub weighted_tokens: Option<f64>,
    /// Requests flagged as cache misses.
    pub cache_misses: i64,
}

/// One fold as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoldRow {
    pub id: i64,
    pub turn: i64,
    pub iteration: Option<i64>,
    pub key: String,
    pub spans: Vec<FoldSpan>,
    pub gist: String,
    pub automatic: bool,
    pub absorbed_by: Option<i64>,
    pub receipt: FoldReceipt,
    pub group_id: i64,
    pub measurement: Measurement,
}

/// The model call an iteration answers: the call's id and the tool result's size (o200k
/// tokens) in the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAnswer {
    pub call_id: String,
    pub tokens: i64,
    /// Images the block showed; their bytes are already stored
    /// ([`ImageStore::put_image`](super::ImageStore::put_image)).
    pub images: Vec<crate::protocol::ImageRef>,
}

/// What [`SessionRecords::fork_session`](super::SessionRecords::fork_session) copies: session
/// `source` through turn `through` (inclusive) into the new session `new_id`, whose workspace is `roots`.
#[derive(Debug, Clone)]
pub struct ForkRequest<'a> {
    pub source: &'a str,
    pub through: i64,
    pub new_id: &'a str,
    pub roots: &'a [String],
}

/// What a fork copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ForkCopied {
    pub turns: i64,
    pub iterations: i64,
    pub history: i64,
    pub folds: i64,
    pub defs: i64,
}

/// Where a sub-session came from: the block that spawned it (issue 27 §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChildLink {
    pub child: String,
    pub parent: String,
    pub turn: i64,
    pub iteration: i64,
    pub task: String,
}

/// A sub-session as its parent lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChildRow {
    pub link: ChildLink,
    /// `queued`, `running`, `done`, `failed: …`, `cancelled`, `iteration limit` or
    /// `interrupted` (its gateway stopped while it ran).
    pub status: String,
    /// The final answer (`None` until it ends).
    pub answer: Option<String>,
    /// Reported tokens over its requests.
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub requests: i64,
}
