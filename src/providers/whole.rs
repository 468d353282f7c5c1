//! Answers that do not stream (`[provider] stream = false`): one JSON object per request, an
//! OpenAI `chat.completion` or an Anthropic `message`.
//!
//! The object is turned into the events its stream would have carried (one chunk holding the
//! whole message; Anthropic's `message_start`, a start and stop per content block,
//! `message_delta`, `message_stop`) and fed to the same decoders, so both modes make the same
//! `AssistantMessage` out of the same content, and a display sees the whole text as one
//! delta.

use serde_json::{json, Value};

use super::error::{clean_message, json_message, ProviderError};
use super::{Decode, Decoded};
use crate::protocol::StreamEvent;

/// Decodes a whole JSON answer with `decoder`.
pub(crate) fn decode<D: Decode>(
    body: &[u8],
    mut decoder: D,
    anthropic: bool,
    emit: &mut dyn FnMut(StreamEvent),
) -> Result<Decoded, ProviderError> {
    let value: Value = serde_json::from_slice(body).map_err(|err| {
        ProviderError::malformed(format!(
            "the answer is not JSON ({err}): {}",
            clean_message(&String::from_utf8_lossy(body), 80)
        ))
    })?;
    if value.get("error").is_some_and(|e| !e.is_null()) || value["type"] == "error" {
        let message = json_message(&value).unwrap_or_else(|| "no message".into());
        let error_type = value["error"]["type"].as_str().unwrap_or("error");
        return Err(ProviderError::stream_error(error_type, &message, false));
    }
    let events = if anthropic {
        anthropic_events(&value)?
    } else {
        vec![("message".to_string(), openai_chunk(&value)?)]
    };
    let mut done = false;
    for (name, data) in events {
        done = decoder.feed(&name, &data.to_string(), emit)?;
    }
    decoder.finish(done)
}

/// A `chat.completion` as the one chunk that carries all of it.
fn openai_chunk(value: &Value) -> Result<Value, ProviderError> {
    let choice = value["choices"]
        .as_array()
        .and_then(|c| c.first())
        .ok_or_else(|| {
            ProviderError::malformed("the answer has no choices: it is not a chat completion")
        })?;
    let mut message = choice["message"].clone();
    if !message.is_object() {
        return Err(ProviderError::malformed(
            "the answer's choice has no message: it is not a chat completion",
        ));
    }
    // Calls of a whole message are separate entries; without an `index` the chunk decoder
    // would join entries that lack an id.
    if let Some(calls) = message["tool_calls"].as_array_mut() {
        for (i, call) in calls.iter_mut().enumerate() {
            if call.get("index").is_none_or(Value::is_null) {
                call["index"] = json!(i);
            }
        }
    }
    // Every answer has a finish reason; a server that leaves it out still answered whole.
    let finish = match &choice["finish_reason"] {
        Value::String(reason) if !reason.is_empty() => json!(reason),
        _ => json!("stop"),
    };
    let mut chunk = json!({
        "model": value["model"],
        "choices": [{"index": 0, "delta": message, "finish_reason": finish}],
    });
    if value.get("usage").is_some_and(Value::is_object) {
        chunk["usage"] = value["usage"].clone();
    }
    Ok(chunk)
}

/// A `message` as the events of its stream.
fn anthropic_events(value: &Value) -> Result<Vec<(String, Value)>, ProviderError> {
    let blocks = value["content"].as_array().ok_or_else(|| {
        ProviderError::malformed("the answer has no content list: it is not a Messages answer")
    })?;
    let mut events = vec![(
        "message_start".to_string(),
        json!({"type": "message_start", "message": {"model": value["model"], "usage": value["usage"]}}),
    )];
    for (index, block) in blocks.iter().enumerate() {
        events.push((
            "content_block_start".into(),
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        events.push((
            "content_block_stop".into(),
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta".into(),
        json!({"type": "message_delta", "delta": {"stop_reason": value["stop_reason"]}}),
    ));
    events.push(("message_stop".into(), json!({"type": "message_stop"})));
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::super::{anthropic, openai};
    use super::*;
    use crate::protocol::{ContentBlock, ToolCall};

    fn call(id: &str, args: &str) -> ContentBlock {
        ContentBlock::ToolCall(ToolCall {
            id: id.into(),
            name: "python_execution".into(),
            arguments: args.into(),
        })
    }

    #[test]
    fn a_chat_completion_with_two_calls_without_ids() {
        let body = br#"{"id":"x","object":"chat.completion","model":"smollm2","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "function_call":{"name":"python_execution","arguments":"{}"},
            "tool_calls":[{"type":"function","function":{"name":"python_execution","arguments":"{\"code\":\"1\"}"}},
                          {"type":"function","function":{"name":"python_execution","arguments":"{\"code\":\"2\"}"}}]}}],
            "usage":{"prompt_tokens":12,"completion_tokens":3}}"#;
        let mut events = Vec::new();
        let d = decode(body, openai::Decoder::default(), false, &mut |e| {
            events.push(e)
        })
        .unwrap();
        assert_eq!(
            d.message.blocks,
            [
                call("call_0", r#"{"code":"1"}"#),
                call("call_1", r#"{"code":"2"}"#)
            ]
        );
        assert_eq!(d.stop_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            (d.usage.input_tokens, d.usage.output_tokens),
            (Some(12), Some(3))
        );
        assert_eq!(events.len(), 2, "{events:?}");
    }

    #[test]
    fn a_messages_answer_with_text_and_a_tool_use() {
        let body = br#"{"id":"msg","type":"message","role":"assistant","model":"claude-x","stop_reason":"max_tokens",
            "content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"python_execution","input":{"code":"1"}}],
            "usage":{"input_tokens":10,"cache_read_input_tokens":90,"output_tokens":7}}"#;
        let mut events = Vec::new();
        let d = decode(body, anthropic::Decoder::default(), true, &mut |e| {
            events.push(e)
        })
        .unwrap();
        assert_eq!(
            d.message.blocks,
            [
                ContentBlock::Text {
                    text: "Reading.".into()
                },
                call("toolu_1", r#"{"code":"1"}"#)
            ]
        );
        assert_eq!(d.stop_reason.as_deref(), Some("max_tokens"));
        assert_eq!(d.usage.input_tokens, Some(100));
        assert_eq!(d.usage.output_tokens, Some(7));
        assert_eq!(d.model.as_deref(), Some("claude-x"));
        assert_eq!(
            events[0],
            StreamEvent::TextDelta {
                text: "Reading.".into()
            }
        );
    }

    #[test]
    fn errors_and_foreign_json_are_named() {
        let err = decode(
            br#"{"error":{"message":"bad","type":"invalid_request_error"}}"#,
            openai::Decoder::default(),
            false,
            &mut |_| {},
        )
        .err()
        .unwrap();
        assert_eq!(err.kind(), "stream_error");
        assert!(err.to_string().contains("bad"), "{err}");
        let err = decode(
            br#"{"object":"list"}"#,
            openai::Decoder::default(),
            false,
            &mut |_| {},
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("no choices"), "{err}");
        let err = decode(b"<html>", anthropic::Decoder::default(), true, &mut |_| {})
            .err()
            .unwrap();
        assert_eq!(err.kind(), "malformed");
    }
}
