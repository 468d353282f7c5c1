//! Relative prices of a request's input: what a cached token and a cache write cost against
//! an uncached input token, and how long a provider keeps a prefix cached (issue 24).
//!
//! Only ratios matter to folding: a fold rewrites the history after its first position, so
//! every later token is written to the cache again; whether that pays depends on these
//! three numbers, not on the price list's currency. The built-in table follows the
//! providers' published prices (December 2026); `[pricing]` in the config overrides it.
//!
//! - Anthropic: cache reads 0.1×, writes 1.25× for the 5-minute cache (the one Vis asks
//!   for, `cache_control: ephemeral`); the lifetime is refreshed by every hit.
//! - OpenAI: automatic caching, no write surcharge; reads 0.1× (GPT-5 family), 0.25×
//!   (GPT-4.1, o3, o4-mini) or 0.5× (GPT-4o, o1 and older); cached prefixes are kept
//!   5–10 minutes idle.
//! - Other OpenAI-compatible servers: DeepSeek 0.1×; anything unknown is priced like
//!   OpenAI's most conservative tier (0.5×), so a hint never promises more than it can.
//!
//! [`InputCost::of`] splits a request's reported input into uncached tokens, cache reads and
//! cache writes and weighs them: `uncached × 1 + reads × cache_read + writes × cache_write`.
//! Anthropic reports the three apart; OpenAI-compatible servers report the whole input and the
//! cached part, and writing costs nothing extra there, so writes are 0 and the uncached part is
//! `input − cached` at 1.0 (a configured `cache_write` has nothing to act on for them). A
//! provider that does not report its cache reads leaves the split unavailable, never zero.

use serde::Serialize;

use super::ProviderKind;
use crate::protocol::Usage;

/// Prices of input tokens relative to an uncached input token (1.0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CachePrices {
    /// A token read from the prompt cache.
    pub cache_read: f64,
    /// A token written to the prompt cache (1.0 where writing costs nothing extra).
    pub cache_write: f64,
    /// Seconds a cached prefix lives without a hit.
    pub lifetime_secs: u64,
}

impl CachePrices {
    /// The built-in prices for a provider and model (see the module docs).
    pub fn builtin(kind: ProviderKind, model: &str) -> CachePrices {
        let model = model.to_ascii_lowercase();
        match kind {
            ProviderKind::Anthropic => CachePrices {
                cache_read: 0.1,
                cache_write: 1.25,
                lifetime_secs: 300,
            },
            ProviderKind::OpenAi => {
                // Model names may carry a vendor prefix (`openai/gpt-5` on OpenRouter).
                let name = model.rsplit('/').next().unwrap_or(&model);
                let cache_read = if name.starts_with("gpt-5") || name.starts_with("deepseek") {
                    0.1
                } else if name.starts_with("gpt-4.1")
                    || name.starts_with("o3")
                    || name.starts_with("o4")
                {
                    0.25
                } else {
                    0.5
                };
                CachePrices {
                    cache_read,
                    cache_write: 1.0,
                    lifetime_secs: 300,
                }
            }
        }
    }

    /// The cost of one request's input in uncached-token units: `uncached` tokens at 1.0,
    /// `read` at the cache-read price and `written` at the cache-write price.
    pub fn weighted(&self, uncached: u64, read: u64, written: u64) -> f64 {
        uncached as f64 + read as f64 * self.cache_read + written as f64 * self.cache_write
    }
}

/// The shortest prefix either provider caches (OpenAI: 1,024 tokens; Anthropic: 1,024 for
/// most models): below it nothing is expected from the cache.
pub const MIN_CACHED_PREFIX: u64 = 1024;

/// A request whose cache reads fall below this share of what was expected is flagged as a
/// cache miss: providers cache in blocks (OpenAI 128 tokens; Anthropic up to its last
/// breakpoint), so small shortfalls are normal, but less than half means the prefix changed
/// where it should not have.
pub const CACHE_MISS_SHARE: f64 = 0.5;

/// How many of a request's input tokens should have come from the cache: the share of its
/// body (`shared` of `body` bytes) that repeats the previous answered request byte for byte,
/// applied to its input tokens (as reported, else the local estimate). Nothing is expected
/// below [`MIN_CACHED_PREFIX`], or after an idle gap longer than the cache lives.
pub fn expected_cached(
    shared: usize,
    body: usize,
    input_tokens: u64,
    idle_secs: u64,
    prices: &CachePrices,
) -> u64 {
    if body == 0 || idle_secs > prices.lifetime_secs {
        return 0;
    }
    let expected = (input_tokens as f64 * shared.min(body) as f64 / body as f64).floor() as u64;
    if expected < MIN_CACHED_PREFIX {
        0
    } else {
        expected
    }
}

/// Whether `read` cached tokens are far below the `expected` ones (see [`CACHE_MISS_SHARE`]).
pub fn is_cache_miss(expected: u64, read: u64) -> bool {
    expected >= MIN_CACHED_PREFIX && (read as f64) < expected as f64 * CACHE_MISS_SHARE
}

/// A request's input split by price, and its weighted total in uncached-token units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct InputCost {
    /// Input tokens billed at the full price (neither read from nor written to the cache).
    pub uncached: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache (0 where the provider reports none).
    pub cache_write: u64,
    /// `uncached + cache_read × prices.cache_read + cache_write × prices.cache_write`.
    pub weighted: f64,
}

impl InputCost {
    /// The split of `usage` as `kind` reports it, weighed by `prices`; `None` when the
    /// provider did not report its input or its cache reads (or Anthropic its cache writes).
    pub fn of(kind: ProviderKind, usage: &Usage, prices: &CachePrices) -> Option<InputCost> {
        let input = usage.input_tokens?;
        let read = usage.cached_tokens?;
        let write = match kind {
            // Normalised input is input + cache creation + cache read (see `anthropic.rs`).
            ProviderKind::Anthropic => usage.cache_creation_tokens?,
            // Caching is automatic and free to write: nothing is reported and nothing owed.
            ProviderKind::OpenAi => usage.cache_creation_tokens.unwrap_or(0),
        };
        let uncached = input.saturating_sub(read).saturating_sub(write);
        Some(InputCost {
            uncached,
            cache_read: read,
            cache_write: write,
            weighted: prices.weighted(uncached, read, write),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_prices_follow_the_provider_and_model() {
        let a = CachePrices::builtin(ProviderKind::Anthropic, "claude-sonnet-4-5");
        assert_eq!(
            (a.cache_read, a.cache_write, a.lifetime_secs),
            (0.1, 1.25, 300)
        );
        let gpt5 = CachePrices::builtin(ProviderKind::OpenAi, "openai/GPT-5-mini");
        assert_eq!((gpt5.cache_read, gpt5.cache_write), (0.1, 1.0));
        let gpt41 = CachePrices::builtin(ProviderKind::OpenAi, "gpt-4.1");
        assert_eq!(gpt41.cache_read, 0.25);
        let unknown = CachePrices::builtin(ProviderKind::OpenAi, "SmolLM2-135M");
        assert_eq!(unknown.cache_read, 0.5);
    }

    #[test]
    fn weighted_cost_counts_each_kind_of_token_at_its_price() {
        let a = CachePrices::builtin(ProviderKind::Anthropic, "claude");
        let cost = a.weighted(1000, 10_000, 400);
        assert!((cost - (1000.0 + 1000.0 + 500.0)).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn the_expected_cache_follows_the_shared_prefix_its_minimum_and_lifetime() {
        let a = CachePrices::builtin(ProviderKind::Anthropic, "claude");
        assert_eq!(expected_cached(9_000, 10_000, 5_000, 10, &a), 4_500);
        // Below the minimum cacheable prefix, after the cache expired, or an empty body.
        assert_eq!(expected_cached(1_000, 10_000, 5_000, 10, &a), 0);
        assert_eq!(expected_cached(9_000, 10_000, 5_000, 301, &a), 0);
        assert_eq!(expected_cached(0, 0, 5_000, 0, &a), 0);
        assert!(is_cache_miss(4_500, 0));
        assert!(is_cache_miss(4_500, 2_249));
        assert!(!is_cache_miss(4_500, 2_250));
        assert!(!is_cache_miss(0, 0));
    }

    fn usage(input: Option<u64>, read: Option<u64>, write: Option<u64>) -> Usage {
        Usage {
            input_tokens: input,
            cached_tokens: read,
            cache_creation_tokens: write,
            output_tokens: Some(5),
        }
    }

    #[test]
    fn input_is_split_as_each_provider_reports_it() {
        let a = CachePrices::builtin(ProviderKind::Anthropic, "claude");
        // Anthropic: 300 uncached + 2000 read + 700 written = 3000 normalised input.
        let cost = InputCost::of(
            ProviderKind::Anthropic,
            &usage(Some(3000), Some(2000), Some(700)),
            &a,
        )
        .unwrap();
        assert_eq!(
            (cost.uncached, cost.cache_read, cost.cache_write),
            (300, 2000, 700)
        );
        assert!(
            (cost.weighted - (300.0 + 200.0 + 875.0)).abs() < 1e-9,
            "{cost:?}"
        );
        let o = CachePrices::builtin(ProviderKind::OpenAi, "gpt-4o");
        let cost = InputCost::of(
            ProviderKind::OpenAi,
            &usage(Some(3000), Some(2048), None),
            &o,
        )
        .unwrap();
        assert_eq!(
            (cost.uncached, cost.cache_read, cost.cache_write),
            (952, 2048, 0)
        );
        assert!((cost.weighted - (952.0 + 1024.0)).abs() < 1e-9, "{cost:?}");
    }

    #[test]
    fn what_the_provider_did_not_report_stays_unavailable() {
        let a = CachePrices::builtin(ProviderKind::Anthropic, "claude");
        for u in [
            usage(None, Some(1), Some(1)),
            usage(Some(10), None, Some(1)),
            usage(Some(10), Some(1), None),
        ] {
            assert_eq!(
                InputCost::of(ProviderKind::Anthropic, &u, &a),
                None,
                "{u:?}"
            );
        }
        let o = CachePrices::builtin(ProviderKind::OpenAi, "llama");
        assert_eq!(
            InputCost::of(ProviderKind::OpenAi, &usage(Some(10), None, None), &o),
            None
        );
    }
}
