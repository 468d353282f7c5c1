//! What can go wrong talking to a model provider, each as one line naming the cause and the fix.
//!
//! Design notes:
//! - Every variant's `Display` is a single line a user can act on; the provider's own message is
//!   included after [`clean_message`] made it short and control-character free, because it often
//!   is the most precise cause there is ("context length exceeded", "model not found").
//! - [`ProviderError::kind`] is a stable short code for the gateway's health records and
//!   metrics; [`ProviderError::is_transient`] is the one retry rule the client applies.
//! - `Exhausted` wraps the last cause after the retries ran out; its `kind` is the cause's kind,
//!   so a record says "rate_limited" rather than "gave up".

use std::time::Duration;

/// An error of one model request (after retries, when they applied).
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The settings cannot work (unknown provider name, unparsable base URL, client setup).
    #[error("{0}")]
    Config(String),

    /// No key for a host that needs one; nothing was sent.
    #[error("no API key for {url}; set {env} (or point --base-url at a server that needs none)")]
    MissingKey { url: String, env: &'static str },

    /// HTTP 401/403.
    #[error(
        "the provider rejected the API key (HTTP {status}: {message}); set {env} to a valid key"
    )]
    Auth {
        status: u16,
        message: String,
        env: &'static str,
    },

    /// HTTP 404: the model or the endpoint does not exist there.
    #[error("HTTP 404 from {url}: unknown model '{model}' or wrong base URL{detail}; check --model and --base-url{hint}")]
    NotFound {
        url: String,
        model: String,
        /// ` (provider message)` or empty.
        detail: String,
        /// A provider-specific hint about the base URL's shape, or empty.
        hint: String,
    },

    /// Another 4xx: the request itself is refused; the provider's message says why.
    #[error("the provider refused the request (HTTP {status}): {message}; not retried: fix what it names (model, options or context length)")]
    BadRequest { status: u16, message: String },

    /// Any 4xx/5xx whose body is a validation error: the request cannot succeed as sent
    /// (llama-cpp-python answers HTTP 500 for a field of the wrong type).
    #[error("the server rejected the request as invalid (HTTP {status}: {detail}); not retried: it cannot succeed as sent — check the [provider] options, and report it if Vis built the request wrong")]
    Invalid { status: u16, detail: String },

    /// HTTP 200 with no event at all (or only comments and pings, or events that ended
    /// before any of an answer), or a non-streaming 200 with an empty body: nothing to decode,
    /// and no partial answer was discarded.
    #[error("the server answered with an empty {what} ({how}); a prompt over the server's context window or an option it does not support does this — check the server's log; {hint}")]
    Empty {
        /// `stream` or `body`.
        what: &'static str,
        /// `HTTP 200 without a single event`, …
        how: &'static str,
        /// The setting to try.
        hint: String,
    },

    /// HTTP 429.
    #[error("rate limited by the provider (HTTP 429: {message}); wait and retry, or lower the request rate{wait}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
        /// `; it asks to wait N s` or empty.
        wait: String,
        /// The provider said not to retry (`x-should-retry: false`).
        no_retry: bool,
    },

    /// HTTP 5xx (500, 502, 503, 504, 529 overloaded, ...) and 408.
    #[error("the provider failed (HTTP {status}: {message}); {}{wait}", if *.no_retry { "it says a retry will not help, check the provider's status" } else { "it is down or overloaded, retry later" })]
    Server {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
        wait: String,
        no_retry: bool,
    },

    /// The TCP/TLS connection could not be made or broke before the response headers.
    #[error("cannot connect to {url} ({cause}); check that the server is running and --base-url is right")]
    Connect { url: String, cause: String },

    /// No response headers within the request timeout (a whole answer's: the longer of the
    /// request and idle timeouts).
    #[error("no response from {url} within {}; {}", secs(.after), if *.whole { "a whole answer ([provider] stream = false) comes only when it is complete, and the server is likely still working on it: not retried (a retry would queue behind it); raise [provider] idle_timeout or ask for less" } else { "the provider is slow or unreachable, retry or raise the request timeout" })]
    Timeout {
        url: String,
        after: Duration,
        /// The request asked for a whole answer (`stream = false`).
        whole: bool,
    },

    /// The stream went silent (no bytes, not even a keep-alive) for the idle timeout.
    #[error("the response stream went silent for {}; the partial answer was discarded, retry or raise the idle timeout", secs(.after))]
    IdleTimeout { after: Duration },

    /// The stream ended (or the connection dropped) before the response was complete.
    #[error("the response stream ended early ({detail}); {}", if *.partial { "the partial answer was discarded, retry the request" } else { "nothing of an answer had arrived yet, retry the request" })]
    Truncated {
        detail: String,
        /// Some of the answer had arrived (and was discarded).
        partial: bool,
    },

    /// The stream carried data that is not the provider's format.
    #[error("the provider sent malformed data ({detail}); check that --provider and --base-url name a compatible server")]
    Malformed { detail: String },

    /// An error the provider reported inside an HTTP 200 stream.
    #[error("the provider reported an error mid-stream ({error_type}: {message}); the partial answer was discarded{advice}")]
    Stream {
        error_type: String,
        message: String,
        transient: bool,
        /// What to do, chosen from `transient`.
        advice: &'static str,
    },

    /// Retries ran out; `last` is the last attempt's cause.
    #[error("gave up after {attempts} attempts; last error: {last}")]
    Exhausted {
        attempts: u32,
        last: Box<ProviderError>,
    },

    /// Any other unexpected HTTP status (1xx/3xx that was not followed, ...).
    #[error("unexpected HTTP {status} from {url}: {message}; check --base-url")]
    Http {
        status: u16,
        url: String,
        message: String,
    },
}

fn secs(d: &Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

impl ProviderError {
    /// True when the same request may succeed if sent again (the client's retry rule).
    pub fn is_transient(&self) -> bool {
        match self {
            ProviderError::RateLimited { no_retry, .. }
            | ProviderError::Server { no_retry, .. } => !no_retry,
            ProviderError::Timeout { whole, .. } => !whole,
            ProviderError::Connect { .. }
            | ProviderError::IdleTimeout { .. }
            | ProviderError::Truncated { .. } => true,
            ProviderError::Stream { transient, .. } => *transient,
            ProviderError::Config(_)
            | ProviderError::MissingKey { .. }
            | ProviderError::Auth { .. }
            | ProviderError::NotFound { .. }
            | ProviderError::BadRequest { .. }
            | ProviderError::Invalid { .. }
            | ProviderError::Empty { .. }
            | ProviderError::Malformed { .. }
            | ProviderError::Exhausted { .. }
            | ProviderError::Http { .. } => false,
        }
    }

    /// A stable short code: `config`, `auth`, `not_found`, `bad_request`, `invalid_request`,
    /// `empty_response`, `rate_limited`, `server`, `connect`, `timeout`, `idle_timeout`,
    /// `truncated`, `malformed`, `stream_error`, `http`. For `Exhausted`, the last cause's
    /// code.
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::Config(_) => "config",
            ProviderError::MissingKey { .. } | ProviderError::Auth { .. } => "auth",
            ProviderError::NotFound { .. } => "not_found",
            ProviderError::BadRequest { .. } => "bad_request",
            ProviderError::Invalid { .. } => "invalid_request",
            ProviderError::Empty { .. } => "empty_response",
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Server { .. } => "server",
            ProviderError::Connect { .. } => "connect",
            ProviderError::Timeout { .. } => "timeout",
            ProviderError::IdleTimeout { .. } => "idle_timeout",
            ProviderError::Truncated { .. } => "truncated",
            ProviderError::Malformed { .. } => "malformed",
            ProviderError::Stream { .. } => "stream_error",
            ProviderError::Exhausted { last, .. } => last.kind(),
            ProviderError::Http { .. } => "http",
        }
    }

    /// The wait the provider asked for (`retry-after`), if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ProviderError::RateLimited { retry_after, .. }
            | ProviderError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The error of the last attempt (itself unless retries ran out).
    pub fn last_cause(&self) -> &ProviderError {
        match self {
            ProviderError::Exhausted { last, .. } => last.last_cause(),
            other => other,
        }
    }

    pub(crate) fn stream_error(error_type: &str, message: &str, transient: bool) -> ProviderError {
        ProviderError::Stream {
            error_type: clean_message(error_type, 60),
            message: clean_message(message, 300),
            transient,
            advice: if transient {
                "; retry later"
            } else {
                "; not retried: fix what it names"
            },
        }
    }

    pub(crate) fn truncated(detail: impl Into<String>) -> ProviderError {
        ProviderError::Truncated {
            detail: detail.into(),
            partial: true,
        }
    }

    pub(crate) fn malformed(detail: impl Into<String>) -> ProviderError {
        ProviderError::Malformed {
            detail: detail.into(),
        }
    }
}

/// One short line from a provider's text: control characters become spaces, runs of
/// whitespace collapse, and anything past `max` characters is cut with an ellipsis (an HTML
/// error page must not flood a terminal).
pub(crate) fn clean_message(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            count += 1;
            pending_space = false;
        }
        if count >= max {
            out.push('…');
            return out;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// The provider's own message from an error body: `error.message` (OpenAI, Anthropic,
/// OpenRouter), `error` as a string (Ollama), top-level `message` or `detail` (vLLM, FastAPI
/// servers); otherwise a short excerpt of the body itself.
pub(crate) fn body_message(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        if let Some(message) = json_message(&value) {
            return clean_message(&message, 300);
        }
    }
    let text = String::from_utf8_lossy(body);
    let cleaned = clean_message(&text, 200);
    if cleaned.is_empty() {
        "empty body".to_string()
    } else {
        cleaned
    }
}

/// The message inside a JSON error value, if it has one.
pub(crate) fn json_message(value: &serde_json::Value) -> Option<String> {
    let error = value.get("error");
    let candidates = [
        error.and_then(|e| e.get("message")),
        error.filter(|e| e.is_string()),
        value.get("message"),
        value.get("detail"),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|v| v.as_str().filter(|s| !s.trim().is_empty()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_clean_short_line() {
        assert_eq!(clean_message("a\n\tb\x1b[31m  c ", 100), "a b [31m c");
        assert_eq!(clean_message("abcdef", 3), "abc…");
        assert_eq!(
            body_message(br#"{"error":{"message":"bad\nthing","type":"x"}}"#),
            "bad thing"
        );
        assert_eq!(
            body_message(br#"{"error":"model 'q' not found"}"#),
            "model 'q' not found"
        );
        assert_eq!(body_message(br#"{"object":"error","message":"m"}"#), "m");
        assert_eq!(
            body_message(b"<html>\n<b>502</b></html>"),
            "<html> <b>502</b></html>"
        );
        assert_eq!(body_message(b""), "empty body");
    }

    #[test]
    fn exhausted_reports_the_cause_kind() {
        let err = ProviderError::Exhausted {
            attempts: 3,
            last: Box::new(ProviderError::truncated("x")),
        };
        assert_eq!(err.kind(), "truncated");
        assert!(!err.is_transient());
        assert_eq!(secs(&Duration::from_millis(1500)), "1.5 s");
        assert_eq!(secs(&Duration::from_millis(150)), "150 ms");
    }
}
