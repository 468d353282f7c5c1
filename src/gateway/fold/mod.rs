//! Folding settled work (SPEC §4, §7): keys resolved against the conversation, folds applied
//! to what requests carry, receipts, measurements, and the automatic fold at the hard limit.
//!
//! Rules (documented in `docs/folding.md`):
//!
//! - A key selects items of the stored conversation by position. Iterations are folded with
//!   their whole response: an assistant message and the results of all its calls go together
//!   (the receipt says when a selection was widened), so every tool call keeps its result and
//!   the roles around the fold still alternate.
//! - Nothing that includes the running iteration can be folded, nor a response that is still
//!   running; the whole call is rejected and nothing is folded.
//! - A fold that overlaps an earlier one absorbs it: the new span grows to cover the old one
//!   entirely, the old fold is marked absorbed, and its gist is not repeated.
//! - In requests, each span is replaced by one item at its first position, whose text is
//!   fixed when the fold is made: `[vis] fold N replaces t2/i1-i6: <gist>` (a multi-span fold's
//!   other spans say where its gist is). The originals stay in the store.
//! - Catalog and `AGENTS.md` notices inside a span go with it; the next request then sends a
//!   fresh update, so nothing folded reappears in place.
//! - All folds between two model requests share one measurement; the next response measures
//!   the whole request's change.
//!
//! A fold is made in three steps: [`plan`] works it out on a copy of the conversation, the
//! store records it, and only then does [`Conversation::apply_fold`] change the conversation
//! in memory ([`fold`] does all three), so a store that refuses leaves everything as it was.
//!
//! - `select`: which items a key selects;
//! - `apply`: what a fold does to the items requests carry;
//! - `gist`: the text of an automatic fold, and the originals `read_session` shows;
//! - `keys`: the names of conversation ranges (`t2/i1-i3`) the model folds by;
//! - `measure`: each model's limits, how full the context is, the hint, and what a response
//!   after folds says they saved;
//! - `price`: what a fold costs and saves with a prompt cache (receipts);
//! - `rank`: which folds the hint names: settled work in batches.

mod apply;
mod gist;
mod keys;
mod measure;
mod price;
mod rank;
mod select;

pub use apply::{apply, effect, load, span_texts, tokens_before_seq, Effect};
pub use gist::{mechanical_gist, original_text};
pub use keys::{parse_keys, FoldKey, KeyError};
pub use measure::{
    hint, limits_for, measure_response, thousands, utilization, LimitSource, Limits,
    AUTO_COMPRESS_ABOVE,
};
pub use price::{
    cache_state, price, spans, CacheState, Price, Span, ASSUMED_GIST_TOKENS, MIN_EXPECTED_REQUESTS,
    MIN_FOLD_TOKENS,
};
pub use rank::{rank, Pricing, BATCH_RATIO};
pub use select::{is_settled, select, Fold, Mark, MarkKind, Now, SelectError, Selection};

use super::{Conversation, FoldSettings};
use crate::protocol::{Before, CallError, FoldReceipt, FoldSpan, Measurement, SessionRead};
use crate::store::{FoldRow, Store, StoreError};

/// Default cap on a gist, in o200k tokens.
pub const DEFAULT_GIST_MAX_TOKENS: u64 = 1000;

/// Folds recorded before the next model request measures them. Every fold of a pending group
/// rewrites the group's measurement, so a block looping on `fold_session` would otherwise cost
/// the host time and memory that grow with the square of its folds.
pub const MAX_FOLDS_PER_REQUEST: usize = 32;

/// A gist longer than this many bytes per token of the cap is refused without counting its
/// tokens (no real gist is that sparse, and counting a huge one is costly).
const GIST_BYTES_PER_TOKEN: u64 = 16;

/// Why a fold was refused; nothing was folded. The model (through `fold_session`) or the
/// person (through `/fold`) reads it and acts: it never ends the turn.
#[derive(Debug, thiserror::Error)]
pub enum FoldError {
    #[error("the gist is empty: write what later steps need (facts, paths, addresses, decisions); nothing was folded")]
    EmptyGist,
    #[error("the gist has {} tokens, over the cap of {} ([folding] gist_max_tokens); shorten it — nothing was folded", thousands(*tokens), thousands(*cap))]
    GistTooLong { tokens: u64, cap: u64 },
    #[error("the gist is {} bytes, far over the cap of {} tokens ([folding] gist_max_tokens); shorten it — nothing was folded", thousands(*bytes), thousands(*cap))]
    GistTooLarge { bytes: u64, cap: u64 },
    #[error("fold_session has folded {MAX_FOLDS_PER_REQUEST} times since the last model request, the most it may; the next request measures these folds, so fold the rest after it — nothing was folded")]
    TooManyFolds,
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error("{key} selects nothing that requests still carry")]
    SelectsNothing { key: String },
    #[error(transparent)]
    Tokenizer(#[from] crate::catalog::CatalogError),
    #[error("the fold could not be recorded ({0}); nothing was folded")]
    NotRecorded(StoreError),
    #[error("the fold's measurement could not be recorded ({0})")]
    MeasurementNotRecorded(StoreError),
}

/// Why the next request cannot be kept under the model's input limit: the turn ends with it.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    #[error("the next request needs about {} tokens, over the model's input limit of {}, even after folding all settled work; start a new session, or raise [folding] input_limit if the model takes more", thousands(*tokens), thousands(*limit))]
    OverLimit { tokens: u64, limit: u64 },
    /// The automatic fold was refused.
    #[error(transparent)]
    Fold(#[from] FoldError),
}

impl From<FoldError> for CallError {
    fn from(e: FoldError) -> Self {
        CallError(e.to_string())
    }
}

impl From<SelectError> for CallError {
    fn from(e: SelectError) -> Self {
        CallError(e.to_string())
    }
}

/// Folds made since the last model request: their group, their ids, and the request before
/// them (what the next response is measured against).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingGroup {
    pub group_id: i64,
    pub fold_ids: Vec<i64>,
    pub before: Before,
}

/// A fold worked out on a copy of the conversation, ready to record and then apply.
#[derive(Debug)]
pub struct FoldPlan {
    pub row: FoldRow,
    /// Earlier folds this one absorbs.
    pub absorbs: Vec<i64>,
    /// Where the conversation's bytes change first.
    pub(super) first_changed: usize,
    pub(super) group: PendingGroup,
}

/// Works out `fold_session(key, gist)` (or the automatic fold) without changing anything.
pub fn plan(
    conversation: &Conversation,
    key: &str,
    gist: &str,
    automatic: bool,
    settings: &FoldSettings,
) -> Result<FoldPlan, FoldError> {
    let gist = gist.trim();
    if gist.is_empty() {
        return Err(FoldError::EmptyGist);
    }
    let pending = conversation.pending().map_or(0, |g| g.fold_ids.len());
    if !automatic && pending >= MAX_FOLDS_PER_REQUEST {
        return Err(FoldError::TooManyFolds);
    }
    let cap = settings.gist_max_tokens;
    let bytes = gist.len() as u64;
    if !automatic && bytes > cap.saturating_mul(GIST_BYTES_PER_TOKEN) {
        return Err(FoldError::GistTooLarge { bytes, cap });
    }
    let gist_tokens = crate::catalog::count_tokens(gist)? as u64;
    if gist_tokens > cap && !automatic {
        return Err(FoldError::GistTooLong {
            tokens: gist_tokens,
            cap,
        });
    }
    let now = conversation.now();
    let selection = select(key, conversation.marks(), conversation.folds(), now)?;
    let id = conversation.folds().iter().map(|f| f.id).max().unwrap_or(0) + 1;
    let labels: Vec<String> = selection.spans.iter().map(|(_, _, l)| l.clone()).collect();
    let texts = span_texts(id, &labels, gist);
    let spans: Vec<FoldSpan> = selection
        .spans
        .iter()
        .zip(texts)
        .map(|((first_seq, last_seq, label), text)| FoldSpan {
            first_seq: *first_seq,
            last_seq: *last_seq,
            label: label.clone(),
            text: text + &images_note(conversation.entries(), *first_seq, *last_seq),
        })
        .collect();
    // Worked out on the conversation as it is: a copy of it costs more than the whole plan.
    let Some(effect) = effect(conversation.entries(), &spans) else {
        return Err(FoldError::SelectsNothing {
            key: key.to_string(),
        });
    };
    let mut group = match conversation.pending() {
        Some(group) => group.clone(),
        None => PendingGroup {
            group_id: conversation
                .folds()
                .iter()
                .map(|f| f.group_id)
                .max()
                .unwrap_or(0)
                + 1,
            fold_ids: Vec::new(),
            before: conversation.before(),
        },
    };
    group.fold_ids.push(id);
    let measurement = Measurement::pending(&group.fold_ids, &group.before);
    let net = effect.removed_tokens as i64 - effect.fold_tokens as i64;
    let (recache, recache_note) = recache(conversation, &effect, &spans, &labels);
    let price = price::price(conversation.cache_prices(), recache, net);
    let receipt = FoldReceipt {
        fold: id,
        key: key.to_string(),
        selected: labels,
        widened: selection.widened,
        absorbed: selection.absorbs.clone(),
        tokens_removed: effect.removed_tokens,
        gist_tokens,
        estimated_net_tokens: net,
        recache_tokens: effect.tail_tokens,
        recache_cost: price.recache_cost,
        saving_per_request: price.saving_per_request,
        break_even_requests: price.break_even_requests,
        recache_note,
        fold_count: group.fold_ids.len(),
        automatic,
        measurement: "pending".into(),
    };
    let row = FoldRow {
        id,
        turn: now
            .turn
            .or(conversation.entries().last().map(|e| e.turn))
            .unwrap_or(0),
        iteration: now.running.map(|(_, i)| i),
        key: key.to_string(),
        spans,
        gist: gist.to_string(),
        automatic,
        absorbed_by: None,
        receipt,
        group_id: group.group_id,
        measurement,
    };
    Ok(FoldPlan {
        row,
        absorbs: selection.absorbs,
        first_changed: effect.first_changed,
        group,
    })
}

/// The tokens this fold makes the next request write to the cache again, beyond what it
/// writes anyway, and why: none while the cache is cold; with folds made since the last
/// request, only those before their first position; else everything after the fold's.
fn recache(
    conversation: &Conversation,
    effect: &Effect,
    spans: &[FoldSpan],
    labels: &[String],
) -> (u64, String) {
    let here = labels.first().map_or("", String::as_str);
    if let CacheState::Cold(why) = conversation.cache_state() {
        return (
            0,
            format!("the prompt cache is cold ({why}): the next request writes the whole prefix anyway, so this fold re-caches nothing extra"),
        );
    }
    match conversation.reset() {
        Some((_, seq, from)) => {
            let extra = tokens_before_seq(conversation.entries(), spans, effect.first_changed, seq);
            let note = if extra == 0 {
                format!("a fold since the last request already makes the next one re-cache from {from} on, which covers {here}: nothing extra")
            } else {
                format!("a fold since the last request already re-caches from {from} on; this one adds the {} tokens from {here} up to it", thousands(extra))
            };
            (extra, note)
        }
        None => (
            effect.tail_tokens,
            format!(
                "the next request writes the {} tokens from {here} on to the cache again",
                thousands(effect.tail_tokens)
            ),
        ),
    }
}

/// Plans the fold, records it, then applies it: the conversation changes only once the store
/// holds the fold.
pub fn fold(
    conversation: &mut Conversation,
    store: &mut Store,
    session_id: &str,
    key: &str,
    gist: &str,
    automatic: bool,
    settings: &FoldSettings,
) -> Result<FoldReceipt, FoldError> {
    let plan = plan(conversation, key, gist, automatic, settings)?;
    store
        .record_fold(session_id, &plan.row, &plan.absorbs)
        .map_err(FoldError::NotRecorded)?;
    store
        .set_fold_measurement(session_id, plan.row.group_id, &plan.row.measurement)
        .map_err(FoldError::MeasurementNotRecorded)?;
    Ok(conversation.apply_fold(plan))
}

/// `read_session(key)`: the original content when introspection is on.
pub fn read(
    conversation: &Conversation,
    store: &Store,
    session_id: &str,
    key: &str,
    introspection: bool,
) -> Result<SessionRead, CallError> {
    if !introspection {
        return Ok(SessionRead {
            off: true,
            text: "read_session is off for this session: folded ranges are known only by their gists (the person can turn it on with `vis chat --introspection` or `[folding] introspection = true`).".into(),
        });
    }
    let relaxed = Now {
        turn: None,
        running: conversation.now().running,
    };
    let selection = select(key, conversation.marks(), &[], relaxed)?;
    let rows = store
        .history(session_id)
        .map_err(|e| CallError(format!("the conversation could not be read ({e})")))?;
    Ok(SessionRead {
        off: false,
        text: original_text(&rows, &selection.spans),
    })
}

/// Keeps the next request under the model's input limit: folds the oldest settled turns
/// (else the finished part of the turn in progress) with a mechanical gist. Returns the
/// receipt of the automatic fold, if one was needed; `Err` when even that is not enough.
pub fn enforce_limit(
    conversation: &mut Conversation,
    store: &mut Store,
    session_id: &str,
    limits: Limits,
    settings: &FoldSettings,
) -> Result<Option<FoldReceipt>, LimitError> {
    let start = conversation.projected();
    if start <= limits.input_limit {
        return Ok(None);
    }
    let mut keys = Vec::new();
    let mut turns = Vec::new();
    let mut freed = 0u64;
    for (key, size) in &conversation.candidates() {
        if start.saturating_sub(freed) <= limits.auto_compress_above {
            break;
        }
        keys.push(key.clone());
        if let Some(t) = key
            .strip_prefix('t')
            .and_then(|k| k.split('/').next())
            .and_then(|t| t.parse::<i64>().ok())
        {
            turns.push(t);
        }
        freed += size;
    }
    if keys.is_empty() {
        return Err(LimitError::OverLimit {
            tokens: start,
            limit: limits.input_limit,
        });
    }
    turns.dedup();
    let gist = mechanical_gist(conversation.entries(), &turns);
    let cap = settings.gist_max_tokens.max(200) as usize * 4;
    let gist = crate::protocol::clip(&gist, cap);
    let receipt = fold(
        conversation,
        store,
        session_id,
        &keys.join(","),
        &gist,
        true,
        settings,
    )?;
    let now = conversation.projected();
    if now > limits.input_limit {
        return Err(LimitError::OverLimit {
            tokens: now,
            limit: limits.input_limit,
        });
    }
    Ok(Some(receipt))
}

/// A one-line summary of a receipt (for the person and `/fold`).
pub fn receipt_line(receipt: &FoldReceipt) -> String {
    format!(
        "fold {} replaces {}: {} tokens removed, gist {} tokens, net {} (estimate); re-caching costs {} weighted tokens, it saves {} a request{}; measurement pending{}",
        receipt.fold,
        receipt.selected.join(", "),
        thousands(receipt.tokens_removed),
        thousands(receipt.gist_tokens),
        receipt.estimated_net_tokens,
        thousands(receipt.recache_cost),
        thousands(receipt.saving_per_request),
        match receipt.break_even_requests {
            Some(n) => format!(", paid back after {n} requests"),
            None => String::new(),
        },
        if receipt.automatic { " (automatic)" } else { "" },
    )
}

/// What a fold's text says of the images the folded results showed (they are no longer sent).
fn images_note(
    entries: &[crate::gateway::history::Entry],
    first_seq: i64,
    last_seq: i64,
) -> String {
    let shown: Vec<String> = entries
        .iter()
        .filter(|e| (first_seq..=last_seq).contains(&e.seq))
        .flat_map(|e| match &e.item {
            crate::protocol::HistoryItem::ToolResult { images, .. } => images
                .iter()
                .map(|i| {
                    format!(
                        "{}×{} {}",
                        i.meta.width,
                        i.meta.height,
                        i.meta.format.label()
                    )
                })
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    match shown.len() {
        0 => String::new(),
        1 => format!(" [it showed an image ({}), no longer sent]", shown[0]),
        n => format!(
            " [it showed {n} images ({}), no longer sent]",
            shown.join(", ")
        ),
    }
}
