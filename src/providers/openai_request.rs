//! The conversation as an OpenAI Chat Completions request body.
//!
//! The body is laid out so that it only ever grows at the end between two requests of a
//! session: every field but `messages` comes first, and `messages` last. The gateway caches
//! each item's encoded message and joins them, so a request of a 1,000-iteration session is a
//! concatenation, not a re-serialization.

use serde_json::{json, Value};

use super::images::{openai_message, text_with_notes, ImagePolicy};
use super::ToolChoice;
use crate::protocol::{ContentBlock, HistoryItem, ShownImage, ToolSpec};

/// Everything of a request but the conversation.
#[derive(Debug, Clone)]
pub struct OpenAiRequest<'a> {
    pub model: &'a str,
    /// Sent as `prompt_cache_key`, so requests of one session land on the same cache.
    pub session_id: &'a str,
    pub system: &'a str,
    pub tool: &'a ToolSpec,
    pub max_tokens: Option<u32>,
    /// `false`: one JSON answer (`"stream": false`, no `stream_options`).
    pub stream: bool,
    pub tool_choice: Option<&'a ToolChoice>,
}

/// The start of the body, through the system message (the caller appends `,` and each
/// encoded item, then [`FOOTER`]).
pub fn header(req: &OpenAiRequest<'_>) -> Vec<u8> {
    let mut head = serde_json::Map::new();
    head.insert("model".into(), json!(req.model));
    head.insert("stream".into(), json!(req.stream));
    if req.stream {
        // OpenAI refuses `stream_options` on a request that does not stream.
        head.insert("stream_options".into(), json!({"include_usage": true}));
    }
    head.insert("prompt_cache_key".into(), json!(req.session_id));
    if let Some(max) = req.max_tokens {
        head.insert("max_completion_tokens".into(), json!(max));
    }
    head.insert(
        "tools".into(),
        json!([{
            "type": "function",
            "function": {
                "name": req.tool.name,
                "description": req.tool.description,
                "parameters": req.tool.parameters,
            }
        }]),
    );
    if let Some(choice) = req.tool_choice {
        head.insert("tool_choice".into(), choice.openai_json());
    }
    let mut out = encode(&Value::Object(head));
    // Reopen the object to append `messages` last.
    out.pop();
    out.extend_from_slice(b",\"messages\":[");
    out.extend_from_slice(&encode(&json!({"role": "system", "content": req.system})));
    out
}

/// Closes what [`header`] opened.
pub const FOOTER: &[u8] = b"]}";

/// One item as one message (a tool result's images are sent by [`encode_images_after`]).
pub fn encode_item(item: &HistoryItem, images: &ImagePolicy<'_>) -> Vec<u8> {
    let message = match item {
        HistoryItem::User { text } | HistoryItem::Notice { text } => {
            json!({"role": "user", "content": text})
        }
        HistoryItem::ToolResult {
            call_id,
            output,
            images: shown,
            ..
        } => json!({
            "role": "tool",
            "tool_call_id": call_id,
            "content": text_with_notes(output, shown, images),
        }),
        HistoryItem::Assistant(message) => {
            let text = message.text();
            let calls: Vec<Value> = message
                .blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolCall(call) => Some(json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": canonical_arguments(&call.arguments)},
                    })),
                    _ => None,
                })
                .collect();
            let mut m = serde_json::Map::new();
            m.insert("role".into(), json!("assistant"));
            // Always a string, also beside tool calls: the SDK's types allow null there, but
            // servers whose request models want a string (llama-cpp-python: HTTP 500) or
            // that treat a missing field as no message (an empty 200) accept only "".
            m.insert("content".into(), json!(text));
            if !calls.is_empty() {
                m.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(m)
        }
    };
    encode(&message)
}

/// Whether item `index` is the last tool result of a run of them (the next item, if any, is
/// not a tool result): the run's images go right after it.
pub fn closes_tool_run(items: &[&HistoryItem], index: usize) -> bool {
    matches!(items[index], HistoryItem::ToolResult { .. })
        && !matches!(items.get(index + 1), Some(HistoryItem::ToolResult { .. }))
}

/// The user message holding the images of the run of tool results that ends at `index`
/// (`None` when they showed none, or the model does not take them).
pub fn encode_images_after(
    items: &[&HistoryItem],
    index: usize,
    policy: &ImagePolicy<'_>,
) -> Option<Vec<u8>> {
    if !policy.send || !closes_tool_run(items, index) {
        return None;
    }
    let start = items[..=index]
        .iter()
        .rposition(|i| !matches!(i, HistoryItem::ToolResult { .. }))
        .map_or(0, |p| p + 1);
    let shown: Vec<&ShownImage> = items[start..=index]
        .iter()
        .flat_map(|item| match item {
            HistoryItem::ToolResult { images, .. } => images.iter().collect(),
            _ => Vec::new(),
        })
        .collect();
    (!shown.is_empty()).then(|| encode(&openai_message(&shown)))
}

/// Tool-call arguments as sent back: the text the model produced when it is valid JSON;
/// otherwise a JSON object holding it, because servers that parse the history (vLLM,
/// llama.cpp) would reject the whole request over one malformed call.
pub fn canonical_arguments(arguments: &str) -> String {
    if serde_json::from_str::<Value>(arguments).is_ok() {
        arguments.to_string()
    } else {
        json!({ "_raw": arguments }).to_string()
    }
}

fn encode(value: &Value) -> Vec<u8> {
    // Serializing a `Value` cannot fail (keys are strings).
    serde_json::to_vec(value).unwrap_or_default()
}

/// A whole body from its parts (used by tests and `vis context --json`).
pub fn body(req: &OpenAiRequest<'_>, items: &[HistoryItem], images: &ImagePolicy<'_>) -> Vec<u8> {
    let mut out = header(req);
    let refs: Vec<&HistoryItem> = items.iter().collect();
    for (index, item) in items.iter().enumerate() {
        out.push(b',');
        out.extend_from_slice(&encode_item(item, images));
        if let Some(message) = encode_images_after(&refs, index, images) {
            out.push(b',');
            out.extend_from_slice(&message);
        }
    }
    out.extend_from_slice(FOOTER);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AssistantMessage, ToolCall};

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "python_execution".into(),
            description: "Run Python.".into(),
            parameters: json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}),
        }
    }

    /// A request of session `s-1` to model `m` with system prompt `sys`.
    fn request<'a>(
        tool: &'a ToolSpec,
        stream: bool,
        tool_choice: Option<&'a ToolChoice>,
    ) -> OpenAiRequest<'a> {
        OpenAiRequest {
            model: "m",
            session_id: "s-1",
            system: "sys",
            tool,
            max_tokens: None,
            stream,
            tool_choice,
        }
    }

    #[test]
    fn the_body_is_valid_json_with_messages_last() {
        let tool = tool();
        let req = request(&tool, true, None);
        let items = vec![
            HistoryItem::User { text: "hi".into() },
            HistoryItem::Assistant(AssistantMessage {
                blocks: vec![ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "python_execution".into(),
                    arguments: "{\"code\": \"1\"".into(),
                })],
                reasoning: Some("thinking".into()),
            }),
            HistoryItem::ToolResult {
                call_id: "c1".into(),
                output: "1\n".into(),
                is_error: false,
                images: Vec::new(),
            },
        ];
        let body: Value = serde_json::from_slice(&body(&req, &items, &ImagePolicy::SEND)).unwrap();
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(keys.last().unwrap().as_str(), "messages");
        assert_eq!(body["prompt_cache_key"], "s-1");
        assert_eq!(body["stream_options"]["include_usage"], true);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        // Beside tool calls the content is "", never null or missing.
        assert_eq!(messages[2]["content"], json!(""));
        // A malformed call is sent back as valid JSON holding its text; reasoning is not sent.
        assert_eq!(
            messages[2]["tool_calls"][0]["function"]["arguments"],
            "{\"_raw\":\"{\\\"code\\\": \\\"1\\\"\"}"
        );
        assert!(!String::from_utf8(serde_json::to_vec(&body).unwrap())
            .unwrap()
            .contains("thinking"));
        assert_eq!(messages[3]["role"], "tool");
        assert!(body.get("tool_choice").is_none());
    }

    #[test]
    fn tool_choice_and_a_request_that_does_not_stream() {
        let tool = tool();
        let named = ToolChoice::Function("python_execution".into());
        for (choice, json) in [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::Required, json!("required")),
            (ToolChoice::Off, json!("none")),
            (
                named.clone(),
                json!({"type": "function", "function": {"name": "python_execution"}}),
            ),
        ] {
            let req = request(&tool, false, Some(&choice));
            let body: Value = serde_json::from_slice(&body(&req, &[], &ImagePolicy::SEND)).unwrap();
            assert_eq!(body["tool_choice"], json);
            assert_eq!(body["stream"], false);
            assert!(body.get("stream_options").is_none());
        }
    }
}
