//! The conversation with a model, in one provider-neutral form.
//!
//! Providers decode their streams into these types and encode them back into their own wire
//! format when the history is sent again; nothing here knows about HTTP or JSON shapes.

use serde::{Deserialize, Serialize};

/// Normalized token usage of one model request (SPEC §7, §9).
///
/// Every field is `None` when the provider did not report it: "unavailable" is never
/// replaced by zero, because a zero would look like a measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All input tokens of the request: for Anthropic input + cache creation + cache read,
    /// for OpenAI-compatible servers the prompt tokens.
    pub input_tokens: Option<u64>,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: Option<u64>,
    /// Input tokens written to the prompt cache (Anthropic).
    pub cache_creation_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

/// What a request's input cost by the cost model (issue 24), as its health record keeps it;
/// every field `None` when unavailable (the provider did not report its cache figures, or
/// there was no earlier request to compare with).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestCost {
    /// Input at the full price.
    pub uncached_tokens: Option<u64>,
    /// Input written to the cache (0 where writing is free).
    pub cache_write_tokens: Option<u64>,
    /// The input in uncached-token units at the session's cache prices.
    pub weighted_tokens: Option<f64>,
    /// Input that should have come from the cache (the prefix shared with the previous
    /// answered request).
    pub expected_cached_tokens: Option<u64>,
    /// The cache reads fell far below the expected ones: a prefix bug.
    pub cache_miss: Option<bool>,
}

impl Usage {
    /// True when the provider reported input usage.
    pub fn has_input(&self) -> bool {
        self.input_tokens.is_some()
    }
}

/// One call of a tool, as the model sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id (`call_…`, `toolu_…`); the tool result refers to it.
    pub id: String,
    pub name: String,
    /// The arguments exactly as received (a JSON text, possibly malformed: the gateway
    /// answers a malformed one with a correction rather than failing).
    pub arguments: String,
}

/// One piece of an assistant message, in the order the model produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    /// Anthropic extended thinking; sent back verbatim (with its signature) in later requests.
    Thinking {
        thinking: String,
        signature: String,
    },
    /// Anthropic redacted thinking; sent back verbatim.
    RedactedThinking {
        data: String,
    },
    ToolCall(ToolCall),
}

/// What the model answered in one response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantMessage {
    pub blocks: Vec<ContentBlock>,
    /// Reasoning text some OpenAI-compatible servers stream beside the answer
    /// (`reasoning_content`, `reasoning`). Shown to the user, kept apart from the answer, and
    /// never sent back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

impl AssistantMessage {
    /// The answer's text (all text blocks, in order).
    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.blocks.iter().filter_map(|b| match b {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls().next().is_some()
    }
}

/// The one tool, as every provider is told about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// One item of the conversation, in the order it is sent (SPEC §9). Providers group and
/// encode these into their own messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HistoryItem {
    /// The person's message (starts a turn).
    User {
        text: String,
    },
    Assistant(AssistantMessage),
    /// The answer to one tool call.
    ToolResult {
        call_id: String,
        output: String,
        is_error: bool,
        /// Images the block showed (`show()`), in order; sent after the output.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<super::ShownImage>,
    },
    /// A note from the gateway to the model (a catalog update, an interrupted turn), sent on
    /// the user side.
    Notice {
        text: String,
    },
}

impl HistoryItem {
    /// True for items a provider sends on the user side of the conversation.
    pub fn is_user_side(&self) -> bool {
        !matches!(self, HistoryItem::Assistant(_))
    }
}

/// What a provider reports while a response streams in (for live display).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    TextDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    /// A tool call's name is known (its arguments are still arriving).
    ToolCallStarted {
        id: String,
        name: String,
    },
    /// The attempt failed and is retried after `delay_ms`: discard what this attempt streamed.
    Retrying {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_tool_calls_come_from_blocks_in_order() {
        let message = AssistantMessage {
            blocks: vec![
                ContentBlock::Thinking {
                    thinking: "hm".into(),
                    signature: "sig".into(),
                },
                ContentBlock::Text { text: "a".into() },
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "python_execution".into(),
                    arguments: "{}".into(),
                }),
                ContentBlock::Text { text: "b".into() },
            ],
            reasoning: None,
        };
        assert_eq!(message.text(), "ab");
        assert_eq!(message.tool_calls().count(), 1);
        assert!(message.has_tool_calls());
        assert_eq!(Usage::default().input_tokens, None);
    }
}
