//! A fake model provider on loopback that speaks the real wire formats: OpenAI Chat Completions
//! streaming (`POST /v1/chat/completions`) and Anthropic Messages streaming (`POST /v1/messages`).
//!
//! - `FakeProvider::start()` binds `127.0.0.1:0` and serves on its own thread with its own tokio
//!   runtime, so it works from plain `#[test]` fns and from async code alike; dropping it stops
//!   the server.
//! - Replies are a FIFO script: `push(Reply)`, `push_fn(|req| Reply)` (computed from the
//!   request), or a persistent `respond_with(..)` used once the queue is empty. With nothing
//!   left it answers 500 with a body saying the script ran out (and `x-should-retry: false`, so
//!   a client that honours it fails at once instead of retrying into the same wall).
//! - `Reply::openai()` / `Reply::anthropic()` build real SSE bodies from a description (text in
//!   several deltas, tool calls with their arguments in small fragments, reasoning or thinking,
//!   usage, stop reason); `Reply::raw_sse`/`fixture` serve bytes as given; `Reply::capture`
//!   replays a recorded `.http` exchange (status, headers, body byte for byte); `status`,
//!   `error`, `truncated`, `delay` and `stall` script failures.
//! - Every request is recorded (method, path, headers, body bytes exactly as received, and the
//!   connection it came on) before it is answered: `requests()`. What a client asks a server
//!   about itself (any GET, `POST /api/show`) is answered by `route(..)` (else 404) and
//!   recorded apart: `probes()`.
//!
//! Kept dependency-light (tokio, hyper, http-body-util, futures, serde_json and `vis`'s own
//! protocol types) and free of the test support module, because benchmarks include this file
//! with `#[path]`.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use vis::protocol::Usage;
use vis::providers::{ProviderKind, ProviderSettings};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query (`/v1/chat/completions`).
    pub path: String,
    /// Lower-case names, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body exactly as received.
    pub body: Bytes,
    /// Which TCP connection it came on (counted from 1), to check connection reuse.
    pub connection: u64,
}

impl RecordedRequest {
    /// The body as JSON (panics with the body shown if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|err| {
            panic!(
                "request body is not JSON ({err}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The length of the byte prefix `cur` shares with `prev` (what a prompt cache could reuse).
pub fn shared_prefix_len(prev: &[u8], cur: &[u8]) -> usize {
    prev.iter().zip(cur).take_while(|(a, b)| a == b).count()
}

/// One step of a streamed body.
#[derive(Debug, Clone)]
pub enum Piece {
    /// Bytes written (and flushed) as one chunk.
    Bytes(Bytes),
    /// Silence.
    Pause(Duration),
    /// Drop the connection here, mid-body.
    Abort,
}

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    pieces: Vec<Piece>,
    /// Wait before sending the headers.
    delay: Duration,
    /// Hold the reply until this many requests reached the gate (see [`Gate`]).
    gate: Option<Gate>,
}

/// A meeting point for concurrent requests: a reply behind a gate of `n` is sent only once
/// `n` requests have reached it, so a script proves its requests were in flight together (if
/// they come one after another, the first never gets its answer and fails after 30 s with a
/// reply saying so, instead of hanging the test).
#[derive(Debug, Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

#[derive(Debug)]
struct GateInner {
    n: usize,
    arrived: std::sync::atomic::AtomicUsize,
    notify: tokio::sync::Notify,
}

impl Gate {
    pub fn new(n: usize) -> Gate {
        Gate {
            inner: Arc::new(GateInner {
                n,
                arrived: std::sync::atomic::AtomicUsize::new(0),
                notify: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Counts one arrival made by the test itself: a reply behind a gate of 2 is held until
    /// the test has seen what it must see while the request is in flight, then goes.
    pub fn release(&self) {
        let inner = &self.inner;
        if inner.arrived.fetch_add(1, Ordering::SeqCst) + 1 >= inner.n {
            inner.notify.notify_waiters();
        }
    }

    /// How many requests have reached the gate.
    pub fn arrived(&self) -> usize {
        self.inner.arrived.load(Ordering::SeqCst)
    }

    /// Counts one arrival and waits for the rest; `false` if they did not come in 30 s.
    async fn pass(&self) -> bool {
        let inner = &self.inner;
        let notified = inner.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if inner.arrived.fetch_add(1, Ordering::SeqCst) + 1 >= inner.n {
            inner.notify.notify_waiters();
            return true;
        }
        loop {
            let waited = tokio::time::timeout(Duration::from_secs(30), notified.as_mut()).await;
            if inner.arrived.load(Ordering::SeqCst) >= inner.n {
                return true;
            }
            if waited.is_err() {
                return false;
            }
            notified.set(inner.notify.notified());
            notified.as_mut().enable();
        }
    }
}

/// Splits an SSE body after each blank line, so each event is its own write.
fn split_events(body: &[u8]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < body.len() {
        if body[i] == b'\n' && body[i + 1] == b'\n' {
            pieces.push(Piece::Bytes(Bytes::copy_from_slice(&body[start..i + 2])));
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    if start < body.len() {
        pieces.push(Piece::Bytes(Bytes::copy_from_slice(&body[start..])));
    }
    pieces
}

fn sse_headers() -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "text/event-stream".into()),
        ("cache-control".into(), "no-cache".into()),
    ]
}

impl Reply {
    pub fn openai() -> OpenAiReply {
        OpenAiReply::default()
    }

    pub fn anthropic() -> AnthropicReply {
        AnthropicReply::default()
    }

    /// An SSE body served as given (one write per event).
    pub fn raw_sse(body: impl AsRef<[u8]>) -> Reply {
        Reply::pieces(split_events(body.as_ref()))
    }

    /// A file of `../shared/fixtures/providers/` (relative to the project root), served as is.
    pub fn fixture(name: &str) -> Reply {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/providers")
            .join(name);
        let body = std::fs::read(&path)
            .unwrap_or_else(|err| panic!("fixture {} unreadable: {err}", path.display()));
        Reply::raw_sse(body)
    }

    /// A capture of `../shared/fixtures/providers/` (an `.http` file: the status line
    /// `HTTP 200`, the headers, a blank line, then the body), replayed as recorded: the same
    /// status, the same headers (but the framing ones, `content-length` and
    /// `transfer-encoding`, which the server sets for the body it sends) and the body byte
    /// for byte, one write per event.
    pub fn capture(name: &str) -> Reply {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/providers")
            .join(name);
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|err| panic!("capture {} unreadable: {err}", path.display()));
        let split = bytes
            .windows(2)
            .position(|w| w == b"\n\n")
            .unwrap_or_else(|| {
                panic!(
                    "capture {} has no blank line after its headers",
                    path.display()
                )
            });
        let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
        let body = &bytes[split + 2..];
        let mut lines = head.lines();
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "capture {}: bad status line {status_line:?}",
                    path.display()
                )
            });
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .filter(|(k, _)| k != "content-length" && k != "transfer-encoding")
            .collect();
        Reply {
            status,
            headers,
            pieces: split_events(body),
            delay: Duration::ZERO,
            gate: None,
        }
    }

    /// A 200 event stream made of these pieces.
    pub fn pieces(pieces: Vec<Piece>) -> Reply {
        Reply {
            status: 200,
            headers: sse_headers(),
            pieces,
            delay: Duration::ZERO,
            gate: None,
        }
    }

    /// Any status with these headers and body.
    pub fn status(code: u16, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Reply {
        Reply {
            status: code,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
                .collect(),
            pieces: vec![Piece::Bytes(body.into())],
            delay: Duration::ZERO,
            gate: None,
        }
    }

    /// A JSON error body in the shape both providers use: `{"error": {"message", "type"}}`.
    pub fn error(code: u16, error_type: &str, message: &str) -> Reply {
        let body = json!({"type": "error", "error": {"message": message, "type": error_type}});
        Reply::status(
            code,
            &[("content-type", "application/json")],
            body.to_string(),
        )
    }

    /// A 200 event stream that sends `body`, then drops the connection mid-body.
    pub fn truncated(body: impl AsRef<[u8]>) -> Reply {
        let mut pieces = split_events(body.as_ref());
        pieces.push(Piece::Abort);
        Reply::pieces(pieces)
    }

    /// `reply`, after waiting `wait` before the headers.
    /// `reply`, sent once `gate` has seen all its requests.
    pub fn gated(gate: &Gate, reply: Reply) -> Reply {
        Reply {
            gate: Some(gate.clone()),
            ..reply
        }
    }

    pub fn delay(wait: Duration, reply: Reply) -> Reply {
        Reply {
            delay: reply.delay + wait,
            ..reply
        }
    }

    /// A 200 event stream that sends `before`, then goes silent for `silence`, then ends.
    pub fn stall(before: impl AsRef<[u8]>, silence: Duration) -> Reply {
        let mut pieces = split_events(before.as_ref());
        pieces.push(Piece::Pause(silence));
        Reply::pieces(pieces)
    }

    /// Adds (or replaces) a response header.
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        let name = name.to_ascii_lowercase();
        self.headers.retain(|(k, _)| *k != name);
        self.headers.push((name, value.to_string()));
        self
    }

    /// The body's bytes (the pieces joined), e.g. to cut a built reply short.
    pub fn body_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in &self.pieces {
            if let Piece::Bytes(b) = piece {
                out.extend_from_slice(b);
            }
        }
        out
    }
}

/// Splits `text` into pieces of about `n` bytes, on char boundaries.
fn split_text(text: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if cur.len() >= n {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[derive(Debug, Clone)]
enum Item {
    Text(String),
    Reasoning(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking(String),
    Call {
        id: String,
        name: String,
        args: String,
    },
}

/// Builds an OpenAI Chat Completions SSE body.
#[derive(Debug, Clone)]
pub struct OpenAiReply {
    model: String,
    items: Vec<Item>,
    usage: Option<Usage>,
    usage_inline: bool,
    finish_reason: Option<String>,
    done: bool,
    fragment: usize,
}

impl Default for OpenAiReply {
    fn default() -> Self {
        OpenAiReply {
            model: "gpt-fake".into(),
            items: Vec::new(),
            usage: None,
            usage_inline: false,
            finish_reason: None,
            done: true,
            fragment: 7,
        }
    }
}

impl OpenAiReply {
    pub fn model(mut self, model: &str) -> Self {
        self.model = model.into();
        self
    }
    /// Answer text, sent in several `content` deltas.
    pub fn text(mut self, text: &str) -> Self {
        self.items.push(Item::Text(text.into()));
        self
    }
    /// `reasoning_content` deltas.
    pub fn reasoning(mut self, text: &str) -> Self {
        self.items.push(Item::Reasoning(text.into()));
        self
    }
    /// A tool call; its arguments are sent in fragments of a few bytes.
    pub fn tool_call(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.items.push(Item::Call {
            id: id.into(),
            name: name.into(),
            args: arguments.into(),
        });
        self
    }
    /// Usage in a final chunk with empty `choices` (`stream_options.include_usage`); only the
    /// fields that are `Some` are sent.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
    /// Send the usage inside the last choice chunk instead.
    pub fn usage_inline(mut self) -> Self {
        self.usage_inline = true;
        self
    }
    /// Default: `tool_calls` when there are calls, else `stop`.
    pub fn finish_reason(mut self, reason: &str) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }
    /// End the body after the last chunk, without `data: [DONE]` (as local servers do).
    pub fn no_done(mut self) -> Self {
        self.done = false;
        self
    }
    /// The size of text and argument fragments, in bytes (default 7).
    pub fn fragment(mut self, bytes: usize) -> Self {
        self.fragment = bytes.max(1);
        self
    }

    fn chunk(&self, delta: Value, finish: Option<&str>, usage: Option<Value>) -> String {
        let mut chunk = json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_764_633_600,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        if let Some(usage) = usage {
            chunk["usage"] = usage;
        }
        format!("data: {chunk}\n\n")
    }

    fn wire_usage(usage: &Usage) -> Value {
        let mut u = serde_json::Map::new();
        if let Some(n) = usage.input_tokens {
            u.insert("prompt_tokens".into(), n.into());
        }
        if let Some(n) = usage.output_tokens {
            u.insert("completion_tokens".into(), n.into());
        }
        if let (Some(i), Some(o)) = (usage.input_tokens, usage.output_tokens) {
            u.insert("total_tokens".into(), (i + o).into());
        }
        if let Some(n) = usage.cached_tokens {
            u.insert("prompt_tokens_details".into(), json!({"cached_tokens": n}));
        }
        Value::Object(u)
    }

    /// The SSE body as text.
    pub fn body(&self) -> String {
        let mut out = self.chunk(json!({"role": "assistant", "content": ""}), None, None);
        let mut call_index = 0;
        for item in &self.items {
            match item {
                Item::Text(text) => {
                    for piece in split_text(text, self.fragment) {
                        out += &self.chunk(json!({"content": piece}), None, None);
                    }
                }
                Item::Reasoning(text) | Item::Thinking { thinking: text, .. } => {
                    for piece in split_text(text, self.fragment) {
                        out += &self.chunk(json!({"reasoning_content": piece}), None, None);
                    }
                }
                Item::RedactedThinking(_) => {}
                Item::Call { id, name, args } => {
                    out += &self.chunk(
                        json!({"tool_calls": [{"index": call_index, "id": id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]}),
                        None,
                        None,
                    );
                    for piece in split_text(args, self.fragment) {
                        out += &self.chunk(
                            json!({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}),
                            None,
                            None,
                        );
                    }
                    call_index += 1;
                }
            }
        }
        let finish = self
            .finish_reason
            .clone()
            .unwrap_or_else(|| if call_index > 0 { "tool_calls" } else { "stop" }.to_string());
        let usage = self.usage.as_ref().map(Self::wire_usage);
        if self.usage_inline {
            out += &self.chunk(json!({}), Some(&finish), usage);
        } else {
            out += &self.chunk(json!({}), Some(&finish), None);
            if let Some(usage) = usage {
                let chunk = json!({
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 1_764_633_600,
                    "model": self.model,
                    "choices": [],
                    "usage": usage,
                });
                out += &format!("data: {chunk}\n\n");
            }
        }
        if self.done {
            out += "data: [DONE]\n\n";
        }
        out
    }

    pub fn build(self) -> Reply {
        Reply::raw_sse(self.body())
    }
}

/// Builds an Anthropic Messages SSE body.
#[derive(Debug, Clone)]
pub struct AnthropicReply {
    model: String,
    items: Vec<Item>,
    usage: Option<Usage>,
    stop_reason: Option<String>,
    fragment: usize,
}

impl Default for AnthropicReply {
    fn default() -> Self {
        AnthropicReply {
            model: "claude-fake".into(),
            items: Vec::new(),
            usage: None,
            stop_reason: None,
            fragment: 7,
        }
    }
}

impl AnthropicReply {
    pub fn model(mut self, model: &str) -> Self {
        self.model = model.into();
        self
    }
    pub fn text(mut self, text: &str) -> Self {
        self.items.push(Item::Text(text.into()));
        self
    }
    /// A thinking block with its signature.
    pub fn thinking(mut self, thinking: &str, signature: &str) -> Self {
        self.items.push(Item::Thinking {
            thinking: thinking.into(),
            signature: signature.into(),
        });
        self
    }
    pub fn redacted_thinking(mut self, data: &str) -> Self {
        self.items.push(Item::RedactedThinking(data.into()));
        self
    }
    /// A `tool_use` block; its input JSON is sent in `input_json_delta` fragments.
    pub fn tool_call(mut self, id: &str, name: &str, input_json: &str) -> Self {
        self.items.push(Item::Call {
            id: id.into(),
            name: name.into(),
            args: input_json.into(),
        });
        self
    }
    /// Normalized usage (input includes cached and cache-creation tokens, as the client
    /// reports it); it is sent split the way Anthropic does: input, cache creation and cache
    /// read in `message_start`, output in `message_delta`. Only `Some` fields are sent.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
    /// Default: `tool_use` when there are calls, else `end_turn`.
    pub fn stop_reason(mut self, reason: &str) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }
    pub fn fragment(mut self, bytes: usize) -> Self {
        self.fragment = bytes.max(1);
        self
    }

    fn event(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    /// The SSE body as text.
    pub fn body(&self) -> String {
        let mut start_usage = serde_json::Map::new();
        let mut output = None;
        if let Some(u) = &self.usage {
            if let Some(input) = u.input_tokens {
                let uncached = input
                    .saturating_sub(u.cached_tokens.unwrap_or(0))
                    .saturating_sub(u.cache_creation_tokens.unwrap_or(0));
                start_usage.insert("input_tokens".into(), uncached.into());
            }
            if let Some(n) = u.cache_creation_tokens {
                start_usage.insert("cache_creation_input_tokens".into(), n.into());
            }
            if let Some(n) = u.cached_tokens {
                start_usage.insert("cache_read_input_tokens".into(), n.into());
            }
            if u.output_tokens.is_some() {
                start_usage.insert("output_tokens".into(), 1.into());
            }
            output = u.output_tokens;
        }
        let mut message = json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null,
        });
        if self.usage.is_some() {
            message["usage"] = Value::Object(start_usage);
        }
        let mut out = Self::event(
            "message_start",
            json!({"type": "message_start", "message": message}),
        );
        out += &Self::event("ping", json!({"type": "ping"}));
        let mut has_calls = false;
        for (index, item) in self.items.iter().enumerate() {
            let (block, deltas): (Value, Vec<Value>) = match item {
                Item::Text(text) | Item::Reasoning(text) => (
                    json!({"type": "text", "text": ""}),
                    split_text(text, self.fragment)
                        .into_iter()
                        .map(|t| json!({"type": "text_delta", "text": t}))
                        .collect(),
                ),
                Item::Thinking {
                    thinking,
                    signature,
                } => {
                    let mut deltas: Vec<Value> = split_text(thinking, self.fragment)
                        .into_iter()
                        .map(|t| json!({"type": "thinking_delta", "thinking": t}))
                        .collect();
                    deltas.push(json!({"type": "signature_delta", "signature": signature}));
                    (
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                        deltas,
                    )
                }
                Item::RedactedThinking(data) => (
                    json!({"type": "redacted_thinking", "data": data}),
                    Vec::new(),
                ),
                Item::Call { id, name, args } => {
                    has_calls = true;
                    let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
                    deltas.extend(
                        split_text(args, self.fragment)
                            .into_iter()
                            .map(|p| json!({"type": "input_json_delta", "partial_json": p})),
                    );
                    (
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                        deltas,
                    )
                }
            };
            out += &Self::event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": block}),
            );
            for delta in deltas {
                out += &Self::event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                );
            }
            out += &Self::event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            );
        }
        let stop = self
            .stop_reason
            .clone()
            .unwrap_or_else(|| if has_calls { "tool_use" } else { "end_turn" }.to_string());
        let mut delta = json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null}});
        if let Some(n) = output {
            delta["usage"] = json!({"output_tokens": n});
        }
        out += &Self::event("message_delta", delta);
        out += &Self::event("message_stop", json!({"type": "message_stop"}));
        out
    }

    pub fn build(self) -> Reply {
        Reply::raw_sse(self.body())
    }
}

type Responder = Box<dyn FnMut(&RecordedRequest) -> Reply + Send>;

enum Scripted {
    Fixed(Reply),
    Computed(Box<dyn FnOnce(&RecordedRequest) -> Reply + Send>),
}

#[derive(Default)]
struct Shared {
    queue: Mutex<VecDeque<Scripted>>,
    /// Scripts of conversations told apart by a marker in their first user message:
    /// `(marker, replies)`, in the order they were added.
    conversations: Mutex<Vec<(String, VecDeque<Scripted>)>>,
    requests: Mutex<Vec<RecordedRequest>>,
    responder: Mutex<Option<Responder>>,
    /// Fixed answers to other paths (`GET /props`, ...), by `(method, path)`.
    routes: Mutex<Vec<(String, String, Reply)>>,
    /// Requests of what a client asks a server about itself (any GET, `POST /api/show`):
    /// kept apart from `requests`, which are the model requests.
    probes: Mutex<Vec<RecordedRequest>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking test thread must not hide the script from the others.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The fake server. Dropping it shuts the server down.
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeProvider {
    pub fn start() -> FakeProvider {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared::default());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fake-provider-{}", addr.port()))
            .spawn(move || serve(listener, server_shared, rx))
            .expect("spawn fake provider thread");
        FakeProvider {
            addr,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL to configure: with `/v1` for OpenAI-compatible, the root for Anthropic.
    pub fn base_url(&self, kind: ProviderKind) -> String {
        match kind {
            ProviderKind::OpenAi => format!("{}/v1", self.url()),
            ProviderKind::Anthropic => self.url(),
        }
    }

    /// Settings pointing at this server, with key `test-key`, short timeouts and millisecond
    /// retry delays (tests stay fast; adjust fields as needed).
    pub fn settings(&self, kind: ProviderKind) -> ProviderSettings {
        let mut s = ProviderSettings::new(
            kind,
            "fake-model",
            self.base_url(kind),
            Some("test-key".into()),
        );
        s.connect_timeout = Duration::from_secs(2);
        s.request_timeout = Duration::from_secs(10);
        s.idle_timeout = Duration::from_secs(10);
        s.max_retries = 2;
        s.retry_base_delay = Duration::from_millis(2);
        s.retry_max_delay = Duration::from_millis(10);
        s
    }

    /// Queues a reply.
    pub fn push(&self, reply: Reply) -> &Self {
        lock(&self.shared.queue).push_back(Scripted::Fixed(reply));
        self
    }

    /// Scripts a conversation of its own: a request whose first user message contains
    /// `marker` is answered from `replies`, in order (several conversations are served at
    /// once, e.g. sub-sessions); other requests use the main queue.
    pub fn conversation(&self, marker: &str, replies: Vec<Reply>) -> &Self {
        let mut conversations = lock(&self.shared.conversations);
        let script = replies.into_iter().map(Scripted::Fixed);
        match conversations.iter_mut().find(|(m, _)| m == marker) {
            Some((_, queue)) => queue.extend(script),
            None => conversations.push((marker.to_string(), script.collect())),
        }
        self
    }

    /// The model requests of the conversation `marker` names, in order.
    pub fn requests_of(&self, marker: &str) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| first_user_text(&r.body).is_some_and(|t| t.contains(marker)))
            .collect()
    }

    /// Queues a reply computed from the request it answers.
    pub fn push_fn(&self, f: impl FnOnce(&RecordedRequest) -> Reply + Send + 'static) -> &Self {
        lock(&self.shared.queue).push_back(Scripted::Computed(Box::new(f)));
        self
    }

    /// Answers every request the queue does not cover with `f` (for scripting whole sessions).
    pub fn respond_with(&self, f: impl FnMut(&RecordedRequest) -> Reply + Send + 'static) {
        *lock(&self.shared.responder) = Some(Box::new(f));
    }

    /// Answers `method path` (exactly, query included) with `reply`, every time: what a
    /// server tells about itself (`GET /props`, `GET /v1/models`, `POST /api/show`).
    pub fn route(&self, method: &str, path: &str, reply: Reply) -> &Self {
        lock(&self.shared.routes).push((method.to_string(), path.to_string(), reply));
        self
    }

    /// The requests asking the server about itself (GETs, `POST /api/show`), in order.
    pub fn probes(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.probes).clone()
    }

    /// Replies still queued.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.queue).len()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("fake provider runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        let connections = Arc::new(AtomicU64::new(0));
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let id = connections.fetch_add(1, Ordering::SeqCst) + 1;
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| handle(shared.clone(), id, req));
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        }
    });
    // Dropping the runtime cancels every connection still open.
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

async fn handle(
    shared: Arc<Shared>,
    connection: u64,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let recorded = RecordedRequest {
        method,
        path,
        headers,
        body,
        connection,
    };
    let probe = recorded.method == "GET" || recorded.path == "/api/show";
    if probe {
        lock(&shared.probes).push(recorded.clone());
        let routed = lock(&shared.routes)
            .iter()
            .find(|(m, p, _)| *m == recorded.method && *p == recorded.path)
            .map(|(_, _, reply)| reply.clone());
        let reply = routed.unwrap_or_else(|| {
            Reply::error(
                404,
                "not_found_error",
                &format!(
                    "fake provider: no route for {} {}",
                    recorded.method, recorded.path
                ),
            )
        });
        return Ok(respond(reply).await);
    }
    lock(&shared.requests).push(recorded.clone());
    let number = lock(&shared.requests).len();

    let routed = recorded.method == "POST"
        && matches!(
            recorded.path.as_str(),
            "/v1/chat/completions" | "/v1/messages"
        );
    let reply = if !routed {
        Reply::error(
            404,
            "not_found_error",
            &format!(
                "fake provider: no route for {} {} (it serves POST /v1/chat/completions and POST /v1/messages)",
                recorded.method, recorded.path
            ),
        )
    } else {
        let first_user = first_user_text(&recorded.body).unwrap_or_default();
        let mut own = None;
        {
            let mut conversations = lock(&shared.conversations);
            if let Some((marker, queue)) = conversations
                .iter_mut()
                .find(|(m, _)| first_user.contains(m.as_str()))
            {
                own = Some(match queue.pop_front() {
                    Some(scripted) => Ok(scripted),
                    None => Err(marker.clone()),
                });
            }
        }
        let next = match own {
            Some(Ok(scripted)) => Some(scripted),
            Some(Err(marker)) => Some(Scripted::Fixed(
                Reply::error(
                    500,
                    "fake_script_exhausted",
                    &format!("fake provider: the script of conversation {marker:?} ran out of replies at request {number}; add more"),
                )
                .with_header("x-should-retry", "false"),
            )),
            None => lock(&shared.queue).pop_front(),
        };
        match next {
            Some(Scripted::Fixed(reply)) => reply,
            Some(Scripted::Computed(f)) => f(&recorded),
            None => match lock(&shared.responder).as_mut() {
                Some(f) => f(&recorded),
                None => Reply::error(
                    500,
                    "fake_script_exhausted",
                    &format!(
                        "fake provider: the script ran out of replies at request {number} ({} {}); push more replies",
                        recorded.method, recorded.path
                    ),
                )
                .with_header("x-should-retry", "false"),
            },
        }
    };
    Ok(respond(reply).await)
}

/// The text of a request body's first user message (both wire formats), for routing.
pub fn first_user_text(body: &[u8]) -> Option<String> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let first = json["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "user")?;
    Some(match &first["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

async fn respond(reply: Reply) -> Response<Body> {
    if let Some(gate) = &reply.gate {
        if !gate.pass().await {
            return Box::pin(respond(Reply::error(
                500,
                "fake_gate_timeout",
                &format!(
                    "fake provider: only {} of the {} requests expected together arrived within 30 s",
                    gate.arrived(),
                    gate.inner.n
                ),
            )
            .with_header("x-should-retry", "false")))
            .await;
        }
    }
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let pieces = futures::stream::unfold(reply.pieces.into_iter(), |mut pieces| async move {
        loop {
            match pieces.next()? {
                Piece::Bytes(bytes) => return Some((Ok(Frame::data(bytes)), pieces)),
                Piece::Pause(d) => tokio::time::sleep(d).await,
                Piece::Abort => {
                    // Let the bytes already written reach the socket before the cut.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let cut = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "cut");
                    return Some((Err(cut), pieces));
                }
            }
        }
    });
    let mut response = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        response = response.header(name, value);
    }
    response
        .body(BodyExt::boxed_unsync(StreamBody::new(pieces)))
        .expect("a valid fake response")
}
