//! How full the model's context is (SPEC §7): the limits of each model, the level, and the
//! hint appended to block output while usage stays high.
//!
//! Limits: `input_limit` is the model's context window minus room for its output (the hard
//! limit no request may exceed); `auto_compress_above` is where folding becomes required:
//! 200,000 tokens, or 85% of `input_limit` for models whose window is smaller. Models not in
//! [`KNOWN_MODELS`] are assumed to have a 128k window with 16k kept for output (112,000
//! input, folding required above 95,200); `[folding] input_limit` and
//! `[folding] auto_compress_above` in the config override both.

use serde::Serialize;
use serde_json::Value;

/// The level at which folding is required, for models with a large enough window.
pub const AUTO_COMPRESS_ABOVE: u64 = 200_000;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub input_limit: u64,
    pub auto_compress_above: u64,
    /// `table`, `config` or `unknown model`.
    pub source: &'static str,
}

/// The limits of `model`, with the config's overrides.
pub fn limits_for(
    model: &str,
    input_limit: Option<u64>,
    auto_compress_above: Option<u64>,
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
    let (table_limit, mut source) = match best {
        Some((_, window, output)) => (window - output, "table"),
        None => (UNKNOWN_WINDOW - UNKNOWN_OUTPUT, "unknown model"),
    };
    let limit = match input_limit {
        Some(n) => {
            source = "config";
            n
        }
        None => table_limit,
    };
    let compress = match auto_compress_above {
        Some(n) => {
            source = "config";
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

/// How urgent folding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Below 75% of `auto_compress_above`.
    Normal,
    /// From 75%.
    Hint,
    /// From 90%.
    Urgent,
    /// Above 100%: folding is required.
    Required,
}

pub fn level(tokens: u64, auto_compress_above: u64) -> Level {
    let share = tokens as f64 / auto_compress_above.max(1) as f64;
    if share > 1.0 {
        Level::Required
    } else if share >= 0.9 {
        Level::Urgent
    } else if share >= 0.75 {
        Level::Hint
    } else {
        Level::Normal
    }
}

/// `session["utilization"]` (SPEC §7).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Utilization {
    /// The last request's input tokens as the provider reported them, else the local
    /// estimate (then `estimated` is true); `None` before the first request.
    pub last_request_tokens: Option<u64>,
    pub estimated: bool,
    pub auto_compress_above: u64,
    pub input_limit: u64,
    /// last / input_limit.
    pub saturation: Option<f64>,
    /// input_limit − last.
    pub headroom_tokens: Option<i64>,
    pub level: Option<Level>,
    /// The latest fold measurement (pending, measured or unavailable).
    pub fold_measurement: Option<Value>,
}

impl Utilization {
    pub fn new(
        limits: Limits,
        last: Option<(u64, bool)>,
        fold_measurement: Option<Value>,
    ) -> Utilization {
        let (last_request_tokens, estimated) = match last {
            Some((n, estimated)) => (Some(n), estimated),
            None => (None, false),
        };
        Utilization {
            last_request_tokens,
            estimated,
            auto_compress_above: limits.auto_compress_above,
            input_limit: limits.input_limit,
            saturation: last_request_tokens.map(|n| {
                (n as f64 / limits.input_limit.max(1) as f64 * 10_000.0).round() / 10_000.0
            }),
            headroom_tokens: last_request_tokens.map(|n| limits.input_limit as i64 - n as i64),
            level: last_request_tokens.map(|n| level(n, limits.auto_compress_above)),
            fold_measurement,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The hint appended to block output at this level (`None` below 75%). `candidates` are
    /// the oldest settled ranges with their sizes, oldest first.
    pub fn hint(&self, candidates: &[(String, u64)]) -> Option<String> {
        let (Some(level), Some(tokens)) = (self.level, self.last_request_tokens) else {
            return None;
        };
        let share = tokens as f64 * 100.0 / self.auto_compress_above.max(1) as f64;
        let sized: Vec<String> = candidates
            .iter()
            .take(4)
            .map(|(key, n)| format!("{key} ({} tokens)", thousands(*n)))
            .collect();
        let what = if sized.is_empty() {
            "nothing settled yet; finish the current step, then fold it".to_string()
        } else {
            format!("oldest settled: {}", sized.join(", "))
        };
        let head = format!(
            "{} of {} tokens ({share:.0}%)",
            thousands(tokens),
            thousands(self.auto_compress_above)
        );
        Some(match level {
            Level::Normal => return None,
            Level::Hint => format!(
                "[vis] context hint: {head}; fold settled work with fold_session(key, gist) when this step is done — {what}."
            ),
            Level::Urgent => format!(
                "[vis] context urgent: {head}; fold settled work now with fold_session(key, gist) — {what}."
            ),
            Level::Required => format!(
                "[vis] context over the limit: {head}; folding is required before anything else — {what}. At {} tokens the gateway folds the oldest turns itself.",
                thousands(self.input_limit)
            ),
        })
    }
}

/// `12,345`.
pub fn thousands(n: u64) -> String {
    crate::runtime::group_thousands(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_the_table_config_or_the_unknown_rule() {
        let l = limits_for("claude-sonnet-4-5", None, None);
        assert_eq!(
            (l.input_limit, l.auto_compress_above, l.source),
            (168_000, 142_800, "table")
        );
        let l = limits_for("gpt-5-codex", None, None);
        assert_eq!((l.input_limit, l.auto_compress_above), (272_000, 200_000));
        let l = limits_for("anthropic/claude-opus-4.1", None, None);
        assert_eq!(l.input_limit, 168_000);
        let l = limits_for("my-local-model", None, None);
        assert_eq!(
            (l.input_limit, l.auto_compress_above, l.source),
            (112_000, 95_200, "unknown model")
        );
        let l = limits_for("gpt-5", Some(10_000), Some(5_000));
        assert_eq!(
            (l.input_limit, l.auto_compress_above, l.source),
            (10_000, 5_000, "config")
        );
    }

    #[test]
    fn levels_and_hints() {
        assert_eq!(level(74, 100), Level::Normal);
        assert_eq!(level(75, 100), Level::Hint);
        assert_eq!(level(90, 100), Level::Urgent);
        assert_eq!(level(100, 100), Level::Urgent);
        assert_eq!(level(101, 100), Level::Required);
        let limits = limits_for("x", Some(2000), Some(1000));
        let u = Utilization::new(limits, Some((800, false)), None);
        assert_eq!(u.saturation, Some(0.4));
        assert_eq!(u.headroom_tokens, Some(1200));
        let hint = u.hint(&[("t1".into(), 300), ("t2".into(), 200)]).unwrap();
        assert!(
            hint.starts_with("[vis] context hint: 800 of 1,000 tokens (80%)"),
            "{hint}"
        );
        assert!(hint.contains("t1 (300 tokens), t2 (200 tokens)"), "{hint}");
        let u = Utilization::new(limits, Some((1100, true)), None);
        assert!(u.hint(&[]).unwrap().contains("folding is required"));
        assert!(Utilization::new(limits, Some((10, false)), None)
            .hint(&[])
            .is_none());
        assert!(Utilization::new(limits, None, None).hint(&[]).is_none());
    }
}
