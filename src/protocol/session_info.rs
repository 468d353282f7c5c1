//! The `session` dict a block reads (SPEC §5), rebuilt before every block: one struct here,
//! one `TypedDict` on the Python side (`python/vis/_protocol.py`), and a test that keeps the
//! two the same (`protocol::python_types`).
//!
//! The host fills in what it knows ([`SessionInfo::new`]); the supervisor adds `restored` and
//! `sandbox`; the worker's runner adds `workspace_roots` (from the block's own field) and the
//! extensions' context.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Measurement;

/// The level at which folding is required, for models with a large enough window.
pub const AUTO_COMPRESS_ABOVE: u64 = 200_000;

/// `session` (SPEC §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: String,
    pub turn: i64,
    pub iteration: i64,
    pub counts: SessionCounts,
    pub utilization: Utilization,
    /// What each loaded extension contributes (filled in by the worker).
    pub extensions: Map<String, Value>,
    /// On the first block after a (re)start: which definitions came back.
    pub restored: Option<Value>,
    /// MCP servers as namespaces: their status, from hosts that have them.
    pub mcp: Value,
    /// Which sandbox layers are in force (added by the supervisor).
    pub sandbox: Option<Value>,
    /// The background jobs' settings (added by the supervisor): `max`, `next_id`,
    /// `output_bytes`.
    #[serde(default)]
    pub jobs: Option<Value>,
}

/// How much the session holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionCounts {
    pub turns: i64,
    pub iterations: i64,
    pub folds: i64,
}

impl SessionInfo {
    /// The dict for block `turn`/`iteration` of session `id`.
    pub fn new(
        id: &str,
        turn: i64,
        iteration: i64,
        counts: SessionCounts,
        utilization: Utilization,
    ) -> SessionInfo {
        SessionInfo {
            id: id.to_string(),
            turn,
            iteration,
            counts,
            utilization,
            extensions: Map::new(),
            restored: None,
            mcp: serde_json::json!({"servers": {}, "skipped": []}),
            sandbox: None,
            jobs: None,
        }
    }
}

/// How urgent folding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Below 75% of `auto_compress_above`.
    Normal,
    /// From 75%.
    Hint,
    /// From 90%.
    Urgent,
    /// Above 100%: folding is required.
    Required,
}

pub fn level(tokens: u64, auto_compress_above: u64) -> Level {
    let share = tokens as f64 / auto_compress_above.max(1) as f64;
    if share > 1.0 {
        Level::Required
    } else if share >= 0.9 {
        Level::Urgent
    } else if share >= 0.75 {
        Level::Hint
    } else {
        Level::Normal
    }
}

/// `session["utilization"]` (SPEC §7). Without a model in the loop (`vis exec`, `vis mcp`)
/// nothing but the default threshold is known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Utilization {
    /// The last request's input tokens as the provider reported them, else the local
    /// estimate (then `estimated` is true); `None` before the first request.
    pub last_request_tokens: Option<u64>,
    pub estimated: bool,
    pub auto_compress_above: u64,
    /// The model's hard input limit (`None` without a model).
    pub input_limit: Option<u64>,
    /// last / input_limit.
    pub saturation: Option<f64>,
    /// input_limit − last.
    pub headroom_tokens: Option<i64>,
    pub level: Option<Level>,
    /// The latest fold measurement (pending, measured or unavailable).
    pub fold_measurement: Option<Measurement>,
    /// The folds worth making now, priced (`None` without a model).
    #[serde(default)]
    pub fold_hint: Option<FoldHint>,
}

/// The folds worth making now, by what they save and what re-caching costs (issue 24).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldHint {
    /// `warm` or `cold` (nothing cached: a fold re-caches nothing extra).
    pub cache: String,
    /// Why the cache is cold (or what the next request re-caches anyway).
    pub cache_note: Option<String>,
    /// The requests a fold is expected to keep paying off for.
    pub expected_requests: u64,
    /// Good folds, best first.
    pub candidates: Vec<FoldCandidate>,
    /// The advice in one line (what block output ends with when there is any).
    pub text: Option<String>,
}

/// One settled range and its price, in cache-weighted tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldCandidate {
    pub key: String,
    /// Tokens requests carry for it now.
    pub tokens: u64,
    pub recache_cost: u64,
    pub saving_per_request: u64,
    pub break_even_requests: Option<u64>,
    /// saving × expected requests − re-cache cost.
    pub value: i64,
}

impl Utilization {
    /// With a model whose limits are `input_limit` and `auto_compress_above`; `last` is the
    /// last request's tokens and whether they are an estimate.
    pub fn new(
        input_limit: u64,
        auto_compress_above: u64,
        last: Option<(u64, bool)>,
        fold_measurement: Option<Measurement>,
    ) -> Utilization {
        let (last_request_tokens, estimated) = match last {
            Some((n, estimated)) => (Some(n), estimated),
            None => (None, false),
        };
        Utilization {
            last_request_tokens,
            estimated,
            auto_compress_above,
            input_limit: Some(input_limit),
            saturation: last_request_tokens
                .map(|n| (n as f64 / input_limit.max(1) as f64 * 10_000.0).round() / 10_000.0),
            headroom_tokens: last_request_tokens.map(|n| input_limit as i64 - n as i64),
            level: last_request_tokens.map(|n| level(n, auto_compress_above)),
            fold_measurement,
            fold_hint: None,
        }
    }

    /// Where no model is in the loop: nothing is known (SPEC §7).
    pub fn without_requests() -> Utilization {
        Utilization {
            last_request_tokens: None,
            estimated: false,
            auto_compress_above: AUTO_COMPRESS_ABOVE,
            input_limit: None,
            saturation: None,
            headroom_tokens: None,
            level: None,
            fold_measurement: None,
            fold_hint: None,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_hints() {
        assert_eq!(level(74, 100), Level::Normal);
        assert_eq!(level(75, 100), Level::Hint);
        assert_eq!(level(90, 100), Level::Urgent);
        assert_eq!(level(100, 100), Level::Urgent);
        assert_eq!(level(101, 100), Level::Required);
        let u = Utilization::new(2000, 1000, Some((800, false)), None);
        assert_eq!(u.saturation, Some(0.4));
        assert_eq!(u.headroom_tokens, Some(1200));
    }

    #[test]
    fn without_a_model_the_dict_says_so() {
        let u = serde_json::to_value(Utilization::without_requests()).unwrap();
        assert_eq!(
            u,
            serde_json::json!({
                "last_request_tokens": null, "estimated": false,
                "auto_compress_above": AUTO_COMPRESS_ABOVE, "input_limit": null,
                "saturation": null, "headroom_tokens": null, "level": null,
                "fold_measurement": null, "fold_hint": null,
            })
        );
    }
}
