//! The fake provider's prompt cache: a prefix cache keyed by content, as Anthropic's and
//! OpenAI's are. A request's cached tokens are the longest prefix it shares with any earlier
//! request still within the cache lifetime (a hit refreshes that entry's lifetime); every
//! request is cached in turn. The cache runs on its own clock, advanced a fixed step per
//! request and by whole idle gaps, so a replay simulates time without waiting for it.

use vis::catalog::count_tokens;

/// Seconds a request (the model's answer and the block it runs) moves the cache clock on.
pub const SECONDS_PER_REQUEST: f64 = 6.0;

/// What one request cost, in tokens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub input: u64,
    pub cached: u64,
    /// Tokens it repeats from the request before it: what should have been cached.
    pub repeated: u64,
}

/// Relative prices of input tokens: an uncached one is 1.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    pub read: f64,
    /// What a token not read from the cache costs (Anthropic writes it at 1.25×; OpenAI
    /// caches automatically at no surcharge).
    pub uncached: f64,
}

pub const ANTHROPIC: Prices = Prices {
    read: 0.1,
    uncached: 1.25,
};
pub const GPT5: Prices = Prices {
    read: 0.1,
    uncached: 1.0,
};

impl Usage {
    pub fn weighted(&self, p: &Prices) -> f64 {
        self.cached as f64 * p.read + (self.input - self.cached) as f64 * p.uncached
    }
}

pub struct PrefixCache {
    lifetime: f64,
    now: f64,
    /// Cached request bodies and when each was last used.
    entries: Vec<(Vec<u8>, f64)>,
}

/// Bodies kept at most (older ones are prefixes of newer ones in a linear session).
const MAX_ENTRIES: usize = 48;

impl PrefixCache {
    pub fn new(lifetime_secs: f64) -> PrefixCache {
        PrefixCache {
            lifetime: lifetime_secs,
            now: 0.0,
            entries: Vec::new(),
        }
    }

    /// An idle gap: nothing is asked for `secs`.
    pub fn advance(&mut self, secs: f64) {
        self.now += secs;
    }

    /// Serves `body`: its input and cached tokens.
    pub fn request(&mut self, body: &[u8]) -> Usage {
        let (now, lifetime) = (self.now, self.lifetime);
        self.entries.retain(|(_, used)| now - *used < lifetime);
        let best = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, (b, _))| (i, shared_prefix_len(b, body)))
            .max_by_key(|(_, n)| *n);
        let shared = match best {
            Some((i, n)) if n > 0 => {
                self.entries[i].1 = now;
                n
            }
            _ => 0,
        };
        let tokens = |b: &[u8]| count_tokens(&String::from_utf8_lossy(b)).unwrap() as u64;
        let input = tokens(body);
        let repeated = self
            .entries
            .last()
            .map_or(0, |(last, _)| shared_prefix_len(last, body));
        let usage = Usage {
            input,
            cached: tokens(&body[..shared]).min(input),
            repeated: tokens(&body[..repeated]).min(input),
        };
        self.entries.push((body.to_vec(), now));
        if self.entries.len() > MAX_ENTRIES {
            self.entries.remove(0);
        }
        self.now += SECONDS_PER_REQUEST;
        usage
    }
}

pub fn shared_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
