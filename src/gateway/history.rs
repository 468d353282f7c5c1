//! The conversation in memory: the stored history as provider-neutral items, each with its
//! token estimate, and the repair of turns a stopped gateway left running.

use serde_json::Value;

use super::GatewayError;
use std::collections::HashMap;
use std::sync::Arc;

use crate::protocol::{AssistantMessage, HistoryItem, ShownImage};
use crate::store::{HistoryKind, HistoryRow, Store};

/// One conversation item and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub seq: i64,
    pub turn: i64,
    /// The iteration a tool result answers.
    pub iteration: Option<i64>,
    pub item: HistoryItem,
    /// o200k estimate of what the item adds to a request (counted once, when it was made).
    pub tokens: u64,
    /// Notices: what they bring the conversation to (see [`NoticeMeta`]).
    pub meta: Option<NoticeMeta>,
}

impl Entry {
    /// An item of the conversation that is not a notice; `tokens` is its estimate (see
    /// [`estimate_item`]), counted once by the caller, which records it too.
    pub fn new(
        seq: i64,
        turn: i64,
        iteration: Option<i64>,
        item: HistoryItem,
        tokens: u64,
    ) -> Entry {
        Entry {
            seq,
            turn,
            iteration,
            item,
            tokens,
            meta: None,
        }
    }
}

/// What a notice updates, so the state the conversation shows survives a restart.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeMeta {
    CatalogHash(String),
    AgentsMd(Option<String>),
    /// The item that stands for folded items (made in memory, never stored as history).
    Fold {
        id: i64,
        first_seq: i64,
        last_seq: i64,
    },
}

/// Rebuilds the items from stored rows, *without* the bytes of the images they show: their
/// data stays empty until [`load_images`] reads it for the items a request will carry (the
/// caller applies folds first, so a folded image is never read).
pub fn from_rows(rows: Vec<HistoryRow>) -> Result<Vec<Entry>, GatewayError> {
    rows.into_iter().map(from_row).collect()
}

/// Reads the bytes of the images `entries` show (each once, shared by the items that show it).
/// Returns how many images it read from the store.
pub fn load_images(
    store: &Store,
    session_id: &str,
    entries: &mut [Entry],
) -> Result<usize, GatewayError> {
    let mut loaded: HashMap<String, Arc<[u8]>> = HashMap::new();
    for entry in entries.iter_mut() {
        let HistoryItem::ToolResult { images, .. } = &mut entry.item else {
            continue;
        };
        for image in images.iter_mut() {
            if let Some(data) = loaded.get(&image.meta.hash) {
                image.data = data.clone();
                continue;
            }
            let (_, bytes) = store.image(session_id, &image.meta.hash)?.ok_or_else(|| {
                GatewayError::CorruptHistory {
                    seq: entry.seq,
                    detail: format!("image {} is not in the store", image.meta.hash),
                }
            })?;
            let data: Arc<[u8]> = bytes.into();
            loaded.insert(image.meta.hash.clone(), data.clone());
            image.data = data;
        }
    }
    Ok(loaded.len())
}

fn from_row(row: HistoryRow) -> Result<Entry, GatewayError> {
    let corrupt = |what: String| GatewayError::CorruptHistory {
        seq: row.seq,
        detail: what,
    };
    let item = match row.kind {
        HistoryKind::User => HistoryItem::User {
            text: row.body.clone(),
        },
        HistoryKind::Notice => HistoryItem::Notice {
            text: row.body.clone(),
        },
        HistoryKind::Assistant => {
            let message: AssistantMessage = serde_json::from_str(&row.body)
                .map_err(|e| corrupt(format!("assistant message is not readable: {e}")))?;
            HistoryItem::Assistant(message)
        }
        HistoryKind::ToolResult => HistoryItem::ToolResult {
            call_id: row
                .call_id
                .clone()
                .ok_or_else(|| corrupt("tool result without a call id".into()))?,
            output: row.body.clone(),
            is_error: !row.status.is_some_and(|s| s.is_ok()),
            images: row
                .images
                .iter()
                .map(|meta| ShownImage {
                    meta: meta.clone(),
                    data: Arc::from([]),
                })
                .collect(),
        },
    };
    let meta = match &row.meta {
        None => None,
        Some(text) => Some(
            serde_json::from_str::<NoticeMeta>(text)
                .map_err(|e| corrupt(format!("notice metadata is not readable: {e}")))?,
        ),
    };
    Ok(Entry {
        seq: row.seq,
        turn: row.turn,
        iteration: row.iteration,
        item,
        tokens: row.tokens.max(0) as u64,
        meta,
    })
}

/// Serializes notice metadata for the store.
pub fn meta_json(meta: &NoticeMeta) -> String {
    serde_json::to_string(meta).unwrap_or_else(|_| Value::Null.to_string())
}

/// The o200k estimate of an item: its text, a tool call's arguments, plus a few tokens of
/// message framing.
pub fn estimate_item(item: &HistoryItem) -> u64 {
    const FRAMING: u64 = 4;
    let count = |s: &str| crate::catalog::count_tokens(s).unwrap_or(s.len() / 4) as u64;
    FRAMING
        + match item {
            HistoryItem::User { text } | HistoryItem::Notice { text } => count(text),
            HistoryItem::ToolResult { output, images, .. } => {
                count(output)
                    + images
                        .iter()
                        .map(|i| i.meta.estimated_tokens())
                        .sum::<u64>()
            }
            HistoryItem::Assistant(message) => {
                let mut n = count(&message.text());
                for call in message.tool_calls() {
                    n += count(&call.arguments) + count(&call.name) + 4;
                }
                n
            }
        }
}

/// Tool calls of the last assistant message of `turn` that have no result yet.
pub fn unanswered_calls(entries: &[Entry], turn: i64) -> Vec<crate::protocol::ToolCall> {
    let Some(last) = entries
        .iter()
        .rposition(|e| e.turn == turn && matches!(e.item, HistoryItem::Assistant(_)))
    else {
        return Vec::new();
    };
    let HistoryItem::Assistant(message) = &entries[last].item else {
        return Vec::new();
    };
    let answered: Vec<&str> = entries[last + 1..]
        .iter()
        .filter_map(|e| match &e.item {
            HistoryItem::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    message
        .tool_calls()
        .filter(|c| !answered.contains(&c.id.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ContentBlock, ToolCall};

    #[test]
    fn unanswered_calls_are_the_last_messages_calls_without_results() {
        let call = |id: &str| {
            ContentBlock::ToolCall(ToolCall {
                id: id.into(),
                name: "python_execution".into(),
                arguments: "{}".into(),
            })
        };
        let entry = |seq, item| Entry {
            seq,
            turn: 2,
            iteration: None,
            item,
            tokens: 1,
            meta: None,
        };
        let entries = vec![
            entry(1, HistoryItem::User { text: "go".into() }),
            entry(
                2,
                HistoryItem::Assistant(AssistantMessage {
                    blocks: vec![call("a"), call("b"), call("c")],
                    reasoning: None,
                }),
            ),
            entry(
                3,
                HistoryItem::ToolResult {
                    call_id: "a".into(),
                    output: "ok".into(),
                    is_error: false,
                    images: Vec::new(),
                },
            ),
        ];
        let ids: Vec<String> = unanswered_calls(&entries, 2)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, ["b", "c"]);
        assert!(unanswered_calls(&entries, 1).is_empty());
        assert!(estimate_item(&entries[0].item) >= 5);
    }
}
