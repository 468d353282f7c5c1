//! Which stored items a fold key selects (SPEC §4 "Context folding"): keys resolved against
//! the conversation by position, widened to whole responses, checked against what is running,
//! and grown over earlier folds they overlap (which they absorb). The rules are in
//! `docs/folding.md`.

use super::keys::{parse_keys, FoldKey, KeyError};
use crate::gateway::history::Entry;
use crate::protocol::{FoldSpan, HistoryItem, Measurement, TurnStatus};
use crate::store::FoldRow;

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

/// A fold in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Fold {
    pub id: i64,
    pub spans: Vec<FoldSpan>,
    pub absorbed_by: Option<i64>,
    pub group_id: i64,
    pub measurement: Measurement,
}

impl Fold {
    pub fn from_row(row: &FoldRow) -> Fold {
        Fold {
            id: row.id,
            spans: row.spans.clone(),
            absorbed_by: row.absorbed_by,
            group_id: row.group_id,
            measurement: row.measurement.clone(),
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
    Parse(#[from] KeyError),
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
            spans: vec![FoldSpan {
                first_seq: 6,
                last_seq: 8,
                label: "t2/i1-i2".into(),
                text: "[vis] fold 1 replaces t2/i1-i2: old".into(),
            }],
            absorbed_by: None,
            group_id: 1,
            measurement: Measurement::Unavailable {
                fold_count: 1,
                folds: vec![1],
                reason: "test".into(),
            },
        };
        let s = select("t2/i2-i3", &marks, std::slice::from_ref(&old), IDLE).unwrap();
        assert_eq!(s.spans, [(6, 10, "t2/i1-i3".to_string())]);
        assert_eq!(s.absorbs, [1]);
        // A fold elsewhere is left alone.
        let s = select("t1", &marks, &[old], IDLE).unwrap();
        assert!(s.absorbs.is_empty());
    }
}
