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
//! Which of the settled ranges ([`spans`]) the hint names, and in what batches: `rank`.

use crate::gateway::history::{Entry, NoticeMeta};
use crate::protocol::HistoryItem;
use crate::providers::CachePrices;

use super::Now;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic() -> CachePrices {
        CachePrices::builtin(crate::providers::ProviderKind::Anthropic, "")
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
}
