//! Model providers: streaming HTTP clients for OpenAI-compatible Chat Completions and Anthropic
//! Messages, decoding into the provider-neutral conversation types of [`crate::protocol`].
//!
//! ```text
//! gateway ── body: Bytes ──► Provider::stream ── POST (reqwest, rustls/ring) ──► provider
//!                                  │ retry loop (retry.rs): backoff, retry-after, Retrying event
//!                                  ▼
//!                   bytes ─► sse.rs (idle timeout, EOF flush, eventsource-stream)
//!                         (or, stream = false: one JSON answer ─► whole.rs ─► its events)
//!                                  ▼
//!                   openai.rs | anthropic.rs  (Decode: events ─► AssistantMessage, Usage)
//!                                  ▼
//!           ModelResponse { message, stop_reason, usage, model, ttft, latency, retries }
//! ```
//!
//! Design notes:
//! - The gateway serializes the request body (canonically, so prompt caches keep hitting) and
//!   this module sends those bytes untouched; it never parses or rebuilds a request.
//! - One `reqwest::Client` per process and connect timeout (direct or through the proxies),
//!   shared by every `Provider`: connections (and TLS sessions) are reused from one request to
//!   the next and by every session and sub-session of the process, and a new session does not
//!   pay the client's setup (milliseconds) before its first request.
//! - TLS is rustls with the `ring` provider (installed process-wide on first use unless
//!   another provider already is) and the platform's root certificates. Proxies from the
//!   environment are honoured, except for loopback base URLs, which are always reached
//!   directly (a local model server behind a corporate proxy setting is a classic trap).
//! - Timeouts: `connect_timeout` for the TCP/TLS connect, `request_timeout` until the response
//!   headers, `idle_timeout` between any two pieces of the body (comments and pings count). No
//!   overall deadline: a long answer that keeps streaming is fine.
//! - Errors are [`ProviderError`]s whose `Display` is one line naming the cause and the fix.
//!   A failed attempt's partial output is never returned: callers get a whole response or an
//!   error, and a `StreamEvent::Retrying` tells a live display to discard what it showed.
//! - Dropping the future of [`Provider::stream`] drops the response, which closes the
//!   connection; nothing keeps running in the background.
//! - Real servers differ (issue 23): a validation error is permanent whatever its status
//!   (`validation.rs`), an empty 200 is its own error naming the setting to try, some servers
//!   need `tool_choice` or cannot stream what is asked (`ToolChoice`, `stream = false`), and a
//!   local server may tell its context window (`discover.rs`).
//!
//! The public API is the one sketched for the gateway, with these additions: `ProviderKind`
//! also implements serde (lower-case names) and has `as_str`; `ProviderError` has
//! `retry_after()` and `last_cause()`; [`ProviderSettings::endpoint`] gives the URL a request
//! goes to. `Provider::new` performs the missing-key check (so it fails before anything is
//! sent) and validates the base URL.

mod anthropic;
pub mod anthropic_request;
mod client;
mod discover;
mod error;
pub mod images;
mod openai;
pub mod openai_request;
pub mod pricing;
mod retry;
mod sse;
mod validation;
mod whole;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub(crate) use client::install_crypto_provider;
pub use client::{ModelResponse, Provider};
pub use discover::{context_window, ServerWindow, PROBE_TIMEOUT};
pub use error::ProviderError;
pub use images::{note as image_note, ImagePolicy};
pub use pricing::{
    expected_cached, is_cache_miss, CachePrices, InputCost, CACHE_MISS_SHARE, MIN_CACHED_PREFIX,
};
pub use retry::RETRY_AFTER_CEILING;

use crate::protocol::{AssistantMessage, StreamEvent, Usage};

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp, LM Studio, ...).
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = ProviderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(ProviderKind::OpenAi),
            "anthropic" => Ok(ProviderKind::Anthropic),
            _ => Err(ProviderError::Config(format!(
                "unknown provider '{}'; use --provider openai (any OpenAI-compatible server) or --provider anthropic",
                error::clean_message(s, 40)
            ))),
        }
    }
}

/// Everything needed to talk to one provider and model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    pub model: String,
    /// OpenAI-compatible: includes `/v1` (`https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`); Anthropic: the root (`https://api.anthropic.com`).
    pub base_url: String,
    pub api_key: Option<String>,
    pub connect_timeout: Duration,
    /// Until the response headers arrive.
    pub request_timeout: Duration,
    /// The longest silence between two pieces of the streamed body.
    pub idle_timeout: Duration,
    /// Retries after the first attempt (so `max_retries + 1` attempts at most).
    pub max_retries: u32,
    /// The backoff base: retry `n` waits a random time in `[0, base * 2^n]`, capped below.
    pub retry_base_delay: Duration,
    pub retry_max_delay: Duration,
    /// `tool_choice` sent with every request (`[provider] tool_choice`); not sent when `None`.
    pub tool_choice: Option<ToolChoice>,
    /// Streamed answers (the default) or one JSON answer per request (`[provider] stream =
    /// false`, for servers that cannot stream what is asked, e.g. tools with `tool_choice`).
    pub stream: bool,
    /// `[provider] images`: whether requests carry images; `None` decides by the model's
    /// family ([`images::model_accepts_images`]).
    pub images: Option<bool>,
}

impl ProviderSettings {
    /// Whether this model gets the images blocks show (else a one-line note each).
    pub fn accepts_images(&self) -> bool {
        self.images
            .unwrap_or_else(|| images::model_accepts_images(self.kind, &self.model))
    }
}

/// `[provider] tool_choice`: whether the model may, must or must not call the tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (`"auto"`; some servers put the tools into the prompt only when
    /// `tool_choice` is sent at all, e.g. llama-cpp-python's `chatml-function-calling`).
    Auto,
    /// Every answer must call a tool (Anthropic: `any`).
    Required,
    /// No tool calls (`"none"`).
    Off,
    /// Every answer must call this function (the one tool Vis offers, `python_execution`).
    Function(String),
}

impl ToolChoice {
    /// `"auto"`, `"required"`, `"none"` or the tool's name; the error says what is valid.
    pub fn parse(text: &str) -> Result<ToolChoice, String> {
        match text.trim() {
            "auto" => Ok(ToolChoice::Auto),
            "required" | "any" => Ok(ToolChoice::Required),
            "none" => Ok(ToolChoice::Off),
            crate::protocol::TOOL_NAME => {
                Ok(ToolChoice::Function(crate::protocol::TOOL_NAME.into()))
            }
            other => Err(format!(
                "must be \"auto\", \"required\", \"none\" or the tool's name \"{}\", got {:?}",
                crate::protocol::TOOL_NAME,
                error::clean_message(other, 60)
            )),
        }
    }

    /// As written in the config.
    pub fn as_str(&self) -> &str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::Off => "none",
            ToolChoice::Function(name) => name,
        }
    }

    /// Chat Completions' `tool_choice`.
    pub fn openai_json(&self) -> serde_json::Value {
        match self {
            ToolChoice::Function(name) => {
                serde_json::json!({"type": "function", "function": {"name": name}})
            }
            other => serde_json::json!(other.as_str()),
        }
    }

    /// Messages' `tool_choice`.
    pub fn anthropic_json(&self) -> serde_json::Value {
        match self {
            ToolChoice::Auto => serde_json::json!({"type": "auto"}),
            ToolChoice::Required => serde_json::json!({"type": "any"}),
            ToolChoice::Off => serde_json::json!({"type": "none"}),
            ToolChoice::Function(name) => serde_json::json!({"type": "tool", "name": name}),
        }
    }

    /// Whether every answer must call a tool (a turn then ends only at its iteration limit).
    pub fn forces_a_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Function(_))
    }
}

impl ProviderSettings {
    /// Settings with the default timeouts and retries (see `docs/providers.md`).
    pub fn new(
        kind: ProviderKind,
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<String>,
    ) -> ProviderSettings {
        ProviderSettings {
            kind,
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            // Reasoning models can think for minutes without sending a byte.
            idle_timeout: Duration::from_secs(300),
            max_retries: 4,
            retry_base_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(20),
            tool_choice: None,
            stream: true,
            images: None,
        }
    }

    pub fn default_base_url(kind: ProviderKind) -> &'static str {
        match kind {
            ProviderKind::OpenAi => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The environment variable that holds the key for `kind`.
    pub fn key_env(kind: ProviderKind) -> &'static str {
        match kind {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The URL requests are POSTed to (base URL without its trailing `/`, plus the path).
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim().trim_end_matches('/');
        match self.kind {
            ProviderKind::OpenAi => format!("{base}/chat/completions"),
            ProviderKind::Anthropic => format!("{base}/v1/messages"),
        }
    }
}

/// What a decoder made of one complete stream.
pub(crate) struct Decoded {
    pub message: AssistantMessage,
    pub stop_reason: Option<String>,
    pub usage: Usage,
    pub model: Option<String>,
}

/// One provider's stream decoder: events in, a complete response out.
pub(crate) trait Decode: Send {
    /// Takes one event, its name and its data (trimmed, never empty: an event without data
    /// carries nothing); `Ok(true)` when it completed the response (`[DONE]`, `message_stop`).
    fn feed(
        &mut self,
        event: &str,
        data: &str,
        emit: &mut dyn FnMut(StreamEvent),
    ) -> Result<bool, ProviderError>;

    /// The tool call still arriving, as "tool call 'NAME' (ID)", for truncation messages.
    fn open_call(&self) -> Option<String>;

    /// The body is over (`done`: a completing event was seen): the response, or why it is not
    /// complete.
    fn finish(self, done: bool) -> Result<Decoded, ProviderError>;
}

/// The JSON of one `data:` field, or a `Malformed` error quoting the start of it.
pub(crate) fn data_json(data: &str) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(data).map_err(|err| {
        ProviderError::malformed(format!(
            "a data line is not JSON ({err}): {}",
            error::clean_message(data, 80)
        ))
    })
}

/// The innermost cause of an error chain ("Connection refused (os error 111)"): reqwest's own
/// top-level message repeats the URL, which the callers' messages already name.
pub(crate) fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    error::clean_message(&cause.to_string(), 160)
}
