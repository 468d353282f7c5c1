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

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::history::{Entry, NoticeMeta};
use crate::protocol::{HistoryItem, TurnStatus};
use crate::session::{parse_keys, FoldKey};
use crate::store::{FoldRow, HistoryKind, HistoryRow, Store};

/// Default cap on a gist, in o200k tokens.
pub const DEFAULT_GIST_MAX_TOKENS: u64 = 1000;

/// Where an item sits, for resolving keys (kept for every item, folded or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub seq: i64,
    pub turn: i64,
    pub kind: MarkKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkKind {
    User,
    Assistant { calls: Vec<String> },
    ToolResult { iteration: i64, call_id: String },
    Notice,
}

impl Mark {
    pub fn of(entry: &Entry) -> Mark {
        let kind = match &entry.item {
            HistoryItem::User { .. } => MarkKind::User,
            HistoryItem::Notice { .. } => MarkKind::Notice,
            HistoryItem::Assistant(m) => MarkKind::Assistant {
                calls: m.tool_calls().map(|c| c.id.clone()).collect(),
            },
            HistoryItem::ToolResult { call_id, .. } => MarkKind::ToolResult {
                iteration: entry.iteration.unwrap_or(0),
                call_id: call_id.clone(),
            },
        };
        Mark {
            seq: entry.seq,
            turn: entry.turn,
            kind,
        }
    }
}

/// One replaced range of the stored conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub first_seq: i64,
    pub last_seq: i64,
    pub label: String,
    /// The fixed text that replaces it in requests.
    pub text: String,
}

/// A fold in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Fold {
    pub id: i64,
    pub spans: Vec<Span>,
    pub absorbed_by: Option<i64>,
    pub group_id: i64,
    pub measurement: Value,
}

impl Fold {
    pub fn from_row(row: &FoldRow) -> Fold {
        Fold {
            id: row.id,
            spans: serde_json::from_str(&row.spans).unwrap_or_default(),
            absorbed_by: row.absorbed_by,
            group_id: row.group_id,
            measurement: serde_json::from_str(&row.measurement).unwrap_or(Value::Null),
        }
    }
}

/// Where the conversation stands while a fold is asked for.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// The turn in progress (none between turns).
    pub turn: Option<i64>,
    /// The iteration whose block is running.
    pub running: Option<(i64, i64)>,
}

/// Why a fold key selects nothing foldable: one line for the model, the cause and what to do
/// (a host call's refusal, never an error that ends the turn).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error(transparent)]
    Parse(#[from] crate::session::KeyError),
    #[error("unknown turn t{turn}: {}", match known {
        Some((a, b)) => format!("the conversation has turns t{a} to t{b} (turns run by `vis exec` are not part of it)"),
        None => "the conversation is empty".to_string(),
    })]
    UnknownTurn {
        turn: i64,
        /// The first and last turn of the conversation, if it has any.
        known: Option<(i64, i64)>,
    },
    #[error("t{0} is the turn now running, so it cannot be folded whole; fold its finished iterations (t{0}/i1-…) or earlier turns")]
    TurnRunning(i64),
    #[error("-t{0} includes the turn now running; fold through an earlier turn, or through a finished iteration (-t{0}/iN)")]
    ThroughRunningTurn(i64),
    #[error("t{turn}/i{first}-i{last} is reversed: write the first iteration first (t{turn}/i{last}-i{first})")]
    Reversed { turn: i64, first: i64, last: i64 },
    #[error("t{turn}/i{iteration} is the iteration now running; fold only finished work (up to t{turn}/i{})", iteration - 1)]
    IterationRunning { turn: i64, iteration: i64 },
    #[error("unknown iteration t{turn}/i{iteration}: {}", match known {
        Some((a, b)) => format!("turn {turn} has iterations i{a} to i{b}"),
        None => format!("turn {turn} has no iterations"),
    })]
    UnknownIteration {
        turn: i64,
        iteration: i64,
        /// The first and last iteration of the turn, if it has any.
        known: Option<(i64, i64)>,
    },
    #[error("t{turn}/i{iteration} belongs to the response whose call t{turn}/i{running} is running; its iterations can be folded once the response is finished")]
    ResponseRunning {
        turn: i64,
        iteration: i64,
        running: i64,
    },
    #[error("t{turn}/i{iteration} belongs to a response that has not finished")]
    ResponseUnfinished { turn: i64, iteration: i64 },
}

/// The ranges a key list selects, after widening and absorption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `(first_seq, last_seq, label)`, in order, disjoint.
    pub spans: Vec<(i64, i64, String)>,
    pub absorbs: Vec<i64>,
    /// True when an iteration range was widened to whole responses.
    pub widened: bool,
}

/// Resolves `key` against the conversation (`marks`, every stored item) and the active folds.
/// Errors are one line for the model: the cause and what to do.
pub fn select(
    key: &str,
    marks: &[Mark],
    folds: &[Fold],
    now: Now,
) -> Result<Selection, SelectError> {
    let keys = parse_keys(key)?;
    let mut spans: Vec<(i64, i64)> = Vec::new();
    let mut widened = false;
    for k in &keys {
        let (first, last, w) = resolve(k, marks, now)?;
        widened |= w;
        spans.push((first, last));
    }
    // Absorb overlapping folds until nothing more overlaps.
    let mut absorbs: Vec<i64> = Vec::new();
    loop {
        let hit: Vec<&Fold> = folds
            .iter()
            .filter(|f| f.absorbed_by.is_none() && !absorbs.contains(&f.id))
            .filter(|f| {
                f.spans.iter().any(|s| {
                    spans
                        .iter()
                        .any(|&(a, b)| s.first_seq <= b && a <= s.last_seq)
                })
            })
            .collect();
        if hit.is_empty() {
            break;
        }
        for fold in hit {
            absorbs.push(fold.id);
            spans.extend(fold.spans.iter().map(|s| (s.first_seq, s.last_seq)));
        }
    }
    // Merge overlapping spans and spans with no item between them.
    spans.sort();
    let mut merged: Vec<(i64, i64)> = Vec::new();
    for (a, b) in spans {
        match merged.last_mut() {
            Some((_, last)) if a <= *last || !marks.iter().any(|m| m.seq > *last && m.seq < a) => {
                *last = (*last).max(b)
            }
            _ => merged.push((a, b)),
        }
    }
    absorbs.sort();
    Ok(Selection {
        spans: merged
            .into_iter()
            .map(|(a, b)| (a, b, label(marks, a, b)))
            .collect(),
        absorbs,
        widened,
    })
}

/// The seq range one key selects, and whether it was widened to whole responses.
fn resolve(key: &FoldKey, marks: &[Mark], now: Now) -> Result<(i64, i64, bool), SelectError> {
    let chat_turns: Vec<i64> = {
        let mut t: Vec<i64> = marks.iter().map(|m| m.turn).collect();
        t.dedup();
        t
    };
    let turn_range = |t: i64| -> Result<(i64, i64), SelectError> {
        let seqs: Vec<i64> = marks
            .iter()
            .filter(|m| m.turn == t)
            .map(|m| m.seq)
            .collect();
        match (seqs.first(), seqs.last()) {
            (Some(a), Some(b)) => Ok((*a, *b)),
            _ => Err(SelectError::UnknownTurn {
                turn: t,
                known: chat_turns
                    .first()
                    .zip(chat_turns.last())
                    .map(|(a, b)| (*a, *b)),
            }),
        }
    };
    let running_turn = |t: i64| now.turn == Some(t);
    match *key {
        FoldKey::Turn(t) => {
            let (a, b) = turn_range(t)?;
            if running_turn(t) {
                return Err(SelectError::TurnRunning(t));
            }
            Ok((a, b, false))
        }
        FoldKey::ThroughTurn(t) => {
            let (_, b) = turn_range(t)?;
            if running_turn(t) {
                return Err(SelectError::ThroughRunningTurn(t));
            }
            Ok((marks.first().map_or(b, |m| m.seq), b, false))
        }
        FoldKey::Iterations { turn, first, last } => {
            if first > last {
                return Err(SelectError::Reversed { turn, first, last });
            }
            turn_range(turn)?;
            let (a, _) = response_of(marks, turn, first, now)?;
            let (_, b) = response_of(marks, turn, last, now)?;
            let exact = |i: i64| result_seq(marks, turn, i);
            let widened = Some(a) != assistant_seq(marks, turn, first)
                || Some(b) != exact(last)
                || (first..=last).count() != count_between(marks, a, b);
            Ok((a, b, widened))
        }
        FoldKey::ThroughIteration { turn, iteration } => {
            turn_range(turn)?;
            let (_, b) = response_of(marks, turn, iteration, now)?;
            Ok((marks.first().map_or(b, |m| m.seq), b, false))
        }
    }
}

fn result_seq(marks: &[Mark], turn: i64, iteration: i64) -> Option<i64> {
    marks
        .iter()
        .find(|m| {
            m.turn == turn
                && matches!(&m.kind, MarkKind::ToolResult { iteration: i, .. } if *i == iteration)
        })
        .map(|m| m.seq)
}

fn assistant_seq(marks: &[Mark], turn: i64, iteration: i64) -> Option<i64> {
    let call = marks.iter().find_map(|m| match &m.kind {
        MarkKind::ToolResult {
            iteration: i,
            call_id,
        } if m.turn == turn && *i == iteration => Some(call_id.clone()),
        _ => None,
    })?;
    marks
        .iter()
        .rev()
        .find(|m| {
            m.turn == turn
                && matches!(&m.kind, MarkKind::Assistant { calls } if calls.contains(&call))
        })
        .map(|m| m.seq)
}

fn count_between(marks: &[Mark], a: i64, b: i64) -> usize {
    marks
        .iter()
        .filter(|m| m.seq >= a && m.seq <= b && matches!(m.kind, MarkKind::ToolResult { .. }))
        .count()
}

/// The seq range of the response that made iteration `i` of `turn`: its assistant message
/// through the last result of its calls.
fn response_of(marks: &[Mark], turn: i64, i: i64, now: Now) -> Result<(i64, i64), SelectError> {
    if now.running == Some((turn, i)) {
        return Err(SelectError::IterationRunning { turn, iteration: i });
    }
    let Some(start) = assistant_seq(marks, turn, i) else {
        let known: Vec<i64> = marks
            .iter()
            .filter_map(|m| match m.kind {
                MarkKind::ToolResult { iteration, .. } if m.turn == turn => Some(iteration),
                _ => None,
            })
            .collect();
        return Err(SelectError::UnknownIteration {
            turn,
            iteration: i,
            known: known.first().zip(known.last()).map(|(a, b)| (*a, *b)),
        });
    };
    let calls = match marks.iter().find(|m| m.seq == start).map(|m| &m.kind) {
        Some(MarkKind::Assistant { calls }) => calls.clone(),
        _ => Vec::new(),
    };
    let results: Vec<(i64, i64)> = marks
        .iter()
        .filter_map(|m| match &m.kind {
            MarkKind::ToolResult { iteration, call_id }
                if m.seq > start && calls.contains(call_id) =>
            {
                Some((m.seq, *iteration))
            }
            _ => None,
        })
        .collect();
    if results.len() < calls.len() {
        return Err(match now.running {
            Some((t, running)) if t == turn => SelectError::ResponseRunning {
                turn,
                iteration: i,
                running,
            },
            _ => SelectError::ResponseUnfinished { turn, iteration: i },
        });
    }
    let end = results.iter().map(|(s, _)| *s).max().unwrap_or(start);
    Ok((start, end))
}

/// A readable name for a seq range: `t2`, `t2/i4-i5`, `t1-t3/i9`.
fn label(marks: &[Mark], first: i64, last: i64) -> String {
    let inside: Vec<&Mark> = marks
        .iter()
        .filter(|m| m.seq >= first && m.seq <= last)
        .collect();
    let (Some(a), Some(b)) = (inside.first(), inside.last()) else {
        return format!("items {first}-{last}");
    };
    let turn_first = |t: i64| marks.iter().find(|m| m.turn == t).map(|m| m.seq);
    let turn_last = |t: i64| marks.iter().rev().find(|m| m.turn == t).map(|m| m.seq);
    let iterations = |from: &Mark, to: &Mark| -> (Option<i64>, Option<i64>) {
        let its: Vec<i64> = inside
            .iter()
            .filter(|m| m.turn >= from.turn && m.turn <= to.turn)
            .filter_map(|m| match m.kind {
                MarkKind::ToolResult { iteration, .. } => Some(iteration),
                _ => None,
            })
            .collect();
        (its.first().copied(), its.last().copied())
    };
    let starts_turn = turn_first(a.turn) == Some(a.seq);
    let ends_turn = turn_last(b.turn) == Some(b.seq);
    let first_it = inside.iter().find_map(|m| match m.kind {
        MarkKind::ToolResult { iteration, .. } if m.turn == a.turn => Some(iteration),
        _ => None,
    });
    let last_it = inside.iter().rev().find_map(|m| match m.kind {
        MarkKind::ToolResult { iteration, .. } if m.turn == b.turn => Some(iteration),
        _ => None,
    });
    let start = if starts_turn {
        format!("t{}", a.turn)
    } else {
        format!("t{}/i{}", a.turn, first_it.unwrap_or(1))
    };
    let end = if ends_turn {
        format!("t{}", b.turn)
    } else {
        format!("t{}/i{}", b.turn, last_it.unwrap_or(1))
    };
    if a.turn == b.turn {
        if starts_turn && ends_turn {
            return format!("t{}", a.turn);
        }
        let (x, y) = iterations(a, b);
        return match (x, y) {
            (Some(x), Some(y)) if x == y => format!("t{}/i{x}", a.turn),
            (Some(x), Some(y)) => format!("t{}/i{x}-i{y}", a.turn),
            _ => start,
        };
    }
    format!("{start}-{end}")
}

/// The fixed texts of a fold's spans.
pub fn span_texts(id: i64, labels: &[String], gist: &str) -> Vec<String> {
    labels
        .iter()
        .enumerate()
        .map(|(n, label)| {
            if n == 0 {
                format!("[vis] fold {id} replaces {label}: {}", gist.trim())
            } else {
                format!(
                    "[vis] fold {id} also replaces {label} (its gist is at {})",
                    labels[0]
                )
            }
        })
        .collect()
}

/// Replaces each span's items in `view` by the span's item; returns the index of the first
/// replaced item (where the conversation's bytes change).
pub fn apply(view: &mut Vec<Entry>, fold_id: i64, spans: &[Span]) -> Option<usize> {
    let mut first_changed: Option<usize> = None;
    for span in spans {
        let covered = |e: &Entry| {
            let (lo, hi) = match &e.meta {
                Some(NoticeMeta::Fold {
                    first_seq,
                    last_seq,
                    ..
                }) => (*first_seq, *last_seq),
                _ => (e.seq, e.seq),
            };
            lo >= span.first_seq && hi <= span.last_seq
        };
        let Some(start) = view.iter().position(covered) else {
            continue;
        };
        let end = view[start..]
            .iter()
            .position(|e| !covered(e))
            .map_or(view.len(), |n| start + n);
        let turn = view[start].turn;
        let item = HistoryItem::Notice {
            text: span.text.clone(),
        };
        let tokens = super::history::estimate_item(&item);
        let entry = Entry {
            seq: span.first_seq,
            turn,
            iteration: None,
            item,
            tokens,
            meta: Some(NoticeMeta::Fold {
                id: fold_id,
                first_seq: span.first_seq,
                last_seq: span.last_seq,
            }),
        };
        view.splice(start..end, [entry]);
        first_changed = Some(first_changed.map_or(start, |f: usize| f.min(start)));
    }
    first_changed
}

/// The measurement state of a group of folds, as JSON.
pub fn pending(fold_ids: &[i64], before: &Before) -> Value {
    json!({
        "status": "pending",
        "fold_count": fold_ids.len(),
        "folds": fold_ids,
        "before_input_tokens": before.input_tokens,
        "before_provider": before.provider,
        "before_model": before.model,
        "before_turn": before.turn,
    })
}

/// The last request before a group of folds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Before {
    pub input_tokens: Option<u64>,
    pub provider: String,
    pub model: String,
    pub turn: i64,
}

impl Before {
    pub fn from_pending(v: &Value) -> Option<Before> {
        (v["status"] == "pending").then(|| Before {
            input_tokens: v["before_input_tokens"].as_u64(),
            provider: v["before_provider"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            model: v["before_model"].as_str().unwrap_or_default().to_string(),
            turn: v["before_turn"].as_i64().unwrap_or(0),
        })
    }
}

/// What the response after a group of folds says about them.
pub fn measure(
    fold_ids: &[i64],
    before: &Before,
    after_input: Option<u64>,
    provider: &str,
    model: &str,
    turn: i64,
) -> Value {
    let unavailable = |reason: &str| json!({"status": "unavailable", "fold_count": fold_ids.len(), "folds": fold_ids, "reason": reason});
    if before.provider.is_empty() {
        return unavailable(
            "no model request came before the folds, so there is nothing to compare with",
        );
    }
    if before.provider != provider || before.model != model {
        return unavailable(&format!(
            "the provider or model changed between the requests ({}/{} before, {provider}/{model} after)",
            before.provider, before.model
        ));
    }
    if before.turn != turn {
        return unavailable(
            "a new turn started in between, so the person's message is part of the change",
        );
    }
    let (Some(b), Some(a)) = (before.input_tokens, after_input) else {
        return unavailable("the provider reported no input usage for one of the two requests");
    };
    json!({
        "status": "measured",
        "fold_count": fold_ids.len(),
        "folds": fold_ids,
        "before_input_tokens": b,
        "after_input_tokens": a,
        "net_reduction_tokens": b as i64 - a as i64,
    })
}

/// The gist of an automatic fold, made from what the folded turns did: what the person asked,
/// the files read and edited, the tests run with their results, the last conclusion.
pub fn mechanical_gist(view: &[Entry], turns: &[i64]) -> String {
    let mut parts = Vec::new();
    for &t in turns {
        let items: Vec<&Entry> = view.iter().filter(|e| e.turn == t).collect();
        let mut asked = String::new();
        let mut read: Vec<String> = Vec::new();
        let mut edited: Vec<String> = Vec::new();
        let mut tests: Vec<String> = Vec::new();
        let mut conclusion = String::new();
        let mut codes: Vec<String> = Vec::new();
        for e in &items {
            match &e.item {
                HistoryItem::User { text } => asked = clip_line(text, 100),
                HistoryItem::Assistant(m) => {
                    let text = m.text();
                    if !text.trim().is_empty() {
                        conclusion = clip_line(&text, 240);
                    }
                    for call in m.tool_calls() {
                        if let Ok(code) = crate::protocol::code_of(call) {
                            codes.push(code);
                        }
                    }
                }
                HistoryItem::ToolResult { output, .. } => {
                    if let Some(code) = codes.last() {
                        if is_test_command(code) {
                            if let Some(line) = test_summary(output) {
                                tests.push(line);
                            }
                        }
                    }
                }
                HistoryItem::Notice { .. } => {}
            }
        }
        for code in &codes {
            for cap in file_calls().captures_iter(code) {
                let (func, path) = (&cap[1], cap[2].to_string());
                let list = if func == "patch" || func == "write_text" {
                    &mut edited
                } else {
                    &mut read
                };
                if !list.contains(&path) {
                    list.push(path);
                }
            }
        }
        let mut line = format!("t{t}:");
        if !asked.is_empty() {
            line.push_str(&format!(" asked \"{asked}\";"));
        }
        if !read.is_empty() {
            line.push_str(&format!(" read {};", short(&read)));
        }
        if !edited.is_empty() {
            line.push_str(&format!(" edited {};", short(&edited)));
        }
        if !tests.is_empty() {
            line.push_str(&format!(" tests: {};", tests.join(" / ")));
        }
        if !conclusion.is_empty() {
            line.push_str(&format!(" concluded \"{conclusion}\""));
        }
        parts.push(line.trim_end_matches(';').to_string());
    }
    format!(
        "(automatic fold: the context reached the model's input limit) {}",
        parts.join(" | ")
    )
}

fn file_calls() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        #[allow(clippy::expect_used)]
        Regex::new(
            r#"\b(cat|patch|read_text|write_text|Path)\(\s*(?:r|f)?["']([^"'\n]{1,200})["']"#,
        )
        .expect("a valid literal regex")
    })
}

fn is_test_command(code: &str) -> bool {
    [
        "tests.run",
        "pytest",
        "cargo test",
        "npm test",
        "go test",
        "unittest",
    ]
    .iter()
    .any(|n| code.contains(n))
}

fn test_summary(output: &str) -> Option<String> {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    #[allow(clippy::expect_used)]
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?i)(\d+ (passed|failed|errors?)|test result: \w+[^\n]*|FAILED|all tests passed)",
        )
        .expect("a valid literal regex")
    });
    output
        .lines()
        .rev()
        .find(|l| re.is_match(l))
        .map(|l| clip_line(l, 120))
}

fn clip_line(text: &str, max: usize) -> String {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::protocol::clip(&one, max)
}

fn short(items: &[String]) -> String {
    let mut out: Vec<String> = items.iter().take(6).cloned().collect();
    if items.len() > 6 {
        out.push(format!("+{} more", items.len() - 6));
    }
    out.join(", ")
}

/// The original content of the seq ranges of `selection`, from the stored rows, as text.
pub fn original_text(rows: &[HistoryRow], spans: &[(i64, i64, String)]) -> String {
    let mut out = String::new();
    for (first, last, label) in spans {
        out.push_str(&format!("== {label} ==\n"));
        for row in rows.iter().filter(|r| r.seq >= *first && r.seq <= *last) {
            match row.kind {
                HistoryKind::User => {
                    out.push_str(&format!("[t{} user]\n{}\n", row.turn, row.body.trim_end()))
                }
                HistoryKind::Notice => out.push_str(&format!(
                    "[t{} notice]\n{}\n",
                    row.turn,
                    row.body.trim_end()
                )),
                HistoryKind::Assistant => {
                    if let Ok(m) =
                        serde_json::from_str::<crate::protocol::AssistantMessage>(&row.body)
                    {
                        let text = m.text();
                        if !text.trim().is_empty() {
                            out.push_str(&format!(
                                "[t{} assistant]\n{}\n",
                                row.turn,
                                text.trim_end()
                            ));
                        }
                        for call in m.tool_calls() {
                            let code = crate::protocol::code_of(call)
                                .unwrap_or_else(|_| call.arguments.clone());
                            out.push_str(&format!(
                                "[t{} call {}]\n{}\n",
                                row.turn,
                                call.name,
                                code.trim_end()
                            ));
                        }
                    }
                }
                HistoryKind::ToolResult => out.push_str(&format!(
                    "[t{}/i{} result, {}]\n{}\n",
                    row.turn,
                    row.iteration.unwrap_or(0),
                    row.status.map_or("?", |s| s.as_str()),
                    row.body.trim_end()
                )),
            }
        }
    }
    out
}

/// Loads the folds of a session and applies the active ones to `view`.
pub fn load(
    store: &Store,
    session_id: &str,
    view: &mut Vec<Entry>,
) -> Result<Vec<Fold>, crate::store::StoreError> {
    let folds: Vec<Fold> = store
        .folds(session_id)?
        .iter()
        .map(Fold::from_row)
        .collect();
    for fold in folds.iter().filter(|f| f.absorbed_by.is_none()) {
        apply(view, fold.id, &fold.spans);
    }
    Ok(folds)
}

/// Turns that ended (any status but running) are settled.
pub fn is_settled(status: &str) -> bool {
    status != TurnStatus::Running.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks() -> Vec<Mark> {
        // t1: user, a1(c1), r1, a(final)   t2: user, a2(c2,c3), r2, r3, a3(c4), r4
        let m = |seq, turn, kind| Mark { seq, turn, kind };
        let a = |calls: &[&str]| MarkKind::Assistant {
            calls: calls.iter().map(|c| c.to_string()).collect(),
        };
        let r = |i: i64, c: &str| MarkKind::ToolResult {
            iteration: i,
            call_id: c.into(),
        };
        vec![
            m(1, 1, MarkKind::User),
            m(2, 1, a(&["c1"])),
            m(3, 1, r(1, "c1")),
            m(4, 1, a(&[])),
            m(5, 2, MarkKind::User),
            m(6, 2, a(&["c2", "c3"])),
            m(7, 2, r(1, "c2")),
            m(8, 2, r(2, "c3")),
            m(9, 2, a(&["c4"])),
            m(10, 2, r(3, "c4")),
        ]
    }

    const IDLE: Now = Now {
        turn: None,
        running: None,
    };

    #[test]
    fn keys_select_whole_responses() {
        let marks = marks();
        let s = select("t1", &marks, &[], IDLE).unwrap();
        assert_eq!(s.spans, [(1, 4, "t1".to_string())]);
        let s = select("t2/i3", &marks, &[], IDLE).unwrap();
        assert_eq!(s.spans, [(9, 10, "t2/i3".to_string())]);
        assert!(!s.widened);
        // i1 shares its response with i2: both go.
        let s = select("t2/i1", &marks, &[], IDLE).unwrap();
        assert_eq!(s.spans, [(6, 8, "t2/i1-i2".to_string())]);
        assert!(s.widened);
        let s = select("-t2/i2", &marks, &[], IDLE).unwrap();
        assert_eq!(s.spans, [(1, 8, "t1-t2/i2".to_string())]);
        // Adjacent keys merge into one span; others stay apart.
        let s = select("t1,t2", &marks, &[], IDLE).unwrap();
        assert_eq!(s.spans, [(1, 10, "t1-t2".to_string())]);
        let s = select("t1,t2/i1-i2", &marks, &[], IDLE).unwrap();
        assert_eq!(
            s.spans,
            [(1, 4, "t1".to_string()), (6, 8, "t2/i1-i2".to_string())]
        );
    }

    #[test]
    fn bad_keys_are_rejected_with_the_reason() {
        let marks = marks();
        let running = Now {
            turn: Some(2),
            running: Some((2, 3)),
        };
        let cases: &[(&str, Now, &str)] = &[
            (
                "t9",
                IDLE,
                "unknown turn t9: the conversation has turns t1 to t2",
            ),
            (
                "t2/i7",
                IDLE,
                "unknown iteration t2/i7: turn 2 has iterations i1 to i3",
            ),
            ("t2/i3-i1", IDLE, "is reversed"),
            ("t2", running, "the turn now running"),
            ("-t2", running, "includes the turn now running"),
            ("t2/i3", running, "the iteration now running"),
            ("t2/i1-i3", running, "the iteration now running"),
            ("t1,t2/x", IDLE, "bad fold key"),
        ];
        for (key, now, expected) in cases {
            let e = select(key, &marks, &[], *now).unwrap_err().to_string();
            assert!(e.contains(expected), "{key}: {e}");
        }
        // Finished work of the running turn can be folded.
        assert!(select("t2/i1-i2", &marks, &[], running).is_ok());
    }

    #[test]
    fn an_overlapping_fold_is_absorbed() {
        let marks = marks();
        let old = Fold {
            id: 1,
            spans: vec![Span {
                first_seq: 6,
                last_seq: 8,
                label: "t2/i1-i2".into(),
                text: "[vis] fold 1 replaces t2/i1-i2: old".into(),
            }],
            absorbed_by: None,
            group_id: 1,
            measurement: Value::Null,
        };
        let s = select("t2/i2-i3", &marks, std::slice::from_ref(&old), IDLE).unwrap();
        assert_eq!(s.spans, [(6, 10, "t2/i1-i3".to_string())]);
        assert_eq!(s.absorbs, [1]);
        // A fold elsewhere is left alone.
        let s = select("t1", &marks, &[old], IDLE).unwrap();
        assert!(s.absorbs.is_empty());
    }

    #[test]
    fn measurements() {
        let before = Before {
            input_tokens: Some(5000),
            provider: "openai".into(),
            model: "m".into(),
            turn: 3,
        };
        let m = measure(&[1, 2], &before, Some(3200), "openai", "m", 3);
        assert_eq!(m["status"], "measured");
        assert_eq!(m["net_reduction_tokens"], 1800);
        assert_eq!(m["fold_count"], 2);
        let m = measure(&[1], &before, Some(5600), "openai", "m", 3);
        assert_eq!(m["net_reduction_tokens"], -600);
        for (after, provider, turn, reason) in [
            (None, "openai", 3, "no input usage"),
            (Some(1), "anthropic", 3, "provider or model changed"),
            (Some(1), "openai", 4, "a new turn started"),
        ] {
            let m = measure(&[1], &before, after, provider, "m", turn);
            assert_eq!(m["status"], "unavailable");
            assert!(m["reason"].as_str().unwrap().contains(reason), "{m}");
        }
        let p = pending(&[4], &before);
        assert_eq!(Before::from_pending(&p), Some(before));
    }
}
