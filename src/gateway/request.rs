//! One model request of a turn: sending it (the worker may start meanwhile), what the gateway
//! sees of it while it runs (retries, time to first content: a failed or interrupted request
//! has no response to tell), its health record, and what its finish reason means for the turn
//! (an answer cut at the output limit, an empty one).
//!
//! The health record weighs the input by the session's cache prices (`providers::InputCost`)
//! and sets beside the provider's cache reads what should have been read: the share of the
//! body that repeats the previous answered request byte for byte ([`CacheTracker`]).

use tokio_util::sync::CancellationToken;

use super::{to_bytes, ChatSession, GatewayError};
use crate::protocol::{Event, RequestCost, StreamEvent};
use crate::providers::{expected_cached, is_cache_miss, InputCost, ModelResponse, ProviderError};
use crate::store::{now_millis, RequestRecord};

/// The request bodies a prompt cache could reuse: the last one the provider answered (and
/// when it ended) and the one in flight.
#[derive(Debug, Default)]
pub(super) struct CacheTracker {
    answered: Option<(bytes::Bytes, i64)>,
    in_flight: Option<bytes::Bytes>,
}

impl CacheTracker {
    /// Input tokens of the request in flight that should come from the cache (see
    /// `expected_cached`), given its input tokens; it becomes the last answered request.
    /// `None` when no request was answered before it in this process.
    fn answered(
        &mut self,
        input_tokens: u64,
        started_at: i64,
        ended_at: i64,
        prices: &crate::providers::CachePrices,
    ) -> Option<u64> {
        let body = self.in_flight.take()?;
        let expected = self.answered.as_ref().map(|(previous, previous_end)| {
            let shared = previous
                .iter()
                .zip(body.iter())
                .take_while(|(a, b)| a == b)
                .count();
            let idle_secs = u64::try_from(started_at - previous_end).unwrap_or(0) / 1000;
            expected_cached(shared, body.len(), input_tokens, idle_secs, prices)
        });
        self.answered = Some((body, ended_at));
        expected
    }
}

/// What the gateway saw of a request while it ran: the retries made and, for the attempt
/// that ran last, the time to its first content (a failed or interrupted request has no
/// `ModelResponse` to say so).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Clock {
    retries: u32,
    ttft: Option<std::time::Duration>,
}

/// How long a worker's start (`warm_up`) leaves the request it overlaps to go out alone: a
/// reused connection's write takes well under a millisecond; a new connection's handshake
/// waits on the network more than on the CPU. The model's answer takes far longer, so the
/// worker is still ready before a block needs it.
const WORKER_START_GRACE: std::time::Duration = std::time::Duration::from_millis(10);

/// One request; `None` when `stop` interrupted it. With `warm_up`, the worker starts
/// meanwhile, [`WORKER_START_GRACE`] after the request (a start failure shows when a block
/// needs the worker).
///
/// The request runs on a task of its own: a worker's start forks and execs synchronously
/// (milliseconds on a busy machine), and on the turn's task that would hold back the request's
/// connect and write until it is done (a sub-session's first request waited for it).
pub(super) async fn request(
    session: &mut ChatSession,
    body: Vec<u8>,
    events: &tokio::sync::mpsc::UnboundedSender<Event>,
    stop: &CancellationToken,
    warm_up: bool,
) -> (Option<Result<ModelResponse, ProviderError>>, Clock) {
    let body = to_bytes(body);
    session.cache.in_flight = Some(body.clone());
    let provider = match session.provider() {
        Ok(provider) => provider.clone(),
        Err(e) => return (Some(Err(e)), Clock::default()),
    };
    crate::trace::mark(&session.id, "request: client ready");
    let sink = events.clone();
    let stop = stop.clone();
    let id = session.id.clone();
    let (ended, request_ended) = tokio::sync::oneshot::channel::<()>();
    let mut sending = AbortOnDrop(tokio::spawn(async move {
        crate::trace::mark(&id, "request: task runs");
        let answer = stream(&provider, body, &sink, &stop).await;
        let _ = ended.send(());
        answer
    }));
    let start = async {
        if warm_up {
            // The worker is not needed before the model answers, and its launch (a process
            // start, then CPython's: tens of ms of CPU) competes with the request's connect
            // and write for the cores: started at once, a child's first request reached the
            // server 3-4 ms later, once 15 ms (`docs/spawn.md`). It starts once the request
            // has had the time to go out, or when the request ends, if that is sooner.
            let _ = tokio::time::timeout(WORKER_START_GRACE, request_ended).await;
            crate::trace::mark(&session.id, "request: worker start begun");
            let _ = session.runner.supervisor_mut().start().await;
        }
    };
    let (sent, ()) = tokio::join!(sending.wait(), start);
    match sent {
        Ok(answer) => answer,
        Err(e) => (
            Some(Err(ProviderError::Config(format!(
                "the request's task ended without an answer ({e})"
            )))),
            Clock::default(),
        ),
    }
}

/// A spawned task that is aborted when its handle is dropped (the turn that waits for it was
/// dropped: its request goes with it).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn wait(&mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Streams `body` with `provider`, turning its events into the turn's; `None` when `stop`
/// interrupted it.
async fn stream(
    provider: &crate::providers::Provider,
    body: bytes::Bytes,
    sink: &tokio::sync::mpsc::UnboundedSender<Event>,
    stop: &CancellationToken,
) -> (Option<Result<ModelResponse, ProviderError>>, Clock) {
    let mut clock = Clock::default();
    // An attempt starts when the request goes out, or after a retry's wait.
    let mut attempt_start = std::time::Instant::now();
    let clock_ref = &mut clock;
    let mut on_event = move |event: StreamEvent| {
        match &event {
            StreamEvent::Retrying { delay_ms, .. } => {
                clock_ref.retries += 1;
                clock_ref.ttft = None;
                attempt_start =
                    std::time::Instant::now() + std::time::Duration::from_millis(*delay_ms);
            }
            _ if clock_ref.ttft.is_none() => {
                clock_ref.ttft = Some(attempt_start.elapsed());
            }
            _ => {}
        }
        let event = match event {
            StreamEvent::TextDelta { text } => Event::TextDelta { text },
            StreamEvent::ReasoningDelta { text } => Event::ReasoningDelta { text },
            StreamEvent::Retrying {
                attempt,
                delay_ms,
                reason,
            } => Event::Retrying {
                attempt,
                delay_ms,
                reason,
            },
            StreamEvent::ToolCallStarted { .. } => return,
        };
        let _ = sink.send(event);
    };
    let answer = tokio::select! {
        answer = provider.stream(body, &mut on_event) => Some(answer),
        _ = stop.cancelled() => None,
    };
    (answer, clock)
}

/// How a request ended, for its health record.
pub(super) enum Outcome<'a> {
    Answered(&'a ModelResponse),
    /// Failed or interrupted (`kind` "interrupted"): what the gateway saw of it.
    Failed {
        clock: Clock,
        kind: &'a str,
        message: String,
    },
}

pub(super) fn record_request(
    session: &mut ChatSession,
    turn: i64,
    started_at: i64,
    estimate: u64,
    outcome: Outcome<'_>,
) -> Result<RequestCost, GatewayError> {
    let as_i64 = |v: Option<u64>| v.map(|n| n as i64);
    let settings = &session.settings.provider;
    let provider_name = settings.kind.as_str().to_string();
    let response = match &outcome {
        Outcome::Answered(r) => Some(*r),
        Outcome::Failed { .. } => None,
    };
    let model_name = response
        .and_then(|r| r.model.clone())
        .unwrap_or_else(|| settings.model.clone());
    let measurement = match response {
        Some(r) => {
            let measured = session.conversation.answered(
                r.usage.input_tokens,
                estimate,
                &provider_name,
                &model_name,
                turn,
            );
            if let Some((group, m)) = &measured {
                session
                    .runner
                    .store()
                    .set_fold_measurement(&session.id, *group, m)?;
            }
            measured.map(|(_, m)| m)
        }
        None => None,
    };
    let millis = |d: std::time::Duration| d.as_millis() as i64;
    let (latency_ms, ttft_ms, retries, error_kind, error) = match outcome {
        Outcome::Answered(r) => (
            millis(r.latency),
            r.ttft.map(millis),
            r.retries as i64,
            None,
            None,
        ),
        Outcome::Failed {
            clock,
            kind,
            message,
        } => (
            now_millis() - started_at,
            clock.ttft.map(millis),
            clock.retries as i64,
            Some(kind.to_string()),
            Some(message),
        ),
    };
    let prices = session.settings.cache_prices;
    let cost =
        response.and_then(|r| InputCost::of(session.settings.provider.kind, &r.usage, &prices));
    let expected = match response {
        Some(r) => session.cache.answered(
            r.usage.input_tokens.unwrap_or(estimate),
            started_at,
            started_at + latency_ms,
            &prices,
        ),
        None => {
            // The provider did not process it: nothing was cached.
            session.cache.in_flight = None;
            None
        }
    };
    let cache_miss = match (expected, response.and_then(|r| r.usage.cached_tokens)) {
        (Some(expected), Some(read)) => Some(is_cache_miss(expected, read)),
        _ => None,
    };
    let request_cost = RequestCost {
        uncached_tokens: cost.map(|c| c.uncached),
        cache_write_tokens: cost.map(|c| c.cache_write),
        weighted_tokens: cost.map(|c| c.weighted),
        expected_cached_tokens: expected,
        cache_miss,
    };
    let record = RequestRecord {
        seq: 0,
        turn,
        provider: provider_name,
        model: model_name,
        started_at,
        latency_ms,
        ttft_ms,
        retries,
        input_tokens: response.and_then(|r| as_i64(r.usage.input_tokens)),
        cached_tokens: response.and_then(|r| as_i64(r.usage.cached_tokens)),
        cache_creation_tokens: response.and_then(|r| as_i64(r.usage.cache_creation_tokens)),
        output_tokens: response.and_then(|r| as_i64(r.usage.output_tokens)),
        estimate_tokens: estimate as i64,
        error_kind,
        error,
        fold_measurement: measurement.map(|m| serde_json::to_string(&m).unwrap_or_default()),
        finish_reason: response.and_then(|r| r.stop_reason.clone()),
        uncached_tokens: cost.map(|c| c.uncached as i64),
        cache_write_tokens: cost.map(|c| c.cache_write as i64),
        weighted_tokens: cost.map(|c| c.weighted),
        expected_cached_tokens: expected.map(|n| n as i64),
        cache_miss,
    };
    let id = session.id.clone();
    session.runner.store_mut().record_request(&id, &record)?;
    Ok(request_cost)
}

/// What a person sees when the model's answer was empty (no text, no call).
pub const EMPTY_ANSWER: &str = "(empty answer: the model sent no text and no tool call)";

/// The finish reason, as sent, when it says the answer was cut at the output limit
/// (OpenAI-compatible `length`, Anthropic `max_tokens`).
pub(super) fn output_limit_reason(stop_reason: &str) -> Option<String> {
    match stop_reason {
        "length" => Some("finish_reason \"length\"".into()),
        "max_tokens" => Some("stop_reason \"max_tokens\"".into()),
        _ => None,
    }
}

/// The line that ends a cut turn, naming what sets the limit.
pub(super) fn cut_notice(session: &ChatSession, reason: String) -> String {
    let what = match session.settings.provider.kind {
        crate::providers::ProviderKind::Anthropic => format!(
            "raise [provider] max_output_tokens (now {})",
            session.settings.max_output_tokens
        ),
        // Vis sends no output limit to these servers: theirs, or a full context, cut it.
        crate::providers::ProviderKind::OpenAi => {
            "the server's own output limit or a full context window ended it".into()
        }
    };
    format!(
        "the answer was cut at the output limit ({reason}); {what}; send a message to let the model go on"
    )
}
