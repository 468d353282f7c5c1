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

use serde::Serialize;

use super::ProviderKind;

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
}
