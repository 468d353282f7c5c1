//! OpenAI Chat Completions streaming (`POST {base}/chat/completions`, `stream: true`), as sent
//! by OpenAI, OpenRouter, Ollama, vLLM, llama.cpp's server and LM Studio.
//!
//! Decoding notes:
//! - Only choice 0 is read (the gateway never asks for `n > 1`).
//! - Tool calls arrive as fragments keyed by `index`; the id and name come in the first
//!   fragment, `function.arguments` in any number of pieces, and parallel calls interleave.
//!   A call's place among the blocks is where it first appeared; the calls themselves are
//!   output in index order. A server that omits `index` (some compatible servers do) gets one
//!   assigned: a fragment with an id opens a new call, one without continues the last. A
//!   missing id becomes `call_{index}` so the tool result can still refer to it.
//! - `reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning` (OpenRouter, newer vLLM)
//!   go to `AssistantMessage::reasoning`, never into the text.
//! - Usage is taken from wherever a non-null `usage` comes (a final chunk with empty
//!   `choices` under `stream_options.include_usage`, or inline in a choice chunk); the latest
//!   wins. Fields not sent stay `None`.
//! - `[DONE]` ends the stream. A clean end of the body after a `finish_reason` is a normal end
//!   (local servers skip `[DONE]`); an end before any `finish_reason` is a truncation, and no
//!   half-received call is returned.
//! - `{"error": ...}` in a data line is the provider failing mid-stream; it is transient when
//!   its type or code reads like an overload, a rate limit or a server error.

use serde::Deserialize;

use super::error::{json_message, ProviderError};
use super::{Decode, Decoded};
use crate::protocol::{AssistantMessage, ContentBlock, StreamEvent, ToolCall, Usage};

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    /// DeepSeek reports its cache hits here instead of `prompt_tokens_details`.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

enum Segment {
    Text(String),
    /// The place of a call; calls fill these places in index order.
    Call,
}

struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

#[derive(Default)]
pub(crate) struct Decoder {
    segments: Vec<Segment>,
    calls: Vec<PartialCall>,
    reasoning: Option<String>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
}

impl Decoder {
    fn text(&mut self, text: &str) {
        match self.segments.last_mut() {
            Some(Segment::Text(buf)) => buf.push_str(text),
            _ => self.segments.push(Segment::Text(text.to_string())),
        }
    }

    fn tool_call(&mut self, delta: ToolCallDelta, emit: &mut dyn FnMut(StreamEvent)) {
        let id = delta.id.filter(|s| !s.is_empty());
        let index = match delta.index {
            Some(index) => index,
            None => match (&id, self.calls.last()) {
                (None, Some(last)) => last.index,
                _ => self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0),
            },
        };
        let pos = match self.calls.iter().position(|c| c.index == index) {
            Some(pos) => pos,
            None => {
                self.calls.push(PartialCall {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                    announced: false,
                });
                self.segments.push(Segment::Call);
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[pos];
        if let Some(id) = id {
            if call.id.is_empty() {
                call.id = id;
            }
        }
        if let Some(function) = delta.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                if call.name.is_empty() {
                    call.name = name;
                }
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            if call.id.is_empty() {
                call.id = format!("call_{}", call.index);
            }
            emit(StreamEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
            });
        }
    }
}

/// The error of an `{"error": ...}` chunk.
fn chunk_error(chunk: &serde_json::Value, error: &serde_json::Value) -> ProviderError {
    let field = |name: &str| {
        error.get(name).and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    };
    let error_type = field("type")
        .or_else(|| field("code"))
        .unwrap_or_else(|| "error".to_string());
    let code = field("code").unwrap_or_default();
    let message = json_message(chunk).unwrap_or_else(|| "no message".to_string());
    let words = format!("{error_type} {code}").to_ascii_lowercase();
    let numeric = code.parse::<u16>().ok();
    let transient = [
        "server_error",
        "overloaded",
        "rate_limit",
        "timeout",
        "unavailable",
        "internal",
    ]
    .iter()
    .any(|w| words.contains(w))
        || numeric.is_some_and(|c| c == 429 || c >= 500);
    ProviderError::stream_error(&error_type, &message, transient)
}

impl Decode for Decoder {
    fn feed(
        &mut self,
        _event: &str,
        data: &str,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<bool, ProviderError> {
        if data == "[DONE]" {
            return Ok(true);
        }
        let value = super::data_json(data)?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Err(chunk_error(&value, error));
        }
        let chunk: Chunk = serde_json::from_value(value).map_err(|err| {
            ProviderError::malformed(format!("a chunk is not a chat completion chunk: {err}"))
        })?;
        if self.model.is_none() {
            self.model = chunk.model.filter(|m| !m.is_empty());
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens,
                cached_tokens: usage
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .or(usage.prompt_cache_hit_tokens),
                cache_creation_tokens: None,
                output_tokens: usage.completion_tokens,
            });
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                let reasoning = delta.reasoning_content.or(delta.reasoning);
                if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                    self.reasoning
                        .get_or_insert_with(String::new)
                        .push_str(&text);
                    emit(StreamEvent::ReasoningDelta { text });
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    self.text(&text);
                    emit(StreamEvent::TextDelta { text });
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.tool_call(call, emit);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(false)
    }

    fn open_call(&self) -> Option<String> {
        if self.finish_reason.is_some() {
            return None;
        }
        self.calls
            .last()
            .map(|call| format!("tool call '{}' ({})", call.name, call.id))
    }

    fn finish(self, done: bool) -> Result<Decoded, ProviderError> {
        if !done && self.finish_reason.is_none() {
            let detail = match self.open_call() {
                Some(call) => format!(
                    "the body ended inside {call} before a finish_reason; the call was not run"
                ),
                None => "the body ended before a finish_reason".to_string(),
            };
            return Err(ProviderError::truncated(detail));
        }
        // Calls keep the places where they first appeared, filled in index order.
        let mut order: Vec<usize> = (0..self.calls.len()).collect();
        order.sort_by_key(|&pos| self.calls[pos].index);
        let mut calls: Vec<Option<PartialCall>> = self.calls.into_iter().map(Some).collect();
        let mut next = order.into_iter();
        let mut blocks = Vec::with_capacity(self.segments.len());
        for segment in self.segments {
            match segment {
                Segment::Text(text) => blocks.push(ContentBlock::Text { text }),
                Segment::Call => {
                    if let Some(call) = next.next().and_then(|pos| calls[pos].take()) {
                        let id = if call.id.is_empty() {
                            format!("call_{}", call.index)
                        } else {
                            call.id
                        };
                        blocks.push(ContentBlock::ToolCall(ToolCall {
                            id,
                            name: call.name,
                            arguments: call.arguments,
                        }));
                    }
                }
            }
        }
        Ok(Decoded {
            message: AssistantMessage {
                blocks,
                reasoning: self.reasoning,
            },
            stop_reason: self.finish_reason,
            usage: self.usage.unwrap_or_default(),
            model: self.model,
        })
    }
}
