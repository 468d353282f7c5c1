//! What a fold does to the conversation requests carry: each span's items replaced by one
//! item at its first position, whose text is fixed when the fold is made.

use crate::gateway::history::{Entry, NoticeMeta};
use crate::protocol::{FoldSpan, HistoryItem};
use crate::store::{Store, StoreError};

use super::select::Fold;

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

/// Whether `entry` lies inside `span`: an item by its own position, an earlier fold's item by
/// the range it replaces.
fn covered(entry: &Entry, span: &FoldSpan) -> bool {
    let (lo, hi) = match &entry.meta {
        Some(NoticeMeta::Fold {
            first_seq,
            last_seq,
            ..
        }) => (*first_seq, *last_seq),
        _ => (entry.seq, entry.seq),
    };
    lo >= span.first_seq && hi <= span.last_seq
}

/// The item that takes a span's place.
fn span_item(span: &FoldSpan) -> (HistoryItem, u64) {
    let item = HistoryItem::Notice {
        text: span.text.clone(),
    };
    let tokens = crate::gateway::history::estimate_item(&item);
    (item, tokens)
}

/// What [`apply`] would do to `view`, worked out without changing (or copying) it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effect {
    /// The index of the first replaced item (where the conversation's bytes change).
    pub first_changed: usize,
    /// Tokens of the items the spans replace.
    pub removed_tokens: u64,
    /// Tokens of the items that take their place.
    pub fold_tokens: u64,
    /// Tokens from `first_changed` to the end once the fold is applied (what the next
    /// request writes to the cache again).
    pub tail_tokens: u64,
}

/// The items of `view` that `span` covers: one run, as a fold's spans are contiguous in the
/// conversation (`None` when it covers none).
fn covered_range(view: &[Entry], span: &FoldSpan) -> Option<std::ops::Range<usize>> {
    let start = view.iter().position(|e| covered(e, span))?;
    let end = view[start..]
        .iter()
        .position(|e| !covered(e, span))
        .map_or(view.len(), |n| start + n);
    Some(start..end)
}

/// The effect of applying `spans` to `view`; `None` when they cover nothing. The spans of
/// one fold are disjoint, so each covers the same items before and after the others are
/// applied, and the first change is at the smallest start either way.
pub fn effect(view: &[Entry], spans: &[FoldSpan]) -> Option<Effect> {
    let mut first_changed: Option<usize> = None;
    let (mut removed_tokens, mut fold_tokens) = (0u64, 0u64);
    for span in spans {
        let Some(std::ops::Range { start, end }) = covered_range(view, span) else {
            continue;
        };
        removed_tokens += view[start..end].iter().map(|e| e.tokens).sum::<u64>();
        fold_tokens += span_item(span).1;
        first_changed = Some(first_changed.map_or(start, |f: usize| f.min(start)));
    }
    let first_changed = first_changed?;
    let tail_before: u64 = view[first_changed..].iter().map(|e| e.tokens).sum();
    Some(Effect {
        first_changed,
        removed_tokens,
        fold_tokens,
        tail_tokens: tail_before - removed_tokens + fold_tokens,
    })
}

/// Tokens of the conversation once `spans` are applied, from `first_changed` up to the item
/// at `seq` (exclusive): what a fold re-caches beyond a reset that starts at `seq`.
pub fn tokens_before_seq(
    view: &[Entry],
    spans: &[FoldSpan],
    first_changed: usize,
    seq: i64,
) -> u64 {
    let kept: u64 = view
        .get(first_changed..)
        .unwrap_or_default()
        .iter()
        .filter(|e| e.seq < seq && !spans.iter().any(|s| covered(e, s)))
        .map(|e| e.tokens)
        .sum();
    let items: u64 = spans
        .iter()
        .filter(|s| s.first_seq < seq && view.iter().any(|e| covered(e, s)))
        .map(|s| span_item(s).1)
        .sum();
    kept + items
}

/// Replaces each span's items in `view` by the span's item; returns the index of the first
/// replaced item (where the conversation's bytes change).
pub fn apply(view: &mut Vec<Entry>, fold_id: i64, spans: &[FoldSpan]) -> Option<usize> {
    let mut first_changed: Option<usize> = None;
    for span in spans {
        let Some(std::ops::Range { start, end }) = covered_range(view, span) else {
            continue;
        };
        let turn = view[start].turn;
        let (item, tokens) = span_item(span);
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

/// Loads the folds of a session and applies the active ones to `view`.
pub fn load(
    store: &Store,
    session_id: &str,
    view: &mut Vec<Entry>,
) -> Result<Vec<Fold>, StoreError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, tokens: u64) -> Entry {
        Entry::new(
            seq,
            1,
            None,
            HistoryItem::Notice {
                text: format!("item {seq}"),
            },
            tokens,
        )
    }

    fn span(first_seq: i64, last_seq: i64) -> FoldSpan {
        FoldSpan {
            first_seq,
            last_seq,
            label: format!("s{first_seq}"),
            text: format!("[vis] fold 9 replaces s{first_seq}"),
        }
    }

    #[test]
    fn the_effect_is_what_applying_does() {
        let view: Vec<Entry> = (1..=10).map(|seq| entry(seq, seq as u64 * 10)).collect();
        let total = |v: &[Entry]| v.iter().map(|e| e.tokens).sum::<u64>();
        for spans in [
            vec![span(3, 5)],
            vec![span(7, 8), span(2, 3)],
            vec![span(1, 10)],
            vec![span(10, 10), span(4, 6)],
        ] {
            let predicted = effect(&view, &spans).unwrap();
            let mut applied = view.clone();
            let first = apply(&mut applied, 9, &spans).unwrap();
            assert_eq!(predicted.first_changed, first, "{spans:?}");
            assert_eq!(
                total(&view) - predicted.removed_tokens + predicted.fold_tokens,
                total(&applied),
                "{spans:?}"
            );
            assert_eq!(predicted.tail_tokens, total(&applied[first..]), "{spans:?}");
        }
        assert_eq!(effect(&view, &[span(20, 30)]), None);
    }

    #[test]
    fn a_fold_behind_a_reset_adds_only_what_lies_before_it() {
        let view: Vec<Entry> = (1..=10).map(|seq| entry(seq, seq as u64 * 10)).collect();
        let item = span_item(&span(2, 3)).1;
        // A reset from item 6 on: folding 2-3 adds its item and items 4 and 5.
        let first = effect(&view, &[span(2, 3)]).unwrap().first_changed;
        assert_eq!(
            tokens_before_seq(&view, &[span(2, 3)], first, 6),
            item + 40 + 50
        );
        // Folding 7-8 behind a reset from item 4 adds nothing.
        let first = effect(&view, &[span(7, 8)]).unwrap().first_changed;
        assert_eq!(tokens_before_seq(&view, &[span(7, 8)], first, 4), 0);
        // Without a reset further on, it is the whole tail.
        let e = effect(&view, &[span(2, 3)]).unwrap();
        assert_eq!(
            tokens_before_seq(&view, &[span(2, 3)], e.first_changed, i64::MAX),
            e.tail_tokens
        );
    }
}
