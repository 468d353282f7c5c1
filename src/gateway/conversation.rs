//! The conversation of a chat session: the one owner of what requests carry.
//!
//! [`Conversation`] holds the stored items as requests show them (folded ranges replaced by
//! their gists), where every item sits (for fold keys), the folds and the group waiting for
//! its measurement, the last answered request, the request prefix and its cached encodings,
//! what the conversation shows of the catalog and `AGENTS.md`, and the token estimate. Nothing
//! else changes these: a fold is planned by `fold` and applied here once the store holds it;
//! items are appended here as the store records them.

use crate::catalog::Snapshot;
use crate::protocol::{Before, FoldReceipt, HistoryItem, Measurement, ToolSpec};
use crate::providers::CachePrices;
use crate::providers::{anthropic_request, openai_request, ProviderKind};
use crate::store::{ChatPrefix, HistoryKind, NewHistoryItem, Store};

use super::assemble::{Assembler, Wire};
use super::fold::{self, CacheState, Fold, FoldPlan, Mark, Now, PendingGroup};
use super::history::{self, Entry, NoticeMeta};
use super::{ChatSettings, GatewayError};

/// What the last answered request tells about the context's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastRequest {
    pub input_tokens: Option<u64>,
    pub estimate: u64,
    pub provider: String,
    pub model: String,
    pub turn: i64,
}

/// The conversation and what it shows.
pub struct Conversation {
    prefix: Option<ChatPrefix>,
    /// The conversation as requests carry it: stored items, folded ranges replaced.
    entries: Vec<Entry>,
    /// Where every stored item sits (folded or not), for resolving fold keys.
    marks: Vec<Mark>,
    folds: Vec<Fold>,
    /// Folds made since the last request.
    pending: Option<PendingGroup>,
    /// The latest fold measurement (shown in `session["utilization"]`).
    latest_measurement: Option<Measurement>,
    last_request: Option<LastRequest>,
    /// The turn in progress and the iteration whose block runs.
    now: Now,
    assembler: Option<Assembler>,
    /// The catalog the conversation shows now (the prefix's or the last update's).
    shown_catalog: Option<String>,
    /// The `AGENTS.md` the conversation shows now.
    shown_agents: Option<Option<String>>,
    /// The worker's manifest version last compared with the shown catalog.
    seen_manifest: Option<u64>,
    /// o200k estimate of prefix + conversation.
    estimate: u64,
    /// What the prompt cache knows: the prices, and the clock the cache's lifetime runs on.
    cache: CacheClock,
}

/// When the last request was answered (so whether the provider still caches the prefix),
/// how many were, and the prices of cached input.
#[derive(Debug, Clone)]
struct CacheClock {
    prices: CachePrices,
    /// Milliseconds since the epoch (from the health record after a resume).
    last_request_at: Option<i64>,
    /// Requests answered in the session so far (resumed ones included).
    answered: u64,
    /// Opened from the store and no request answered since.
    resumed: bool,
    /// Added to the wall clock: replays and tests simulate an idle gap without waiting.
    skew_ms: i64,
}

impl Conversation {
    /// The stored conversation of session `id`, with its folds applied and the turns a
    /// stopped gateway left running repaired; also what the person should be told. `prices`
    /// are the session's (`ChatSettings::cache_prices`): receipts and hints price folds by them.
    pub fn load(
        store: &mut Store,
        id: &str,
        prices: CachePrices,
    ) -> Result<(Conversation, Vec<String>), GatewayError> {
        let prefix = store.chat_prefix(id)?;
        let mut entries = history::from_rows(store.history(id)?)?;
        let notes = super::repair::repair_running_turns(store, id, &mut entries)?;
        let marks: Vec<Mark> = entries.iter().map(Mark::of).collect();
        let folds = fold::load(store, id, &mut entries)?;
        // Only now, with the folds applied: a folded image's bytes are never read.
        history::load_images(store, id, &mut entries)?;
        let pending = folds
            .iter()
            .filter_map(|f| f.measurement.before().map(|b| (f.group_id, f.id, b)))
            .fold(
                None,
                |acc: Option<PendingGroup>, (group_id, fold_id, before)| match acc {
                    Some(mut group) if group.group_id == group_id => {
                        group.fold_ids.push(fold_id);
                        Some(group)
                    }
                    _ => Some(PendingGroup {
                        group_id,
                        fold_ids: vec![fold_id],
                        before,
                    }),
                },
            );
        let latest_measurement = folds.last().map(|f| f.measurement.clone());
        let requests = store.requests(id)?;
        let answered: Vec<_> = requests.iter().filter(|r| r.error.is_none()).collect();
        let cache = CacheClock {
            prices,
            last_request_at: answered.last().map(|r| r.started_at + r.latency_ms),
            answered: answered.len() as u64,
            resumed: !answered.is_empty(),
            skew_ms: 0,
        };
        let last_request = requests
            .into_iter()
            .rev()
            .find(|r| r.error.is_none())
            .map(|r| LastRequest {
                input_tokens: r.input_tokens.map(|n| n.max(0) as u64),
                estimate: r.estimate_tokens.max(0) as u64,
                provider: r.provider,
                model: r.model,
                turn: r.turn,
            });
        let (shown_catalog, shown_agents) = shown_state(prefix.as_ref(), &entries);
        let estimate = prefix.as_ref().map_or(0, |p| p.tokens.max(0) as u64)
            + entries.iter().map(|e| e.tokens).sum::<u64>();
        let conversation = Conversation {
            prefix,
            entries,
            marks,
            folds,
            pending,
            latest_measurement,
            last_request,
            now: Now {
                turn: None,
                running: None,
            },
            assembler: None,
            shown_catalog,
            shown_agents,
            seen_manifest: None,
            estimate,
            cache,
        };
        Ok((conversation, notes))
    }

    pub fn prefix(&self) -> Option<&ChatPrefix> {
        self.prefix.as_ref()
    }

    /// Fixes the prefix of a new session's first request: what it shows of the catalog and
    /// `AGENTS.md` from now on, and the manifest it was rendered from.
    pub fn set_prefix(&mut self, prefix: ChatPrefix, manifest_version: u64) {
        self.estimate += prefix.tokens.max(0) as u64;
        self.shown_catalog = Some(prefix.catalog_hash.clone());
        self.shown_agents = Some(prefix.agents_md.clone());
        self.seen_manifest = Some(manifest_version);
        self.prefix = Some(prefix);
    }

    /// The conversation as requests carry it.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn marks(&self) -> &[Mark] {
        &self.marks
    }

    /// The folds of the session (absorbed ones included).
    pub fn folds(&self) -> &[Fold] {
        &self.folds
    }

    pub fn pending(&self) -> Option<&PendingGroup> {
        self.pending.as_ref()
    }

    pub fn latest_measurement(&self) -> Option<&Measurement> {
        self.latest_measurement.as_ref()
    }

    pub fn now(&self) -> Now {
        self.now
    }

    /// A turn begins (`Some`) or ends (`None`).
    pub fn set_turn(&mut self, turn: Option<i64>) {
        self.now = Now {
            turn,
            running: None,
        };
    }

    /// The iteration whose block runs (while it runs).
    pub fn set_running(&mut self, running: Option<(i64, i64)>) {
        self.now.running = running;
    }

    /// o200k estimate of the next request (prefix + conversation).
    pub fn estimate(&self) -> u64 {
        self.estimate
    }

    /// The last request's input tokens and whether they are an estimate.
    pub fn last_tokens(&self) -> Option<(u64, bool)> {
        self.last_request.as_ref().map(|r| match r.input_tokens {
            Some(n) => (n, false),
            None => (r.estimate, true),
        })
    }

    /// The request before the folds made now (what the next response is measured against).
    pub fn before(&self) -> Before {
        match &self.last_request {
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
        }
    }

    /// The next request's size: the provider's count of the last one plus what was added
    /// (or folded) since.
    pub fn projected(&self) -> u64 {
        match &self.last_request {
            Some(r) => match r.input_tokens {
                Some(n) => (n as i64 + self.estimate as i64 - r.estimate as i64).max(0) as u64,
                None => self.estimate,
            },
            None => self.estimate,
        }
    }

    /// The catalog (hash) and `AGENTS.md` the conversation shows now.
    pub fn shown(&self) -> (Option<&str>, Option<&Option<String>>) {
        (self.shown_catalog.as_deref(), self.shown_agents.as_ref())
    }

    /// Whether the worker's manifest may have changed since the catalog was last compared.
    pub fn manifest_unseen(&mut self, version: u64) -> bool {
        let unseen = self.seen_manifest != Some(version);
        self.seen_manifest = Some(version);
        unseen
    }

    pub fn show_catalog(&mut self, hash: String) {
        self.shown_catalog = Some(hash);
    }

    pub fn show_agents(&mut self, agents: Option<String>) {
        self.shown_agents = Some(agents);
    }

    /// Appends an item the store just recorded.
    pub fn push(&mut self, entry: Entry) {
        self.estimate += entry.tokens;
        self.marks.push(Mark::of(&entry));
        self.entries.push(entry);
    }

    /// Records a person's message, an answer or a notice of `turn`, and appends it.
    pub fn append(
        &mut self,
        store: &mut Store,
        session_id: &str,
        turn: i64,
        item: HistoryItem,
        meta: Option<NoticeMeta>,
    ) -> Result<(), GatewayError> {
        let (kind, body) = match &item {
            HistoryItem::User { text } => (HistoryKind::User, text.clone()),
            HistoryItem::Notice { text } => (HistoryKind::Notice, text.clone()),
            HistoryItem::Assistant(message) => (
                HistoryKind::Assistant,
                serde_json::to_string(message).unwrap_or_default(),
            ),
            HistoryItem::ToolResult { .. } => {
                return Err(GatewayError::CorruptHistory {
                    seq: 0,
                    detail: "tool results are recorded with their iteration".into(),
                })
            }
        };
        let tokens = history::estimate_item(&item);
        let meta_json = meta.as_ref().map(history::meta_json);
        let seq = store.append_history(
            session_id,
            &NewHistoryItem {
                turn,
                kind,
                body: &body,
                tokens: tokens as i64,
                meta: meta_json.as_deref(),
            },
        )?;
        self.push(Entry {
            seq,
            turn,
            iteration: None,
            item,
            tokens,
            meta,
        });
        Ok(())
    }

    /// The body of the next request, as it would be sent now.
    pub fn body(&mut self, settings: &ChatSettings, session_id: &str) -> Vec<u8> {
        let Some(prefix) = &self.prefix else {
            return Vec::new();
        };
        let assembler = match &mut self.assembler {
            Some(a) => a,
            None => self
                .assembler
                .insert(new_assembler(prefix, settings, session_id)),
        };
        assembler.body(&self.entries)
    }

    /// A response arrived: it is the last answered request now, and it measures the folds
    /// made before it (the measurement, if there were any, is returned to be recorded).
    pub fn answered(
        &mut self,
        input_tokens: Option<u64>,
        estimate: u64,
        provider: &str,
        model: &str,
        turn: i64,
    ) -> Option<(i64, Measurement)> {
        let measured = self.pending.take().map(|group| {
            let m = super::fold::measure_response(
                &group.fold_ids,
                &group.before,
                input_tokens,
                provider,
                model,
                turn,
            );
            for f in self
                .folds
                .iter_mut()
                .filter(|f| f.group_id == group.group_id)
            {
                f.measurement = m.clone();
            }
            self.latest_measurement = Some(m.clone());
            (group.group_id, m)
        });
        self.cache.last_request_at = Some(self.clock_ms());
        self.cache.answered += 1;
        self.cache.resumed = false;
        self.last_request = Some(LastRequest {
            input_tokens,
            estimate,
            provider: provider.to_string(),
            model: model.to_string(),
            turn,
        });
        measured
    }

    pub fn cache_prices(&self) -> &CachePrices {
        &self.cache.prices
    }

    /// Moves the clock the cache lifetime runs on forward by `secs`, as if the session had
    /// been idle that long (replays and tests: an idle gap without waiting for it).
    pub fn advance_clock(&mut self, secs: u64) {
        self.cache.skew_ms += secs.saturating_mul(1000) as i64;
    }

    fn clock_ms(&self) -> i64 {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        wall + self.cache.skew_ms
    }

    /// Whether the provider still holds the prefix: cold when no request was answered for
    /// the cache's lifetime (also across a resume: the stored health record says when).
    pub fn cache_state(&self) -> CacheState {
        let idle = self.cache.last_request_at.map(|at| self.clock_ms() - at);
        fold::cache_state(idle, self.cache.prices.lifetime_secs, self.cache.resumed)
    }

    /// Requests a fold is expected to keep paying off for (see `fold::price`).
    pub fn expected_requests(&self) -> u64 {
        self.cache.answered.max(fold::MIN_EXPECTED_REQUESTS)
    }

    /// Where the folds made since the last request make the next one re-cache from: the
    /// index of the first item they changed, and its key.
    pub fn reset(&self) -> Option<(usize, i64, String)> {
        let group = self.pending.as_ref()?;
        let (seq, label) = self
            .folds
            .iter()
            .filter(|f| group.fold_ids.contains(&f.id))
            .flat_map(|f| f.spans.iter())
            .map(|s| (s.first_seq, s.label.clone()))
            .min_by_key(|(seq, _)| *seq)?;
        let index = self.entries.iter().position(|e| e.seq >= seq)?;
        Some((index, seq, label))
    }

    /// Applies a fold the store has recorded.
    pub fn apply_fold(&mut self, plan: FoldPlan) -> FoldReceipt {
        let FoldPlan {
            row,
            absorbs,
            first_changed,
            group,
        } = plan;
        // The same spans the plan measured, on the same entries: the same change.
        fold::apply(&mut self.entries, row.id, &row.spans);
        for f in self.folds.iter_mut() {
            if absorbs.contains(&f.id) {
                f.absorbed_by = Some(row.id);
            }
            if f.group_id == group.group_id {
                f.measurement = row.measurement.clone();
            }
        }
        self.folds.push(Fold {
            id: row.id,
            spans: row.spans,
            absorbed_by: None,
            group_id: row.group_id,
            measurement: row.measurement.clone(),
        });
        self.estimate = self.prefix.as_ref().map_or(0, |p| p.tokens.max(0) as u64)
            + self.entries.iter().map(|e| e.tokens).sum::<u64>();
        if let Some(assembler) = &mut self.assembler {
            assembler.invalidate_from(first_changed);
        }
        let (catalog, agents) = shown_state(self.prefix.as_ref(), &self.entries);
        self.shown_catalog = catalog;
        self.shown_agents = agents;
        self.seen_manifest = None;
        self.pending = Some(group);
        self.latest_measurement = Some(row.measurement);
        row.receipt
    }

    /// The oldest settled ranges with their sizes, oldest first: earlier turns not folded
    /// away, else the finished responses of the turn in progress.
    pub fn candidates(&self) -> Vec<(String, u64)> {
        let current = self.now.turn;
        let mut turns: Vec<(i64, u64)> = Vec::new();
        for e in &self.entries {
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
        // The turn in progress: everything up to the last finished iteration before the
        // running (or latest) response.
        let its: Vec<(i64, u64)> = self
            .entries
            .iter()
            .filter(|e| e.turn == turn)
            .filter_map(|e| e.iteration.map(|i| (i, e.tokens)))
            .collect();
        let upto = match self.now.running {
            Some((_, r)) => r - 1,
            None => its.last().map_or(0, |(i, _)| *i),
        };
        let done: Vec<&(i64, u64)> = its.iter().filter(|(i, _)| *i <= upto).collect();
        match (done.first(), done.last()) {
            (Some((a, _)), Some((b, _))) if *b > 1 => {
                let size: u64 = self
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
}

/// The catalog and `AGENTS.md` the conversation shows: the prefix's, updated by notices.
fn shown_state(
    prefix: Option<&ChatPrefix>,
    entries: &[Entry],
) -> (Option<String>, Option<Option<String>>) {
    let mut catalog = prefix.map(|p| p.catalog_hash.clone());
    let mut agents = prefix.map(|p| p.agents_md.clone());
    for entry in entries {
        match &entry.meta {
            Some(NoticeMeta::CatalogHash(h)) => catalog = Some(h.clone()),
            Some(NoticeMeta::AgentsMd(a)) => agents = Some(a.clone()),
            Some(NoticeMeta::Fold { .. }) | None => {}
        }
    }
    (catalog, agents)
}

fn new_assembler(prefix: &ChatPrefix, settings: &ChatSettings, session_id: &str) -> Assembler {
    let tool: ToolSpec =
        serde_json::from_str(&prefix.tool).unwrap_or_else(|_| crate::protocol::tool_spec());
    match settings.provider.kind {
        ProviderKind::OpenAi => Assembler::new(
            Wire::OpenAi,
            openai_request::header(&openai_request::OpenAiRequest {
                model: &settings.provider.model,
                session_id,
                system: &prefix.system,
                tool: &tool,
                max_tokens: None,
                stream: settings.provider.stream,
                tool_choice: settings.provider.tool_choice.as_ref(),
            }),
        )
        .with_images(settings.provider.accepts_images(), &settings.provider.model),
        ProviderKind::Anthropic => Assembler::new(
            Wire::Anthropic {
                keep_thinking: settings.thinking_budget.is_some(),
            },
            anthropic_request::header(&anthropic_request::AnthropicRequest {
                model: &settings.provider.model,
                system: &prefix.system,
                tool: &tool,
                max_tokens: settings.max_output_tokens,
                thinking_budget: settings.thinking_budget,
                stream: settings.provider.stream,
                tool_choice: settings.provider.tool_choice.as_ref(),
            }),
        )
        .with_images(settings.provider.accepts_images(), &settings.provider.model),
    }
}

/// The catalog snapshot shown before `hash` (an empty one when none was).
pub fn shown_snapshot(store: &Store, hash: Option<&str>) -> Result<Snapshot, GatewayError> {
    Ok(match hash {
        Some(hash) => store
            .catalog_snapshot(hash)?
            .unwrap_or_else(Snapshot::empty),
        None => Snapshot::empty(),
    })
}
