//! Folding as a session does it: `fold_session` and `read_session` answered for a running
//! block (host calls), `/fold` for the person, utilization and its hints, measurements, and
//! the automatic fold that keeps every request under the model's input limit.
//!
//! These work on the conversation state and the store only, never the worker, so a block's
//! host call can be answered while the block runs.

use serde_json::{json, Value};

use super::folds::{self, Before, Fold, Span};
use super::history::NoticeMeta;
use super::{shown_state, ChatSession, ChatSettings, State};
use crate::protocol::HistoryItem;
use crate::runtime::CallError;
use crate::session::{limits_for, thousands, Limits, Utilization};
use crate::store::{FoldRow, Store, StoreError};

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
    Select(#[from] folds::SelectError),
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

impl From<folds::SelectError> for CallError {
    fn from(e: folds::SelectError) -> Self {
        CallError(e.to_string())
    }
}

/// Folds recorded before the next model request measures them. Every fold of a pending group
/// rewrites the group's measurement, so a block looping on `fold_session` would otherwise cost
/// the host time and memory that grow with the square of its folds.
pub const MAX_FOLDS_PER_REQUEST: usize = 32;

/// A gist longer than this many bytes per token of the cap is refused without counting its
/// tokens (no real gist is that sparse, and counting a huge one is costly).
const GIST_BYTES_PER_TOKEN: u64 = 16;

/// Calls to `fold_session` and `read_session` one block may make.
pub const MAX_GATEWAY_CALLS_PER_BLOCK: usize = 256;
/// Bytes of text one block may send through those calls.
pub const MAX_GATEWAY_CALL_BYTES_PER_BLOCK: usize = 16 * 1024 * 1024;

/// What one block has asked of the gateway through `fold_session` and `read_session`. Each
/// call costs the host work even when it is refused (the frame is read, the call answered),
/// so a block that loops on them past the budget is stopped instead of keeping the host busy
/// until its timeout.
#[derive(Debug, Default)]
pub(super) struct CallBudget {
    calls: usize,
    bytes: usize,
    spent: bool,
}

impl CallBudget {
    /// Counts one call; an error (for the block) once the budget is spent.
    pub(super) fn charge(&mut self, params: &Value) -> Result<(), CallError> {
        // Counting stops where the budget was spent, so the block's note says what spent it
        // (calls already on their way when it is stopped are refused alike).
        if self.spent {
            return Err(CallError(self.reason()));
        }
        self.calls += 1;
        self.bytes += params.as_object().map_or(0, |m| {
            m.values().filter_map(Value::as_str).map(str::len).sum()
        });
        if self.calls > MAX_GATEWAY_CALLS_PER_BLOCK || self.bytes > MAX_GATEWAY_CALL_BYTES_PER_BLOCK
        {
            self.spent = true;
            return Err(CallError(self.reason()));
        }
        Ok(())
    }

    /// Whether the block went past the budget (and was stopped).
    pub(super) fn spent(&self) -> bool {
        self.spent
    }

    pub(super) fn reason(&self) -> String {
        format!(
            "[vis] the block was stopped: it called fold_session/read_session {} times, sending {} bytes, more than one block may ({MAX_GATEWAY_CALLS_PER_BLOCK} calls, {} bytes); fold in a later block",
            self.calls,
            thousands(self.bytes as u64),
            thousands(MAX_GATEWAY_CALL_BYTES_PER_BLOCK as u64),
        )
    }
}

/// What folding needs: the conversation, the store, the session's id and settings.
pub(super) struct FoldCtx<'a> {
    pub state: &'a mut State,
    pub store: &'a mut Store,
    pub id: &'a str,
    pub settings: &'a ChatSettings,
}

pub(super) fn limits(settings: &ChatSettings) -> Limits {
    limits_for(
        &settings.provider.model,
        settings.folding.input_limit,
        settings.folding.auto_compress_above,
    )
}

pub(super) fn utilization(state: &State, settings: &ChatSettings) -> Utilization {
    let last = state.last_request.as_ref().map(|r| match r.input_tokens {
        Some(n) => (n, false),
        None => (r.estimate, true),
    });
    Utilization::new(limits(settings), last, state.latest_measurement.clone())
}

/// The oldest settled ranges with their sizes, oldest first: earlier turns not folded away,
/// else the finished responses of the turn in progress.
pub(super) fn candidates(state: &State) -> Vec<(String, u64)> {
    let current = state.now.turn;
    let mut turns: Vec<(i64, u64)> = Vec::new();
    for e in &state.entries {
        if matches!(e.meta, Some(NoticeMeta::Fold { .. })) || Some(e.turn) == current {
            continue;
        }
        match turns.last_mut() {
            Some((t, n)) if *t == e.turn => *n += e.tokens,
            _ => turns.push((e.turn, e.tokens)),
        }
    }
    if !turns.is_empty() {
        return turns
            .into_iter()
            .map(|(t, n)| (format!("t{t}"), n))
            .collect();
    }
    let Some(turn) = current else {
        return Vec::new();
    };
    // The turn in progress: everything up to the last finished iteration before the running
    // (or latest) response.
    let its: Vec<(i64, u64)> = state
        .entries
        .iter()
        .filter(|e| e.turn == turn)
        .filter_map(|e| e.iteration.map(|i| (i, e.tokens)))
        .collect();
    let upto = match state.now.running {
        Some((_, r)) => r - 1,
        None => its.last().map_or(0, |(i, _)| *i),
    };
    let done: Vec<&(i64, u64)> = its.iter().filter(|(i, _)| *i <= upto).collect();
    match (done.first(), done.last()) {
        (Some((a, _)), Some((b, _))) if *b > 1 => {
            let size: u64 = state
                .entries
                .iter()
                .filter(|e| e.turn == turn && !matches!(e.item, HistoryItem::User { .. }))
                .filter(|e| e.iteration.is_none_or(|i| i <= upto))
                .map(|e| e.tokens)
                .sum();
            vec![(format!("t{turn}/i{a}-i{b}"), size)]
        }
        _ => Vec::new(),
    }
}

/// The hint for block output at the current level, if any.
pub(super) fn hint(state: &State, settings: &ChatSettings) -> Option<String> {
    utilization(state, settings).hint(&candidates(state))
}

/// `fold_session(key, gist)`: records the fold and returns its receipt.
pub(super) fn fold(
    ctx: &mut FoldCtx<'_>,
    key: &str,
    gist: &str,
    automatic: bool,
) -> Result<Value, FoldError> {
    let gist = gist.trim();
    if gist.is_empty() {
        return Err(FoldError::EmptyGist);
    }
    let pending = ctx
        .state
        .pending_group
        .as_ref()
        .map_or(0, |(_, ids, _)| ids.len());
    if !automatic && pending >= MAX_FOLDS_PER_REQUEST {
        return Err(FoldError::TooManyFolds);
    }
    let cap = ctx.settings.folding.gist_max_tokens;
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
    let selection = folds::select(key, &ctx.state.marks, &ctx.state.folds, ctx.state.now)?;
    let id = ctx.state.folds.iter().map(|f| f.id).max().unwrap_or(0) + 1;
    let labels: Vec<String> = selection.spans.iter().map(|(_, _, l)| l.clone()).collect();
    let texts = folds::span_texts(id, &labels, gist);
    let spans: Vec<Span> = selection
        .spans
        .iter()
        .zip(texts)
        .map(|((first_seq, last_seq, label), text)| Span {
            first_seq: *first_seq,
            last_seq: *last_seq,
            label: label.clone(),
            text,
        })
        .collect();
    // Worked out on a copy: the store is written before anything in memory changes.
    let mut view = ctx.state.entries.clone();
    let before_tokens: u64 = view.iter().map(|e| e.tokens).sum();
    let Some(first_changed) = folds::apply(&mut view, id, &spans) else {
        return Err(FoldError::SelectsNothing {
            key: key.to_string(),
        });
    };
    let after_tokens: u64 = view.iter().map(|e| e.tokens).sum();
    let fold_items: u64 = view
        .iter()
        .filter(|e| matches!(e.meta, Some(NoticeMeta::Fold { id: f, .. }) if f == id))
        .map(|e| e.tokens)
        .sum();
    let removed = before_tokens - (after_tokens - fold_items);
    let recache: u64 = view[first_changed..].iter().map(|e| e.tokens).sum();
    let (group_id, mut fold_ids, before) = match ctx.state.pending_group.clone() {
        Some(group) => group,
        None => {
            let group = ctx
                .state
                .folds
                .iter()
                .map(|f| f.group_id)
                .max()
                .unwrap_or(0)
                + 1;
            let before = match &ctx.state.last_request {
                Some(r) => Before {
                    input_tokens: r.input_tokens,
                    provider: r.provider.clone(),
                    model: r.model.clone(),
                    turn: r.turn,
                },
                None => Before {
                    input_tokens: None,
                    provider: String::new(),
                    model: String::new(),
                    turn: 0,
                },
            };
            (group, Vec::new(), before)
        }
    };
    fold_ids.push(id);
    let measurement = folds::pending(&fold_ids, &before);
    let receipt = json!({
        "fold": id,
        "key": key,
        "selected": labels,
        "widened": selection.widened,
        "absorbed": selection.absorbs,
        "tokens_removed": removed,
        "gist_tokens": gist_tokens,
        "estimated_net_tokens": removed as i64 - fold_items as i64,
        "recache_tokens": recache,
        "fold_count": fold_ids.len(),
        "automatic": automatic,
        "measurement": "pending",
    });
    ctx.store
        .record_fold(
            ctx.id,
            &FoldRow {
                id,
                turn: ctx
                    .state
                    .now
                    .turn
                    .or(ctx.state.entries.last().map(|e| e.turn))
                    .unwrap_or(0),
                iteration: ctx.state.now.running.map(|(_, i)| i),
                key: key.to_string(),
                spans: serde_json::to_string(&spans).unwrap_or_default(),
                gist: gist.to_string(),
                automatic,
                absorbed_by: None,
                receipt: receipt.to_string(),
                group_id,
                measurement: measurement.to_string(),
            },
            &selection.absorbs,
        )
        .map_err(FoldError::NotRecorded)?;
    ctx.store
        .set_fold_measurement(ctx.id, group_id, &measurement.to_string())
        .map_err(FoldError::MeasurementNotRecorded)?;
    // Now memory follows the store.
    for f in ctx.state.folds.iter_mut() {
        if selection.absorbs.contains(&f.id) {
            f.absorbed_by = Some(id);
        }
        if f.group_id == group_id {
            f.measurement = measurement.clone();
        }
    }
    ctx.state.folds.push(Fold {
        id,
        spans,
        absorbed_by: None,
        group_id,
        measurement: measurement.clone(),
    });
    ctx.state.entries = view;
    ctx.state.estimate = ctx
        .state
        .prefix
        .as_ref()
        .map_or(0, |p| p.tokens.max(0) as u64)
        + after_tokens;
    if let Some(assembler) = &mut ctx.state.assembler {
        assembler.invalidate_from(first_changed);
    }
    let (catalog, agents) = shown_state(ctx.state.prefix.as_ref(), &ctx.state.entries);
    ctx.state.shown_catalog = catalog;
    ctx.state.shown_agents = agents;
    ctx.state.seen_manifest = None;
    ctx.state.pending_group = Some((group_id, fold_ids, before));
    ctx.state.latest_measurement = Some(measurement);
    Ok(receipt)
}

/// `read_session(key)`: the original content when introspection is on.
pub(super) fn read(ctx: &mut FoldCtx<'_>, key: &str) -> crate::runtime::CallAnswer {
    if !ctx.settings.folding.introspection {
        return Ok(json!({
            "off": true,
            "text": "read_session is off for this session: folded ranges are known only by their gists (the person can turn it on with `vis chat --introspection` or `[folding] introspection = true`).",
        }));
    }
    let relaxed = folds::Now {
        turn: None,
        running: ctx.state.now.running,
    };
    let selection = folds::select(key, &ctx.state.marks, &[], relaxed)?;
    let rows = ctx
        .store
        .history(ctx.id)
        .map_err(|e| CallError(format!("the conversation could not be read ({e})")))?;
    Ok(json!({"off": false, "text": folds::original_text(&rows, &selection.spans)}))
}

/// After a response: the measurement of the folds made since the request before it.
pub(super) fn measured(
    state: &mut State,
    store: &Store,
    id: &str,
    after_input: Option<u64>,
    provider: &str,
    model: &str,
    turn: i64,
) -> Result<Option<Value>, crate::store::StoreError> {
    let Some((group, ids, before)) = state.pending_group.take() else {
        return Ok(None);
    };
    let m = folds::measure(&ids, &before, after_input, provider, model, turn);
    store.set_fold_measurement(id, group, &m.to_string())?;
    for f in state.folds.iter_mut().filter(|f| f.group_id == group) {
        f.measurement = m.clone();
    }
    state.latest_measurement = Some(m.clone());
    Ok(Some(m))
}

/// Keeps the next request under the model's input limit: folds the oldest settled turns
/// (else the finished part of the turn in progress) with a mechanical gist. Returns the
/// receipt of the automatic fold, if one was needed; `Err` when even that is not enough.
pub(super) fn enforce_limit(ctx: &mut FoldCtx<'_>) -> Result<Option<Value>, LimitError> {
    let limits = limits(ctx.settings);
    // The provider's count of the last request plus what was added (or folded) since.
    let projected = |state: &State| -> u64 {
        match &state.last_request {
            Some(r) => match r.input_tokens {
                Some(n) => (n as i64 + state.estimate as i64 - r.estimate as i64).max(0) as u64,
                None => state.estimate,
            },
            None => state.estimate,
        }
    };
    let start = projected(ctx.state);
    if start <= limits.input_limit {
        return Ok(None);
    }
    let candidates = candidates(ctx.state);
    let mut keys = Vec::new();
    let mut turns = Vec::new();
    let mut freed = 0u64;
    for (key, size) in &candidates {
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
    let gist = folds::mechanical_gist(&ctx.state.entries, &turns);
    let cap = ctx.settings.folding.gist_max_tokens.max(200) as usize * 4;
    let gist = crate::protocol::clip(&gist, cap);
    let receipt = fold(ctx, &keys.join(","), &gist, true)?;
    let now = projected(ctx.state);
    if now > limits.input_limit {
        return Err(LimitError::OverLimit {
            tokens: now,
            limit: limits.input_limit,
        });
    }
    Ok(Some(receipt))
}

/// A one-line summary of a receipt (for the person and `/fold`).
pub fn receipt_line(receipt: &Value) -> String {
    format!(
        "fold {} replaces {}: {} tokens removed, gist {} tokens, net {} (estimate); the next request re-caches {} tokens; measurement pending{}",
        receipt["fold"],
        receipt["selected"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", "))
            .unwrap_or_default(),
        thousands(receipt["tokens_removed"].as_u64().unwrap_or(0)),
        thousands(receipt["gist_tokens"].as_u64().unwrap_or(0)),
        receipt["estimated_net_tokens"],
        thousands(receipt["recache_tokens"].as_u64().unwrap_or(0)),
        if receipt["automatic"] == true { " (automatic)" } else { "" },
    )
}

impl ChatSession {
    /// `session["utilization"]` as it stands.
    pub fn utilization(&self) -> Utilization {
        utilization(&self.state, &self.settings)
    }

    /// Folds `key` with `gist` for the person (`/fold`), between turns.
    pub fn fold(&mut self, key: &str, gist: &str) -> Result<Value, FoldError> {
        fold(
            &mut FoldCtx {
                state: &mut self.state,
                store: &mut *self.store,
                id: &self.id,
                settings: &self.settings,
            },
            key,
            gist,
            false,
        )
    }

    /// The folds of the session (absorbed ones included).
    pub fn folds(&self) -> &[Fold] {
        &self.state.folds
    }
}
