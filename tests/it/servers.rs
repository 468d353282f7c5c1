//! Real OpenAI-compatible servers as they behave (issue 23 §1), at the provider client: the
//! captures of llama-cpp-python 0.3.36 in `../shared/fixtures/providers/llama-cpp-python/`
//! replayed byte for byte, validation errors, empty streams, whole (not streamed) answers,
//! `tool_choice`, and what servers tell about their context window.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use vis::protocol::{ContentBlock, StreamEvent, ToolCall, Usage};
use vis::providers::{
    context_window, ModelResponse, Provider, ProviderError, ProviderKind, ProviderSettings,
    ToolChoice,
};

use crate::support::fake_provider::{FakeProvider, Reply};

const OPENAI: ProviderKind = ProviderKind::OpenAi;
const ANTHROPIC: ProviderKind = ProviderKind::Anthropic;
const BODY: &str =
    r#"{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;

fn capture(name: &str) -> Reply {
    Reply::capture(&format!("llama-cpp-python/{name}"))
}

fn provider(
    fake: &FakeProvider,
    kind: ProviderKind,
    tweak: impl FnOnce(&mut ProviderSettings),
) -> Provider {
    let mut settings = fake.settings(kind);
    tweak(&mut settings);
    Provider::new(settings).unwrap()
}

async fn call(p: &Provider) -> (Result<ModelResponse, ProviderError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = p
        .stream(Bytes::from_static(BODY.as_bytes()), &mut |e| events.push(e))
        .await;
    (result, events)
}

fn one_line(err: &ProviderError, parts: &[&str], not: &[&str]) {
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "not one line: {msg}");
    for part in parts {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
    for part in not {
        assert!(!msg.contains(part), "{part:?} in: {msg}");
    }
}

/// A whole Chat Completions answer, as a server sends it for `"stream": false`.
pub fn completion(message: Value, finish: &str) -> Reply {
    let body = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "smollm2",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912},
    });
    Reply::status(
        200,
        &[("content-type", "application/json")],
        body.to_string(),
    )
}

// ---- the captures --------------------------------------------------------------------------

#[tokio::test]
async fn capture_tool_call_with_pings_is_one_call() {
    let fake = FakeProvider::start();
    fake.push(capture("tool-call-with-pings.http"));
    let (result, events) = call(&provider(&fake, OPENAI, |_| {})).await;
    let r = result.unwrap();
    // Ten fragments, each repeating the id and the name, and the legacy `function_call`
    // beside them: one call, its arguments joined once.
    assert_eq!(
        r.message.blocks,
        vec![ContentBlock::ToolCall(ToolCall {
            id: "call__0_python_execution_cmpl-684eb2d9-2fdf-4893-a736-689c439a1e91".into(),
            name: "python_execution".into(),
            arguments: "{ \"code\": \"{\" } ".into(),
        })]
    );
    let starts = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ToolCallStarted { .. }))
        .count();
    assert_eq!(starts, 1, "{events:?}");
    assert!(!events
        .iter()
        .any(|e| matches!(e, StreamEvent::TextDelta { .. })));
    assert_eq!(r.stop_reason.as_deref(), Some("tool_calls"));
    // It never sends usage while streaming: unknown, not zero.
    assert_eq!(r.usage, Usage::default());
    assert_eq!(r.model.as_deref(), Some("smollm2"));
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn capture_500_validation_error_is_permanent_and_names_the_field() {
    let fake = FakeProvider::start();
    for _ in 0..3 {
        fake.push(capture("http-500-content-null.http"));
    }
    let (result, events) = call(&provider(&fake, OPENAI, |_| {})).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), "invalid_request");
    assert!(!err.is_transient());
    one_line(
        &err,
        &[
            "HTTP 500",
            "body -> messages -> 2 -> content: Input should be a valid string",
            "(and 6 more)",
            "not retried",
        ],
        &["down or overloaded", "ChatCompletionRequest"],
    );
    // Sent once: a request that cannot succeed is not retried.
    assert_eq!(fake.request_count(), 1);
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test]
async fn capture_empty_200_is_the_empty_stream_error_naming_stream_false() {
    let fake = FakeProvider::start();
    for _ in 0..2 {
        fake.push(capture("empty-body-streaming-tool-choice-auto.http"));
    }
    let with_choice = provider(&fake, OPENAI, |s| s.tool_choice = Some(ToolChoice::Auto));
    let err = call(&with_choice).await.0.unwrap_err();
    assert_eq!(err.kind(), "empty_response");
    assert!(!err.is_transient());
    one_line(
        &err,
        &[
            "the server answered with an empty stream",
            "context window",
            "an option it does not support",
            "tool_choice = \"auto\"",
            "[provider] stream = false",
        ],
        &["ended early", "partial answer"],
    );
    assert_eq!(fake.request_count(), 1, "not retried");
    // Without tool_choice the same setting is named: the whole answer says what was refused.
    let plain = provider(&fake, OPENAI, |_| {});
    let err = call(&plain).await.0.unwrap_err();
    one_line(
        &err,
        &["empty stream", "[provider] stream = false"],
        &["tool_choice"],
    );
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn only_comments_and_pings_are_an_empty_stream_too() {
    let fake = FakeProvider::start();
    fake.push(Reply::raw_sse(": ping - 1\n\n: ping - 2\n\n"));
    let err = call(&provider(&fake, OPENAI, |_| {})).await.0.unwrap_err();
    assert_eq!(err.kind(), "empty_response");
    // A stream that started an answer and broke off is still a truncation.
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    ));
    let err = call(&provider(&fake, OPENAI, |s| s.max_retries = 0))
        .await
        .0
        .unwrap_err();
    assert_eq!(err.kind(), "truncated");
    one_line(&err, &["the partial answer was discarded"], &[]);
    // One that ended after its role-only first chunk had nothing to discard, and says so.
    fake.push(Reply::raw_sse(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null}}]}\n\n",
    ));
    let err = call(&provider(&fake, OPENAI, |s| s.max_retries = 0))
        .await
        .0
        .unwrap_err();
    assert_eq!(err.kind(), "truncated");
    one_line(
        &err,
        &["ended early", "nothing of an answer had arrived yet"],
        &["partial answer"],
    );
}

#[tokio::test]
async fn capture_finish_length_keeps_the_reason() {
    let fake = FakeProvider::start();
    fake.push(capture("finish-length.http"));
    let r = call(&provider(&fake, OPENAI, |_| {})).await.0.unwrap();
    assert_eq!(r.message.text(), "Hello.py is a");
    assert_eq!(r.stop_reason.as_deref(), Some("length"));
}

// ---- validation errors in other shapes -----------------------------------------------------

#[tokio::test]
async fn validation_errors_of_other_servers_are_named_and_not_retried() {
    let fake = FakeProvider::start();
    let json = [("content-type", "application/json")];
    fake.push(Reply::status(
        422,
        &json,
        r#"{"detail":[{"type":"string_type","loc":["body","messages",1,"content"],"msg":"Input should be a valid string"}]}"#,
    ));
    fake.push(Reply::status(
        400,
        &json,
        r#"{"error":{"message":"Invalid value: 'maybe'. Supported values are: 'none', 'auto' and 'required'.","type":"invalid_request_error","param":"tool_choice","code":"invalid_value"}}"#,
    ));
    let p = provider(&fake, OPENAI, |_| {});
    let err = call(&p).await.0.unwrap_err();
    one_line(
        &err,
        &[
            "HTTP 422",
            "body -> messages -> 1 -> content: Input should be a valid string",
        ],
        &[],
    );
    let err = call(&p).await.0.unwrap_err();
    one_line(
        &err,
        &["HTTP 400", "tool_choice: Invalid value: 'maybe'"],
        &[],
    );
    assert_eq!(fake.request_count(), 2);
    // A 503 without a validation body is still an outage, and retried.
    fake.push(Reply::error(503, "overloaded", "busy"));
    fake.push(Reply::openai().text("ok").build());
    let r = call(&p).await.0.unwrap();
    assert_eq!(r.retries, 1);
}

// ---- whole answers (stream = false) --------------------------------------------------------

#[tokio::test]
async fn whole_answers_decode_like_streams_for_both_protocols() {
    let fake = FakeProvider::start();
    fake.push(completion(
        json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "python_execution", "arguments": "{\"code\": \"print(1)\"}"}}],
            "function_call": {"name": "python_execution", "arguments": "{\"code\": \"print(1)\"}"}}),
        "tool_calls",
    ));
    let p = provider(&fake, OPENAI, |s| s.stream = false);
    let (result, events) = call(&p).await;
    let r = result.unwrap();
    assert_eq!(
        r.message.blocks,
        vec![ContentBlock::ToolCall(ToolCall {
            id: "call_1".into(),
            name: "python_execution".into(),
            arguments: "{\"code\": \"print(1)\"}".into(),
        })]
    );
    assert_eq!(
        (r.usage.input_tokens, r.usage.output_tokens),
        (Some(900), Some(12))
    );
    assert_eq!(r.stop_reason.as_deref(), Some("tool_calls"));
    // No first token to time in an answer that came whole.
    assert_eq!(r.ttft, None);
    assert_eq!(events.len(), 1, "{events:?}");
    let req = &fake.requests()[0];
    assert_eq!(req.header("accept"), Some("application/json"));
    assert_eq!(
        req.body,
        Bytes::from_static(BODY.as_bytes()),
        "sent untouched"
    );

    let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": "All done."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 95, "output_tokens": 3}});
    fake.push(Reply::status(
        200,
        &[("content-type", "application/json")],
        message.to_string(),
    ));
    let p = provider(&fake, ANTHROPIC, |s| s.stream = false);
    let (result, events) = call(&p).await;
    let r = result.unwrap();
    assert_eq!(r.message.text(), "All done.");
    assert_eq!(
        (r.usage.input_tokens, r.usage.cached_tokens),
        (Some(100), Some(95))
    );
    assert_eq!(
        events,
        vec![StreamEvent::TextDelta {
            text: "All done.".into()
        }]
    );
}

#[tokio::test]
async fn whole_answers_retry_time_out_and_name_an_empty_body() {
    let fake = FakeProvider::start();
    fake.push(Reply::error(503, "overloaded", "busy"));
    fake.push(completion(
        json!({"role": "assistant", "content": "fine"}),
        "stop",
    ));
    let p = provider(&fake, OPENAI, |s| s.stream = false);
    let r = call(&p).await.0.unwrap();
    assert_eq!((r.message.text().as_str(), r.retries), ("fine", 1));
    // An empty 200 is the empty-answer error, not garbage.
    fake.push(Reply::status(
        200,
        &[("content-type", "application/json")],
        "",
    ));
    let err = call(&p).await.0.unwrap_err();
    assert_eq!(err.kind(), "empty_response");
    one_line(&err, &["the server answered with an empty body"], &[]);
    // A server that streams anyway is read as a stream.
    fake.push(Reply::openai().text("streamed").build());
    let r = call(&p).await.0.unwrap();
    assert_eq!(r.message.text(), "streamed");
    // The whole answer's headers come late: the wait for them is the idle timeout.
    fake.push(Reply::delay(
        Duration::from_millis(600),
        completion(json!({"role": "assistant", "content": "late"}), "stop"),
    ));
    let slow = provider(&fake, OPENAI, |s| {
        s.stream = false;
        s.request_timeout = Duration::from_millis(100);
        s.idle_timeout = Duration::from_secs(10);
    });
    assert_eq!(call(&slow).await.0.unwrap().message.text(), "late");
    // A whole answer that does not come in time is not asked for again: a local server is
    // likely still working on it, and a retry would queue behind it.
    fake.push(Reply::delay(
        Duration::from_secs(30),
        completion(json!({"role": "assistant", "content": "never"}), "stop"),
    ));
    let impatient = provider(&fake, OPENAI, |s| {
        s.stream = false;
        s.request_timeout = Duration::from_millis(100);
        s.idle_timeout = Duration::from_millis(200);
    });
    let before = fake.request_count();
    let err = call(&impatient).await.0.unwrap_err();
    assert_eq!(err.kind(), "timeout");
    one_line(
        &err,
        &[
            "within 200 ms",
            "stream = false",
            "not retried",
            "[provider] idle_timeout",
        ],
        &[],
    );
    assert_eq!(fake.request_count(), before + 1);
}

// ---- context windows -----------------------------------------------------------------------

fn json_reply(value: Value) -> Reply {
    Reply::status(
        200,
        &[("content-type", "application/json")],
        value.to_string(),
    )
}

#[tokio::test]
async fn servers_tell_their_context_window() {
    // llama.cpp's llama-server: /props (the window each request gets) beats /v1/models.
    let fake = FakeProvider::start();
    fake.route(
        "GET",
        "/props",
        json_reply(json!({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1})),
    );
    fake.route(
        "GET",
        "/v1/models",
        json_reply(
            json!({"object": "list", "data": [{"id": "m.gguf", "meta": {"n_ctx_train": 131072}}]}),
        ),
    );
    let w = context_window(&fake.settings(OPENAI)).await.unwrap();
    assert_eq!((w.tokens, w.origin), (8192, "llama.cpp /props n_ctx"));
    let paths: Vec<String> = fake.probes().iter().map(|p| p.path.clone()).collect();
    for path in [
        "/props",
        "/v1/models",
        "/api/ps",
        "/api/show",
        "/api/v0/models/fake-model",
    ] {
        assert!(paths.contains(&path.to_string()), "{paths:?}");
    }
    // Probes are not model requests.
    assert_eq!(fake.request_count(), 0);

    // vLLM.
    let fake = FakeProvider::start();
    fake.route(
        "GET",
        "/v1/models",
        json_reply(
            json!({"data": [{"id": "other"}, {"id": "fake-model", "max_model_len": 32768}]}),
        ),
    );
    assert_eq!(
        context_window(&fake.settings(OPENAI)).await.unwrap().tokens,
        32768
    );

    // Ollama: the loaded model's window, else num_ctx from /api/show.
    let fake = FakeProvider::start();
    fake.route(
        "POST",
        "/api/show",
        json_reply(
            json!({"parameters": "num_ctx 16384", "model_info": {"llama.context_length": 131072}}),
        ),
    );
    let w = context_window(&fake.settings(OPENAI)).await.unwrap();
    assert_eq!((w.tokens, w.origin), (16384, "Ollama /api/show num_ctx"));
    let show = &fake
        .probes()
        .into_iter()
        .find(|p| p.path == "/api/show")
        .unwrap();
    assert_eq!(show.json()["model"], "fake-model");

    // LM Studio.
    let fake = FakeProvider::start();
    fake.route(
        "GET",
        "/api/v0/models/fake-model",
        json_reply(
            json!({"id": "fake-model", "max_context_length": 32768, "loaded_context_length": 4096}),
        ),
    );
    assert_eq!(
        context_window(&fake.settings(OPENAI)).await.unwrap().tokens,
        4096
    );
}

#[tokio::test]
async fn servers_that_tell_nothing_leave_the_window_unknown() {
    // llama-cpp-python: its model list has ids only, and /props is 404.
    let fake = FakeProvider::start();
    fake.route(
        "GET",
        "/v1/models",
        json_reply(json!({"object": "list", "data": [{"id": "/home/user/m.gguf", "object": "model", "owned_by": "me", "permissions": []}]})),
    );
    assert_eq!(context_window(&fake.settings(OPENAI)).await, None);
    // Garbage and a server that is not there.
    let fake = FakeProvider::start();
    fake.route("GET", "/props", Reply::status(200, &[], "<html>"));
    assert_eq!(context_window(&fake.settings(OPENAI)).await, None);
    let dead = ProviderSettings::new(OPENAI, "m", "http://127.0.0.1:9/v1", None);
    assert_eq!(context_window(&dead).await, None);
    // Anthropic is never asked.
    let fake = FakeProvider::start();
    assert_eq!(context_window(&fake.settings(ANTHROPIC)).await, None);
    assert!(fake.probes().is_empty());
}
