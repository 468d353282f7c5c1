//! One child's task: it waits for a slot, opens the child's session from its plan, runs its
//! one turn to the end and records how it ended (the parent's `Sub.wait()` sees it through
//! the state channel, the parent's turn through `child_finished`).

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::plan::{catalog_prefix, ChildPlan};
use super::{first_line, ChildState};
use crate::gateway::ChatSession;
use crate::protocol::{Event, HistoryItem, TurnStatus};
use crate::store::Store;

/// What the child's first message says besides the task.
const FRAMING: &str = "[vis] You are a sub-session: a block of another session started you with spawn() to do the task below in a fresh context. Work with python_execution as usual; your final answer (your last message without a tool call) is all the other session receives, so make it complete and self-contained.";

/// One child, from its slot to its end.
pub(super) async fn run_child(
    plan: ChildPlan,
    slots: Arc<Semaphore>,
    cancel: CancellationToken,
    state: watch::Sender<ChildState>,
) {
    crate::trace::mark(&plan.id, "child: task runs");
    let ended = tokio::select! {
        permit = slots.acquire_owned() => match permit {
            Ok(permit) => {
                crate::trace::mark(&plan.id, "child: slot taken");
                let _ = state.send(ChildState { status: "running".into(), answer: None });
                let ended = run_to_end(&plan, &cancel).await;
                drop(permit);
                ended
            }
            Err(_) => ChildState { status: "failed: the gateway is shutting down".into(), answer: None },
        },
        _ = cancel.cancelled() => ChildState { status: "cancelled".into(), answer: None },
    };
    let store = Store::open(&plan.db).ok();
    if let Some(store) = &store {
        // Refused when the parent's lease was lost: the new holder has marked the child.
        store.set_lease_fence(plan.fence.clone());
        let _ = store.set_child_state(&plan.id, &ended.status, ended.answer.as_deref());
    }
    if let Some(live) = &plan.live {
        let _ = live.send(Event::ChildFinished {
            child: plan.id.clone(),
            status: ended.status.clone(),
            answer: first_line(ended.answer.as_deref().unwrap_or_default()),
        });
    }
    let _ = state.send(ended);
    // The log is folded into the database here, once the child is done and on a blocking
    // thread: left to SQLite's automatic checkpoint, it falls on whichever commit takes the
    // log past 1,000 pages, with its fsyncs (5 ms seen on a sibling's start path).
    if let Some(store) = store {
        let _ = tokio::task::spawn_blocking(move || store.settle_log()).await;
    }
}

/// Opens the child's session, runs its one turn, stops its worker.
async fn run_to_end(plan: &ChildPlan, cancel: &CancellationToken) -> ChildState {
    let failed = |why: String| ChildState {
        status: format!("failed: {why}"),
        answer: None,
    };
    let store = match Store::open(&plan.db) {
        Ok(s) => s,
        Err(e) => return failed(e.to_string()),
    };
    crate::trace::mark(&plan.id, "child: store opened");
    // Fenced before it opens, as the parent's store is: every write of the child's turn
    // checks the parent's lease.
    store.set_lease_fence(plan.fence.clone());
    if let Err(e) = store.set_child_state(&plan.id, "running", None) {
        return failed(e.to_string());
    }
    crate::trace::mark(&plan.id, "child: state written");
    let mut session = match ChatSession::open(store, &plan.db, &plan.id, plan.settings.clone()) {
        Ok((s, _)) => s,
        Err(e) => return failed(e.to_string()),
    };
    crate::trace::mark(&plan.id, "child: session opened");
    session.set_spawn(plan.spawn.clone());
    let prefix = plan
        .prefix
        .clone()
        .or_else(|| catalog_prefix(plan, session.store()));
    if let Some(prefix) = prefix {
        if let Err(e) = session.adopt_prefix(prefix) {
            return failed(e.to_string());
        }
    }
    crate::trace::mark(&plan.id, "child: prefix adopted");
    if let Err(e) = session.settle_limits(plan.window) {
        return failed(e.to_string());
    }
    crate::trace::mark(&plan.id, "child: limits settled");
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let message = format!("{FRAMING}\n\n{}", plan.task);
    let ended = session.run_turn(&message, &events, cancel).await;
    let last_text = session.entries().iter().rev().find_map(|e| match &e.item {
        HistoryItem::Assistant(m) if !m.text().trim().is_empty() => Some(m.text()),
        _ => None,
    });
    session.shutdown().await;
    match ended {
        Err(e) => failed(e.to_string()),
        Ok(end) => match end.status {
            TurnStatus::Done => ChildState {
                status: "done".into(),
                answer: Some(end.text),
            },
            TurnStatus::IterationLimit => ChildState {
                status: "iteration limit".into(),
                answer: last_text,
            },
            TurnStatus::Interrupted if cancel.is_cancelled() => ChildState {
                status: "cancelled".into(),
                answer: last_text,
            },
            TurnStatus::Interrupted => ChildState {
                status: "interrupted".into(),
                answer: last_text,
            },
            TurnStatus::OutputLimit => ChildState {
                status: "failed: its answer was cut at the output limit".into(),
                answer: last_text,
            },
            TurnStatus::Failed | TurnStatus::Running => ChildState {
                status: format!(
                    "failed: {}",
                    end.error
                        .map(|(_, message)| message)
                        .unwrap_or_else(|| "the turn failed".into())
                ),
                answer: last_text,
            },
        },
    }
}
