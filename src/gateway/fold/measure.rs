//! Measuring the context (SPEC §7): each model's limits, how full the conversation is
//! (`session["utilization"]`), the hint appended to block output while usage stays high, and
//! what the response after a group of folds says they saved.
//!
//! Limits: `input_limit` is the model's context window minus room for its output (the hard
//! limit no request may exceed); `auto_compress_above` is where folding becomes required:
//! 200,000 tokens, or 85% of `input_limit` for models whose window is smaller. Models not in
//! [`KNOWN_MODELS`] are assumed to have a 128k window with 16k kept for output (112,000
//! input, folding required above 95,200): a guess, and shown as one. A window the server
//! itself tells (`providers::context_window`: llama.cpp, vLLM, Ollama, LM Studio) beats the
//! table, keeping 16k or a quarter of it for the answer; `[folding] input_limit` and
//! `[folding] auto_compress_above` in the config override everything.

use super::super::Conversation;
pub use crate::protocol::AUTO_COMPRESS_ABOVE;
use crate::protocol::{group_thousands, Before, Level, Measurement, Utilization};

use crate::providers::ServerWindow;

/// `auto_compress_above` is at most this share of `input_limit`, so there is room between
/// "folding required" and the hard limit.
const COMPRESS_SHARE: f64 = 0.85;
/// Windows assumed for models we do not know.
const UNKNOWN_WINDOW: u64 = 128_000;
const UNKNOWN_OUTPUT: u64 = 16_000;

/// Model-name prefixes (matched case-insensitively, longest first) → (context window,
/// tokens kept for output).
pub const KNOWN_MODELS: &[(&str, u64, u64)] = &[
    ("gpt-5", 400_000, 128_000),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4o", 128_000, 16_384),
    ("o4-mini", 200_000, 100_000),
    ("o3", 200_000, 100_000),
    ("o1", 200_000, 100_000),
    ("gpt-oss", 131_072, 16_384),
    ("claude-opus-4", 200_000, 32_000),
    ("claude-sonnet-4", 200_000, 32_000),
    ("claude-haiku-4", 200_000, 32_000),
    ("claude-3-7-sonnet", 200_000, 32_000),
    ("claude-3-5", 200_000, 8_192),
    ("qwen3-coder", 262_144, 32_768),
    ("deepseek", 128_000, 8_192),
    ("llama-3", 128_000, 8_192),
    ("llama3", 128_000, 8_192),
];

/// A model's limits and where they came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub input_limit: u64,
    pub auto_compress_above: u64,
    pub source: LimitSource,
}

/// Where a model's limits came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSource {
    /// [`KNOWN_MODELS`].
    Table,
    /// `[folding] input_limit` or `auto_compress_above`.
    Config,
    /// The server's own figure for its context window.
    Server(ServerWindow),
    /// Nothing knew the model: the default window, a guess.
    Unknown,
}

impl LimitSource {
    /// Whether the limits are a guess (and should be shown as one).
    pub fn is_guess(self) -> bool {
        self == LimitSource::Unknown
    }

    /// Where the figure came from, in a few words people can act on.
    pub fn describe(self) -> String {
        match self {
            LimitSource::Table => "from the model table".into(),
            LimitSource::Config => "set in [folding]".into(),
            LimitSource::Server(w) => format!(
                "the server's window of {} tokens ({})",
                thousands(w.tokens),
                w.origin
            ),
            LimitSource::Unknown => {
                "default for an unknown model; set [folding] input_limit".into()
            }
        }
    }
}

/// The limits of `model`: the config's overrides, else the server's own window, else the
/// table, else the guess for an unknown model.
pub fn limits_for(
    model: &str,
    input_limit: Option<u64>,
    auto_compress_above: Option<u64>,
    server: Option<ServerWindow>,
) -> Limits {
    let lower = model.to_ascii_lowercase();
    // A provider prefix (openrouter's `anthropic/claude-…`) does not hide the model.
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let mut best: Option<(usize, u64, u64)> = None;
    for (prefix, window, output) in KNOWN_MODELS {
        if name.starts_with(prefix) && best.is_none_or(|(len, _, _)| prefix.len() > len) {
            best = Some((prefix.len(), *window, *output));
        }
    }
    let (known_limit, mut source) = match (server, best) {
        // Room for the answer: what the table keeps for unknown models, at most a quarter
        // of a small window.
        (Some(w), _) => (
            w.tokens - UNKNOWN_OUTPUT.min(w.tokens / 4),
            LimitSource::Server(w),
        ),
        (None, Some((_, window, output))) => (window - output, LimitSource::Table),
        (None, None) => (UNKNOWN_WINDOW - UNKNOWN_OUTPUT, LimitSource::Unknown),
    };
    let limit = match input_limit {
        Some(n) => {
            source = LimitSource::Config;
            n
        }
        None => known_limit,
    };
    let compress = match auto_compress_above {
        Some(n) => {
            source = LimitSource::Config;
            n.min(limit)
        }
        None => AUTO_COMPRESS_ABOVE.min((limit as f64 * COMPRESS_SHARE) as u64),
    };
    Limits {
        input_limit: limit,
        auto_compress_above: compress,
        source,
    }
}

/// `12,345`.
pub fn thousands(n: u64) -> String {
    group_thousands(n as usize)
}

/// `session["utilization"]` for a model whose limits are `limits`, with the folds worth
/// making now (`fold_hint`, once a request was answered).
pub fn utilization(conversation: &Conversation, limits: Limits) -> Utilization {
    let mut u = Utilization::new(
        limits.input_limit,
        limits.auto_compress_above,
        conversation.last_tokens(),
        conversation.latest_measurement().cloned(),
    );
    if u.level.is_some() {
        // The turn in progress is still in use: its finished steps are named only once the
        // context fills.
        let current_turn_too = u.level.is_some_and(|l| l >= Level::Hint);
        let spans = super::spans(conversation.entries(), conversation.now(), current_turn_too);
        let cache = conversation.cache_state();
        let pricing = super::Pricing {
            prices: conversation.cache_prices(),
            cache: &cache,
            reset: conversation.reset().map(|(index, _, key)| (index, key)),
            expected_requests: conversation.expected_requests(),
            level: u.level,
            request_tokens: u.last_request_tokens,
        };
        u.fold_hint = Some(super::rank(conversation.entries(), &spans, &pricing));
    }
    u
}

/// The line appended to block output: from 75% of `auto_compress_above` how full the
/// context is and what to fold; below that, only when a fold is worth making (the
/// `fold_hint`'s advice). `None` when there is nothing to say.
pub fn hint(utilization: &Utilization) -> Option<String> {
    let (Some(level), Some(tokens)) = (utilization.level, utilization.last_request_tokens) else {
        return None;
    };
    let thousands = |n: u64| group_thousands(n as usize);
    let share = tokens as f64 * 100.0 / utilization.auto_compress_above.max(1) as f64;
    let advice = utilization.fold_hint.as_ref().and_then(|h| h.text.clone());
    let what = advice
        .clone()
        .unwrap_or_else(|| "nothing settled yet; finish the current step, then fold it".into());
    let head = format!(
        "{} of {} tokens ({share:.0}%)",
        thousands(tokens),
        thousands(utilization.auto_compress_above)
    );
    Some(match level {
        Level::Normal => format!("[vis] fold hint: {}; fold with fold_session(key, gist).", advice?),
        Level::Hint => format!(
            "[vis] context hint: {head}; fold settled work with fold_session(key, gist) when this step is done — {what}."
        ),
        Level::Urgent => format!(
            "[vis] context urgent: {head}; fold settled work now with fold_session(key, gist) — {what}."
        ),
        Level::Required => format!(
            "[vis] context over the limit: {head}; folding is required before anything else — {what}. At {} tokens the gateway folds the oldest turns itself.",
            thousands(utilization.input_limit.unwrap_or(0))
        ),
    })
}

/// What the response after a group of folds (`folds`, made after `before`) says about
/// them: the request's input then against `after_input` now, when both are comparable.
pub fn measure_response(
    folds: &[i64],
    before: &Before,
    after_input: Option<u64>,
    provider: &str,
    model: &str,
    turn: i64,
) -> Measurement {
    let unavailable = |reason: String| Measurement::Unavailable {
        fold_count: folds.len(),
        folds: folds.to_vec(),
        reason,
    };
    if before.provider.is_empty() {
        return unavailable(
            "no model request came before the folds, so there is nothing to compare with".into(),
        );
    }
    if before.provider != provider || before.model != model {
        return unavailable(format!(
            "the provider or model changed between the requests ({}/{} before, {provider}/{model} after)",
            before.provider, before.model
        ));
    }
    if before.turn != turn {
        return unavailable(
            "a new turn started in between, so the person's message is part of the change".into(),
        );
    }
    let (Some(b), Some(a)) = (before.input_tokens, after_input) else {
        return unavailable(
            "the provider reported no input usage for one of the two requests".into(),
        );
    };
    Measurement::Measured {
        fold_count: folds.len(),
        folds: folds.to_vec(),
        before_input_tokens: b,
        after_input_tokens: a,
        net_reduction_tokens: b as i64 - a as i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_come_from_the_table_config_the_server_or_the_unknown_rule() {
        let l = limits_for("claude-sonnet-4-5", None, None, None);
        assert_eq!(
            (l.input_limit, l.auto_compress_above, l.source),
            (168_000, 142_800, LimitSource::Table)
        );
        let l = limits_for("gpt-5-codex", None, None, None);
        assert_eq!((l.input_limit, l.auto_compress_above), (272_000, 200_000));
        let l = limits_for("anthropic/claude-opus-4.1", None, None, None);
        assert_eq!(l.input_limit, 168_000);
        let l = limits_for("my-local-model", None, None, None);
        assert_eq!(
            (l.input_limit, l.auto_compress_above, l.source),
            (112_000, 95_200, LimitSource::Unknown)
        );
        assert!(l.source.is_guess());
        assert_eq!(
            l.source.describe(),
            "default for an unknown model; set [folding] input_limit"
        );
        let l = limits_for("gpt-5", Some(10_000), Some(5_000), None);
        assert_eq!(
            (l.input_limit, l.auto_compress_above, l.source),
            (10_000, 5_000, LimitSource::Config)
        );
        // The server's window beats the table (a llama3 run with -c 8192) and keeps a quarter
        // of a small window for the answer; the config beats the server.
        let window = ServerWindow {
            tokens: 8192,
            origin: "llama.cpp /props n_ctx",
        };
        let l = limits_for("llama-3.1-8b", None, None, Some(window));
        assert_eq!(
            (l.input_limit, l.auto_compress_above, l.source),
            (6144, 5222, LimitSource::Server(window))
        );
        assert!(!l.source.is_guess());
        assert_eq!(
            l.source.describe(),
            "the server's window of 8,192 tokens (llama.cpp /props n_ctx)"
        );
        let big = ServerWindow {
            tokens: 131_072,
            origin: "vLLM /v1/models max_model_len",
        };
        assert_eq!(limits_for("m", None, None, Some(big)).input_limit, 115_072);
        let l = limits_for("m", Some(4000), None, Some(window));
        assert_eq!((l.input_limit, l.source), (4000, LimitSource::Config));
    }

    #[test]
    fn hints_name_the_level_and_the_folds_worth_making() {
        let advice = |text: Option<&str>| {
            let mut u = Utilization::new(2000, 1000, Some((800, false)), None);
            u.fold_hint = Some(crate::protocol::FoldHint {
                cache: "warm".into(),
                cache_note: None,
                expected_requests: 10,
                candidates: Vec::new(),
                text: text.map(String::from),
            });
            u
        };
        let text = hint(&advice(Some("cheapest good fold: t2 (900 tokens)"))).unwrap();
        assert_eq!(
            text,
            "[vis] context hint: 800 of 1,000 tokens (80%); fold settled work with fold_session(key, gist) when this step is done — cheapest good fold: t2 (900 tokens)."
        );
        assert!(hint(&advice(None)).unwrap().contains("nothing settled yet"));
        let u = Utilization::new(2000, 1000, Some((1100, true)), None);
        assert!(hint(&u).unwrap().contains("folding is required"));
        // Below 75% only advice is worth a line.
        let mut low = advice(Some("cheapest good fold: t2 (900 tokens)"));
        low.level = Some(Level::Normal);
        assert_eq!(
            hint(&low).unwrap(),
            "[vis] fold hint: cheapest good fold: t2 (900 tokens); fold with fold_session(key, gist)."
        );
        assert!(hint(&Utilization::new(2000, 1000, Some((10, false)), None)).is_none());
        assert!(hint(&Utilization::new(2000, 1000, None, None)).is_none());
    }

    fn before() -> Before {
        Before::example()
    }

    #[test]
    fn a_response_measures_its_folds_only_when_comparable() {
        let measured = measure_response(&[3], &before(), Some(600), "openai", "m", 2);
        assert_eq!(
            serde_json::to_value(&measured).unwrap(),
            json!({"status": "measured", "fold_count": 1, "folds": [3],
                   "before_input_tokens": 1000, "after_input_tokens": 600,
                   "net_reduction_tokens": 400})
        );
        for (after, provider, turn, reason) in [
            (Some(600), "anthropic", 2, "the provider or model changed"),
            (Some(600), "openai", 3, "a new turn started"),
            (None, "openai", 2, "no input usage"),
        ] {
            match measure_response(&[3], &before(), after, provider, "m", turn) {
                Measurement::Unavailable { reason: r, .. } => assert!(r.contains(reason), "{r}"),
                other => panic!("{other:?}"),
            }
        }
    }
}
