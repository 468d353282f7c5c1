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

pub use crate::protocol::AUTO_COMPRESS_ABOVE;
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

/// `12,345`.
pub fn thousands(n: u64) -> String {
    crate::protocol::group_thousands(n as usize)
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
}
