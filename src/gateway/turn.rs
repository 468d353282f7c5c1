//! One turn of the loop (SPEC §9): the person's message, then model requests and the
//! `python_execution` calls they make, in order, until the model answers without a call.
//!
//! Each step is written to the store as it completes: the person's message, each response,
//! each iteration together with its tool result (the block runner records it). A request that
//! fails or is interrupted leaves nothing half-recorded (its partial answer is discarded), and
//! a turn that a stopped gateway left running is repaired when the session is opened again
//! (`repair`).

use tokio_util::sync::CancellationToken;

use super::calls::ConversationCalls;
use super::fold::{self, LimitError};
use super::request::{
    cut_notice, output_limit_reason, record_request, request, Outcome, EMPTY_ANSWER,
};
use super::{ChatSession, GatewayError};
use crate::protocol::{
    code_of, AssistantMessage, ContentBlock, Event, HistoryItem, IterationStatus, Status, ToolCall,
    TurnKind, TurnStatus,
};
use crate::runtime::BlockSpec;
use crate::store::{now_millis, ToolAnswer};

/// Where a turn's events go (a closed receiver is fine: events are for display only).
pub type EventSink = tokio::sync::mpsc::UnboundedSender<Event>;

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    pub turn: i64,
    pub status: TurnStatus,
    /// The model's final answer (empty unless the turn is `Done`).
    pub text: String,
    /// `(kind, message)` of the error that ended the turn.
    pub error: Option<(String, String)>,
}

/// How a direct block (`run_exec`) ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExecEnd {
    pub turn: i64,
    pub status: IterationStatus,
    pub output: String,
}

/// The turn of `session` for the person's message `text`.
pub(super) async fn run(
    session: &mut ChatSession,
    text: &str,
    events: &EventSink,
    stop: &CancellationToken,
) -> Result<TurnEnd, GatewayError> {
    if text.trim().is_empty() {
        return Err(GatewayError::EmptyMessage);
    }
    // The first turn of a session start asks the server for its context window while the
    // worker starts (a short timeout; a server that tells nothing leaves the guess).
    let question = session.window_question();
    let asking = async move {
        match question {
            Some(settings) => crate::providers::context_window(&settings).await,
            None => None,
        }
    };
    let (prefix, window) = tokio::join!(session.ensure_prefix(), asking);
    prefix?;
    session.settle_limits(window)?;
    crate::trace::mark(&session.id, "turn: prefix ready");
    session.brief_children();
    let id = session.id.clone();
    let turn = session
        .runner
        .store_mut()
        .begin_turn(&id, TurnKind::Chat, Some(text))?;
    session.conversation.set_turn(Some(turn));
    session.runner.prepare_checkpoints(turn);
    crate::trace::mark(&id, "turn: begun");
    let _ = events.send(Event::TurnStarted { turn });
    session.conversation.append(
        session.runner.store_mut(),
        &id,
        turn,
        HistoryItem::User { text: text.into() },
        None,
    )?;
    crate::trace::mark(&id, "turn: message stored");
    let mut iterations = 0u32;
    // A resumed session's worker starts while its first request streams.
    let mut warm_up = !session.runner.supervisor().is_running();
    for n in 1u32.. {
        if stop.is_cancelled() {
            return interrupted(session, turn, events);
        }
        if session.drain.is_cancelled() {
            let message = "the gateway is shutting down; the turn stopped before its next model request (resume the session to continue)".to_string();
            return failed(
                session,
                turn,
                TurnStatus::Interrupted,
                "shutdown",
                message,
                events,
            );
        }
        session.sync_mcp().await?;
        // Lets the worker channel's reader apply job reports that came while nothing ran
        // (on a current-thread runtime it runs only when this task yields).
        tokio::task::yield_now().await;
        for notice in session.append_updates(turn)? {
            let first = notice.lines().next().unwrap_or_default().to_string();
            let _ = events.send(Event::Notice { text: first });
        }
        let limits = session.limits();
        let limited = fold::enforce_limit(
            &mut session.conversation,
            session.runner.store_mut(),
            &id,
            limits,
            &session.settings.folding,
        );
        match limited {
            Ok(Some(receipt)) => {
                let _ = events.send(Event::Notice {
                    text: fold::receipt_line(&receipt),
                });
            }
            Ok(None) => {}
            Err(e @ (LimitError::OverLimit { .. } | LimitError::Fold(_))) => {
                let message = e.to_string();
                return failed(
                    session,
                    turn,
                    TurnStatus::Failed,
                    "context_limit",
                    message,
                    events,
                );
            }
        }
        crate::trace::mark(&id, "turn: updates, limits");
        let body = session.next_request_body()?;
        let estimate = session.conversation.estimate();
        crate::trace::mark(&id, "turn: body built");
        let _ = events.send(Event::RequestStarted { turn, n });
        let started_at = now_millis();
        let (answer, clock) = request(session, body, events, stop, warm_up).await;
        warm_up = false;
        let response = match answer {
            Some(Ok(response)) => response,
            // No answer: the request failed or was interrupted; its record says which.
            not_answered => {
                let error = not_answered.and_then(Result::err);
                let (kind, message) = match &error {
                    Some(e) => (e.kind(), e.to_string()),
                    None => ("interrupted", "the request was interrupted".to_string()),
                };
                record_request(
                    session,
                    turn,
                    started_at,
                    estimate,
                    Outcome::Failed {
                        clock,
                        kind,
                        message: message.clone(),
                    },
                )?;
                return match error {
                    Some(_) => failed(session, turn, TurnStatus::Failed, kind, message, events),
                    None => interrupted(session, turn, events),
                };
            }
        };
        let cost = record_request(
            session,
            turn,
            started_at,
            estimate,
            Outcome::Answered(&response),
        )?;
        let _ = events.send(Event::ResponseFinished {
            turn,
            n,
            usage: response.usage,
            estimate_tokens: estimate,
            latency_ms: response.latency.as_millis() as u64,
            ttft_ms: response.ttft.map(|d| d.as_millis() as u64),
            retries: response.retries,
            cost,
        });
        let message = with_call_ids(response.message, turn, n);
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        let final_text = message.text();
        session.conversation.append(
            session.runner.store_mut(),
            &id,
            turn,
            HistoryItem::Assistant(message),
            None,
        )?;
        let cut = response
            .stop_reason
            .as_deref()
            .and_then(output_limit_reason);
        if let Some(reason) = cut {
            // The last call of a cut answer may be cut too: none of them runs, and the model
            // is told so in their results.
            for call in &calls {
                let iteration = session.runner.store().next_iteration(&id, turn)?;
                let note = format!(
                    "[vis] not run: the answer was cut at the output limit ({reason}) before it was complete; the person can let you continue with a new message."
                );
                record_not_run(
                    session,
                    turn,
                    iteration,
                    call,
                    &call.arguments,
                    note,
                    IterationStatus::Rejected,
                    events,
                )?;
            }
            let _ = events.send(Event::Notice {
                text: cut_notice(session, reason),
            });
            return end(
                session,
                turn,
                TurnStatus::OutputLimit,
                final_text,
                None,
                events,
            );
        }
        if calls.is_empty() {
            if final_text.trim().is_empty() {
                let _ = events.send(Event::Notice {
                    text: EMPTY_ANSWER.into(),
                });
            }
            return end(session, turn, TurnStatus::Done, final_text, None, events);
        }
        let mut limit_hit = false;
        for call in calls {
            let iteration = session.runner.store().next_iteration(&id, turn)?;
            let not_run = if iterations >= session.settings.max_iterations {
                limit_hit = true;
                Some((
                    call.arguments.clone(),
                    format!(
                        "[vis] not run: this turn reached its limit of {} iterations; the person can continue it with a new message.",
                        session.settings.max_iterations
                    ),
                    IterationStatus::Rejected,
                ))
            } else if stop.is_cancelled() {
                Some((
                    code_of(&call).unwrap_or_else(|_| call.arguments.clone()),
                    "[vis] not run: the person interrupted the turn.".into(),
                    Status::Interrupted.into(),
                ))
            } else {
                iterations += 1;
                match code_of(&call) {
                    Err(correction) => Some((
                        call.arguments.clone(),
                        correction.to_string(),
                        IterationStatus::Rejected,
                    )),
                    Ok(code) => {
                        if let Some(failure) =
                            run_call(session, turn, iteration, &call, code, events, stop).await?
                        {
                            let message = format!("the block could not run: {failure}");
                            return failed(
                                session,
                                turn,
                                TurnStatus::Failed,
                                "runtime",
                                message,
                                events,
                            );
                        }
                        None
                    }
                }
            };
            if let Some((code, output, status)) = not_run {
                record_not_run(
                    session, turn, iteration, &call, &code, output, status, events,
                )?;
            }
        }
        if stop.is_cancelled() {
            return interrupted(session, turn, events);
        }
        if limit_hit {
            let note = format!(
                "The turn stopped after {} iterations (the limit per turn); send a message to let the model continue.",
                session.settings.max_iterations
            );
            return end(
                session,
                turn,
                TurnStatus::IterationLimit,
                note,
                None,
                events,
            );
        }
    }
    // `1u32..` ends only after four billion requests.
    Err(GatewayError::CorruptHistory {
        seq: turn,
        detail: "the turn ran out of request numbers".into(),
    })
}

/// Runs the block of `call` in the session's runner; the runner records it with its tool
/// result. `Some` when the runtime itself failed (the turn ends).
async fn run_call(
    session: &mut ChatSession,
    turn: i64,
    iteration: i64,
    call: &ToolCall,
    code: String,
    events: &EventSink,
    stop: &CancellationToken,
) -> Result<Option<crate::runtime::RuntimeError>, GatewayError> {
    let _ = events.send(Event::BlockStarted {
        turn,
        iteration,
        code: code.clone(),
    });
    let limits = session.limits();
    let spec = BlockSpec {
        turn,
        iteration,
        code,
        utilization: fold::utilization(&session.conversation, limits),
        live: Some(events.clone()),
    };
    session.conversation.set_running(Some((turn, iteration)));
    let id = session.id.clone();
    let provider = &session.settings.provider;
    let not_sent_to = (!provider.accepts_images()).then(|| provider.model.clone());
    let mut calls = ConversationCalls::new(
        &mut session.conversation,
        &id,
        &session.settings.folding,
        limits,
        Some(call.id.clone()),
    );
    calls.images_not_sent_to = not_sent_to.clone();
    let ran = session
        .runner
        .run_block(spec, &mut calls, stop.child_token())
        .await;
    session.conversation.set_running(None);
    let mut ran = ran?;
    if let Some(e) = ran.unrecorded {
        return Err(e.into());
    }
    // As the stored result has them (`calls::note_not_sent`).
    super::calls::note_not_sent(&mut ran.images, not_sent_to.as_deref());
    push_result(
        session,
        turn,
        iteration,
        call,
        ran.seq,
        &ran.output,
        ran.status,
        ran.images.clone(),
    );
    let _ = events.send(Event::BlockFinished {
        turn,
        iteration,
        status: ran.status,
        output: ran.output,
        wall_ms: ran.wall.as_millis() as u64,
        code: None,
        images: ran.images.iter().map(|i| i.meta.clone()).collect(),
    });
    // The person sees what the model was told instead of an image it cannot take.
    for image in &ran.images {
        if let Some(note) = &image.meta.not_sent {
            let _ = events.send(Event::Notice { text: note.clone() });
        }
    }
    Ok(ran.failure)
}

/// Records a call that did not run and the note the model gets instead of a result.
#[allow(clippy::too_many_arguments)]
fn record_not_run(
    session: &mut ChatSession,
    turn: i64,
    iteration: i64,
    call: &ToolCall,
    code: &str,
    output: String,
    status: IterationStatus,
    events: &EventSink,
) -> Result<(), GatewayError> {
    let item = HistoryItem::ToolResult {
        call_id: call.id.clone(),
        output: output.clone(),
        is_error: !status.is_ok(),
        images: Vec::new(),
    };
    let answer = ToolAnswer {
        call_id: call.id.clone(),
        tokens: super::history::estimate_item(&item) as i64,
        images: Vec::new(),
    };
    let seq =
        session
            .runner
            .record_not_run(turn, iteration, code, &output, status, Some(&answer))?;
    push_result(
        session,
        turn,
        iteration,
        call,
        seq,
        &output,
        status,
        Vec::new(),
    );
    let _ = events.send(Event::BlockFinished {
        turn,
        iteration,
        status,
        output,
        wall_ms: 0,
        code: Some(code.to_string()),
        images: Vec::new(),
    });
    Ok(())
}

/// Appends a recorded tool result to the conversation.
#[allow(clippy::too_many_arguments)]
fn push_result(
    session: &mut ChatSession,
    turn: i64,
    iteration: i64,
    call: &ToolCall,
    seq: Option<i64>,
    output: &str,
    status: IterationStatus,
    images: Vec<crate::protocol::ShownImage>,
) {
    let item = HistoryItem::ToolResult {
        call_id: call.id.clone(),
        output: output.to_string(),
        is_error: !status.is_ok(),
        images,
    };
    let tokens = super::history::estimate_item(&item);
    let entry = super::history::Entry::new(seq.unwrap_or(0), turn, Some(iteration), item, tokens);
    session.conversation.push(entry);
}

/// Ends the turn with an error that is also sent as an event.
fn failed(
    session: &mut ChatSession,
    turn: i64,
    status: TurnStatus,
    kind: &str,
    message: String,
    events: &EventSink,
) -> Result<TurnEnd, GatewayError> {
    let _ = events.send(Event::Error {
        kind: kind.to_string(),
        message: message.clone(),
    });
    end(
        session,
        turn,
        status,
        String::new(),
        Some((kind.to_string(), message)),
        events,
    )
}

/// Ends the turn as interrupted (nothing to say beyond the status).
fn interrupted(
    session: &mut ChatSession,
    turn: i64,
    events: &EventSink,
) -> Result<TurnEnd, GatewayError> {
    end(
        session,
        turn,
        TurnStatus::Interrupted,
        String::new(),
        None,
        events,
    )
}

fn end(
    session: &mut ChatSession,
    turn: i64,
    status: TurnStatus,
    text: String,
    error: Option<(String, String)>,
    events: &EventSink,
) -> Result<TurnEnd, GatewayError> {
    session.runner.end_turn(turn, status)?;
    session.conversation.set_turn(None);
    let _ = events.send(Event::TurnFinished {
        turn,
        status,
        text: text.clone(),
    });
    Ok(TurnEnd {
        turn,
        status,
        text,
        error,
    })
}

/// Gives every tool call an id (some local servers send none), unique within the turn.
fn with_call_ids(mut message: AssistantMessage, turn: i64, n: u32) -> AssistantMessage {
    let mut k = 0;
    for block in &mut message.blocks {
        if let ContentBlock::ToolCall(call) = block {
            k += 1;
            if call.id.trim().is_empty() {
                call.id = format!("call_t{turn}_r{n}_{k}");
            }
        }
    }
    message
}
