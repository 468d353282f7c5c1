//! Folds as they are stored and reported: the spans a fold replaces, its receipt, and the
//! measurement of the request after it (SPEC §4 "Context folding", §7). The store keeps them
//! in JSON columns; these are the types of those columns, so nothing reads them by key.

use serde::{Deserialize, Serialize};

/// A contiguous run of conversation items a fold replaces with its gist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldSpan {
    pub first_seq: i64,
    pub last_seq: i64,
    /// The key of what it replaces (`t2/i1-i3`).
    pub label: String,
    /// The text that takes the span's place in requests.
    pub text: String,
}

/// What `fold_session` returns, and what the store keeps of a fold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldReceipt {
    pub fold: i64,
    #[serde(default)]
    pub key: String,
    /// The ranges replaced, as keys.
    #[serde(default)]
    pub selected: Vec<String>,
    /// The selection grew to whole responses.
    #[serde(default)]
    pub widened: bool,
    /// Earlier folds this one takes in.
    #[serde(default)]
    pub absorbed: Vec<i64>,
    #[serde(default)]
    pub tokens_removed: u64,
    #[serde(default)]
    pub gist_tokens: u64,
    #[serde(default)]
    pub estimated_net_tokens: i64,
    /// Tokens after the fold's first position, which the next request writes to the cache
    /// again.
    #[serde(default)]
    pub recache_tokens: u64,
    /// What re-caching costs the next request, in cache-weighted tokens (an uncached input
    /// token is 1): the tokens after the fold's first position, written to the cache again
    /// instead of read from it, × (cache write − cache read). 0 when the cache is cold or an
    /// earlier fold since the last request already re-caches from before this one.
    #[serde(default)]
    pub recache_cost: u64,
    /// What every later request saves, in cache-weighted tokens: the net tokens removed,
    /// which would have been cache reads, × cache read.
    #[serde(default)]
    pub saving_per_request: u64,
    /// Requests until the savings repay the re-caching (`None` when the fold saves nothing).
    #[serde(default)]
    pub break_even_requests: Option<u64>,
    /// Why the re-caching costs what it does (a cold cache, a batch, or the tokens behind it).
    #[serde(default)]
    pub recache_note: String,
    /// Folds sharing the next request's measurement, this one included.
    #[serde(default)]
    pub fold_count: usize,
    #[serde(default)]
    pub automatic: bool,
    /// `pending` when made (the measurement comes with the next response).
    #[serde(default = "pending_word")]
    pub measurement: String,
}

fn pending_word() -> String {
    "pending".into()
}

/// The last request before a group of folds, against which the next one is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Before {
    pub input_tokens: Option<u64>,
    pub provider: String,
    pub model: String,
    pub turn: i64,
}

#[cfg(test)]
impl Before {
    /// 1,000 input tokens to `openai`'s model `m` in turn 2: the request the unit tests
    /// measure folds against.
    pub(crate) fn example() -> Before {
        Before {
            input_tokens: Some(1000),
            provider: "openai".into(),
            model: "m".into(),
            turn: 2,
        }
    }
}

/// What the request after a group of folds says about them (SPEC §7: the net change of the
/// whole request, never a reused older count).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Measurement {
    /// Made since the last request; measured by the next response.
    Pending {
        fold_count: usize,
        folds: Vec<i64>,
        before_input_tokens: Option<u64>,
        before_provider: String,
        before_model: String,
        before_turn: i64,
    },
    Measured {
        fold_count: usize,
        folds: Vec<i64>,
        before_input_tokens: u64,
        after_input_tokens: u64,
        /// Positive: the request got smaller.
        net_reduction_tokens: i64,
    },
    Unavailable {
        fold_count: usize,
        folds: Vec<i64>,
        reason: String,
    },
}

impl Measurement {
    /// A group's state until the next response.
    pub fn pending(folds: &[i64], before: &Before) -> Measurement {
        Measurement::Pending {
            fold_count: folds.len(),
            folds: folds.to_vec(),
            before_input_tokens: before.input_tokens,
            before_provider: before.provider.clone(),
            before_model: before.model.clone(),
            before_turn: before.turn,
        }
    }

    /// The request before a pending group (to measure it after a restart).
    pub fn before(&self) -> Option<Before> {
        match self {
            Measurement::Pending {
                before_input_tokens,
                before_provider,
                before_model,
                before_turn,
                ..
            } => Some(Before {
                input_tokens: *before_input_tokens,
                provider: before_provider.clone(),
                model: before_model.clone(),
                turn: *before_turn,
            }),
            _ => None,
        }
    }

    pub fn is_pending(&self) -> bool {
        matches!(self, Measurement::Pending { .. })
    }
}

/// What `read_session` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRead {
    /// Introspection is off: `text` says so, and nothing else is shown.
    pub off: bool,
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn before() -> Before {
        Before::example()
    }

    #[test]
    fn measurements_keep_their_stored_json() {
        let pending = Measurement::pending(&[3, 4], &before());
        assert_eq!(
            serde_json::to_value(&pending).unwrap(),
            json!({"status": "pending", "fold_count": 2, "folds": [3, 4],
                   "before_input_tokens": 1000, "before_provider": "openai",
                   "before_model": "m", "before_turn": 2})
        );
        assert_eq!(pending.before(), Some(before()));
    }

    #[test]
    fn an_older_receipt_without_newer_fields_still_reads() {
        let r: FoldReceipt = serde_json::from_value(json!({"fold": 1})).unwrap();
        assert_eq!(r.fold, 1);
        assert_eq!(r.measurement, "pending");
    }
}
