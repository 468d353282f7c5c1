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

/// Replaces each span's items in `view` by the span's item; returns the index of the first
/// replaced item (where the conversation's bytes change).
pub fn apply(view: &mut Vec<Entry>, fold_id: i64, spans: &[FoldSpan]) -> Option<usize> {
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
        let tokens = crate::gateway::history::estimate_item(&item);
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
