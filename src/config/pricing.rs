//! `[pricing]`: the relative prices of cached input, overriding the built-in table
//! (`providers::pricing`). Top-level keys apply to the session's provider, whatever its
//! model; `[pricing.models."PATTERN"]` tables apply to the models their pattern matches:
//!
//! ```toml
//! [pricing]
//! cache_read = 0.1        # a cached token against an uncached one (0 to 1)
//! cache_write = 1.25      # a token written to the cache (1 to 10)
//! cache_lifetime = 300    # seconds a cached prefix lives idle
//! [pricing.models."gpt-4.1*"]
//! cache_read = 0.25
//! ```
//!
//! A pattern is matched against the whole model name, ignoring case; `*` stands for any run of
//! characters (`gpt-5*`, `*/gpt-5*`, `claude-*-4-5`); a pattern without `*` names one model.
//! When several match, the longest pattern wins. Each key set overrides its price alone: the
//! built-in price, then `[pricing]`, then the matching model table.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::providers::{CachePrices, ProviderKind};

/// Prices as written: any of the three, each optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PriceOverrides {
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
    /// Seconds.
    pub cache_lifetime: Option<u64>,
}

/// `[pricing]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PricingConfig {
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
    /// Seconds.
    pub cache_lifetime: Option<u64>,
    /// `[pricing.models."PATTERN"]`, by pattern.
    #[serde(default)]
    pub models: BTreeMap<String, PriceOverrides>,
}

impl PriceOverrides {
    fn apply(&self, prices: &mut CachePrices) {
        if let Some(v) = self.cache_read {
            prices.cache_read = v;
        }
        if let Some(v) = self.cache_write {
            prices.cache_write = v;
        }
        if let Some(v) = self.cache_lifetime {
            prices.lifetime_secs = v;
        }
    }

    fn is_empty(&self) -> bool {
        self.cache_read.is_none() && self.cache_write.is_none() && self.cache_lifetime.is_none()
    }

    /// The checks serde cannot make; `at(key)` is `line N: ` for the key and `table` names
    /// the table in messages.
    fn check(&self, table: &str, at: impl Fn(&str) -> String) -> Result<(), String> {
        if let Some(v) = self
            .cache_read
            .filter(|v| !(v.is_finite() && (0.0..=1.0).contains(v)))
        {
            return Err(format!(
                "{}`{table}.cache_read` must be a price between 0 and 1 (a cached token against an uncached one), got {v}; e.g. cache_read = 0.1",
                at("cache_read")
            ));
        }
        if let Some(v) = self
            .cache_write
            .filter(|v| !(v.is_finite() && (1.0..=10.0).contains(v)))
        {
            return Err(format!(
                "{}`{table}.cache_write` must be a price between 1 and 10 (a token written to the cache against an uncached one; 1 where writing costs nothing extra), got {v}; e.g. cache_write = 1.25",
                at("cache_write")
            ));
        }
        if let Some(v) = self.cache_lifetime.filter(|v| !(1..=86_400).contains(v)) {
            return Err(format!(
                "{}`{table}.cache_lifetime` must be between 1 and 86400 seconds, got {v}; e.g. cache_lifetime = 300",
                at("cache_lifetime")
            ));
        }
        Ok(())
    }
}

impl PricingConfig {
    /// The top-level keys: prices for the session's provider, whatever its model.
    fn defaults(&self) -> PriceOverrides {
        PriceOverrides {
            cache_read: self.cache_read,
            cache_write: self.cache_write,
            cache_lifetime: self.cache_lifetime,
        }
    }

    /// The checks serde cannot make; `at(path)` is `line N: ` for a key path under
    /// `[pricing]`.
    pub(super) fn check(&self, at: impl Fn(&[&str]) -> String) -> Result<(), String> {
        self.defaults().check("pricing", |key| at(&[key]))?;
        for (pattern, prices) in &self.models {
            let table = format!("pricing.models.\"{pattern}\"");
            if pattern.trim().is_empty() || pattern.chars().all(|c| c == '*') {
                return Err(format!(
                    "{}`{table}`: the pattern names no model; write a model name, optionally with `*`, e.g. [pricing.models.\"gpt-5*\"]",
                    at(&["models", pattern])
                ));
            }
            if prices.is_empty() {
                return Err(format!(
                    "{}`{table}` sets none of cache_read, cache_write and cache_lifetime; set one or drop the table",
                    at(&["models", pattern])
                ));
            }
            prices.check(&table, |key| at(&["models", pattern, key]))?;
        }
        Ok(())
    }

    /// The prices a session with `kind`'s `model` runs with: the built-in ones, overridden by
    /// `[pricing]` and then by the longest model pattern that matches.
    pub fn prices(&self, kind: ProviderKind, model: &str) -> CachePrices {
        let mut prices = CachePrices::builtin(kind, model);
        self.defaults().apply(&mut prices);
        let best = self
            .models
            .iter()
            .filter(|(pattern, _)| matches_pattern(pattern, model))
            .max_by_key(|(pattern, _)| pattern.len());
        if let Some((_, overrides)) = best {
            overrides.apply(&mut prices);
        }
        prices
    }
}

/// Whether `name` matches `pattern` (whole name, case ignored, `*` any run of characters).
pub fn matches_pattern(pattern: &str, name: &str) -> bool {
    let pattern = pattern.to_lowercase();
    let name = name.to_lowercase();
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = match parts.split_first() {
        Some(split) => split,
        None => return name.is_empty(),
    };
    let Some(mut remaining) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        // No `*`: the whole name.
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}
