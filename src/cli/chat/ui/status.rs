//! The token figures of a session: the line printed after each turn and the `/status` report.
//!
//! Everything comes from the store's request records (so a resumed session's totals include
//! its earlier runs) and the gateway's local estimate of the next request. An input count the
//! provider did not report is "n/a", never 0; utilization then falls back to the local
//! estimate, marked with `~`.

use super::plural;
use crate::gateway::ChatSession;
use crate::protocol::{Level, Measurement};
use crate::store::{CostTotals, RequestRecord};

/// Token totals over a session's answered requests.
#[derive(Debug, Default, PartialEq)]
pub struct Totals {
    pub requests: usize,
    /// Sum over requests that reported input (`None` when none did).
    pub input: Option<u64>,
    pub cached: Option<u64>,
    pub output: Option<u64>,
    /// Answered requests without an input count.
    pub input_unreported: usize,
}

pub fn totals(requests: &[RequestRecord]) -> Totals {
    let mut t = Totals::default();
    let add = |sum: &mut Option<u64>, v: Option<i64>| {
        if let Some(v) = v {
            *sum = Some(sum.unwrap_or(0) + v.max(0) as u64);
        }
    };
    for r in requests.iter().filter(|r| r.error_kind.is_none()) {
        t.requests += 1;
        add(&mut t.input, r.input_tokens);
        add(&mut t.cached, r.cached_tokens);
        add(&mut t.output, r.output_tokens);
        if r.input_tokens.is_none() {
            t.input_unreported += 1;
        }
    }
    t
}

/// `1,234` or `n/a`.
pub fn count(v: Option<u64>) -> String {
    match v {
        None => "n/a".into(),
        Some(v) => crate::protocol::group_thousands(v as usize),
    }
}

/// ` (83% cached)` when both are known and input is not zero.
fn cached_share(input: Option<u64>, cached: Option<u64>) -> String {
    match (input, cached) {
        (Some(i), Some(c)) if i > 0 => format!(" ({:.0}% cached)", c as f64 * 100.0 / i as f64),
        _ => String::new(),
    }
}

/// Utilization: the last request's input over the level where folding is required (the
/// model's `auto_compress_above`), or the estimate of the next request (marked `~`) when the
/// provider gave no input count; the level when it is past a hint.
pub fn utilization(
    last: Option<&RequestRecord>,
    estimate: u64,
    auto_compress_above: u64,
) -> String {
    let (tokens, mark) = match last.and_then(|r| r.input_tokens) {
        Some(t) => (t.max(0) as u64, ""),
        None => (estimate, "~"),
    };
    let share = tokens as f64 * 100.0 / auto_compress_above.max(1) as f64;
    let level = match crate::protocol::level(tokens, auto_compress_above) {
        Level::Normal => "",
        Level::Hint => " (fold soon)",
        Level::Urgent => " (fold now)",
        Level::Required => " (folding required)",
    };
    format!(
        "{mark}{share:.1}% of {}k{level}",
        auto_compress_above / 1000
    )
}

/// The latest fold measurement in a few words (`None` before the first fold).
pub fn measurement(session: &ChatSession) -> Option<String> {
    Some(match session.utilization().fold_measurement? {
        Measurement::Measured {
            net_reduction_tokens: n,
            ..
        } => {
            let sign = if n >= 0 { "−" } else { "+" };
            format!("fold net {sign}{} tokens", count(Some(n.unsigned_abs())))
        }
        Measurement::Pending { .. } => "fold measurement pending".into(),
        Measurement::Unavailable { reason, .. } => {
            format!("fold measurement n/a ({reason})")
        }
    })
}

fn last_answered(requests: &[RequestRecord]) -> Option<&RequestRecord> {
    requests.iter().rev().find(|r| r.error_kind.is_none())
}

/// The line after each turn, e.g. `s-k3v9x2qa · turn 2 · last in 1,200 (83% cached) out 10 ·
/// session in 2,200 out 30 · next ~2,400 · util 0.6% of 200k`.
pub fn line(session: &ChatSession) -> String {
    let requests = session.store().requests(session.id()).unwrap_or_default();
    let turns = session
        .store()
        .counts(session.id())
        .map(|c| c.turns)
        .unwrap_or(0);
    let last = last_answered(&requests);
    let t = totals(&requests);
    let last_part = match last {
        Some(r) => {
            let input = tokens(r.input_tokens);
            let cached = tokens(r.cached_tokens);
            format!(
                "last in {}{} out {}",
                count(input),
                cached_share(input, cached),
                count(tokens(r.output_tokens))
            )
        }
        None => "no answered request yet".into(),
    };
    let mut line = format!(
        "{} · turn {turns} · {last_part} · session in {} out {} · next ~{} · util {}{}",
        session.id(),
        count(t.input),
        count(t.output),
        count(Some(session.estimate_tokens())),
        utilization(
            last,
            session.estimate_tokens(),
            session.utilization().auto_compress_above
        ),
        if session.limits().source.is_guess() {
            " (window guessed: unknown model)"
        } else {
            ""
        }
    );
    if let Some(m) = measurement(session) {
        line.push_str(" · ");
        line.push_str(&m);
    }
    let running = session.supervisor().jobs().running().len();
    if running > 0 {
        line.push_str(&format!(
            " · {} running (/jobs)",
            plural(running as i64, "job")
        ));
    }
    line
}

/// The `/status` report.
pub fn report(session: &ChatSession) -> Vec<(String, String)> {
    let store = session.store();
    let id = session.id();
    let requests = store.requests(id).unwrap_or_default();
    let counts = store.counts(id).ok();
    let defs = store.load_defs(id).map(|d| d.len()).unwrap_or(0);
    let provider = &session.settings().provider;
    let mut rows = vec![
        (
            "session".to_string(),
            format!("{id} (resume it with vis chat --resume {id})"),
        ),
        (
            "model".into(),
            format!(
                "{}/{} at {}",
                provider.kind, provider.model, provider.base_url
            ),
        ),
        ("workspace".into(), session.roots().join(", ")),
    ];
    if let Some(c) = counts {
        rows.push((
            "turns".into(),
            [
                plural(c.turns, "turn"),
                plural(c.iterations, "iteration"),
                plural(defs as i64, "definition"),
                plural(c.folds, "fold"),
            ]
            .join(", "),
        ));
    }
    let last = last_answered(&requests);
    rows.push((
        "last request".into(),
        match last {
            Some(r) => {
                let input = tokens(r.input_tokens);
                let cached = tokens(r.cached_tokens);
                format!(
                    "in {}, cached {}{}, out {}, {} ms{}{}",
                    count(input),
                    count(cached),
                    cached_share(input, cached),
                    count(tokens(r.output_tokens)),
                    r.latency_ms,
                    r.finish_reason
                        .as_deref()
                        .map(|f| format!(", finished: {f}"))
                        .unwrap_or_default(),
                    request_cost(r)
                )
            }
            None => "none yet".into(),
        },
    ));
    let t = totals(&requests);
    let failed = requests.len() - t.requests;
    rows.push((
        "session tokens".into(),
        format!(
            "in {}, cached {}{}, out {} over {}{}{}",
            count(t.input),
            count(t.cached),
            cached_share(t.input, t.cached),
            count(t.output),
            plural(t.requests as i64, "request"),
            if t.input_unreported > 0 {
                format!(" ({} without an input count)", t.input_unreported)
            } else {
                String::new()
            },
            if failed > 0 {
                format!(", {failed} failed")
            } else {
                String::new()
            }
        ),
    ));
    rows.push((
        "cost".into(),
        format!(
            "{} (prices: cache read {}×, cache write {}×, lifetime {} s)",
            CostTotals::of(&requests).describe(),
            session.settings().cache_prices.cache_read,
            session.settings().cache_prices.cache_write,
            session.settings().cache_prices.lifetime_secs
        ),
    ));
    rows.push((
        "next request".into(),
        format!(
            "~{} tokens (local o200k estimate)",
            count(Some(session.estimate_tokens()))
        ),
    ));
    let u = session.utilization();
    rows.push((
        "utilization".into(),
        format!(
            "{} (folding is required above {} input tokens; the model's hard limit is {}: {})",
            utilization(last, session.estimate_tokens(), u.auto_compress_above),
            count(Some(u.auto_compress_above)),
            count(u.input_limit),
            session.limits().source.describe()
        ),
    ));
    if let Some(m) = measurement(session) {
        rows.push(("folds".into(), m));
    }
    let supervisor = session.supervisor();
    let worker = if supervisor.is_running() {
        let mut parts = vec!["running".to_string()];
        if let Some(pid) = supervisor.worker_pid() {
            parts.push(format!("pid {pid}"));
        }
        if let Some(v) = supervisor.python_version() {
            parts.push(format!(
                "Python {}",
                v.split_whitespace().next().unwrap_or(v)
            ));
        }
        let isolation = supervisor.isolation();
        parts.push(format!(
            "sandbox {}",
            isolation.mode.map_or("?", |m| m.as_str())
        ));
        if !isolation.missing.is_empty() {
            parts.push(format!("missing: {}", isolation.missing.join("; ")));
        }
        parts.join(", ")
    } else {
        "not running (it starts with the next request)".into()
    };
    rows.push(("worker".into(), worker));
    rows
}

/// `, weighted 1,234, cache write 0, expected cached 4,000` and the miss flag, for what the
/// record has.
fn request_cost(r: &RequestRecord) -> String {
    let mut out = String::new();
    if let (Some(w), Some(write)) = (r.weighted_tokens, tokens(r.cache_write_tokens)) {
        out += &format!(
            ", weighted {}, cache write {}",
            count(Some(w.round() as u64)),
            count(Some(write))
        );
    }
    if let Some(e) = tokens(r.expected_cached_tokens) {
        out += &format!(", expected cached {}", count(Some(e)));
    }
    if r.cache_miss == Some(true) {
        out += " — CACHE MISS (reads under half the expected: a prefix bug?)";
    }
    out
}

/// A stored token count (never negative in practice) as a count to show.
fn tokens(stored: Option<i64>) -> Option<u64> {
    stored.map(|v| v.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(input: Option<i64>, cached: Option<i64>, error: bool) -> RequestRecord {
        RequestRecord {
            seq: 0,
            turn: 1,
            provider: "openai".into(),
            model: "m".into(),
            started_at: 0,
            latency_ms: 5,
            ttft_ms: None,
            retries: 0,
            input_tokens: input,
            cached_tokens: cached,
            cache_creation_tokens: None,
            output_tokens: Some(7),
            estimate_tokens: 900,
            error_kind: error.then(|| "http".into()),
            error: None,
            fold_measurement: None,
            finish_reason: None,
            ..Default::default()
        }
    }

    #[test]
    fn missing_input_is_not_zero() {
        let t = totals(&[record(None, None, false)]);
        assert_eq!(t.input, None);
        assert_eq!(count(t.input), "n/a");
        assert_eq!(t.input_unreported, 1);
        assert_eq!(
            utilization(Some(&record(None, None, false)), 3000, 200_000),
            "~1.5% of 200k"
        );
        let t = totals(&[
            record(Some(1000), Some(800), false),
            record(Some(1000), None, true),
            record(None, None, false),
        ]);
        assert_eq!((t.requests, t.input, t.cached), (2, Some(1000), Some(800)));
        assert_eq!(cached_share(t.input, t.cached), " (80% cached)");
        assert_eq!(
            utilization(Some(&record(Some(20_000), None, false)), 0, 200_000),
            "10.0% of 200k"
        );
        assert_eq!(
            utilization(Some(&record(Some(95_000), None, false)), 0, 100_000),
            "95.0% of 100k (fold now)"
        );
    }
}
