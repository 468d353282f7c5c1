//! [`CostTotals`]: what a session's requests cost by the cost model (issue 24 §1), summed over
//! their health records: the input split by price, the weighted total, the measured cache
//! share beside the expected one, and the requests flagged as cache misses. Every view of a
//! session (`vis sessions show`, `/status`, the session API, `/metrics`) reads it from here.

use serde::Serialize;

use super::RequestRecord;

/// Sums over a session's answered requests; a figure no request reported stays out (never 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CostTotals {
    /// Answered requests whose input the provider split by price (see `InputCost`).
    pub priced_requests: u64,
    /// Answered requests it did not (no cache reads reported, or recorded before schema 7).
    pub unpriced_requests: u64,
    pub uncached_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// The input's cost in uncached-token units.
    pub weighted_tokens: f64,
    /// All input tokens of the priced requests.
    pub priced_input_tokens: u64,
    /// Requests with a local estimate of what should have been cached.
    pub estimated_requests: u64,
    pub expected_cached_tokens: u64,
    /// All input tokens of those requests (the provider's count, else the local estimate).
    pub estimated_input_tokens: u64,
    /// Requests whose cache reads fell far below the expected ones.
    pub cache_misses: u64,
}

impl CostTotals {
    pub fn of(records: &[RequestRecord]) -> CostTotals {
        let mut t = CostTotals::default();
        let n = |v: Option<i64>| v.map(|v| v.max(0) as u64);
        for r in records.iter().filter(|r| r.error_kind.is_none()) {
            let split = (
                n(r.uncached_tokens),
                n(r.cached_tokens),
                n(r.cache_write_tokens),
                r.weighted_tokens,
            );
            match split {
                (Some(uncached), Some(read), Some(write), Some(weighted)) => {
                    t.priced_requests += 1;
                    t.uncached_tokens += uncached;
                    t.cache_read_tokens += read;
                    t.cache_write_tokens += write;
                    t.weighted_tokens += weighted;
                    t.priced_input_tokens += uncached + read + write;
                }
                _ => t.unpriced_requests += 1,
            }
            if let Some(expected) = n(r.expected_cached_tokens) {
                t.estimated_requests += 1;
                t.expected_cached_tokens += expected;
                t.estimated_input_tokens +=
                    n(r.input_tokens).unwrap_or(r.estimate_tokens.max(0) as u64);
            }
            if r.cache_miss == Some(true) {
                t.cache_misses += 1;
            }
        }
        t
    }

    /// Cache reads over input, from the provider's own numbers (`None`: none reported).
    pub fn measured_share(&self) -> Option<f64> {
        (self.priced_input_tokens > 0)
            .then(|| self.cache_read_tokens as f64 / self.priced_input_tokens as f64)
    }

    /// What should have been cached over input, by the local estimate.
    pub fn expected_share(&self) -> Option<f64> {
        (self.estimated_input_tokens > 0)
            .then(|| self.expected_cached_tokens as f64 / self.estimated_input_tokens as f64)
    }

    /// One line for a terminal, e.g. `weighted 3,412 (uncached 1,200, cache read 20,000 ·
    /// write 212) · cache share 91% measured, 94% expected · 1 cache miss`.
    pub fn describe(&self) -> String {
        let count = |v: u64| crate::protocol::group_thousands(v as usize);
        let mut parts = Vec::new();
        if self.priced_requests > 0 {
            parts.push(format!(
                "weighted {} (uncached {}, cache read {}, cache write {}){}",
                count(self.weighted_tokens.round() as u64),
                count(self.uncached_tokens),
                count(self.cache_read_tokens),
                count(self.cache_write_tokens),
                if self.unpriced_requests > 0 {
                    format!(", {} unpriced", self.unpriced_requests)
                } else {
                    String::new()
                }
            ));
        } else {
            parts.push("weighted n/a (the provider reported no cache figures)".into());
        }
        let share = |v: Option<f64>| v.map_or("n/a".to_string(), |s| format!("{:.0}%", s * 100.0));
        parts.push(format!(
            "cache share {} measured, {} expected",
            share(self.measured_share()),
            share(self.expected_share())
        ));
        if self.cache_misses > 0 {
            parts.push(format!(
                "{} (cache reads under half the expected: a prefix bug?)",
                if self.cache_misses == 1 {
                    "1 cache miss".to_string()
                } else {
                    format!("{} cache misses", self.cache_misses)
                }
            ));
        }
        parts.join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(input: i64, read: Option<i64>, expected: Option<i64>, miss: bool) -> RequestRecord {
        RequestRecord {
            input_tokens: Some(input),
            cached_tokens: read,
            uncached_tokens: read.map(|r| input - r),
            cache_write_tokens: read.map(|_| 0),
            weighted_tokens: read.map(|r| (input - r) as f64 + r as f64 * 0.5),
            expected_cached_tokens: expected,
            cache_miss: expected.map(|_| miss),
            estimate_tokens: 1,
            ..Default::default()
        }
    }

    #[test]
    fn totals_keep_unreported_figures_out() {
        let failed = RequestRecord {
            error_kind: Some("http".into()),
            uncached_tokens: Some(5),
            ..record(10, Some(5), None, false)
        };
        let t = CostTotals::of(&[
            record(2000, Some(0), None, false),
            record(4000, Some(0), Some(3000), true),
            record(100, None, None, false),
            failed,
        ]);
        assert_eq!((t.priced_requests, t.unpriced_requests), (2, 1));
        assert_eq!((t.uncached_tokens, t.cache_read_tokens), (6000, 0));
        assert_eq!(t.weighted_tokens, 6000.0);
        assert_eq!(t.measured_share(), Some(0.0));
        assert_eq!(t.expected_share(), Some(0.75));
        assert_eq!(t.cache_misses, 1);
        assert_eq!(
            t.describe(),
            "weighted 6,000 (uncached 6,000, cache read 0, cache write 0), 1 unpriced · cache share 0% measured, 75% expected · 1 cache miss (cache reads under half the expected: a prefix bug?)"
        );
        let none = CostTotals::of(&[record(100, None, None, false)]);
        assert_eq!(
            none.describe(),
            "weighted n/a (the provider reported no cache figures) · cache share n/a measured, n/a expected"
        );
    }
}
