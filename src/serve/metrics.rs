//! `/metrics` in the Prometheus text format (the `prometheus-client` crate): global and
//! per-session figures, fed by the events of every turn.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::protocol::{Event, RequestCost};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SessionLabel {
    pub session: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub session: String,
    pub kind: String,
}

/// What a turn has in progress, for the gauges.
#[derive(Debug, Default)]
pub struct Open {
    request: bool,
    block: bool,
}

pub struct Metrics {
    registry: Registry,
    pub live_workers: Gauge,
    pub sessions_open: Gauge,
    blocks_running: Gauge,
    requests_in_flight: Gauge,
    tokens_input: Counter,
    tokens_cached: Counter,
    tokens_output: Counter,
    tokens_uncached: Counter,
    tokens_cache_write: Counter,
    tokens_weighted: Counter<f64, AtomicU64>,
    cache_misses: Counter,
    errors: Counter,
    s_blocks_running: Family<SessionLabel, Gauge>,
    s_requests_in_flight: Family<SessionLabel, Gauge>,
    s_tokens_input: Family<SessionLabel, Counter>,
    s_tokens_cached: Family<SessionLabel, Counter>,
    s_tokens_output: Family<SessionLabel, Counter>,
    s_tokens_uncached: Family<SessionLabel, Counter>,
    s_tokens_cache_write: Family<SessionLabel, Counter>,
    s_tokens_weighted: Family<SessionLabel, Counter<f64, AtomicU64>>,
    s_cache_misses: Family<SessionLabel, Counter>,
    s_iterations: Family<SessionLabel, Counter>,
    s_errors: Family<ErrorLabel, Counter>,
    /// The error kinds seen per session, so a deleted session's series can be removed.
    error_kinds: Mutex<HashMap<String, HashSet<String>>>,
    pub http_requests: Counter<u64, AtomicU64>,
    pub event_log_bytes: Gauge,
    pub leases_held: Gauge,
    pub leases_lost: Counter,
    pub requests_proxied: Counter,
    /// This server's node id: every sample is labelled `node="…"`.
    node: std::sync::OnceLock<String>,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("vis");
        let m = Metrics {
            live_workers: Gauge::default(),
            sessions_open: Gauge::default(),
            blocks_running: Gauge::default(),
            requests_in_flight: Gauge::default(),
            tokens_input: Counter::default(),
            tokens_cached: Counter::default(),
            tokens_output: Counter::default(),
            tokens_uncached: Counter::default(),
            tokens_cache_write: Counter::default(),
            tokens_weighted: Counter::default(),
            cache_misses: Counter::default(),
            errors: Counter::default(),
            s_blocks_running: Family::default(),
            s_requests_in_flight: Family::default(),
            s_tokens_input: Family::default(),
            s_tokens_cached: Family::default(),
            s_tokens_output: Family::default(),
            s_tokens_uncached: Family::default(),
            s_tokens_cache_write: Family::default(),
            s_tokens_weighted: Family::default(),
            s_cache_misses: Family::default(),
            s_iterations: Family::default(),
            s_errors: Family::default(),
            error_kinds: Mutex::new(HashMap::new()),
            http_requests: Counter::default(),
            event_log_bytes: Gauge::default(),
            leases_held: Gauge::default(),
            leases_lost: Counter::default(),
            requests_proxied: Counter::default(),
            node: std::sync::OnceLock::new(),
            registry: Registry::default(),
        };
        registry.register(
            "live_workers",
            "Worker processes alive",
            m.live_workers.clone(),
        );
        registry.register(
            "sessions_open",
            "Sessions loaded in this server",
            m.sessions_open.clone(),
        );
        registry.register(
            "blocks_running",
            "Blocks running now",
            m.blocks_running.clone(),
        );
        registry.register(
            "requests_in_flight",
            "Model requests in flight",
            m.requests_in_flight.clone(),
        );
        registry.register(
            "input_tokens",
            "Input tokens reported by providers",
            m.tokens_input.clone(),
        );
        registry.register(
            "cached_tokens",
            "Input tokens served from prompt caches",
            m.tokens_cached.clone(),
        );
        registry.register(
            "output_tokens",
            "Output tokens reported by providers",
            m.tokens_output.clone(),
        );
        registry.register(
            "uncached_tokens",
            "Input tokens billed at the full price (neither read from nor written to a cache)",
            m.tokens_uncached.clone(),
        );
        registry.register(
            "cache_write_tokens",
            "Input tokens written to prompt caches",
            m.tokens_cache_write.clone(),
        );
        registry.register(
            "weighted_input_tokens",
            "Input in uncached-token units at the cache prices",
            m.tokens_weighted.clone(),
        );
        registry.register(
            "cache_misses",
            "Requests whose cache reads fell under half the expected ones (a prefix bug)",
            m.cache_misses.clone(),
        );
        registry.register("errors", "Errors that ended turns", m.errors.clone());
        registry.register(
            "http_requests",
            "HTTP requests served",
            m.http_requests.clone(),
        );
        registry.register(
            "leases_held",
            "Session leases this node holds",
            m.leases_held.clone(),
        );
        registry.register(
            "leases_lost",
            "Leases this node stopped using because it could not renew them in time",
            m.leases_lost.clone(),
        );
        registry.register(
            "requests_proxied",
            "Requests passed to the node that runs their session",
            m.requests_proxied.clone(),
        );
        registry.register(
            "event_log_bytes",
            "Bytes of events kept for replay, all sessions together",
            m.event_log_bytes.clone(),
        );
        registry.register(
            "session_blocks_running",
            "Blocks running now, per session",
            m.s_blocks_running.clone(),
        );
        registry.register(
            "session_requests_in_flight",
            "Model requests in flight, per session",
            m.s_requests_in_flight.clone(),
        );
        registry.register(
            "session_input_tokens",
            "Input tokens, per session",
            m.s_tokens_input.clone(),
        );
        registry.register(
            "session_cached_tokens",
            "Cached input tokens, per session",
            m.s_tokens_cached.clone(),
        );
        registry.register(
            "session_output_tokens",
            "Output tokens, per session",
            m.s_tokens_output.clone(),
        );
        registry.register(
            "session_uncached_tokens",
            "Input tokens at the full price, per session",
            m.s_tokens_uncached.clone(),
        );
        registry.register(
            "session_cache_write_tokens",
            "Input tokens written to the cache, per session",
            m.s_tokens_cache_write.clone(),
        );
        registry.register(
            "session_weighted_input_tokens",
            "Input in uncached-token units at the cache prices, per session",
            m.s_tokens_weighted.clone(),
        );
        registry.register(
            "session_cache_misses",
            "Requests flagged as cache misses, per session",
            m.s_cache_misses.clone(),
        );
        registry.register(
            "session_iterations",
            "Iterations run, per session",
            m.s_iterations.clone(),
        );
        registry.register(
            "session_errors",
            "Errors that ended turns, per session and kind",
            m.s_errors.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Counts what one event of session `id` says; `open` tracks the turn's request and
    /// block in progress (a failed request has no `ResponseFinished`, a rejected call no
    /// `BlockStarted`).
    pub fn observe(&self, id: &str, event: &Event, open: &mut Open) {
        let label = SessionLabel {
            session: id.to_string(),
        };
        let end_request = |m: &Metrics, open: &mut Open| {
            if std::mem::take(&mut open.request) {
                m.requests_in_flight.dec();
                m.s_requests_in_flight.get_or_create(&label).dec();
            }
        };
        let end_block = |m: &Metrics, open: &mut Open| {
            if std::mem::take(&mut open.block) {
                m.blocks_running.dec();
                m.s_blocks_running.get_or_create(&label).dec();
            }
        };
        match event {
            Event::RequestStarted { .. } => {
                end_request(self, open);
                open.request = true;
                self.requests_in_flight.inc();
                self.s_requests_in_flight.get_or_create(&label).inc();
            }
            Event::ResponseFinished { usage, cost, .. } => {
                end_request(self, open);
                self.observe_cost(&label, cost);
                for (total, family, value) in [
                    (&self.tokens_input, &self.s_tokens_input, usage.input_tokens),
                    (
                        &self.tokens_cached,
                        &self.s_tokens_cached,
                        usage.cached_tokens,
                    ),
                    (
                        &self.tokens_output,
                        &self.s_tokens_output,
                        usage.output_tokens,
                    ),
                ] {
                    if let Some(n) = value {
                        total.inc_by(n);
                        family.get_or_create(&label).inc_by(n);
                    }
                }
            }
            Event::BlockStarted { .. } => {
                end_block(self, open);
                open.block = true;
                self.blocks_running.inc();
                self.s_blocks_running.get_or_create(&label).inc();
            }
            Event::BlockFinished { .. } => {
                end_block(self, open);
                self.s_iterations.get_or_create(&label).inc();
            }
            Event::TurnFinished { .. } => {
                end_request(self, open);
                end_block(self, open);
            }
            Event::Error { kind, .. } => {
                // A failed request never reached ResponseFinished.
                if matches!(kind.as_str(), "interrupted") {
                    return;
                }
                self.errors.inc();
                if let Ok(mut kinds) = self.error_kinds.lock() {
                    kinds
                        .entry(id.to_string())
                        .or_default()
                        .insert(kind.clone());
                }
                self.s_errors
                    .get_or_create(&ErrorLabel {
                        session: id.to_string(),
                        kind: kind.clone(),
                    })
                    .inc();
            }
            _ => {}
        }
    }

    /// The cost model's figures of one answered request (what it did not report stays out).
    fn observe_cost(&self, label: &SessionLabel, cost: &RequestCost) {
        for (total, family, value) in [
            (
                &self.tokens_uncached,
                &self.s_tokens_uncached,
                cost.uncached_tokens,
            ),
            (
                &self.tokens_cache_write,
                &self.s_tokens_cache_write,
                cost.cache_write_tokens,
            ),
            (
                &self.cache_misses,
                &self.s_cache_misses,
                cost.cache_miss.map(u64::from),
            ),
        ] {
            if let Some(n) = value {
                total.inc_by(n);
                family.get_or_create(label).inc_by(n);
            }
        }
        if let Some(w) = cost.weighted_tokens.filter(|w| w.is_finite() && *w >= 0.0) {
            self.tokens_weighted.inc_by(w);
            self.s_tokens_weighted.get_or_create(label).inc_by(w);
        }
    }

    /// Removes every series of session `id` (it was deleted).
    pub fn forget_session(&self, id: &str) {
        let label = SessionLabel {
            session: id.to_string(),
        };
        for family in [&self.s_blocks_running, &self.s_requests_in_flight] {
            family.remove(&label);
        }
        for family in [
            &self.s_tokens_input,
            &self.s_tokens_cached,
            &self.s_tokens_output,
            &self.s_tokens_uncached,
            &self.s_tokens_cache_write,
            &self.s_cache_misses,
            &self.s_iterations,
        ] {
            family.remove(&label);
        }
        self.s_tokens_weighted.remove(&label);
        let kinds = self
            .error_kinds
            .lock()
            .ok()
            .and_then(|mut k| k.remove(id))
            .unwrap_or_default();
        for kind in kinds {
            self.s_errors.remove(&ErrorLabel {
                session: id.to_string(),
                kind,
            });
        }
    }

    /// Labels every sample with this node's id from now on.
    pub fn set_node(&self, node: &str) {
        let _ = self.node.set(node.to_string());
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        match self.node.get() {
            Some(node) => with_node_label(&out, node),
            None => out,
        }
    }
}

/// `text` (the exposition format) with `node="NODE"` first in every sample's labels, so the
/// figures of several nodes aggregate under the same names.
fn with_node_label(text: &str, node: &str) -> String {
    let escaped = node
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            out.push_str(line);
        } else if let Some(brace) = line.find('{').filter(|b| !line[..*b].contains(' ')) {
            let (name, rest) = line.split_at(brace);
            let rest = &rest[1..];
            let sep = if rest.starts_with('}') { "" } else { "," };
            out.push_str(&format!("{name}{{node=\"{escaped}\"{sep}{rest}"));
        } else if let Some((name, value)) = line.split_once(' ') {
            out.push_str(&format!("{name}{{node=\"{escaped}\"}} {value}"));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_sample_is_labelled_by_node() {
        let text = "# HELP vis_x X\n# TYPE vis_x gauge\nvis_x 3\nvis_y{session=\"s-1\"} 2\n# EOF\n";
        assert_eq!(
            super::with_node_label(text, "a:1\"x"),
            "# HELP vis_x X\n# TYPE vis_x gauge\nvis_x{node=\"a:1\\\"x\"} 3\nvis_y{node=\"a:1\\\"x\",session=\"s-1\"} 2\n# EOF\n"
        );
    }
}
