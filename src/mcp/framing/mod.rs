//! MCP over a byte stream (stdio): one JSON-RPC message per line, bounded in size, and every
//! bad line answered instead of dropped.
//!
//! Both ends of MCP on stdio go through [`LineTransport`]: `vis mcp` reading its client
//! ([`Side::Server`]) and the hub reading a stdio server it started ([`Side::Client`]). The
//! SDK's own transport drops what it cannot use (a line that is not JSON, a line over its
//! size limit), so whoever sent it waits for an answer that never comes. Here:
//!
//! - **A line over the limit** ([`LineTransport::new`]'s `max_bytes`, `[mcp] max_message_mb`,
//!   16 MiB by default) is never buffered: its first bytes and the rest as it streams past are
//!   scanned for its `id` ([`sniff`]), and the request it carries fails at once with an error
//!   that names the limit.
//! - **A line that is not JSON**: `-32700 Parse error` (with the request's id when one can be
//!   found in the broken text, else `"id": null`).
//! - **JSON that is not a valid message**: `-32600 Invalid Request` (not an object, a batch,
//!   the wrong `jsonrpc`, an id that is neither number nor string), `-32602 Invalid params`
//!   (a known method whose params do not fit), `-32601 Method not found`.
//! - Notifications are never answered, not even with an error (JSON-RPC 2.0).
//!
//! Who gets the error depends on the side. A request of the peer is answered on the wire. A
//! broken *answer* to one of our own requests is turned into an error for that request and
//! handed to our own service, so the call that waits for it fails with the reason (a server
//! whose tool result is over the limit: `McpToolError` naming the limit).
//!
//! Outgoing, a response over the limit is replaced by an error response for the same id that
//! names the limit (`vis mcp` answering with more than its client accepts).
//!
//! Writes go through one lock; answers decided while reading are written by a task of their
//! own, so a `receive` cancelled by the service's `select!` never leaves half a line behind.

pub mod sniff;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;

use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, NumberOrString, RequestId};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use sniff::{IdSniffer, Kind};

/// MCP methods a peer may request (a request for one of them with params that do not fit is
/// `Invalid params`; any other method is `Method not found`).
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/templates/list",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "completion/complete",
    "elicitation/create",
    "logging/setLevel",
    "roots/list",
    "sampling/createMessage",
];

/// Which end of MCP this transport is, for the errors it writes.
#[derive(Debug, Clone)]
pub enum Side {
    /// `vis mcp`: the peer is an MCP client.
    Server,
    /// The hub's connection to the stdio server `name`.
    Client { server: String },
}

impl Side {
    /// Who sent what was read, for messages.
    fn peer(&self) -> String {
        match self {
            Side::Server => "the MCP client".into(),
            Side::Client { server } => format!("MCP server `{server}`"),
        }
    }
}

/// `16 MiB`, `2.5 MiB`, `812 KiB`, `35 bytes`.
pub fn size_text(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KIB * KIB {
        let mib = b / (KIB * KIB);
        if mib.fract() == 0.0 {
            format!("{mib:.0} MiB")
        } else {
            format!("{mib:.1} MiB")
        }
    } else if b >= KIB {
        format!("{:.0} KiB", b / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// What a call gets when the server's answer was over the limit: `size` when known.
pub fn over_limit_answer(server: &str, size: Option<usize>, limit: usize) -> String {
    let size = match size {
        Some(bytes) => size_text(bytes),
        None => format!("more than {}", size_text(limit)),
    };
    format!(
        "MCP server `{server}` answered with a message of {size}, over the limit of {} for one MCP message; ask the tool for less (a smaller page, a narrower query), or raise [mcp] max_message_mb in config.toml (at most {} MiB)",
        size_text(limit),
        crate::config::MAX_MESSAGE_MB_LIMIT
    )
}

/// One line as it came in.
enum Line {
    /// A whole line (without its newline) is in `line_buf`.
    Whole,
    /// A line over the limit: `bytes` so far (all of it when `ended`), and what its text
    /// told about it.
    Oversized {
        bytes: usize,
        ended: bool,
        sniffer: IdSniffer,
    },
    Eof,
}

/// A line over the limit being skipped.
struct Skipping {
    bytes: usize,
    sniffer: IdSniffer,
    /// Its request was already answered (or found not to need an answer).
    handled: bool,
}

/// Newline-delimited JSON-RPC, bounded (see the module docs).
pub struct LineTransport<Role: ServiceRole, R, W> {
    reader: BufReader<R>,
    line_buf: Vec<u8>,
    skipping: Option<Skipping>,
    max_bytes: usize,
    side: Side,
    /// How to get under the limit, for the error an over-limit answer of ours becomes.
    outgoing_hint: Cow<'static, str>,
    writer: Arc<tokio::sync::Mutex<Option<W>>>,
    /// Errors for our own requests, to hand to our service next.
    delivered: VecDeque<RxJsonRpcMessage<Role>>,
    _role: PhantomData<fn() -> Role>,
}

impl<Role, R, W> LineTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading `reader` and writing `writer`; messages over `max_bytes` are
    /// refused in both directions (see the module docs). `outgoing_hint` ends the error an
    /// over-limit response of ours becomes ("lower --output-limit").
    pub fn new(
        reader: R,
        writer: W,
        side: Side,
        max_bytes: usize,
        outgoing_hint: impl Into<Cow<'static, str>>,
    ) -> Self {
        LineTransport {
            reader: BufReader::new(reader),
            line_buf: Vec::new(),
            skipping: None,
            max_bytes,
            side,
            outgoing_hint: outgoing_hint.into(),
            writer: Arc::new(tokio::sync::Mutex::new(Some(writer))),
            delivered: VecDeque::new(),
            _role: PhantomData,
        }
    }

    /// Reads up to the end of the next line, never holding more than `max_bytes` of it.
    /// Cancel-safe: bytes taken from the reader are recorded before the next await.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let (consumed, ended) = {
                let available = self.reader.fill_buf().await?;
                if available.is_empty() {
                    if let Some(s) = self.skipping.take() {
                        // The peer closed in the middle of an over-limit line.
                        return Ok(Line::Oversized {
                            bytes: s.bytes,
                            ended: true,
                            sniffer: s.sniffer,
                        });
                    }
                    return Ok(Line::Eof);
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                let piece = &available[..take];
                match self.skipping.as_mut() {
                    Some(s) => {
                        s.bytes += piece.len();
                        if !s.sniffer.settled() {
                            s.sniffer.feed(piece);
                        }
                    }
                    None if self.line_buf.len() + piece.len() > self.max_bytes => {
                        let mut sniffer = IdSniffer::new();
                        sniffer.feed(&self.line_buf);
                        sniffer.feed(piece);
                        self.skipping = Some(Skipping {
                            bytes: self.line_buf.len() + piece.len(),
                            sniffer,
                            handled: false,
                        });
                        self.line_buf.clear();
                        self.line_buf.shrink_to(64 * 1024);
                    }
                    None => self.line_buf.extend_from_slice(piece),
                }
                (take, newline.is_some())
            };
            self.reader.consume(consumed);
            if ended {
                let Some(mut s) = self.skipping.take() else {
                    return Ok(Line::Whole);
                };
                s.sniffer.finish();
                if !s.handled {
                    return Ok(Line::Oversized {
                        bytes: s.bytes,
                        ended: true,
                        sniffer: s.sniffer,
                    });
                }
            } else if let Some(s) = self.skipping.as_mut() {
                // Answer as soon as the id and kind are known: the rest may never end.
                if !s.handled && s.sniffer.settled() {
                    s.handled = true;
                    return Ok(Line::Oversized {
                        bytes: s.bytes,
                        ended: false,
                        sniffer: s.sniffer.clone(),
                    });
                }
            }
        }
    }

    /// Writes an error response for `id` (or `"id": null`) to the peer, from a task of its
    /// own (see the module docs).
    fn reply_error(&self, id: Option<&RequestId>, code: ErrorCode, message: String) {
        let id = match id {
            Some(NumberOrString::Number(n)) => json!(n),
            Some(NumberOrString::String(s)) => json!(s.as_ref()),
            None => Value::Null,
        };
        let body =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}});
        let mut bytes = body.to_string().into_bytes();
        bytes.push(b'\n');
        let writer = self.writer.clone();
        tokio::spawn(async move {
            let _ = write_line(&writer, &bytes).await;
        });
    }

    /// Hands our own service an error for its request `id`.
    fn deliver_error(&mut self, id: RequestId, code: ErrorCode, message: String) {
        self.delivered.push_back(JsonRpcMessage::error(
            ErrorData::new(code, message, None),
            Some(id),
        ));
    }

    /// An error about a line of the given kind and id: for the peer's request (or a line of
    /// unknown kind, on the server side) on the wire; for an answer to one of our requests,
    /// to our own service. Anything else has nobody waiting for it and is dropped (a
    /// server's stray non-JSON output, a broken answer of the client to `vis mcp`, which
    /// sends it no requests that matter).
    fn route_error(
        &mut self,
        kind: Option<Kind>,
        id: Option<&RequestId>,
        code: ErrorCode,
        message: String,
    ) {
        match (kind, &self.side) {
            (Some(Kind::Response), Side::Client { .. }) => {
                if let Some(id) = id {
                    self.deliver_error(id.clone(), code, message);
                }
            }
            (Some(Kind::Request), _) | (None, Side::Server) => self.reply_error(id, code, message),
            (Some(Kind::Response), Side::Server) | (None, Side::Client { .. }) => {}
        }
    }

    fn oversized(&mut self, bytes: usize, ended: bool, sniffer: &IdSniffer) {
        let size = if ended {
            size_text(bytes)
        } else {
            format!("more than {}", size_text(self.max_bytes))
        };
        let limit = size_text(self.max_bytes);
        let message = match (&self.side, sniffer.kind()) {
            (Side::Client { server }, Some(Kind::Response)) => {
                over_limit_answer(server, ended.then_some(bytes), self.max_bytes)
            }
            _ => format!(
                "Invalid Request: the message is {size}, over the limit of {limit} for one MCP message; send less (e.g. a shorter block), or raise [mcp] max_message_mb in vis's config.toml"
            ),
        };
        self.route_error(
            sniffer.kind(),
            sniffer.id(),
            ErrorCode::INVALID_REQUEST,
            message,
        );
    }

    /// Turns a whole line into a message, or answers it.
    fn parse_line(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        let raw = std::mem::take(&mut self.line_buf);
        let line = raw.strip_suffix(b"\n").unwrap_or(&raw);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let out = if line.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            match serde_json::from_slice::<RxJsonRpcMessage<Role>>(line) {
                Ok(message) => Some(message),
                Err(e) => {
                    self.refuse(line, &e);
                    None
                }
            }
        };
        // Keep the buffer's memory for the next line, unless one huge line grew it.
        self.line_buf = raw;
        self.line_buf.clear();
        self.line_buf.shrink_to(1024 * 1024);
        out
    }

    /// Answers a line that is not a message we can use (see the module docs).
    fn refuse(&mut self, line: &[u8], error: &serde_json::Error) {
        let peer = self.side.peer();
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) => {
                let sniffer = IdSniffer::of(line);
                let message = format!(
                    "Parse error: {peer} sent a line that is not JSON ({error}); send one JSON-RPC 2.0 message per line"
                );
                self.route_error(
                    sniffer.kind(),
                    sniffer.id(),
                    ErrorCode::PARSE_ERROR,
                    message,
                );
                return;
            }
        };
        let Some(object) = value.as_object() else {
            let what = if value.is_array() {
                "a batch (an array); MCP takes one message per line, batches are not supported"
            } else {
                "not an object; a message is a JSON object with \"jsonrpc\": \"2.0\""
            };
            self.reply_error(
                None,
                ErrorCode::INVALID_REQUEST,
                format!("Invalid Request: {peer} sent {what}"),
            );
            return;
        };
        let method = object.get("method").and_then(Value::as_str);
        let kind = if object.contains_key("method") {
            Some(Kind::Request)
        } else if object.contains_key("result") || object.contains_key("error") {
            Some(Kind::Response)
        } else {
            None
        };
        let id = match object.get("id") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => n.as_i64().map(NumberOrString::Number),
            Some(Value::String(s)) => Some(NumberOrString::String(s.as_str().into())),
            Some(_) => None,
        };
        let valid_id = matches!(object.get("id"), None | Some(Value::Null)) || id.is_some();
        if kind == Some(Kind::Request) && object.get("id").is_none() {
            // A notification: never answered, not even with an error.
            return;
        }
        let (code, message) = if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            (
                ErrorCode::INVALID_REQUEST,
                format!("Invalid Request: {peer} sent a message without \"jsonrpc\": \"2.0\""),
            )
        } else if !valid_id {
            (
                ErrorCode::INVALID_REQUEST,
                format!(
                    "Invalid Request: {peer} sent an id that is neither an integer nor a string"
                ),
            )
        } else if let Some(method) = method {
            if KNOWN_METHODS.contains(&method) {
                (
                    ErrorCode::INVALID_PARAMS,
                    format!("Invalid params for {method}: {error}"),
                )
            } else {
                (
                    ErrorCode::METHOD_NOT_FOUND,
                    format!("Method not found: {}", crate::protocol::clip(method, 80)),
                )
            }
        } else if object.contains_key("result") || object.contains_key("error") {
            (
                ErrorCode::INTERNAL_ERROR,
                format!("{peer} sent an answer that is not a valid MCP result ({error})"),
            )
        } else {
            (
                ErrorCode::INVALID_REQUEST,
                format!(
                    "Invalid Request: {peer} sent an object with neither \"method\" nor \"result\""
                ),
            )
        };
        self.route_error(kind, id.as_ref(), code, message);
    }
}

async fn write_line<W: AsyncWrite + Unpin>(
    writer: &tokio::sync::Mutex<Option<W>>,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut guard = writer.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the MCP connection is closed",
        ));
    };
    w.write_all(bytes).await?;
    w.flush().await
}

impl<Role, R, W> rmcp::transport::Transport<Role> for LineTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<Role>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let limit = self.max_bytes;
        let hint = self.outgoing_hint.clone();
        let encoded = serde_json::to_vec(&item).map(|bytes| match &item {
            JsonRpcMessage::Response(response) if bytes.len() > limit => {
                // An answer the peer would refuse: say why instead.
                let message = format!(
                    "the result is {}, over the limit of {} for one MCP message{}",
                    size_text(bytes.len()),
                    size_text(limit),
                    if hint.is_empty() { String::new() } else { format!("; {hint}") }
                );
                let id = match &response.id {
                    NumberOrString::Number(n) => json!(n),
                    NumberOrString::String(s) => json!(s.as_ref()),
                };
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": ErrorCode::INTERNAL_ERROR.0, "message": message}})
                    .to_string()
                    .into_bytes()
            }
            _ => bytes,
        });
        async move {
            let mut bytes = encoded.map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            write_line(&writer, &bytes).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            if let Some(message) = self.delivered.pop_front() {
                return Some(message);
            }
            match self.read_line().await {
                Ok(Line::Whole) => {
                    if let Some(message) = self.parse_line() {
                        return Some(message);
                    }
                }
                Ok(Line::Oversized {
                    bytes,
                    ended,
                    sniffer,
                }) => self.oversized(bytes, ended, &sniffer),
                // A read error ends the connection like the end of input: the service then
                // reports the peer as gone.
                Ok(Line::Eof) | Err(_) => return None,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut writer = self.writer.lock().await;
        if let Some(mut w) = writer.take() {
            let _ = w.shutdown().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
