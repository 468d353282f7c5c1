//! The conversation as an Anthropic Messages request body.
//!
//! Anthropic wants alternating roles, with a tool use's result first in the next user
//! message: consecutive user-side items (tool results, notices, the person's message) are
//! grouped into one user message, tool results first. Prompt caching uses `cache_control`
//! breakpoints: one on the system block (tools and system, the stable prefix) and the ones
//! the caller asks for on messages (the newest, and the newest of the previous request so its
//! cached prefix is found however many blocks were added since). Breakpoints mark where a
//! cached prefix ends; they are not content, so moving them keeps earlier caches valid.

use std::ops::Range;

use serde_json::{json, Value};

use super::images::{anthropic_block, text_with_notes, ImagePolicy};
use super::openai_request::canonical_arguments;
use super::ToolChoice;
use crate::protocol::{ContentBlock, HistoryItem, ToolSpec};

#[derive(Debug, Clone)]
pub struct AnthropicRequest<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub tool: &'a ToolSpec,
    pub max_tokens: u32,
    /// Extended thinking budget; thinking blocks are sent back only when it is on.
    pub thinking_budget: Option<u32>,
    /// `false`: one JSON answer (`"stream": false`).
    pub stream: bool,
    pub tool_choice: Option<&'a ToolChoice>,
}

/// The start of the body, through `"messages":[`.
pub fn header(req: &AnthropicRequest<'_>) -> Vec<u8> {
    let mut head = serde_json::Map::new();
    head.insert("model".into(), json!(req.model));
    head.insert("max_tokens".into(), json!(req.max_tokens));
    head.insert("stream".into(), json!(req.stream));
    if let Some(budget) = req.thinking_budget {
        head.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    head.insert(
        "tools".into(),
        json!([{
            "name": req.tool.name,
            "description": req.tool.description,
            "input_schema": req.tool.parameters,
        }]),
    );
    if let Some(choice) = req.tool_choice {
        head.insert("tool_choice".into(), choice.anthropic_json());
    }
    head.insert(
        "system".into(),
        json!([{"type": "text", "text": req.system, "cache_control": {"type": "ephemeral"}}]),
    );
    let mut out = serde_json::to_vec(&Value::Object(head)).unwrap_or_default();
    out.pop();
    out.extend_from_slice(b",\"messages\":[");
    out
}

/// Closes what [`header`] opened.
pub const FOOTER: &[u8] = b"]}";

/// The item ranges that form one message each, in order.
pub fn groups(items: &[HistoryItem]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match out.last_mut() {
            Some(last) if items[last.start].is_user_side() == item.is_user_side() => {
                last.end = i + 1
            }
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// One message from the items of one group.
pub fn encode_group(
    items: &[HistoryItem],
    cache_breakpoint: bool,
    keep_thinking: bool,
    images: &ImagePolicy<'_>,
) -> Vec<u8> {
    let user_side = items.first().is_none_or(HistoryItem::is_user_side);
    let mut blocks: Vec<Value> = Vec::new();
    if user_side {
        // Tool results must open the message.
        for item in items {
            if let HistoryItem::ToolResult {
                call_id,
                output,
                is_error,
                images: shown,
            } = item
            {
                let text = text_with_notes(output, shown, images);
                let text = non_empty(&text, "(no output)");
                let content = if images.send && !shown.is_empty() {
                    let mut parts = vec![json!({"type": "text", "text": text})];
                    parts.extend(shown.iter().map(anthropic_block));
                    Value::Array(parts)
                } else {
                    json!(text)
                };
                let mut b = json!({"type": "tool_result", "tool_use_id": tool_id(call_id), "content": content});
                if *is_error {
                    b["is_error"] = json!(true);
                }
                blocks.push(b);
            }
        }
        for item in items {
            if let HistoryItem::User { text } | HistoryItem::Notice { text } = item {
                blocks.push(json!({"type": "text", "text": non_empty(text, "(empty message)")}));
            }
        }
    } else {
        for item in items {
            let HistoryItem::Assistant(message) = item else {
                continue;
            };
            for block in &message.blocks {
                match block {
                    // Anthropic refuses empty and whitespace-only text blocks (HTTP 400):
                    // one stored answer of "\n" would break every later request.
                    ContentBlock::Text { text } if !text.trim().is_empty() => {
                        blocks.push(json!({"type": "text", "text": text}))
                    }
                    ContentBlock::Text { .. } => {}
                    ContentBlock::Thinking {
                        thinking,
                        signature,
                    } if keep_thinking => blocks.push(
                        json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                    ),
                    ContentBlock::RedactedThinking { data } if keep_thinking => {
                        blocks.push(json!({"type": "redacted_thinking", "data": data}))
                    }
                    ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
                    ContentBlock::ToolCall(call) => blocks.push(json!({
                        "type": "tool_use",
                        "id": tool_id(&call.id),
                        "name": call.name,
                        "input": tool_input(&call.arguments),
                    })),
                }
            }
        }
        if blocks.is_empty() {
            blocks.push(json!({"type": "text", "text": "(no answer)"}));
        }
    }
    if cache_breakpoint {
        if let Some(Value::Object(last)) = blocks.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
    }
    let role = if user_side { "user" } else { "assistant" };
    serde_json::to_vec(&json!({"role": role, "content": blocks})).unwrap_or_default()
}

/// `text`, or `placeholder` where Anthropic would refuse it (empty or whitespace only).
fn non_empty<'a>(text: &'a str, placeholder: &'a str) -> &'a str {
    if text.trim().is_empty() {
        placeholder
    } else {
        text
    }
}

/// Anthropic accepts ids of `[A-Za-z0-9_-]`; ids from other providers are mapped into that
/// set deterministically.
fn tool_id(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "call".into()
    } else {
        clean
    }
}

/// `input` must be an object: the parsed arguments, or an object holding text that is not
/// one.
fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => json!({}),
        _ => serde_json::from_str(&canonical_arguments(arguments))
            .unwrap_or_else(|_| json!({ "_raw": arguments })),
    }
}

/// A whole body with the breakpoint on the newest message (tests and `vis context --json`).
pub fn body(
    req: &AnthropicRequest<'_>,
    items: &[HistoryItem],
    images: &ImagePolicy<'_>,
) -> Vec<u8> {
    let mut out = header(req);
    let groups = groups(items);
    for (n, range) in groups.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&encode_group(
            &items[range.clone()],
            n + 1 == groups.len(),
            req.thinking_budget.is_some(),
            images,
        ));
    }
    out.extend_from_slice(FOOTER);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AssistantMessage, ToolCall};

    #[test]
    fn roles_alternate_and_tool_results_open_the_user_message() {
        let tool = ToolSpec {
            name: "python_execution".into(),
            description: "Run Python.".into(),
            parameters: json!({"type": "object"}),
        };
        let req = AnthropicRequest {
            model: "claude",
            system: "sys",
            tool: &tool,
            max_tokens: 1000,
            thinking_budget: None,
            stream: true,
            tool_choice: None,
        };
        let call = |id: &str| {
            ContentBlock::ToolCall(ToolCall {
                id: id.into(),
                name: "python_execution".into(),
                arguments: "{\"code\":\"1\"}".into(),
            })
        };
        let items = vec![
            HistoryItem::User { text: "go".into() },
            HistoryItem::Assistant(AssistantMessage {
                blocks: vec![
                    ContentBlock::Thinking {
                        thinking: "t".into(),
                        signature: "s".into(),
                    },
                    ContentBlock::Text { text: "".into() },
                    ContentBlock::Text { text: " \n".into() },
                    call("call.1"),
                    call("c2"),
                ],
                reasoning: None,
            }),
            HistoryItem::ToolResult {
                call_id: "call.1".into(),
                output: "\n".into(),
                is_error: false,
                images: Vec::new(),
            },
            HistoryItem::Notice {
                text: "catalog update".into(),
            },
            HistoryItem::ToolResult {
                call_id: "c2".into(),
                output: "boom".into(),
                is_error: true,
                images: Vec::new(),
            },
        ];
        let body: Value = serde_json::from_slice(&body(&req, &items, &ImagePolicy::SEND)).unwrap();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["role"], "assistant");
        // Thinking is dropped when thinking is off; empty and whitespace-only text blocks are
        // not sent (Anthropic refuses them), a blank tool output becomes "(no output)".
        assert_eq!(messages[1]["content"].as_array().unwrap().len(), 2);
        assert_eq!(messages[1]["content"][0]["id"], "call_1");
        let user = messages[2]["content"].as_array().unwrap();
        assert_eq!(user[0]["tool_use_id"], "call_1");
        assert_eq!(user[0]["content"], "(no output)");
        assert_eq!(user[1]["is_error"], true);
        assert_eq!(user[2]["type"], "text");
        assert_eq!(user[2]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert!(messages[0]["content"][0].get("cache_control").is_none());
        assert!(body.get("tool_choice").is_none());
        assert_eq!(body["stream"], true);
        let named = ToolChoice::Function("python_execution".into());
        for (choice, json) in [
            (ToolChoice::Auto, json!({"type": "auto"})),
            (ToolChoice::Required, json!({"type": "any"})),
            (ToolChoice::Off, json!({"type": "none"})),
            (
                named.clone(),
                json!({"type": "tool", "name": "python_execution"}),
            ),
        ] {
            let req = AnthropicRequest {
                stream: false,
                tool_choice: Some(&choice),
                ..req.clone()
            };
            let body: Value =
                serde_json::from_slice(&super::body(&req, &items, &ImagePolicy::SEND)).unwrap();
            assert_eq!(
                (&body["tool_choice"], &body["stream"]),
                (&json, &json!(false))
            );
        }
    }
}
