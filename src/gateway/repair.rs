//! Turns a stopped gateway left running, repaired when the session opens again: a chat
//! turn's unanswered calls are recorded as interrupted by the restart (the model is told so in
//! their tool results), a turn cut off mid-response gets a notice, and every such turn is
//! closed as interrupted.

use crate::protocol::{
    code_of, HistoryItem, IterationRecord, IterationStatus, Status, TurnKind, TurnStatus,
};
use crate::store::{now_millis, HistoryKind, NewHistoryItem, Store, ToolAnswer, TurnRange};

use super::history::{self, Entry};
use super::GatewayError;

pub fn repair_running_turns(
    store: &mut Store,
    id: &str,
    entries: &mut Vec<Entry>,
) -> Result<Vec<String>, GatewayError> {
    let mut notes = Vec::new();
    for (turn, kind) in store.running_turns(id)? {
        if kind == TurnKind::Chat {
            let calls = history::unanswered_calls(entries, turn);
            if calls.is_empty() {
                let text = format!("[vis] turn {turn} was interrupted: the gateway stopped before the model finished answering, and the unfinished answer was discarded.");
                let item = HistoryItem::Notice { text: text.clone() };
                let tokens = history::estimate_item(&item);
                let seq = store.append_history(
                    id,
                    &NewHistoryItem {
                        turn,
                        kind: HistoryKind::Notice,
                        body: &text,
                        tokens: tokens as i64,
                        meta: None,
                    },
                )?;
                entries.push(Entry::new(seq, turn, None, item, tokens));
            }
            // The block that was running (recorded before the worker saw it) is the first
            // unanswered call's.
            let mut running: Vec<(i64, String)> = store
                .iterations_in(
                    id,
                    TurnRange {
                        first: turn,
                        last: turn,
                    },
                )?
                .into_iter()
                .filter(|i| i.status == IterationStatus::Running)
                .map(|i| (i.iteration, i.code))
                .collect();
            running.reverse();
            for (k, call) in calls.iter().enumerate() {
                let (iteration, code) = match running.pop() {
                    Some(begun) => begun,
                    None => (
                        store.next_iteration(id, turn)?,
                        code_of(call).unwrap_or_else(|_| call.arguments.clone()),
                    ),
                };
                let output = if k == 0 {
                    "[vis] interrupted by a restart of the gateway: this block was running (or about to run) when the gateway stopped. Its effects on files are unknown; variables are lost; definitions are restored in the new worker.".to_string()
                } else {
                    "[vis] not run: the gateway stopped before this call ran.".to_string()
                };
                let item = HistoryItem::ToolResult {
                    call_id: call.id.clone(),
                    output: output.clone(),
                    is_error: true,
                    images: Vec::new(),
                };
                let tokens = history::estimate_item(&item);
                let seq = store.finish_iteration(
                    &IterationRecord::not_run(
                        id,
                        turn,
                        iteration,
                        &code,
                        &output,
                        Status::Interrupted.into(),
                        now_millis(),
                    ),
                    Some(&ToolAnswer {
                        call_id: call.id.clone(),
                        tokens: tokens as i64,
                        images: Vec::new(),
                    }),
                )?;
                entries.push(Entry::new(
                    seq.unwrap_or(0),
                    turn,
                    Some(iteration),
                    item,
                    tokens,
                ));
            }
            notes.push(format!(
                "[vis] turn {turn} was interrupted by a restart of the gateway{}",
                match calls.len() {
                    0 => ": its unfinished answer was discarded".to_string(),
                    1 => "; its running block is recorded as interrupted".to_string(),
                    n => format!("; its {n} unfinished calls are recorded as interrupted"),
                }
            ));
            // A block still marked running that answers no call the model made ends
            // interrupted too.
            for (iteration, code) in running {
                let output = "[vis] interrupted by a restart of the gateway.";
                store.finish_iteration(
                    &IterationRecord::not_run(
                        id,
                        turn,
                        iteration,
                        &code,
                        output,
                        Status::Interrupted.into(),
                        now_millis(),
                    ),
                    None,
                )?;
            }
        }
        store.end_turn(id, turn, TurnStatus::Interrupted)?;
    }
    Ok(notes)
}
