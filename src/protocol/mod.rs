//! The types every layer shares: what a block is and how it ended, persisted definitions, and
//! the conversation with a model (assistant messages, tool calls, usage, stream events).
//!
//! No I/O here. The runtime's wire messages (`runtime::wire`) carry the block types; the
//! providers produce the conversation types; the store, the gateway, `vis chat` and `vis serve`
//! all speak them.

mod block;
mod conversation;
mod events;
mod mcp;

pub use block::{PersistedDef, RestoreReport, Status};
pub use conversation::{
    AssistantMessage, ContentBlock, HistoryItem, StreamEvent, ToolCall, ToolSpec, Usage,
};
pub use events::{Event, TurnStatus, REJECTED};
pub use mcp::{McpFunction, McpNamespace, McpParam};

/// `text` cut to at most `max` characters (with `…` when cut), for naming things in
/// one-line messages.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}
