//! What a fold costs and saves with a prompt cache (issue 24 §2, SPEC §7 "Price"), in
//! cache-weighted tokens: an uncached input token is 1, a cached one `cache_read`, one
//! written to the cache `cache_write` ([`CachePrices`]).
//!
//! - **Re-cache cost**: a fold changes the request from its first position on, so the next
//!   request writes everything after that position to the cache again instead of reading it:
//!   `tail × (cache_write − cache_read)`, where `tail` is the tokens from the fold's first
//!   position to the end once it is applied. It is 0 while the cache is cold (after a resume
//!   or an idle gap of at least the cache lifetime the whole prefix is written anyway), and a
//!   fold made after another one since the last request pays only for the tokens before the
//!   earlier fold's first position (the same request re-caches the rest anyway).
//! - **Saving per request**: the net tokens removed (the range minus its gist) would have
//!   been cache reads in every later request, the next one included: `net × cache_read`.
//! - **Break-even**: `⌈re-cache cost ÷ saving per request⌉` requests.
//! - **Value** of a candidate: `saving × expected requests − re-cache cost`. The expected
//!   requests are the requests the session has made so far (a session is taken to go on about
//!   as long again as it has gone: the one figure known without guessing the task), at least
//!   [`MIN_EXPECTED_REQUESTS`].
//!
//! Hints name the good folds (a value above what writing the gist costs,
//! [`GIST_WRITE_COST`], and at least [`MIN_FOLD_TOKENS`] net) best first:
//! by value while the cache is warm, which puts the most recent settled work first (little
//! comes after it); oldest first while it is cold (all are free: fold them together); and by
//! raw size from 90% of `auto_compress_above` on, where the window, not the price, is what
//! runs out (the automatic fold would come next).

use crate::gateway::history::{Entry, NoticeMeta};
use crate::protocol::{FoldCandidate, FoldHint, HistoryItem, Level};
use crate::providers::CachePrices;

use super::{thousands, Now};

/// The fewest requests a fold is expected to pay off over (early in a session the count so
/// far says little).
pub const MIN_EXPECTED_REQUESTS: u64 = 10;
/// Smaller folds are never named: the gist alone is a good part of them.
pub const MIN_FOLD_TOKENS: u64 = 200;
/// What writing a gist costs, in uncached input tokens: [`ASSUMED_GIST_TOKENS`] of output at
/// about five input tokens each (Anthropic bills output at 5× input, OpenAI's gpt-5 at 8×;
/// the lower ratio, so a hint does not pass over a fold that pays). A fold is named only when
/// its value exceeds it.
pub const GIST_WRITE_COST: i64 = ASSUMED_GIST_TOKENS as i64 * 5;
/// What a gist is taken to cost before it is written.
pub const ASSUMED_GIST_TOKENS: u64 = 60;

/// Whether the provider still holds the conversation's prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheState {
    Warm,
    /// Cold, and why.
    Cold(String),
}

/// The cache after `idle_ms` without a request (`None`: no request answered yet).
pub fn cache_state(idle_ms: Option<i64>, lifetime_secs: u64, resumed: bool) -> CacheState {
    let Some(idle) = idle_ms else {
        return CacheState::Cold("no request has been answered yet".into());
    };
    let lifetime_ms = lifetime_secs.saturating_mul(1000) as i64;
    if idle < lifetime_ms {
        return CacheState::Warm;
    }
    CacheState::Cold(format!(
        "{}{} since the last request, past the cache lifetime of {}",
        if resumed { "resumed session, " } else { "" },
        duration(idle.max(0) as u64 / 1000),
        duration(lifetime_secs)
    ))
}

/// `45 s`, `5 min`, `2 h 10 min`.
fn duration(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// A fold's price in cache-weighted tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub recache_cost: u64,
    pub saving_per_request: u64,
    pub break_even_requests: Option<u64>,
}

/// The price of re-caching `recache_tokens` to remove `net_tokens` (see the module docs).
pub fn price(prices: &CachePrices, recache_tokens: u64, net_tokens: i64) -> Price {
    let cost = recache_tokens as f64 * (prices.cache_write - prices.cache_read).max(0.0);
    let saving = net_tokens.max(0) as f64 * prices.cache_read;
    Price {
        recache_cost: cost.round() as u64,
        saving_per_request: saving.round() as u64,
        // A hair under the quotient, so float noise never adds a request.
        break_even_requests: (saving > 0.0).then(|| (cost / saving - 1e-9).ceil().max(0.0) as u64),
    }
}

/// A settled range of the conversation as requests carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub key: String,
    /// Its first item and one past its last, in the entries.
    pub first: usize,
    pub end: usize,
    pub tokens: u64,
}

/// The settled ranges: each earlier turn not folded away, and (with `current_turn_too`) the
/// finished iterations of the turn in progress.
pub fn spans(entries: &[Entry], now: Now, current_turn_too: bool) -> Vec<Span> {
    let is_fold = |e: &Entry| matches!(e.meta, Some(NoticeMeta::Fold { .. }));
    let mut out: Vec<(i64, Span, bool)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if Some(e.turn) == now.turn {
            continue;
        }
        match out.last_mut() {
            Some((t, span, live)) if *t == e.turn => {
                span.end = i + 1;
                span.tokens += e.tokens;
                *live |= !is_fold(e);
            }
            _ => out.push((
                e.turn,
                Span {
                    key: format!("t{}", e.turn),
                    first: i,
                    end: i + 1,
                    tokens: e.tokens,
                },
                !is_fold(e),
            )),
        }
    }
    let mut spans: Vec<Span> = out
        .into_iter()
        .filter(|(_, _, live)| *live)
        .map(|(_, s, _)| s)
        .collect();
    if let (true, Some(turn)) = (current_turn_too, now.turn) {
        spans.extend(finished_iterations(
            entries,
            turn,
            now.running.map(|(_, i)| i),
        ));
    }
    spans
}

/// The finished iterations of turn `turn` before the running one, as one range.
fn finished_iterations(entries: &[Entry], turn: i64, running: Option<i64>) -> Option<Span> {
    let results: Vec<(usize, i64)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.turn == turn)
        .filter_map(|(k, e)| e.iteration.map(|i| (k, i)))
        .filter(|(_, i)| running.is_none_or(|r| *i < r))
        .collect();
    let (&(_, a), &(last, b)) = (results.first()?, results.last()?);
    let first = entries
        .iter()
        .position(|e| e.turn == turn && !matches!(e.item, HistoryItem::User { .. }))?;
    let range = &entries[first..=last];
    if range
        .iter()
        .all(|e| matches!(e.meta, Some(NoticeMeta::Fold { .. })))
    {
        return None;
    }
    Some(Span {
        key: if a == b {
            format!("t{turn}/i{a}")
        } else {
            format!("t{turn}/i{a}-i{b}")
        },
        first,
        end: last + 1,
        tokens: range.iter().map(|e| e.tokens).sum(),
    })
}

/// What is known when pricing candidates.
pub struct Pricing<'a> {
    pub prices: &'a CachePrices,
    pub cache: &'a CacheState,
    /// Where the folds made since the last request already make the next request re-cache
    /// from (an index into the entries), with that range's key.
    pub reset: Option<(usize, String)>,
    pub expected_requests: u64,
    pub level: Option<Level>,
}

/// The good folds among `spans`, best first, and the advice.
pub fn rank(entries: &[Entry], spans: &[Span], p: &Pricing<'_>) -> FoldHint {
    let near_limit = p.level.is_some_and(|l| l >= Level::Urgent);
    let cold = matches!(p.cache, CacheState::Cold(_));
    let mut good: Vec<(FoldCandidate, usize)> = Vec::new();
    for span in spans {
        let net = span.tokens.saturating_sub(ASSUMED_GIST_TOKENS);
        if net == 0 || (net < MIN_FOLD_TOKENS && !near_limit) {
            continue;
        }
        let recache_tokens = if cold {
            0
        } else {
            let stop = match &p.reset {
                Some((r, _)) if *r <= span.first => span.first,
                Some((r, _)) => (*r).max(span.end),
                None => entries.len(),
            };
            let behind: u64 = entries[span.first..stop].iter().map(|e| e.tokens).sum();
            (behind + ASSUMED_GIST_TOKENS).saturating_sub(span.tokens)
        };
        let price = price(p.prices, recache_tokens, net as i64);
        let value = price.saving_per_request as i64 * p.expected_requests as i64
            - price.recache_cost as i64;
        if value <= GIST_WRITE_COST && !near_limit {
            continue;
        }
        good.push((
            FoldCandidate {
                key: span.key.clone(),
                tokens: span.tokens,
                recache_cost: price.recache_cost,
                saving_per_request: price.saving_per_request,
                break_even_requests: price.break_even_requests,
                value,
            },
            span.first,
        ));
    }
    if near_limit {
        good.sort_by(|a, b| b.0.tokens.cmp(&a.0.tokens).then(a.1.cmp(&b.1)));
    } else if cold {
        good.sort_by_key(|c| c.1);
    } else {
        good.sort_by(|a, b| b.0.value.cmp(&a.0.value).then(a.1.cmp(&b.1)));
    }
    let candidates: Vec<FoldCandidate> = good.into_iter().map(|(c, _)| c).collect();
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

/// The advice in one line; `None` when no fold is worth making.
fn advice(candidates: &[FoldCandidate], p: &Pricing<'_>, near_limit: bool) -> Option<String> {
    let first = candidates.first()?;
    let sized = |c: &FoldCandidate| format!("{} ({} tokens)", c.key, thousands(c.tokens));
    let named: Vec<String> = candidates.iter().take(4).map(sized).collect();
    if let CacheState::Cold(why) = p.cache {
        return Some(format!(
            "the prompt cache is cold ({why}), so folding settled work re-caches nothing extra now: fold {} in this block",
            named.join(", ")
        ));
    }
    if near_limit {
        return Some(format!("largest settled first: {}", named.join(", ")));
    }
    let mut text = if let (Some((_, from)), 0) = (&p.reset, first.recache_cost) {
        format!(
            "the next request re-caches from {from} on anyway, so folding {} now costs nothing extra",
            candidates
                .iter()
                .take_while(|c| c.recache_cost == 0)
                .take(4)
                .map(sized)
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!(
            "cheapest good fold: {} — re-caching costs {}, it saves {} a request, paid back after {} requests",
            sized(first),
            thousands(first.recache_cost),
            thousands(first.saving_per_request),
            first.break_even_requests.unwrap_or(0)
        )
    };
    if candidates.len() > 1 && first.recache_cost > 0 {
        text.push_str(&format!(
            "; also {}; fold them in one block: folds before the next request share one cache re-write",
            named[1..].join(", ")
        ));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic() -> CachePrices {
        CachePrices {
            cache_read: 0.1,
            cache_write: 1.25,
            lifetime_secs: 300,
        }
    }

    #[test]
    fn the_price_follows_the_formula() {
        // 2,000 tokens re-cached at 1.25 − 0.1, 1,000 net tokens saved at 0.1 per request.
        let p = price(&anthropic(), 2000, 1000);
        assert_eq!(
            p,
            Price {
                recache_cost: 2300,
                saving_per_request: 100,
                break_even_requests: Some(23)
            }
        );
        let gpt5 = CachePrices {
            cache_read: 0.1,
            cache_write: 1.0,
            lifetime_secs: 300,
        };
        assert_eq!(price(&gpt5, 1000, 900).break_even_requests, Some(10));
        assert_eq!(price(&gpt5, 0, 900).break_even_requests, Some(0));
        assert_eq!(price(&gpt5, 1000, -5).break_even_requests, None);
    }

    #[test]
    fn the_cache_is_cold_after_its_lifetime() {
        assert_eq!(cache_state(Some(299_999), 300, false), CacheState::Warm);
        assert_eq!(
            cache_state(Some(300_000), 300, false),
            CacheState::Cold(
                "5 min since the last request, past the cache lifetime of 5 min".into()
            )
        );
        match cache_state(Some(9_000_000), 300, true) {
            CacheState::Cold(why) => {
                assert!(why.starts_with("resumed session, 2 h 30 min"), "{why}")
            }
            CacheState::Warm => panic!("warm"),
        }
        assert!(matches!(cache_state(None, 300, false), CacheState::Cold(_)));
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

    #[test]
    fn warm_ranks_recent_work_first_and_cold_the_oldest() {
        // Turns 1-3 settled (1,000 tokens each), turn 4 in progress.
        let entries: Vec<Entry> = [1, 1, 2, 2, 3, 3, 4]
            .iter()
            .map(|&t| entry(t, 500))
            .collect();
        let now = Now {
            turn: Some(4),
            running: None,
        };
        let found = spans(&entries, now, false);
        assert_eq!(
            found.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(),
            ["t1", "t2", "t3"]
        );
        let prices = anthropic();
        let warm = CacheState::Warm;
        let mut p = Pricing {
            prices: &prices,
            cache: &warm,
            reset: None,
            expected_requests: 40,
            level: Some(Level::Normal),
        };
        let hint = rank(&entries, &found, &p);
        let keys: Vec<&str> = hint.candidates.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["t3", "t2", "t1"]);
        // t3: 500 tokens behind it plus the gist are re-cached: 560 × 1.15 = 644.
        let t3 = &hint.candidates[0];
        assert_eq!((t3.recache_cost, t3.saving_per_request), (644, 94));
        assert_eq!(t3.value, 94 * 40 - 644);
        let text = hint.text.unwrap();
        assert!(
            text.starts_with("cheapest good fold: t3 (1,000 tokens)"),
            "{text}"
        );
        assert!(text.contains("fold them in one block"), "{text}");

        let cold = CacheState::Cold("idle".into());
        p.cache = &cold;
        let hint = rank(&entries, &found, &p);
        let keys: Vec<&str> = hint.candidates.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["t1", "t2", "t3"]);
        assert!(hint.candidates.iter().all(|c| c.recache_cost == 0));
        assert!(hint.text.unwrap().contains("re-caches nothing extra"));

        // A fold of t2 made since the last request: t3 behind it is free, t1 pays for t1-t2.
        p.cache = &warm;
        p.reset = Some((2, "t2".into()));
        let others: Vec<Span> = found.iter().filter(|s| s.key != "t2").cloned().collect();
        let hint = rank(&entries, &others, &p);
        assert_eq!(hint.candidates[0].key, "t3");
        assert_eq!(hint.candidates[0].recache_cost, 0);
        // t1 pays only for itself up to t2: (1,000 + 60 − 1,000) × 1.15.
        assert_eq!(hint.candidates[1].recache_cost, 69);
        assert!(hint
            .text
            .unwrap()
            .starts_with("the next request re-caches from t2 on anyway"));

        // Near the limit the largest comes first, value or not.
        p.reset = None;
        p.level = Some(Level::Urgent);
        let mut big = entries.clone();
        big[0].tokens = 5000;
        let found = spans(&big, now, false);
        let hint = rank(&big, &found, &p);
        assert_eq!(hint.candidates[0].key, "t1");
        assert!(hint
            .text
            .unwrap()
            .starts_with("largest settled first: t1 (5,500 tokens)"));
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
            prices: &prices,
            cache: &warm,
            reset: None,
            expected_requests: 10,
            level: Some(Level::Normal),
        };
        let hint = rank(&entries, &spans(&entries, now, false), &p);
        assert!(hint.candidates.is_empty());
        assert_eq!(hint.text, None);
    }
}
