//! The HTTP side: one request attempt, and the retry loop around it.

use std::sync::Once;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Response, StatusCode, Url};

use super::error::{body_message, clean_message, json_message, ProviderError};
use super::retry::{self, RETRY_AFTER_CEILING};
use super::validation::validation_detail;
use super::{
    anthropic, openai, root_cause, sse, whole, Decode, Decoded, ProviderKind, ProviderSettings,
};
use crate::protocol::{AssistantMessage, StreamEvent, Usage};

/// The most of an error body read for its message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// The largest whole (not streamed) answer accepted.
const WHOLE_BODY_LIMIT: usize = 64 << 20;

/// Hosts that always need a key, so a missing one fails before anything is sent.
const OFFICIAL_HOSTS: [&str; 2] = ["api.openai.com", "api.anthropic.com"];

/// One complete model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    pub message: AssistantMessage,
    /// `finish_reason` / `stop_reason` as the provider sent it.
    pub stop_reason: Option<String>,
    /// Normalized usage; `None` where the provider reported nothing.
    pub usage: Usage,
    /// The model as the provider reported it.
    pub model: Option<String>,
    /// From sending the successful attempt to its first content delta.
    pub ttft: Option<Duration>,
    /// The whole call, retries and waits included.
    pub latency: Duration,
    pub retries: u32,
}

/// A client for one provider and model.
#[derive(Debug, Clone)]
pub struct Provider {
    settings: ProviderSettings,
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
}

/// rustls needs a process-wide crypto provider when built without aws-lc; install ring unless
/// the embedding program already chose one.
pub(crate) fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // An Err means another thread installed one meanwhile: equally good.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// The process's HTTP client for a connect timeout, direct (a loopback server: no proxy) or
/// not. Building one costs milliseconds (its TLS setup), which every session and every
/// sub-session would pay before its first request; one client per kind also keeps one
/// connection pool, so a sub-session's first request reuses a connection its parent opened.
/// Headers (the key) go with each request, never with the client.
fn shared_client(
    connect_timeout: Duration,
    direct: bool,
) -> Result<reqwest::Client, ProviderError> {
    type Clients = Vec<((Duration, bool), reqwest::Client)>;
    static CLIENTS: std::sync::Mutex<Clients> = std::sync::Mutex::new(Vec::new());
    let mut clients = CLIENTS.lock().unwrap_or_else(|p| p.into_inner());
    let key = (connect_timeout, direct);
    if let Some((_, client)) = clients.iter().find(|(k, _)| *k == key) {
        return Ok(client.clone());
    }
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("vis/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true);
    if direct {
        builder = builder.no_proxy();
    }
    let client = builder.build().map_err(|err| {
        ProviderError::Config(format!(
            "cannot set up the HTTP client ({}); check the TLS setup of this machine",
            root_cause(&err)
        ))
    })?;
    clients.push((key, client.clone()));
    Ok(client)
}

pub(crate) fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn header_value(value: &str, what: &str) -> Result<HeaderValue, ProviderError> {
    HeaderValue::from_str(value).map_err(|_| {
        ProviderError::Config(format!(
            "the {what} contains characters not allowed in an HTTP header; check it for stray newlines or quotes"
        ))
    })
}

impl Provider {
    /// A client for `settings`. Fails without sending anything when the base URL is not an
    /// http(s) URL or when an official host has no key.
    pub fn new(settings: ProviderSettings) -> Result<Provider, ProviderError> {
        install_crypto_provider();
        let endpoint_text = settings.endpoint();
        let endpoint = Url::parse(&endpoint_text)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "invalid base URL '{}'; use an http(s) URL such as {}",
                    clean_message(&settings.base_url, 120),
                    ProviderSettings::default_base_url(settings.kind)
                ))
            })?;
        let key = settings
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let host = endpoint.host_str().unwrap_or_default().to_ascii_lowercase();
        if key.is_none() && OFFICIAL_HOSTS.contains(&host.as_str()) {
            return Err(ProviderError::MissingKey {
                url: settings.base_url.trim_end_matches('/').to_string(),
                env: ProviderSettings::key_env(settings.kind),
            });
        }

        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static(if settings.stream {
                "text/event-stream"
            } else {
                "application/json"
            }),
        );
        match settings.kind {
            ProviderKind::OpenAi => {
                // Local servers need no key; sending an empty bearer would confuse some.
                if let Some(key) = key {
                    let mut value = header_value(&format!("Bearer {key}"), "API key")?;
                    value.set_sensitive(true);
                    headers.insert(AUTHORIZATION, value);
                }
            }
            ProviderKind::Anthropic => {
                if let Some(key) = key {
                    let mut value = header_value(key, "API key")?;
                    value.set_sensitive(true);
                    headers.insert(HeaderName::from_static("x-api-key"), value);
                }
                headers.insert(
                    HeaderName::from_static("anthropic-version"),
                    HeaderValue::from_static("2023-06-01"),
                );
            }
        }

        let client = shared_client(settings.connect_timeout, is_loopback(&endpoint))?;
        Ok(Provider {
            settings,
            client,
            endpoint,
            headers,
        })
    }

    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// POSTs `body` (the gateway's serialized request, sent byte for byte) and streams the
    /// answer. `on_event` sees every text/reasoning delta, tool-call start and retry as they
    /// arrive (with `stream = false`, the whole answer's text at once when it came).
    /// Transient failures are retried here; dropping the future cancels the request.
    pub async fn stream(
        &self,
        body: Bytes,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<ModelResponse, ProviderError> {
        let started = Instant::now();
        let mut retries = 0u32;
        loop {
            let attempt_started = Instant::now();
            let mut ttft = None;
            let result = {
                let mut emit = |event: StreamEvent| {
                    if ttft.is_none() {
                        ttft = Some(attempt_started.elapsed());
                    }
                    on_event(event);
                };
                self.attempt(body.clone(), &mut emit).await
            };
            let err = match result {
                Ok(decoded) => {
                    return Ok(ModelResponse {
                        message: decoded.message,
                        stop_reason: decoded.stop_reason,
                        usage: decoded.usage,
                        model: decoded.model,
                        // An answer that came whole has no first token to time.
                        ttft: ttft.filter(|_| self.settings.stream),
                        latency: started.elapsed(),
                        retries,
                    });
                }
                Err(err) => err,
            };
            let hinted = err.retry_after();
            // A wait past the ceiling (a quota window) is not slept through: say so now.
            let too_long = hinted.is_some_and(|d| d > RETRY_AFTER_CEILING);
            if !err.is_transient() || too_long || retries >= self.settings.max_retries {
                return Err(if retries == 0 || !err.is_transient() {
                    err
                } else {
                    ProviderError::Exhausted {
                        attempts: retries + 1,
                        last: Box::new(err),
                    }
                });
            }
            let delay = hinted.unwrap_or_else(|| {
                retry::backoff(
                    retries,
                    self.settings.retry_base_delay,
                    self.settings.retry_max_delay,
                )
            });
            retries += 1;
            on_event(StreamEvent::Retrying {
                attempt: retries,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                reason: err.to_string(),
            });
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(
        &self,
        body: Bytes,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Decoded, ProviderError> {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .body(body)
            .send();
        // A whole answer's headers come only when the answer is complete: the wait for them
        // is as long as the silence a stream may keep.
        let wait = if self.settings.stream {
            self.settings.request_timeout
        } else {
            self.settings
                .request_timeout
                .max(self.settings.idle_timeout)
        };
        let response = match tokio::time::timeout(wait, request).await {
            Err(_) => {
                return Err(ProviderError::Timeout {
                    url: self.endpoint.to_string(),
                    after: wait,
                    whole: !self.settings.stream,
                })
            }
            Ok(Err(err)) => return Err(self.send_error(&err)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let body = self.read_error_body(response).await;
            return Err(self.status_error(status, &headers, &body));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        // An event stream is read as one whatever was asked (a server may stream anyway).
        let streamed = content_type.starts_with("text/event-stream");
        if !self.settings.stream && !streamed {
            return self.whole(response, emit).await;
        }
        if content_type.starts_with("application/json") {
            return Err(self.json_instead_of_stream(response).await);
        }
        let events = sse::events(
            Box::pin(response.bytes_stream()),
            self.settings.idle_timeout,
        );
        let empty = |how| self.empty("stream", how);
        match self.settings.kind {
            ProviderKind::OpenAi => read(events, openai::Decoder::default(), emit, empty).await,
            ProviderKind::Anthropic => {
                read(events, anthropic::Decoder::default(), emit, empty).await
            }
        }
    }

    /// A whole JSON answer (`stream = false`).
    async fn whole(
        &self,
        mut response: Response,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Decoded, ProviderError> {
        let mut body = Vec::new();
        loop {
            match tokio::time::timeout(self.settings.idle_timeout, response.chunk()).await {
                Err(_) => {
                    return Err(ProviderError::IdleTimeout {
                        after: self.settings.idle_timeout,
                    })
                }
                Ok(Err(err)) => {
                    return Err(ProviderError::truncated(format!(
                        "the connection broke mid-response: {}",
                        root_cause(&err)
                    )))
                }
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            }
            if body.len() > WHOLE_BODY_LIMIT {
                return Err(ProviderError::malformed(format!(
                    "the answer is over {} MiB: not a chat answer",
                    WHOLE_BODY_LIMIT >> 20
                )));
            }
        }
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(self.empty("body", "HTTP 200 without a byte of JSON"));
        }
        match self.settings.kind {
            ProviderKind::OpenAi => whole::decode(&body, openai::Decoder::default(), false, emit),
            ProviderKind::Anthropic => {
                whole::decode(&body, anthropic::Decoder::default(), true, emit)
            }
        }
    }

    /// The error of an answer with nothing in it, naming the setting to try.
    fn empty(&self, what: &'static str, how: &'static str) -> ProviderError {
        let hint = match (&self.settings.tool_choice, self.settings.stream) {
            (Some(choice), true) => format!(
                "with tool_choice = \"{}\", try [provider] stream = false (llama-cpp-python cannot stream with tool_choice set)",
                clean_message(choice.as_str(), 40)
            ),
            (None, true) => "try [provider] stream = false: the server then says what it refused".into(),
            (_, false) => "raise the server's context size if the prompt is over it".into(),
        };
        ProviderError::Empty { what, how, hint }
    }

    fn send_error(&self, err: &reqwest::Error) -> ProviderError {
        let cause = if err.is_timeout() {
            format!(
                "no connection within {} s",
                self.settings.connect_timeout.as_secs_f64()
            )
        } else {
            root_cause(err)
        };
        ProviderError::Connect {
            url: self.endpoint.to_string(),
            cause,
        }
    }

    /// The start of an error response's body, within the idle timeout.
    async fn read_error_body(&self, mut response: Response) -> Vec<u8> {
        let mut body = Vec::new();
        while body.len() < ERROR_BODY_LIMIT {
            match tokio::time::timeout(self.settings.idle_timeout, response.chunk()).await {
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body
    }

    async fn json_instead_of_stream(&self, response: Response) -> ProviderError {
        let body = self.read_error_body(response).await;
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body) {
            if value.get("error").is_some_and(|e| !e.is_null()) {
                let message = json_message(&value).unwrap_or_else(|| "no message".into());
                return ProviderError::stream_error("error", &message, false);
            }
        }
        ProviderError::malformed(
            "expected an event stream (text/event-stream) but got a JSON body: the server ignored \"stream\": true",
        )
    }

    fn status_error(&self, status: StatusCode, headers: &HeaderMap, body: &[u8]) -> ProviderError {
        let message = body_message(body);
        let code = status.as_u16();
        // A validation error is permanent whatever the status says (llama-cpp-python: 500).
        if matches!(code, 400 | 402 | 405..=428 | 430..=599) {
            if let Some(detail) = validation_detail(body) {
                return ProviderError::Invalid {
                    status: code,
                    detail,
                };
            }
        }
        let retry_after = retry::retry_after(headers, SystemTime::now());
        let no_retry = retry::should_not_retry(headers);
        let wait = retry_after
            .map(|d| format!("; it asks to wait {} s", d.as_secs_f64()))
            .unwrap_or_default();
        match code {
            401 | 403 => ProviderError::Auth {
                status: code,
                message,
                env: ProviderSettings::key_env(self.settings.kind),
            },
            404 => {
                let base = self.settings.base_url.trim().trim_end_matches('/');
                let hint = match self.settings.kind {
                    ProviderKind::OpenAi if !base.ends_with("/v1") => {
                        " (OpenAI-compatible base URLs usually end in /v1)"
                    }
                    ProviderKind::Anthropic if base.ends_with("/v1") => {
                        " (the Anthropic base URL is the root, without /v1)"
                    }
                    _ => "",
                };
                ProviderError::NotFound {
                    url: self.endpoint.to_string(),
                    model: clean_message(&self.settings.model, 80),
                    detail: format!(" ({message})"),
                    hint: hint.to_string(),
                }
            }
            429 => ProviderError::RateLimited {
                message,
                retry_after,
                wait,
                no_retry,
            },
            408 | 500..=599 => ProviderError::Server {
                status: code,
                message,
                retry_after,
                wait,
                no_retry,
            },
            400..=499 => ProviderError::BadRequest {
                status: code,
                message,
            },
            _ => ProviderError::Http {
                status: code,
                url: self.endpoint.to_string(),
                message,
            },
        }
    }
}

/// Drives `decoder` over the events until the response completes or the body ends. A body
/// without a single data event is `empty(how)`'s error, not a truncation; a truncation says
/// whether any of the answer had arrived (and was discarded).
async fn read<D: Decode>(
    events: impl futures::Stream<Item = Result<sse::SseEvent, ProviderError>> + Send,
    mut decoder: D,
    emit: &mut (dyn FnMut(StreamEvent) + Send),
    empty: impl Fn(&'static str) -> ProviderError,
) -> Result<Decoded, ProviderError> {
    let mut events = std::pin::pin!(events);
    let mut done = false;
    let mut seen = false;
    let mut content = false;
    let mut emit = |event: StreamEvent| {
        content = true;
        emit(event);
    };
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(ProviderError::Truncated { detail, .. }) => {
                let detail = match decoder.open_call() {
                    Some(call) => format!("{detail}, inside {call}; the call was not run"),
                    None => detail,
                };
                return Err(ProviderError::Truncated {
                    detail,
                    partial: content,
                });
            }
            Err(err) => return Err(err),
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        seen = true;
        match decoder.feed(&event.event, data, &mut emit) {
            Ok(false) => {}
            Ok(true) => {
                done = true;
                break;
            }
            // Half a JSON object at the very end is a cut body, not garbage.
            Err(ProviderError::Malformed { .. }) if event.at_eof => {
                let detail = match decoder.open_call() {
                    Some(call) => format!(
                        "the body ended in the middle of an event, inside {call}; the call was not run"
                    ),
                    None => "the body ended in the middle of an event".to_string(),
                };
                return Err(ProviderError::truncated(detail));
            }
            Err(err) => return Err(err),
        }
    }
    if !seen {
        return Err(empty("HTTP 200 without a single event"));
    }
    match decoder.finish(done) {
        Err(ProviderError::Truncated { detail, .. }) => Err(ProviderError::Truncated {
            detail,
            partial: content,
        }),
        other => other,
    }
}
