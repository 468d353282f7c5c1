//! The types every layer shares: a block and its result ([`Block`], [`BlockResult`], [`Status`]),
//! persisted definitions, how a worker ended, turn statuses and events, MCP tools as functions,
//! and the conversation with a model (assistant messages, tool calls, usage, stream events).
//!
//! No I/O here. The runtime carries the block types over its pipe (`runtime::wire`) and into
//! Python (their pyo3 conversions live with them); the providers produce the conversation
//! types; the store, the gateway, `vis exec`, `vis mcp`, `vis chat` and `vis serve` all speak
//! them, and take them from here rather than from `runtime`.

mod block;
mod conversation;
mod events;
mod fold;
mod host;
mod image;
mod mcp;
mod pyjson;
#[cfg(test)]
mod python_types;
mod restore;
mod session;
mod session_info;
mod tool;

pub use block::{Block, BlockResult, ExitInfo, PersistedDef, Status};
pub use conversation::{
    AssistantMessage, ContentBlock, HistoryItem, RequestCost, StreamEvent, ToolCall, ToolSpec,
    Usage,
};
pub use events::{Event, TurnStatus};
pub use fold::{Before, FoldReceipt, FoldSpan, Measurement, SessionRead};
pub use host::{CallAnswer, CallError, HostReply, HostRequest, SpawnParams};
pub use image::{human_size, ImageFormat, ImageRef, ShownImage};
pub use mcp::{McpFunction, McpNamespace, McpParam};
pub use pyjson::{json_from_py, json_into_py};
pub use restore::{RestoreNotice, RestoreReport};
pub use session::{IterationRecord, IterationRow, IterationStatus, TurnKind, TurnRow};
pub use session_info::{
    level, FoldCandidate, FoldHint, Level, SessionCounts, SessionInfo, Utilization,
    AUTO_COMPRESS_ABOVE,
};
pub use tool::{code_of, tool_spec, ToolCallError, TOOL_NAME};

/// `text` cut to at most `max` characters (with `…` when cut), for naming things in
/// one-line messages.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// A duration for messages: `3 s`, `1.5 s`.
pub fn format_seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", s as u64)
    } else {
        format!("{s:.1} s")
    }
}

/// `1234567` → `1,234,567`.
pub fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
