//! The types every layer shares: what a block is and how it ended, persisted definitions, and
//! the conversation with a model (assistant messages, tool calls, usage, stream events).
//!
//! No I/O here. The runtime's wire messages (`runtime::wire`) carry the block types; the
//! providers produce the conversation types; the store, the gateway, `vis chat` and `vis serve`
//! all speak them.

mod block;
mod conversation;

pub use block::{PersistedDef, RestoreReport, Status};
pub use conversation::{AssistantMessage, ContentBlock, StreamEvent, ToolCall, Usage};
