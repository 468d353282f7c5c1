//! Anthropic Messages streaming (`POST {base}/v1/messages`, `stream: true`).
//!
//! Decoding notes:
//! - The event's JSON `type` decides (the `event:` name is its copy; it is used only when
//!   `type` is missing). Unknown event and block types are skipped: the API adds them over
//!   time (server tools, citations) and none of them changes what the gateway acts on.
//! - Blocks are kept by their `index`, in index order: text (`text_delta`), thinking
//!   (`thinking_delta` + `signature_delta`, kept whole so it can be sent back verbatim),
//!   redacted thinking (`data`), and tool use (`input_json_delta.partial_json` fragments
//!   joined; an empty join means `{}`).
//! - Usage is split across `message_start` (input, cache creation, cache read) and
//!   `message_delta` (output, sometimes updated input/cache counts); the latest non-null value
//!   of each field wins. Normalized input = input + cache creation + cache read (SPEC §7);
//!   cached = cache read. A field never sent stays `None`.
//! - Only `message_stop` completes a response; a body that ends before it is truncated.
//! - `event: error` mid-stream is transient for `overloaded_error`, `api_error`,
//!   `rate_limit_error` and `timeout_error`.
//! - Thinking deltas are also reported as `StreamEvent::ReasoningDelta` for live display; the
//!   thinking itself lives in its block, not in `AssistantMessage::reasoning`.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::{json_message, ProviderError};
use super::{Decode, Decoded};
use crate::protocol::{AssistantMessage, ContentBlock, StreamEvent, ToolCall, Usage};

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct MessageStart {
    message: StartMessage,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct BlockStart {
    index: u64,
    content_block: serde_json::Value,
}

#[derive(Deserialize)]
struct BlockDelta {
    index: u64,
    delta: serde_json::Value,
}

#[derive(Deserialize)]
struct BlockStop {
    index: u64,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: Option<MessageDeltaBody>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

enum Partial {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        /// The `input` of `content_block_start`, used when no fragments follow.
        start_input: serde_json::Value,
    },
    /// A block type this client does not use.
    Skipped,
}

struct Slot {
    block: Partial,
    open: bool,
}

#[derive(Default)]
pub(crate) struct Decoder {
    blocks: BTreeMap<u64, Slot>,
    input: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
    stop_reason: Option<String>,
    model: Option<String>,
}

fn parse<'a, T: Deserialize<'a>>(data: &'a str, what: &str) -> Result<T, ProviderError> {
    serde_json::from_str(data)
        .map_err(|err| ProviderError::malformed(format!("a {what} event is not valid: {err}")))
}

fn string(value: &serde_json::Value, key: &str) -> String {
    value
        .get(key)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

impl Decoder {
    fn usage(&mut self, usage: Option<WireUsage>) {
        let usage = usage.unwrap_or_default();
        // Latest non-null wins: message_delta may repeat or update the start's counts.
        self.input = usage.input_tokens.or(self.input);
        self.cache_creation = usage.cache_creation_input_tokens.or(self.cache_creation);
        self.cache_read = usage.cache_read_input_tokens.or(self.cache_read);
        self.output = usage.output_tokens.or(self.output);
    }

    fn start(&mut self, start: BlockStart, emit: &mut dyn FnMut(StreamEvent)) {
        let b = &start.content_block;
        let block = match b.get("type").and_then(|t| t.as_str()) {
            Some("text") => {
                let text = string(b, "text");
                if !text.is_empty() {
                    emit(StreamEvent::TextDelta { text: text.clone() });
                }
                Partial::Text(text)
            }
            Some("thinking") => Partial::Thinking {
                thinking: string(b, "thinking"),
                signature: string(b, "signature"),
            },
            Some("redacted_thinking") => Partial::Redacted(string(b, "data")),
            Some("tool_use") => {
                let (id, name) = (string(b, "id"), string(b, "name"));
                emit(StreamEvent::ToolCallStarted {
                    id: id.clone(),
                    name: name.clone(),
                });
                Partial::ToolUse {
                    id,
                    name,
                    json: String::new(),
                    start_input: b.get("input").cloned().unwrap_or(serde_json::Value::Null),
                }
            }
            _ => Partial::Skipped,
        };
        self.blocks.insert(start.index, Slot { block, open: true });
    }

    fn delta(
        &mut self,
        delta: BlockDelta,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), ProviderError> {
        let Some(slot) = self.blocks.get_mut(&delta.index) else {
            return Err(ProviderError::malformed(format!(
                "a delta for content block {} that never started",
                delta.index
            )));
        };
        let d = &delta.delta;
        let text = |key: &str| d.get(key).and_then(|v| v.as_str()).unwrap_or_default();
        match (d.get("type").and_then(|t| t.as_str()), &mut slot.block) {
            (Some("text_delta"), Partial::Text(buf)) => {
                let piece = text("text");
                if !piece.is_empty() {
                    buf.push_str(piece);
                    emit(StreamEvent::TextDelta {
                        text: piece.to_string(),
                    });
                }
            }
            (Some("thinking_delta"), Partial::Thinking { thinking, .. }) => {
                let piece = text("thinking");
                if !piece.is_empty() {
                    thinking.push_str(piece);
                    emit(StreamEvent::ReasoningDelta {
                        text: piece.to_string(),
                    });
                }
            }
            (Some("signature_delta"), Partial::Thinking { signature, .. }) => {
                signature.push_str(text("signature"));
            }
            (Some("input_json_delta"), Partial::ToolUse { json, .. }) => {
                json.push_str(text("partial_json"));
            }
            // citations_delta and deltas of skipped blocks carry nothing the gateway uses.
            _ => {}
        }
        Ok(())
    }
}

impl Decode for Decoder {
    fn feed(
        &mut self,
        event: &str,
        data: &str,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<bool, ProviderError> {
        let value = super::data_json(data)?;
        let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or(event);
        match kind {
            "message_start" => {
                let start: MessageStart = parse(data, kind)?;
                self.model = start.message.model.filter(|m| !m.is_empty());
                self.usage(start.message.usage);
            }
            "content_block_start" => self.start(parse(data, kind)?, emit),
            "content_block_delta" => self.delta(parse(data, kind)?, emit)?,
            "content_block_stop" => {
                let stop: BlockStop = parse(data, kind)?;
                if let Some(slot) = self.blocks.get_mut(&stop.index) {
                    slot.open = false;
                }
            }
            "message_delta" => {
                let delta: MessageDelta = parse(data, kind)?;
                if let Some(reason) = delta.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                self.usage(delta.usage);
            }
            "message_stop" => return Ok(true),
            "error" => {
                let error = value.get("error").cloned().unwrap_or_default();
                let error_type = string(&error, "type");
                let error_type = if error_type.is_empty() {
                    "error".to_string()
                } else {
                    error_type
                };
                let transient = matches!(
                    error_type.as_str(),
                    "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
                );
                let message = json_message(&value).unwrap_or_else(|| "no message".to_string());
                return Err(ProviderError::stream_error(
                    &error_type,
                    &message,
                    transient,
                ));
            }
            // ping, and event types added after this was written.
            _ => {}
        }
        Ok(false)
    }

    fn open_call(&self) -> Option<String> {
        self.blocks.values().find_map(|slot| match &slot.block {
            Partial::ToolUse { id, name, .. } if slot.open => {
                Some(format!("tool call '{name}' ({id})"))
            }
            _ => None,
        })
    }

    fn finish(self, done: bool) -> Result<Decoded, ProviderError> {
        if !done {
            let detail = match self.open_call() {
                Some(call) => format!(
                    "the body ended inside {call} before message_stop; the call was not run"
                ),
                None => "the body ended before message_stop".to_string(),
            };
            return Err(ProviderError::truncated(detail));
        }
        let blocks = self
            .blocks
            .into_values()
            .filter_map(|slot| match slot.block {
                Partial::Text(text) if text.is_empty() => None,
                Partial::Text(text) => Some(ContentBlock::Text { text }),
                Partial::Thinking {
                    thinking,
                    signature,
                } => Some(ContentBlock::Thinking {
                    thinking,
                    signature,
                }),
                Partial::Redacted(data) => Some(ContentBlock::RedactedThinking { data }),
                Partial::ToolUse {
                    id,
                    name,
                    json,
                    start_input,
                } => {
                    let arguments = if !json.trim().is_empty() {
                        json
                    } else if start_input.as_object().is_some_and(|o| !o.is_empty()) {
                        start_input.to_string()
                    } else {
                        "{}".to_string()
                    };
                    Some(ContentBlock::ToolCall(ToolCall {
                        id,
                        name,
                        arguments,
                    }))
                }
                Partial::Skipped => None,
            })
            .collect();
        let input = self
            .input
            .map(|input| input + self.cache_creation.unwrap_or(0) + self.cache_read.unwrap_or(0));
        Ok(Decoded {
            message: AssistantMessage {
                blocks,
                reasoning: None,
            },
            stop_reason: self.stop_reason,
            usage: Usage {
                input_tokens: input,
                cached_tokens: self.cache_read,
                cache_creation_tokens: self.cache_creation,
                output_tokens: self.output,
            },
            model: self.model,
        })
    }
}
