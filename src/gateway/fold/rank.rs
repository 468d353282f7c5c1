//! Which folds the hint names (issue 24 §2, SPEC §7 "Price"): settled work in batches.
//!
//! Each fold has a fixed price however little it folds: the next request re-writes the cache
//! from the fold's position on, the model writes a gist (output tokens, and a lossy summary of
//! work it may still be asked about), and the gist stays in every later request. Carrying
//! settled work costs only cache reads (0.1× for both providers). So the hint lets settled
//! work pile up behind the last fold and names it as **one batch**, one fold with one gist
//! (adjacent turns in one key merge into one span), once the batch is at least
//! [`BATCH_RATIO`] times what the request keeps without it (the system prompt, the tool,
//! the gists and the turn in progress): a fold then cuts the request to a third or less, and
//! a session makes one fold where folding every turn would make several.
//!
//! - **Warm cache**: the batch is named once it reaches that size and its value (saving ×
//!   expected requests − re-cache cost) pays for its gist ([`GIST_WRITE_COST`]).
//! - **Cold cache** (no request for the cache lifetime, or resumed after it): a fold
//!   re-caches nothing extra, so the batch is named as soon as it pays for its gist.
//! - **After a fold since the last request**: settled work behind its position is re-cached
//!   by the next request anyway; it is named at once (free), apart from the priced batch.
//! - **From 90% of `auto_compress_above`**: the window, not the price, runs out: each settled
//!   range is named, largest first, value ignored.

use crate::gateway::history::Entry;
use crate::protocol::{FoldCandidate, FoldHint, Level};
use crate::providers::CachePrices;

use super::price::{
    price, CacheState, Span, ASSUMED_GIST_TOKENS, GIST_WRITE_COST, MIN_FOLD_TOKENS,
};
use super::thousands;

/// A warm cache's batch is named once its net tokens are at least this many times what the
/// request keeps without it: the fold then cuts the request to a third or less.
pub const BATCH_RATIO: f64 = 2.0;

/// What is known when pricing candidates.
pub struct Pricing<'a> {
    pub prices: &'a CachePrices,
    pub cache: &'a CacheState,
    /// Where the folds made since the last request already make the next request re-cache
    /// from (an index into the entries), with that range's key.
    pub reset: Option<(usize, String)>,
    pub expected_requests: u64,
    pub level: Option<Level>,
    /// The last request's input tokens (what the request keeps is this minus the batch).
    pub request_tokens: Option<u64>,
}

impl Pricing<'_> {
    /// The net tokens a warm batch needs before it is named.
    pub fn batch_tokens(&self, batch_tokens: u64) -> u64 {
        let kept = self
            .request_tokens
            .unwrap_or(0)
            .saturating_sub(batch_tokens);
        ((kept as f64 * BATCH_RATIO) as u64).max(MIN_FOLD_TOKENS)
    }
}

/// The good folds among `spans`, best first, and the advice.
pub fn rank(entries: &[Entry], spans: &[Span], p: &Pricing<'_>) -> FoldHint {
    let near_limit = p.level.is_some_and(|l| l >= Level::Urgent);
    let cold = matches!(p.cache, CacheState::Cold(_));
    let candidates = if near_limit {
        largest_first(entries, spans, p)
    } else {
        batches(entries, spans, p)
    };
    let cache_note = match (p.cache, &p.reset) {
        (CacheState::Cold(why), _) => Some(why.clone()),
        (CacheState::Warm, Some((_, key))) => Some(format!(
            "a fold since the last request makes the next one re-cache from {key} on"
        )),
        (CacheState::Warm, None) => None,
    };
    let text = advice(&candidates, p, near_limit);
    FoldHint {
        cache: if cold { "cold" } else { "warm" }.into(),
        cache_note,
        expected_requests: p.expected_requests,
        candidates,
        text,
    }
}

/// `spans` folded as one fold with one gist, priced; `None` when they remove nothing.
fn candidate(entries: &[Entry], spans: &[&Span], p: &Pricing<'_>) -> Option<FoldCandidate> {
    let first = spans.iter().map(|s| s.first).min()?;
    let end = spans.iter().map(|s| s.end).max()?;
    let tokens: u64 = spans.iter().map(|s| s.tokens).sum();
    let net = tokens.saturating_sub(ASSUMED_GIST_TOKENS);
    if net == 0 {
        return None;
    }
    let recache_tokens = match (p.cache, &p.reset) {
        (CacheState::Cold(_), _) => 0,
        // Behind the position a fold since the last request re-caches from: free.
        (CacheState::Warm, Some((r, _))) if *r <= first => 0,
        (CacheState::Warm, reset) => {
            let stop = reset.as_ref().map_or(entries.len(), |(r, _)| (*r).max(end));
            let behind: u64 = entries[first..stop].iter().map(|e| e.tokens).sum();
            (behind + ASSUMED_GIST_TOKENS).saturating_sub(tokens)
        }
    };
    let price = price(p.prices, recache_tokens, net as i64);
    let value =
        price.saving_per_request as i64 * p.expected_requests as i64 - price.recache_cost as i64;
    Some(FoldCandidate {
        key: spans
            .iter()
            .map(|s| s.key.as_str())
            .collect::<Vec<_>>()
            .join(","),
        tokens,
        recache_cost: price.recache_cost,
        saving_per_request: price.saving_per_request,
        break_even_requests: price.break_even_requests,
        value,
    })
}

/// Below 90%: the settled work as batches. Work behind a fold made since the last request is
/// free and comes first; the rest is one batch, named once it is large enough (warm) or
/// whenever it pays for its gist (cold).
fn batches(entries: &[Entry], spans: &[Span], p: &Pricing<'_>) -> Vec<FoldCandidate> {
    let free_from = match (p.cache, &p.reset) {
        (CacheState::Warm, Some((r, _))) => *r,
        _ => usize::MAX,
    };
    let (free, priced): (Vec<&Span>, Vec<&Span>) = spans.iter().partition(|s| s.first >= free_from);
    let worth = |c: &FoldCandidate, min_net: u64| {
        c.tokens.saturating_sub(ASSUMED_GIST_TOKENS) >= min_net && c.value > GIST_WRITE_COST
    };
    let mut out = Vec::new();
    if let Some(c) = candidate(entries, &free, p).filter(|c| worth(c, MIN_FOLD_TOKENS)) {
        out.push(c);
    }
    if let Some(c) = candidate(entries, &priced, p) {
        let min_net = match p.cache {
            CacheState::Cold(_) => MIN_FOLD_TOKENS,
            CacheState::Warm => p.batch_tokens(c.tokens),
        };
        if worth(&c, min_net) {
            out.push(c);
        }
    }
    out
}

/// From 90%: each settled range, largest first, value ignored.
fn largest_first(entries: &[Entry], spans: &[Span], p: &Pricing<'_>) -> Vec<FoldCandidate> {
    let mut out: Vec<(FoldCandidate, usize)> = spans
        .iter()
        .filter_map(|s| candidate(entries, &[s], p).map(|c| (c, s.first)))
        .collect();
    out.sort_by(|a, b| b.0.tokens.cmp(&a.0.tokens).then(a.1.cmp(&b.1)));
    out.into_iter().map(|(c, _)| c).collect()
}

/// The advice in one line; `None` when no fold is worth making.
fn advice(candidates: &[FoldCandidate], p: &Pricing<'_>, near_limit: bool) -> Option<String> {
    let first = candidates.first()?;
    let sized = |c: &FoldCandidate| format!("{} ({} tokens)", c.key, thousands(c.tokens));
    if near_limit {
        let named: Vec<String> = candidates.iter().take(4).map(sized).collect();
        return Some(format!("largest settled first: {}", named.join(", ")));
    }
    if let CacheState::Cold(why) = p.cache {
        return Some(format!(
            "the prompt cache is cold ({why}), so folding settled work re-caches nothing extra now: fold {} in one fold_session call, one gist for all of it",
            sized(first)
        ));
    }
    let priced = |c: &FoldCandidate| {
        format!(
            "fold the settled work in one batch, {} in one fold_session call with one gist — re-caching costs {}, it saves {} a request, paid back after {}",
            sized(c),
            thousands(c.recache_cost),
            thousands(c.saving_per_request),
            match c.break_even_requests.unwrap_or(0) {
                1 => "1 request".to_string(),
                n => format!("{n} requests"),
            }
        )
    };
    match (&p.reset, first.recache_cost) {
        (Some((_, from)), 0) => {
            let mut text = format!(
                "the next request re-caches from {from} on anyway, so folding {} now costs nothing extra",
                sized(first)
            );
            if let Some(next) = candidates.get(1) {
                text.push_str(&format!("; also {}", priced(next)));
            }
            Some(text)
        }
        _ => Some(priced(first)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::fold::{spans, Now};
    use crate::protocol::HistoryItem;

    fn anthropic() -> CachePrices {
        CachePrices::builtin(crate::providers::ProviderKind::Anthropic, "")
    }

    /// Pricing at the normal level over 40 requests, no fold since the last request and no
    /// request measured yet; each test sets what it is about.
    fn pricing<'a>(prices: &'a CachePrices, cache: &'a CacheState) -> Pricing<'a> {
        Pricing {
            prices,
            cache,
            reset: None,
            expected_requests: 40,
            level: Some(Level::Normal),
            request_tokens: None,
        }
    }

    fn entry(turn: i64, tokens: u64) -> Entry {
        Entry::new(
            0,
            turn,
            None,
            HistoryItem::Notice {
                text: String::new(),
            },
            tokens,
        )
    }

    /// Turns 1-3 settled (1,000 tokens each), turn 4 in progress (500).
    fn three_settled() -> (Vec<Entry>, Vec<Span>) {
        let entries: Vec<Entry> = [1, 1, 2, 2, 3, 3, 4]
            .iter()
            .map(|&t| entry(t, 500))
            .collect();
        let now = Now {
            turn: Some(4),
            running: None,
        };
        let found = spans(&entries, now, false);
        (entries, found)
    }

    fn keys(hint: &FoldHint) -> Vec<&str> {
        hint.candidates.iter().map(|c| c.key.as_str()).collect()
    }

    #[test]
    fn a_warm_batch_is_named_once_it_is_twice_what_the_request_keeps() {
        let (entries, found) = three_settled();
        assert_eq!(
            found.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(),
            ["t1", "t2", "t3"]
        );
        let prices = anthropic();
        let warm = CacheState::Warm;
        // The request keeps 3,000 tokens besides the 3,000 settled ones: not a batch yet.
        let mut p = Pricing {
            request_tokens: Some(6000),
            ..pricing(&prices, &warm)
        };
        assert_eq!(p.batch_tokens(3000), 6000);
        let hint = rank(&entries, &found, &p);
        assert!(hint.candidates.is_empty(), "{hint:?}");
        assert_eq!(hint.text, None);
        // It keeps 1,000: 2,940 net tokens are over twice that, one fold with one gist.
        p.request_tokens = Some(4000);
        let hint = rank(&entries, &found, &p);
        assert_eq!(keys(&hint), ["t1,t2,t3"]);
        let batch = &hint.candidates[0];
        // Re-cached: t4's 500 tokens behind the batch plus the gist, 560 × 1.15 = 644; saved:
        // 2,940 net tokens read at 0.1.
        assert_eq!(
            (batch.tokens, batch.recache_cost, batch.saving_per_request),
            (3000, 644, 294)
        );
        assert_eq!(batch.value, 294 * 40 - 644);
        assert_eq!(batch.break_even_requests, Some(3));
        assert_eq!(
            hint.text.as_deref(),
            Some("fold the settled work in one batch, t1,t2,t3 (3,000 tokens) in one fold_session call with one gist — re-caching costs 644, it saves 294 a request, paid back after 3 requests")
        );
    }

    #[test]
    fn a_cold_cache_names_the_batch_as_soon_as_it_pays_for_its_gist() {
        let (entries, found) = three_settled();
        let prices = anthropic();
        let cold = CacheState::Cold("idle".into());
        let p = Pricing {
            // Far below the warm batch size: cold, that does not matter.
            request_tokens: Some(60_000),
            ..pricing(&prices, &cold)
        };
        let hint = rank(&entries, &found, &p);
        assert_eq!(keys(&hint), ["t1,t2,t3"]);
        assert_eq!(hint.candidates[0].recache_cost, 0);
        assert_eq!(hint.cache, "cold");
        assert_eq!(
            hint.text.as_deref(),
            Some("the prompt cache is cold (idle), so folding settled work re-caches nothing extra now: fold t1,t2,t3 (3,000 tokens) in one fold_session call, one gist for all of it")
        );
    }

    #[test]
    fn work_behind_a_fold_since_the_last_request_is_free() {
        let (entries, found) = three_settled();
        let prices = anthropic();
        let warm = CacheState::Warm;
        // t2 was folded since the last request: t3 lies behind it, t1 before it.
        let others: Vec<Span> = found.iter().filter(|s| s.key != "t2").cloned().collect();
        let mut p = Pricing {
            reset: Some((2, "t2".into())),
            request_tokens: Some(4000),
            ..pricing(&prices, &warm)
        };
        let hint = rank(&entries, &others, &p);
        // t1 alone is not a batch (the request keeps 3,000 besides it); t3 is free.
        assert_eq!(keys(&hint), ["t3"]);
        assert_eq!(hint.candidates[0].recache_cost, 0);
        assert_eq!(
            hint.cache_note.as_deref(),
            Some("a fold since the last request makes the next one re-cache from t2 on")
        );
        assert_eq!(
            hint.text.as_deref(),
            Some("the next request re-caches from t2 on anyway, so folding t3 (1,000 tokens) now costs nothing extra")
        );
        // A small request: t1 is a batch too, and pays only for itself up to t2's position:
        // (1,000 + 60 − 1,000) × 1.15.
        p.request_tokens = Some(1400);
        let hint = rank(&entries, &others, &p);
        assert_eq!(keys(&hint), ["t3", "t1"]);
        assert_eq!(hint.candidates[1].recache_cost, 69);
        let text = hint.text.unwrap();
        assert!(
            text.ends_with("; also fold the settled work in one batch, t1 (1,000 tokens) in one fold_session call with one gist — re-caching costs 69, it saves 94 a request, paid back after 1 request"),
            "{text}"
        );
    }

    #[test]
    fn near_the_limit_the_largest_settled_range_comes_first() {
        let (mut entries, _) = three_settled();
        entries[0].tokens = 5000;
        let now = Now {
            turn: Some(4),
            running: None,
        };
        let found = spans(&entries, now, false);
        let prices = anthropic();
        let warm = CacheState::Warm;
        let p = Pricing {
            expected_requests: 10,
            level: Some(Level::Urgent),
            request_tokens: Some(1_000_000),
            ..pricing(&prices, &warm)
        };
        let hint = rank(&entries, &found, &p);
        // Each range on its own, largest first, value or batch size ignored.
        assert_eq!(keys(&hint), ["t1", "t2", "t3"]);
        assert!(hint
            .text
            .unwrap()
            .starts_with("largest settled first: t1 (5,500 tokens), t2 (1,000 tokens)"));
    }

    #[test]
    fn small_or_unprofitable_ranges_are_not_named() {
        let entries: Vec<Entry> = [1, 2, 2].iter().map(|&t| entry(t, 300)).collect();
        let now = Now {
            turn: Some(2),
            running: None,
        };
        let prices = anthropic();
        let warm = CacheState::Warm;
        let p = Pricing {
            expected_requests: 10,
            // A batch by size (the request keeps 100 besides t1), but 240 net tokens × 0.1 × 10
            // requests minus the re-cache do not pay for writing the gist.
            request_tokens: Some(400),
            ..pricing(&prices, &warm)
        };
        let hint = rank(&entries, &spans(&entries, now, false), &p);
        assert!(hint.candidates.is_empty(), "{hint:?}");
        assert_eq!(hint.text, None);
    }
}
