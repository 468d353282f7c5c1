//! The provider clients against the fake provider on loopback: the real HTTP client, the real
//! SSE parsing, the fixtures of `../shared/fixtures/providers/` (SPEC §9, §10).

use std::time::{Duration, Instant};

use bytes::Bytes;
use vis::protocol::{ContentBlock, StreamEvent, ToolCall, Usage};
use vis::providers::{ModelResponse, Provider, ProviderError, ProviderKind, ProviderSettings};

use crate::support::fake_provider::{shared_prefix_len, FakeProvider, Piece, Reply};

const OPENAI: ProviderKind = ProviderKind::OpenAi;
const ANTHROPIC: ProviderKind = ProviderKind::Anthropic;

/// A canonical request body with odd spacing and key order: it must arrive byte for byte.
const BODY: &str = r#"{"model":"fake-model","stream":true, "messages":[{"role":"user","content":"hi \u00e9"}],"a":1}"#;

const CAT_CALL: &str = r#"{"code": "print(cat('src/app.py', 1, 40))"}"#;

fn provider(fake: &FakeProvider, kind: ProviderKind) -> Provider {
    provider_with(fake, kind, |_| {})
}

fn provider_with(
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

async fn ok(p: &Provider) -> (ModelResponse, Vec<StreamEvent>) {
    let (result, events) = call(p).await;
    match result {
        Ok(response) => (response, events),
        Err(err) => panic!("expected a response, got: {err}"),
    }
}

async fn err(p: &Provider) -> (ProviderError, Vec<StreamEvent>) {
    let (result, events) = call(p).await;
    match result {
        Ok(response) => panic!("expected an error, got {response:?}"),
        Err(err) => (err, events),
    }
}

fn text(t: &str) -> ContentBlock {
    ContentBlock::Text { text: t.into() }
}

fn tool(id: &str, args: &str) -> ContentBlock {
    ContentBlock::ToolCall(ToolCall {
        id: id.into(),
        name: "python_execution".into(),
        arguments: args.into(),
    })
}

fn usage(
    input: Option<u64>,
    cached: Option<u64>,
    creation: Option<u64>,
    output: Option<u64>,
) -> Usage {
    Usage {
        input_tokens: input,
        cached_tokens: cached,
        cache_creation_tokens: creation,
        output_tokens: output,
    }
}

fn retry_count(events: &[StreamEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Retrying { .. }))
        .count()
}

fn assert_mentions(err: &ProviderError, parts: &[&str]) {
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "not one line: {msg}");
    for part in parts {
        assert!(msg.contains(part), "{part:?} missing from: {msg}");
    }
}

// ---- fixtures -------------------------------------------------------------------------------

#[tokio::test]
async fn fixture_openai_tool_call_joins_fragments_and_reads_final_usage() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-tool-call.sse"));
    let (r, events) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(
        r.message.blocks,
        vec![text("Let me read it."), tool("call_1", CAT_CALL)]
    );
    assert_eq!(r.usage, usage(Some(2210), Some(1792), None, Some(31)));
    assert_eq!(r.stop_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(r.retries, 0);
    assert!(r.ttft.is_some() && r.ttft.unwrap() <= r.latency);
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta {
                text: "Let me read it.".into()
            },
            StreamEvent::ToolCallStarted {
                id: "call_1".into(),
                name: "python_execution".into()
            },
        ]
    );
}

#[tokio::test]
async fn fixture_openai_parallel_calls_come_out_in_index_order() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-parallel-tool-calls.sse"));
    let (r, _) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(
        r.message.blocks,
        vec![
            tool("call_a", r#"{"code": "print(1)"}"#),
            tool("call_b", r#"{"code": "print(2)"}"#)
        ]
    );
    assert_eq!(r.usage.input_tokens, Some(2210));
    assert_eq!(r.usage.cached_tokens, Some(1792));
}

#[tokio::test]
async fn fixture_local_server_without_usage_or_done_finishes_with_usage_unavailable() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-compatible-no-usage-no-done.sse"));
    let (r, _) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(r.message.text(), "The tests pass now.");
    assert_eq!(r.usage, Usage::default(), "never zero when not reported");
    assert!(!r.usage.has_input());
    assert_eq!(r.stop_reason.as_deref(), Some("stop"));
    assert_eq!(r.model.as_deref(), Some("qwen2.5-coder:7b"));
}

#[tokio::test]
async fn fixture_comments_ignored_reasoning_apart_inline_usage_taken() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture(
        "openai-compatible-reasoning-comments-inline-usage.sse",
    ));
    let (r, events) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(r.message.blocks, vec![text("Done.")]);
    assert_eq!(
        r.message.reasoning.as_deref(),
        Some("The user wants a short answer.")
    );
    assert_eq!(r.usage, usage(Some(900), None, None, Some(12)));
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta {
                text: "The user wants".into()
            },
            StreamEvent::ReasoningDelta {
                text: " a short answer.".into()
            },
            StreamEvent::TextDelta {
                text: "Done.".into()
            },
        ]
    );
}

#[tokio::test]
async fn fixture_error_midstream_is_a_clear_error_not_an_answer() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-error-midstream.sse"));
    let (e, _) = err(&provider_with(&fake, OPENAI, |s| s.max_retries = 0)).await;
    assert_eq!(e.kind(), "stream_error");
    assert!(e.is_transient(), "server_error is transient");
    assert_mentions(
        &e,
        &[
            "mid-stream",
            "server_error",
            "The server had an error while processing your request.",
            "partial answer was discarded",
            "retry later",
        ],
    );
}

#[tokio::test]
async fn fixture_error_midstream_is_retried_and_the_next_reply_wins() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-error-midstream.sse"));
    fake.push(Reply::openai().text("Whole answer.").build());
    let (r, events) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(r.message.blocks, vec![text("Whole answer.")]);
    assert_eq!(r.retries, 1);
    // The failed attempt's partial text was shown, then the retry told the UI to discard it.
    let retry_at = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Retrying { .. }))
        .unwrap();
    assert!(events[..retry_at].contains(&StreamEvent::TextDelta {
        text: "Partial".into()
    }));
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn fixture_truncated_in_tool_call_is_truncated_and_returns_no_call() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-truncated-in-tool-call.sse"));
    let (e, events) = err(&provider_with(&fake, OPENAI, |s| s.max_retries = 0)).await;
    assert_eq!(e.kind(), "truncated");
    assert_mentions(
        &e,
        &[
            "ended early",
            "inside tool call 'python_execution' (call_t)",
            "not run",
            "retry",
        ],
    );
    // The display saw the call start, but no response (so no call) came back.
    assert!(events
        .iter()
        .any(|e| matches!(e, StreamEvent::ToolCallStarted { .. })));
}

#[tokio::test]
async fn truncation_is_retried_and_exhaustion_names_the_attempts() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-truncated-in-tool-call.sse"));
    fake.push(Reply::fixture("openai-truncated-in-tool-call.sse"));
    let (e, events) = err(&provider_with(&fake, OPENAI, |s| s.max_retries = 1)).await;
    assert_eq!(e.kind(), "truncated");
    assert_mentions(&e, &["gave up after 2 attempts", "ended early"]);
    assert_eq!(retry_count(&events), 1);
}

#[tokio::test]
async fn fixture_anthropic_thinking_text_tool_use() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("anthropic-thinking-text-tool-use.sse"));
    let (r, events) = ok(&provider(&fake, ANTHROPIC)).await;
    assert_eq!(
        r.message.blocks,
        vec![
            ContentBlock::Thinking {
                thinking: "Read the file first.".into(),
                signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()
            },
            text("Let me read it."),
            ContentBlock::ToolCall(ToolCall {
                id: "toolu_01".into(),
                name: "python_execution".into(),
                arguments: CAT_CALL.into()
            }),
        ]
    );
    // input = 410 + 0 + 1,800 (SPEC §7).
    assert_eq!(r.usage, usage(Some(2210), Some(1800), Some(0), Some(87)));
    assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(r.message.reasoning, None);
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta {
                text: "Read the file first.".into()
            },
            StreamEvent::TextDelta {
                text: "Let me read it.".into()
            },
            StreamEvent::ToolCallStarted {
                id: "toolu_01".into(),
                name: "python_execution".into()
            },
        ]
    );
}

#[tokio::test]
async fn fixture_anthropic_overloaded_midstream_is_retried() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("anthropic-overloaded-midstream.sse"));
    fake.push(Reply::anthropic().text("Recovered.").build());
    let (r, events) = ok(&provider(&fake, ANTHROPIC)).await;
    assert_eq!(r.message.blocks, vec![text("Recovered.")]);
    assert_eq!(r.retries, 1);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            StreamEvent::TextDelta { .. } => "text",
            StreamEvent::Retrying { .. } => "retry",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds.first(), Some(&"text"), "{events:?}");
    assert_eq!(kinds[1], "retry");
    match &events[1] {
        StreamEvent::Retrying {
            attempt, reason, ..
        } => {
            assert_eq!(*attempt, 1);
            assert!(reason.contains("overloaded_error"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn anthropic_overloaded_without_retries_says_so() {
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("anthropic-overloaded-midstream.sse"));
    let (e, _) = err(&provider_with(&fake, ANTHROPIC, |s| s.max_retries = 0)).await;
    assert_eq!(e.kind(), "stream_error");
    assert_mentions(&e, &["overloaded_error", "Overloaded", "retry later"]);
}

// ---- built replies --------------------------------------------------------------------------

#[tokio::test]
async fn built_openai_reply_with_two_tool_calls_and_events_in_order() {
    let fake = FakeProvider::start();
    fake.push(
        Reply::openai()
            .reasoning("think")
            .text("Two steps.")
            .tool_call("call_1", "python_execution", r#"{"code":"print(1)"}"#)
            .tool_call("call_2", "python_execution", r#"{"code":"print('é')"}"#)
            .usage(usage(Some(100), Some(64), None, Some(9)))
            .fragment(3)
            .build(),
    );
    let (r, events) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(
        r.message.blocks,
        vec![
            text("Two steps."),
            tool("call_1", r#"{"code":"print(1)"}"#),
            tool("call_2", r#"{"code":"print('é')"}"#)
        ]
    );
    assert_eq!(r.message.reasoning.as_deref(), Some("think"));
    assert_eq!(r.usage, usage(Some(100), Some(64), None, Some(9)));
    assert_eq!(r.stop_reason.as_deref(), Some("tool_calls"));
    let texts: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, "Two steps.");
    let order: Vec<String> = events
        .iter()
        .map(|e| match e {
            StreamEvent::TextDelta { .. } => "text".to_string(),
            StreamEvent::ReasoningDelta { .. } => "reasoning".to_string(),
            StreamEvent::ToolCallStarted { id, .. } => id.clone(),
            StreamEvent::Retrying { .. } => "retry".to_string(),
        })
        .collect();
    let mut dedup = order.clone();
    dedup.dedup();
    assert_eq!(dedup, ["reasoning", "text", "call_1", "call_2"]);
    assert!(
        order.iter().filter(|o| *o == "text").count() > 1,
        "several deltas"
    );
}

#[tokio::test]
async fn built_anthropic_reply_with_two_tool_calls() {
    let fake = FakeProvider::start();
    fake.push(
        Reply::anthropic()
            .thinking("plan", "sig-1")
            .redacted_thinking("opaque")
            .text("Both.")
            .tool_call("toolu_1", "python_execution", r#"{"code":"a=1"}"#)
            .tool_call("toolu_2", "python_execution", "")
            .usage(usage(Some(1000), Some(600), Some(300), Some(42)))
            .build(),
    );
    let (r, _) = ok(&provider(&fake, ANTHROPIC)).await;
    assert_eq!(
        r.message.blocks,
        vec![
            ContentBlock::Thinking {
                thinking: "plan".into(),
                signature: "sig-1".into()
            },
            ContentBlock::RedactedThinking {
                data: "opaque".into()
            },
            text("Both."),
            tool("toolu_1", r#"{"code":"a=1"}"#),
            tool("toolu_2", "{}"),
        ]
    );
    assert_eq!(r.usage, usage(Some(1000), Some(600), Some(300), Some(42)));
    assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
}

#[tokio::test]
async fn usage_subsets_stay_none_where_not_sent() {
    let fake = FakeProvider::start();
    fake.push(
        Reply::openai()
            .text("x")
            .usage(usage(Some(5), None, None, None))
            .usage_inline()
            .no_done()
            .build(),
    );
    fake.push(Reply::anthropic().text("y").build());
    let (r, _) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(r.usage, usage(Some(5), None, None, None));
    let (r, _) = ok(&provider(&fake, ANTHROPIC)).await;
    assert_eq!(r.usage, Usage::default());
}

#[tokio::test]
async fn a_body_without_the_final_blank_line_still_delivers_its_last_event() {
    let fake = FakeProvider::start();
    let body = Reply::openai().text("end").no_done().body();
    fake.push(Reply::raw_sse(body.trim_end()));
    let (r, _) = ok(&provider(&fake, OPENAI)).await;
    assert_eq!(r.message.text(), "end");
    assert_eq!(r.stop_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn a_body_cut_mid_event_is_truncated_not_malformed() {
    let fake = FakeProvider::start();
    let body = Reply::openai().text("end").no_done().body();
    let cut = &body[..body.len() - 20];
    fake.push(Reply::raw_sse(cut));
    let (e, _) = err(&provider_with(&fake, OPENAI, |s| s.max_retries = 0)).await;
    assert_eq!(e.kind(), "truncated", "{e}");
}

#[tokio::test]
async fn anthropic_stream_without_message_stop_is_truncated() {
    let fake = FakeProvider::start();
    let body = Reply::anthropic()
        .tool_call("toolu_1", "python_execution", r#"{"code":"print(1)"}"#)
        .body();
    let cut = body.find("event: content_block_stop").unwrap();
    fake.push(Reply::truncated(&body[..cut]));
    let (e, _) = err(&provider_with(&fake, ANTHROPIC, |s| s.max_retries = 0)).await;
    assert_eq!(e.kind(), "truncated");
    assert_mentions(
        &e,
        &["inside tool call 'python_execution' (toolu_1)", "not run"],
    );
}

#[tokio::test]
async fn a_dropped_connection_mid_body_is_truncated() {
    let fake = FakeProvider::start();
    let body = Reply::openai().text("Hello there").body();
    fake.push(Reply::truncated(&body[..body.len() / 2]));
    let (e, _) = err(&provider_with(&fake, OPENAI, |s| s.max_retries = 0)).await;
    assert_eq!(e.kind(), "truncated");
    assert_mentions(&e, &["ended early"]);
}

#[tokio::test]
async fn garbage_in_a_data_line_is_malformed() {
    let fake = FakeProvider::start();
    fake.push(Reply::raw_sse("data: {not json}\n\ndata: [DONE]\n\n"));
    let (e, _) = err(&provider(&fake, OPENAI)).await;
    assert_eq!(e.kind(), "malformed");
    assert!(!e.is_transient());
    assert_mentions(
        &e,
        &[
            "malformed data",
            "not JSON",
            "check that --provider and --base-url",
        ],
    );
    assert_eq!(fake.request_count(), 1, "garbage is not retried");
}

#[tokio::test]
async fn a_json_body_instead_of_a_stream_is_explained() {
    let fake = FakeProvider::start();
    fake.push(Reply::status(
        200,
        &[("content-type", "application/json")],
        r#"{"id":"x","choices":[{"message":{"content":"hi"}}]}"#,
    ));
    let (e, _) = err(&provider(&fake, OPENAI)).await;
    assert_eq!(e.kind(), "malformed");
    assert_mentions(&e, &["text/event-stream", "\"stream\": true"]);
}

#[tokio::test]
async fn a_non_transient_midstream_error_is_not_retried() {
    let fake = FakeProvider::start();
    fake.push(Reply::raw_sse(
        "data: {\"error\":{\"message\":\"Invalid tool schema\",\"type\":\"invalid_request_error\"}}\n\n",
    ));
    let (e, _) = err(&provider(&fake, OPENAI)).await;
    assert_mentions(&e, &["Invalid tool schema", "not retried"]);
    assert_eq!(fake.request_count(), 1);
}

// ---- HTTP statuses and retries --------------------------------------------------------------

#[tokio::test]
async fn rate_limit_honours_retry_after_beyond_the_backoff_cap() {
    let fake = FakeProvider::start();
    fake.push(Reply::error(429, "rate_limit_error", "slow down").with_header("retry-after", "1"));
    fake.push(Reply::openai().text("ok").build());
    let p = provider(&fake, OPENAI); // retry_max_delay is 10 ms
    let started = Instant::now();
    let (r, events) = ok(&p).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.retries, 1);
    assert!(r.latency >= Duration::from_secs(1));
    match &events[0] {
        StreamEvent::Retrying {
            attempt,
            delay_ms,
            reason,
        } => {
            assert_eq!((*attempt, *delay_ms), (1, 1000));
            assert!(
                reason.contains("HTTP 429") && reason.contains("slow down"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn retry_after_ms_is_preferred_and_a_too_long_wait_fails_at_once() {
    let fake = FakeProvider::start();
    fake.push(
        Reply::error(429, "rate_limit_error", "slow")
            .with_header("retry-after-ms", "120")
            .with_header("retry-after", "30"),
    );
    fake.push(Reply::openai().text("ok").build());
    let started = Instant::now();
    let (r, _) = ok(&provider(&fake, OPENAI)).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(120) && took < Duration::from_secs(20),
        "{took:?}"
    );
    assert_eq!(r.retries, 1);

    fake.push(
        Reply::error(429, "rate_limit_error", "daily quota").with_header("retry-after", "3600"),
    );
    let started = Instant::now();
    let (e, events) = err(&provider(&fake, OPENAI)).await;
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(e.kind(), "rate_limited");
    assert_eq!(retry_count(&events), 0);
    assert_mentions(
        &e,
        &[
            "HTTP 429",
            "daily quota",
            "asks to wait 3600 s",
            "lower the request rate",
        ],
    );
}

#[tokio::test]
async fn server_errors_are_retried() {
    let fake = FakeProvider::start();
    fake.push(Reply::error(503, "server_error", "unavailable"));
    fake.push(Reply::error(529, "overloaded_error", "Overloaded"));
    fake.push(Reply::anthropic().text("fine").build());
    let (r, events) = ok(&provider(&fake, ANTHROPIC)).await;
    assert_eq!(r.message.text(), "fine");
    assert_eq!(r.retries, 2);
    assert_eq!(retry_count(&events), 2);
}

#[tokio::test]
async fn exhausted_retries_name_the_attempts_and_the_last_cause() {
    let fake = FakeProvider::start();
    for _ in 0..3 {
        fake.push(Reply::error(503, "server_error", "down for maintenance"));
    }
    let (e, events) = err(&provider(&fake, OPENAI)).await; // max_retries 2
    assert_eq!(e.kind(), "server");
    assert_mentions(
        &e,
        &[
            "gave up after 3 attempts",
            "HTTP 503",
            "down for maintenance",
            "retry later",
        ],
    );
    assert_eq!(retry_count(&events), 2);
    assert_eq!(fake.request_count(), 3);
}

#[tokio::test]
async fn unauthorized_names_the_key_variable_and_is_not_retried() {
    let fake = FakeProvider::start();
    fake.push(Reply::error(
        401,
        "invalid_request_error",
        "Incorrect API key provided: sk-xx",
    ));
    fake.push(Reply::error(403, "permission_error", "invalid x-api-key"));
    let (e, _) = err(&provider(&fake, OPENAI)).await;
    assert_eq!(e.kind(), "auth");
    assert_mentions(
        &e,
        &[
            "rejected the API key",
            "HTTP 401",
            "Incorrect API key",
            "set OPENAI_API_KEY to a valid key",
        ],
    );
    let (e, _) = err(&provider(&fake, ANTHROPIC)).await;
    assert_mentions(&e, &["HTTP 403", "set ANTHROPIC_API_KEY"]);
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn not_found_names_the_model_and_the_url() {
    let fake = FakeProvider::start();
    // A base URL without /v1: the fake has no such route and answers 404.
    let p = provider_with(&fake, OPENAI, |s| {
        s.base_url = fake.url();
        s.model = "gpt-nope".into();
    });
    let (e, _) = err(&p).await;
    assert_eq!(e.kind(), "not_found");
    let url = format!("{}/chat/completions", fake.url());
    assert_mentions(
        &e,
        &[
            &format!("HTTP 404 from {url}"),
            "unknown model 'gpt-nope'",
            "check --model and --base-url",
            "usually end in /v1",
        ],
    );
    assert_eq!(fake.request_count(), 1);
}

#[tokio::test]
async fn bad_request_carries_the_providers_message() {
    let fake = FakeProvider::start();
    fake.push(Reply::error(
        400,
        "invalid_request_error",
        "prompt is too long: 215000 tokens > 200000 maximum",
    ));
    let (e, _) = err(&provider(&fake, ANTHROPIC)).await;
    assert_eq!(e.kind(), "bad_request");
    assert_mentions(
        &e,
        &[
            "HTTP 400",
            "prompt is too long: 215000 tokens > 200000 maximum",
            "not retried",
        ],
    );
    fake.push(Reply::status(422, &[], "\u{1b}[1mraw\ttext\nbody\u{7}"));
    let (e, _) = err(&provider(&fake, OPENAI)).await;
    assert_mentions(&e, &["HTTP 422", "[1mraw text body"]);
    assert!(!e.to_string().chars().any(|c| c.is_control()));
    assert_eq!(fake.request_count(), 2);
}

#[tokio::test]
async fn connection_refused_is_retried_then_explained() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut settings =
        ProviderSettings::new(OPENAI, "m", format!("http://127.0.0.1:{port}/v1"), None);
    settings.retry_base_delay = Duration::from_millis(1);
    settings.retry_max_delay = Duration::from_millis(5);
    settings.max_retries = 2;
    let p = Provider::new(settings).unwrap();
    let (e, events) = err(&p).await;
    assert_eq!(e.kind(), "connect");
    assert_eq!(retry_count(&events), 2);
    assert_mentions(
        &e,
        &[
            "gave up after 3 attempts",
            &format!("cannot connect to http://127.0.0.1:{port}/v1/chat/completions"),
            "check that the server is running",
        ],
    );
}

#[tokio::test]
async fn request_timeout_until_headers() {
    let fake = FakeProvider::start();
    fake.push(Reply::delay(
        Duration::from_secs(30),
        Reply::openai().text("late").build(),
    ));
    let p = provider_with(&fake, OPENAI, |s| {
        s.request_timeout = Duration::from_millis(150);
        s.max_retries = 0;
    });
    let started = Instant::now();
    let (e, _) = err(&p).await;
    // Far below the reply's own delay, so only the timeout can have ended it (generous for a
    // loaded machine).
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(e.kind(), "timeout");
    assert_mentions(
        &e,
        &[
            "no response from",
            "within 150 ms",
            "raise the request timeout",
        ],
    );

    // Retried: the next reply is on time.
    fake.push(Reply::delay(
        Duration::from_secs(30),
        Reply::openai().text("late").build(),
    ));
    fake.push(Reply::openai().text("on time").build());
    let p = provider_with(&fake, OPENAI, |s| {
        s.request_timeout = Duration::from_millis(150)
    });
    let (r, _) = ok(&p).await;
    assert_eq!((r.message.text().as_str(), r.retries), ("on time", 1));
}

#[tokio::test]
async fn idle_timeout_between_events_but_comments_are_life() {
    let fake = FakeProvider::start();
    let body = Reply::openai().text("stalled answer").body();
    let half = body.find("\n\n").unwrap() + 2;
    fake.push(Reply::stall(&body[..half], Duration::from_secs(30)));
    let p = provider_with(&fake, OPENAI, |s| {
        s.idle_timeout = Duration::from_millis(200);
        s.max_retries = 0;
    });
    let started = Instant::now();
    let (e, _) = err(&p).await;
    // Far below the reply's own delay, so only the timeout can have ended it (generous for a
    // loaded machine).
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(e.kind(), "idle_timeout");
    assert_mentions(&e, &["went silent for 200 ms", "raise the idle timeout"]);

    // 5 × 400 ms of silence broken by keep-alive comments: longer than the idle timeout in
    // total, never in one gap (with room for a loaded machine's late wake-ups).
    let p = provider_with(&fake, OPENAI, |s| {
        s.idle_timeout = Duration::from_millis(1500);
        s.max_retries = 0;
    });
    let body = Reply::openai().text("kept alive").body();
    let mut pieces = Vec::new();
    for _ in 0..5 {
        pieces.push(Piece::Pause(Duration::from_millis(400)));
        pieces.push(Piece::Bytes(Bytes::from_static(b": keep-alive\n\n")));
    }
    pieces.push(Piece::Bytes(Bytes::from(body)));
    fake.push(Reply::pieces(pieces));
    let (r, _) = ok(&p).await;
    assert_eq!(r.message.text(), "kept alive");
}

#[tokio::test]
async fn script_ran_out_fails_loudly_without_retries() {
    let fake = FakeProvider::start();
    let (e, events) = err(&provider(&fake, OPENAI)).await;
    assert_mentions(&e, &["script ran out of replies at request 1"]);
    assert_eq!(retry_count(&events), 0, "x-should-retry: false is honoured");
}

// ---- settings, requests and headers ---------------------------------------------------------

#[test]
fn a_missing_key_for_an_official_host_fails_before_sending() {
    for (kind, env) in [(OPENAI, "OPENAI_API_KEY"), (ANTHROPIC, "ANTHROPIC_API_KEY")] {
        let url = ProviderSettings::default_base_url(kind);
        for key in [None, Some("  ".to_string())] {
            let e = Provider::new(ProviderSettings::new(kind, "m", url, key)).unwrap_err();
            assert_eq!(e.kind(), "auth");
            assert_mentions(&e, &["no API key for", url, &format!("set {env}")]);
        }
        assert_eq!(ProviderSettings::key_env(kind), env);
        // With a key, the TLS client (rustls with ring) builds without touching the network.
        let p = Provider::new(ProviderSettings::new(kind, "m", url, Some("k".into()))).unwrap();
        assert_eq!(p.settings().kind, kind);
    }
}

#[test]
fn provider_names_and_base_urls() {
    assert_eq!("openai".parse::<ProviderKind>().unwrap(), OPENAI);
    assert_eq!("Anthropic".parse::<ProviderKind>().unwrap(), ANTHROPIC);
    assert_eq!(OPENAI.to_string(), "openai");
    let e = "gemini".parse::<ProviderKind>().unwrap_err();
    assert_mentions(
        &e,
        &[
            "unknown provider 'gemini'",
            "--provider openai",
            "anthropic",
        ],
    );
    let e = Provider::new(ProviderSettings::new(OPENAI, "m", "localhost:8080", None)).unwrap_err();
    assert_eq!(e.kind(), "config");
    assert_mentions(
        &e,
        &[
            "invalid base URL 'localhost:8080'",
            "https://api.openai.com/v1",
        ],
    );
    let s = ProviderSettings::new(ANTHROPIC, "m", "https://api.anthropic.com/", None);
    assert_eq!(s.endpoint(), "https://api.anthropic.com/v1/messages");
}

#[tokio::test]
async fn the_body_goes_byte_for_byte_with_each_providers_headers() {
    let fake = FakeProvider::start();
    fake.push(Reply::openai().text("a").build());
    fake.push(Reply::openai().text("b").build());
    fake.push(Reply::anthropic().text("c").build());
    ok(&provider(&fake, OPENAI)).await;
    // A local server without a key, and a base URL with a trailing slash.
    ok(&provider_with(&fake, OPENAI, |s| {
        s.api_key = None;
        s.base_url.push('/');
    }))
    .await;
    ok(&provider(&fake, ANTHROPIC)).await;

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    for req in &reqs {
        assert_eq!(req.method, "POST");
        assert_eq!(&req.body[..], BODY.as_bytes());
        assert_eq!(req.header("content-type"), Some("application/json"));
        assert_eq!(req.header("accept"), Some("text/event-stream"));
        assert!(req.header("user-agent").unwrap().starts_with("vis/"));
    }
    assert_eq!(reqs[0].json()["a"], 1);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer test-key"));
    assert_eq!(reqs[0].header("x-api-key"), None);
    assert_eq!(reqs[1].path, "/v1/chat/completions");
    assert_eq!(reqs[1].header("authorization"), None);
    assert_eq!(reqs[2].path, "/v1/messages");
    assert_eq!(reqs[2].header("x-api-key"), Some("test-key"));
    assert_eq!(reqs[2].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(reqs[2].header("authorization"), None);
}

#[tokio::test]
async fn one_client_reuses_its_connection() {
    let fake = FakeProvider::start();
    fake.push(Reply::openai().text("1").build());
    fake.push(Reply::openai().text("2").build());
    let p = provider(&fake, OPENAI);
    ok(&p).await;
    ok(&p).await;
    let reqs = fake.requests();
    assert_eq!(reqs[0].connection, reqs[1].connection);
}

#[tokio::test]
async fn dropping_the_future_cancels_cleanly() {
    let fake = FakeProvider::start();
    let body = Reply::openai().text("never finishes").body();
    fake.push(Reply::stall(
        &body[..body.len() / 2],
        Duration::from_secs(30),
    ));
    fake.push(Reply::openai().text("next").build());
    let p = provider(&fake, OPENAI);
    let started = Instant::now();
    let cancelled = tokio::time::timeout(Duration::from_millis(200), call(&p)).await;
    assert!(cancelled.is_err());
    // Far below the reply's own delay, so only the timeout can have ended it (generous for a
    // loaded machine).
    assert!(started.elapsed() < Duration::from_secs(10));
    let (r, _) = ok(&p).await;
    assert_eq!(r.message.text(), "next");
}

#[test]
fn the_stream_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let settings = ProviderSettings::new(OPENAI, "m", "http://127.0.0.1:9/v1", None);
    let p = Provider::new(settings).unwrap();
    let mut sink = |_e: StreamEvent| {};
    let fut = p.stream(Bytes::new(), &mut sink);
    assert_send(&fut);
}

#[test]
fn the_fake_computes_replies_from_requests() {
    // Sync test: the fake runs on its own thread; the client gets a runtime of its own.
    let fake = FakeProvider::start();
    let mut prev: Vec<u8> = Vec::new();
    fake.respond_with(move |req| {
        let cached = shared_prefix_len(&prev, &req.body) as u64;
        prev = req.body.to_vec();
        Reply::openai()
            .text("ok")
            .usage(usage(
                Some(req.body.len() as u64),
                Some(cached),
                None,
                Some(1),
            ))
            .build()
    });
    fake.push_fn(|req| Reply::openai().text(&format!("path {}", req.path)).build());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let p = provider(&fake, OPENAI);
    rt.block_on(async {
        let (r, _) = ok(&p).await;
        assert_eq!(r.message.text(), "path /v1/chat/completions");
        let (r1, _) = ok(&p).await;
        assert_eq!(r1.usage.input_tokens, Some(BODY.len() as u64));
        assert_eq!(r1.usage.cached_tokens, Some(0));
        let (r2, _) = ok(&p).await;
        assert_eq!(r2.usage.cached_tokens, Some(BODY.len() as u64));
    });
    assert_eq!(shared_prefix_len(b"abcd", b"abxy"), 2);
    assert_eq!(fake.remaining(), 0);
}
