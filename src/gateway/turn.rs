//! One turn of the loop (SPEC §9): the person's message, then model requests and the
//! `python_execution` calls they make, in order, until the model answers without a call.
//!
//! Each step is written to the store as it completes: the person's message, each response,
//! each iteration together with its tool result. A request that fails or is interrupted
//! leaves nothing half-recorded (its partial answer is discarded), and a turn that a stopped
//! gateway left running is repaired when the session is opened again.

use std::path::PathBuf;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::folding::{self, CallBudget, FoldCtx};
use super::folds;
use super::history::{self, Entry};
use super::{to_bytes, ChatSession, GatewayError};
use crate::protocol::code_of;
use crate::protocol::{
    AssistantMessage, Block, ContentBlock, Event, HistoryItem, IterationStatus, Status,
    StreamEvent, ToolCall, TurnKind, TurnStatus,
};
use crate::providers::{ModelResponse, ProviderError};
use crate::runtime::{CallAnswer, CallError, RuntimeError};
use crate::store::{
    now_millis, HistoryKind, IterationRecord, NewHistoryItem, RequestRecord, Store,
};

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
    pub status: String,
    pub output: String,
}

/// A tool result as recorded: what the model gets back and how the call ended.
struct CallResult {
    code: String,
    output: String,
    status: IterationStatus,
    started_at: i64,
    wall_ms: i64,
    exec_us: i64,
    artifact: Option<String>,
    worker_exit: Option<String>,
    defs_set: Vec<crate::protocol::PersistedDef>,
    defs_deleted: Vec<String>,
}

impl CallResult {
    fn note(code: String, output: String, status: IterationStatus) -> CallResult {
        CallResult {
            code,
            output,
            status,
            started_at: now_millis(),
            wall_ms: 0,
            exec_us: 0,
            artifact: None,
            worker_exit: None,
            defs_set: vec![],
            defs_deleted: vec![],
        }
    }
}

impl ChatSession {
    /// Runs one turn for the person's message `text`. Cancelling `stop` interrupts the running
    /// block or request and ends the turn. Provider errors end the turn (`Failed`, with the
    /// error) without losing anything; `Err` is kept for failures of the store or the session
    /// itself.
    pub async fn run_turn(
        &mut self,
        text: &str,
        events: &EventSink,
        stop: &CancellationToken,
    ) -> Result<TurnEnd, GatewayError> {
        if text.trim().is_empty() {
            return Err(GatewayError::EmptyMessage);
        }
        self.ensure_prefix().await?;
        let turn = self
            .store
            .begin_turn(&self.id, TurnKind::Chat, Some(text))?;
        self.state.now = folds::Now {
            turn: Some(turn),
            running: None,
        };
        let _ = events.send(Event::TurnStarted { turn });
        self.append_item(turn, None, HistoryItem::User { text: text.into() })?;
        let mut iterations = 0u32;
        // A resumed session's worker starts while its first request streams.
        let mut warm_up = !self.supervisor.is_running();
        for n in 1u32.. {
            if stop.is_cancelled() {
                return self.end_turn(turn, TurnStatus::Interrupted, String::new(), None, events);
            }
            if self.drain.is_cancelled() {
                let message = "the gateway is shutting down; the turn stopped before its next model request (resume the session to continue)".to_string();
                let _ = events.send(Event::Error {
                    kind: "shutdown".into(),
                    message: message.clone(),
                });
                return self.end_turn(
                    turn,
                    TurnStatus::Interrupted,
                    String::new(),
                    Some(("shutdown".into(), message)),
                    events,
                );
            }
            self.sync_mcp().await?;
            for notice in self.append_updates(turn)? {
                let first = notice.lines().next().unwrap_or_default().to_string();
                let _ = events.send(Event::Notice { text: first });
            }
            let limited = folding::enforce_limit(&mut FoldCtx {
                state: &mut self.state,
                store: &mut *self.store,
                id: &self.id,
                settings: &self.settings,
            });
            match limited {
                Ok(Some(receipt)) => {
                    let _ = events.send(Event::Notice {
                        text: folding::receipt_line(&receipt),
                    });
                }
                Ok(None) => {}
                Err(e) => {
                    let message = e.to_string();
                    let _ = events.send(Event::Error {
                        kind: "context_limit".into(),
                        message: message.clone(),
                    });
                    return self.end_turn(
                        turn,
                        TurnStatus::Failed,
                        String::new(),
                        Some(("context_limit".into(), message)),
                        events,
                    );
                }
            }
            let body = self.next_request_body()?;
            let estimate = self.state.estimate;
            let _ = events.send(Event::RequestStarted { turn, n });
            let started_at = now_millis();
            let answer = self.request(body, events, stop, warm_up).await;
            warm_up = false;
            let response = match answer {
                None => {
                    self.record_request(
                        turn,
                        started_at,
                        estimate,
                        None,
                        Some(("interrupted", "the request was interrupted".into())),
                    )?;
                    return self.end_turn(
                        turn,
                        TurnStatus::Interrupted,
                        String::new(),
                        None,
                        events,
                    );
                }
                Some(Err(e)) => {
                    let (kind, message) = (e.kind().to_string(), e.to_string());
                    self.record_request(
                        turn,
                        started_at,
                        estimate,
                        None,
                        Some((e.kind(), message.clone())),
                    )?;
                    let _ = events.send(Event::Error {
                        kind: kind.clone(),
                        message: message.clone(),
                    });
                    return self.end_turn(
                        turn,
                        TurnStatus::Failed,
                        String::new(),
                        Some((kind, message)),
                        events,
                    );
                }
                Some(Ok(response)) => response,
            };
            self.record_request(turn, started_at, estimate, Some(&response), None)?;
            let _ = events.send(Event::ResponseFinished {
                turn,
                n,
                usage: response.usage,
                estimate_tokens: estimate,
                latency_ms: response.latency.as_millis() as u64,
                ttft_ms: response.ttft.map(|d| d.as_millis() as u64),
                retries: response.retries,
            });
            let message = with_call_ids(response.message, turn, n);
            let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
            let final_text = message.text();
            self.append_item(turn, None, HistoryItem::Assistant(message))?;
            if calls.is_empty() {
                return self.end_turn(turn, TurnStatus::Done, final_text, None, events);
            }
            let mut limit_hit = false;
            for call in calls {
                let iteration = self.store.next_iteration(&self.id, turn)?;
                let result = if iterations >= self.settings.max_iterations {
                    limit_hit = true;
                    CallResult::note(
                        call.arguments.clone(),
                        format!(
                            "[vis] not run: this turn reached its limit of {} iterations; the person can continue it with a new message.",
                            self.settings.max_iterations
                        ),
                        IterationStatus::Rejected,
                    )
                } else if stop.is_cancelled() {
                    CallResult::note(
                        code_of(&call).unwrap_or_else(|_| call.arguments.clone()),
                        "[vis] not run: the person interrupted the turn.".into(),
                        Status::Interrupted.into(),
                    )
                } else {
                    iterations += 1;
                    match code_of(&call) {
                        Err(correction) => CallResult::note(
                            call.arguments.clone(),
                            correction.to_string(),
                            IterationStatus::Rejected,
                        ),
                        Ok(code) => {
                            match self.run_block(turn, iteration, code, events, stop).await? {
                                Ok(result) => result,
                                Err((result, error)) => {
                                    self.record_call(turn, iteration, &call.id, result, events)?;
                                    let message = format!("the block could not run: {error}");
                                    let _ = events.send(Event::Error {
                                        kind: "runtime".into(),
                                        message: message.clone(),
                                    });
                                    return self.end_turn(
                                        turn,
                                        TurnStatus::Failed,
                                        String::new(),
                                        Some(("runtime".into(), message)),
                                        events,
                                    );
                                }
                            }
                        }
                    }
                };
                self.record_call(turn, iteration, &call.id, result, events)?;
            }
            if stop.is_cancelled() {
                return self.end_turn(turn, TurnStatus::Interrupted, String::new(), None, events);
            }
            if limit_hit {
                let note = format!(
                    "The turn stopped after {} iterations (the limit per turn); send a message to let the model continue.",
                    self.settings.max_iterations
                );
                return self.end_turn(turn, TurnStatus::IterationLimit, note, None, events);
            }
        }
        unreachable_turn(turn)
    }

    /// Runs one block without the model, as `vis exec` does: a new turn of kind `exec` with
    /// one iteration, recorded but not part of the conversation the model sees.
    pub async fn run_exec(
        &mut self,
        code: &str,
        events: &EventSink,
        stop: &CancellationToken,
    ) -> Result<ExecEnd, GatewayError> {
        crate::runtime::validate_code(code)?;
        let turn = self.store.begin_turn(&self.id, TurnKind::Exec, None)?;
        let _ = events.send(Event::TurnStarted { turn });
        let result = match self
            .run_block(turn, 1, code.to_string(), events, stop)
            .await?
        {
            Ok(result) => result,
            Err((result, _)) => result,
        };
        let record = IterationRecord {
            session_id: &self.id,
            turn,
            iteration: 1,
            code: &result.code,
            output: &result.output,
            status: result.status,
            started_at: result.started_at,
            duration_ms: result.wall_ms,
            exec_us: result.exec_us,
            artifact: result.artifact.as_deref(),
            worker_exit: result.worker_exit.as_deref(),
            defs_set: &result.defs_set,
            defs_deleted: &result.defs_deleted,
        };
        self.store.record_iteration(&record)?;
        let _ = events.send(Event::BlockFinished {
            turn,
            iteration: 1,
            status: result.status.as_str().to_string(),
            output: result.output.clone(),
            wall_ms: result.wall_ms.max(0) as u64,
        });
        self.store.end_turn(&self.id, turn, TurnStatus::Done)?;
        let _ = events.send(Event::TurnFinished {
            turn,
            status: TurnStatus::Done.as_str().into(),
            text: String::new(),
        });
        Ok(ExecEnd {
            turn,
            status: result.status.as_str().to_string(),
            output: result.output,
        })
    }

    /// One request; `None` when `stop` interrupted it. With `warm_up`, the worker starts
    /// meanwhile (a start failure shows when a block needs the worker).
    async fn request(
        &mut self,
        body: Vec<u8>,
        events: &EventSink,
        stop: &CancellationToken,
        warm_up: bool,
    ) -> Option<Result<ModelResponse, ProviderError>> {
        if let Err(e) = self.provider() {
            return Some(Err(e));
        }
        let Some(provider) = self.provider.as_ref() else {
            return Some(Err(ProviderError::Config("no provider".into())));
        };
        let supervisor = &mut self.supervisor;
        let sink = events.clone();
        let mut on_event = move |event: StreamEvent| {
            let event = match event {
                StreamEvent::TextDelta { text } => Event::TextDelta { text },
                StreamEvent::ReasoningDelta { text } => Event::ReasoningDelta { text },
                StreamEvent::Retrying {
                    attempt,
                    delay_ms,
                    reason,
                } => Event::Retrying {
                    attempt,
                    delay_ms,
                    reason,
                },
                StreamEvent::ToolCallStarted { .. } => return,
            };
            let _ = sink.send(event);
        };
        let stream = async {
            tokio::select! {
                answer = provider.stream(to_bytes(body), &mut on_event) => Some(answer),
                _ = stop.cancelled() => None,
            }
        };
        let start = async {
            if warm_up {
                let _ = supervisor.start().await;
            }
        };
        let (answer, ()) = tokio::join!(stream, start);
        answer
    }

    /// Runs one block, answering the host calls it makes. `Err` carries the recorded result
    /// and the cause when the block could not run because the runtime failed.
    async fn run_block(
        &mut self,
        turn: i64,
        iteration: i64,
        code: String,
        events: &EventSink,
        stop: &CancellationToken,
    ) -> Result<Result<CallResult, (CallResult, RuntimeError)>, GatewayError> {
        let counts = self.store.counts(&self.id)?;
        self.state.now.running = Some((turn, iteration));
        let utilization = folding::utilization(&self.state, &self.settings).to_json();
        let mut session =
            crate::session::session_dict(&self.id, turn, iteration, counts, utilization);
        if let Some(hub) = &self.mcp {
            session["mcp"] = hub.status_json();
        }
        let request = Block {
            code: code.clone(),
            filename: format!("<t{turn}/i{iteration}>"),
            session,
            output_limit: self.settings.output_limit,
            artifact_path: self.artifact_dir.join(format!("t{turn}-i{iteration}.txt")),
            artifact_dir: self.artifact_dir.clone(),
            workspace_roots: self.roots.iter().map(PathBuf::from).collect(),
            timeout: self.settings.block_timeout,
            artifact_quota: self.settings.worker.sandbox.artifact_quota,
        };
        let _ = events.send(Event::BlockStarted {
            turn,
            iteration,
            code: code.clone(),
        });
        let started_at = now_millis();
        let (calls_tx, mut calls) = tokio::sync::mpsc::unbounded_channel();
        // MCP calls run as tasks of their own (a tool can take long; the block's deadlines and
        // other host calls go on meanwhile); the ones still running when the block ends are
        // cancelled at their servers.
        let mut mcp_tasks = Vec::new();
        // The block's own stop: cancelled when it spends its budget of gateway calls, which
        // interrupts the block and not the turn.
        let block_stop = stop.child_token();
        let mut budget = CallBudget::default();
        let outcome = {
            let run = self.supervisor.exec(request, calls_tx, block_stop.clone());
            tokio::pin!(run);
            loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(call) = calls.recv() => {
                        let call = match crate::mcp::spawn_host_call(self.mcp.as_ref(), call) {
                            Ok(task) => {
                                mcp_tasks.push(task);
                                continue;
                            }
                            Err(call) => call,
                        };
                        if let Err(spent) = budget.charge(&call.params) {
                            call.reply(Err(spent));
                            block_stop.cancel();
                            continue;
                        }
                        let answer = answer_host_call(
                            &mut FoldCtx { state: &mut self.state, store: &mut *self.store, id: &self.id, settings: &self.settings },
                            &call.method,
                            &call.params,
                        );
                        call.reply(answer);
                    }
                }
            }
        };
        for task in mcp_tasks {
            task.abort();
        }
        while let Ok(call) = calls.try_recv() {
            let call = match crate::mcp::spawn_host_call(self.mcp.as_ref(), call) {
                Ok(task) => {
                    task.abort();
                    continue;
                }
                Err(call) => call,
            };
            if let Err(spent) = budget.charge(&call.params) {
                call.reply(Err(spent));
                continue;
            }
            let answer = answer_host_call(
                &mut FoldCtx {
                    state: &mut self.state,
                    store: &mut *self.store,
                    id: &self.id,
                    settings: &self.settings,
                },
                &call.method,
                &call.params,
            );
            call.reply(answer);
        }
        self.state.now.running = None;
        let wall_ms = now_millis() - started_at;
        Ok(match outcome {
            Ok(outcome) => {
                let mut output = if outcome.output.is_empty() {
                    "(no output)".to_string()
                } else {
                    outcome.output
                };
                if budget.spent() {
                    if !output.ends_with('\n') {
                        output.push('\n');
                    }
                    output.push_str(&budget.reason());
                    output.push('\n');
                }
                // While the context is high, every block's output says so (SPEC §7).
                if let Some(hint) = folding::hint(&self.state, &self.settings) {
                    if !output.ends_with('\n') {
                        output.push('\n');
                    }
                    output.push_str(&hint);
                    output.push('\n');
                }
                Ok(CallResult {
                    code,
                    output,
                    status: outcome.status.into(),
                    started_at,
                    wall_ms: outcome.wall.as_millis() as i64,
                    exec_us: outcome.exec_micros as i64,
                    artifact: outcome.artifact.map(|p| p.to_string_lossy().into_owned()),
                    worker_exit: outcome.worker_lost.map(|e| e.to_string()),
                    defs_set: outcome.defs_set,
                    defs_deleted: outcome.defs_deleted,
                })
            }
            Err(RuntimeError::InvalidBlock(message)) => {
                let mut result =
                    CallResult::note(code, format!("[vis] {message}"), IterationStatus::Rejected);
                result.wall_ms = wall_ms;
                Ok(result)
            }
            Err(e) => {
                let mut result = CallResult::note(
                    code,
                    format!("[vis] the block could not run: {e}"),
                    Status::Crashed.into(),
                );
                result.wall_ms = wall_ms;
                Err((result, e))
            }
        })
    }

    /// Records an iteration with its place in the conversation, and reports it.
    fn record_call(
        &mut self,
        turn: i64,
        iteration: i64,
        call_id: &str,
        result: CallResult,
        events: &EventSink,
    ) -> Result<(), GatewayError> {
        let item = HistoryItem::ToolResult {
            call_id: call_id.to_string(),
            output: result.output.clone(),
            is_error: !result.status.is_ok(),
        };
        let tokens = history::estimate_item(&item);
        let seq = self.store.record_tool_result(
            &IterationRecord {
                session_id: &self.id,
                turn,
                iteration,
                code: &result.code,
                output: &result.output,
                status: result.status,
                started_at: result.started_at,
                duration_ms: result.wall_ms,
                exec_us: result.exec_us,
                artifact: result.artifact.as_deref(),
                worker_exit: result.worker_exit.as_deref(),
                defs_set: &result.defs_set,
                defs_deleted: &result.defs_deleted,
            },
            call_id,
            tokens as i64,
        )?;
        if let Some(exit) = &result.worker_exit {
            self.store
                .record_worker_event(&self.id, result.status.as_str(), exit)?;
        }
        self.push_entry(Entry {
            seq,
            turn,
            iteration: Some(iteration),
            item,
            tokens,
            meta: None,
        });
        let _ = events.send(Event::BlockFinished {
            turn,
            iteration,
            status: result.status.as_str().to_string(),
            output: result.output,
            wall_ms: result.wall_ms.max(0) as u64,
        });
        Ok(())
    }

    /// Appends a user or assistant item to the store and the conversation.
    fn append_item(
        &mut self,
        turn: i64,
        iteration: Option<i64>,
        item: HistoryItem,
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
        let seq = self.store.append_history(
            &self.id,
            &NewHistoryItem {
                turn,
                kind,
                body: &body,
                tokens: tokens as i64,
                meta: None,
            },
        )?;
        self.push_entry(Entry {
            seq,
            turn,
            iteration,
            item,
            tokens,
            meta: None,
        });
        Ok(())
    }

    fn record_request(
        &mut self,
        turn: i64,
        started_at: i64,
        estimate: u64,
        response: Option<&ModelResponse>,
        error: Option<(&str, String)>,
    ) -> Result<(), GatewayError> {
        let as_i64 = |v: Option<u64>| v.map(|n| n as i64);
        let provider_name = self.settings.provider.kind.as_str().to_string();
        let model_name = response
            .and_then(|r| r.model.clone())
            .unwrap_or_else(|| self.settings.provider.model.clone());
        let measurement = match response {
            Some(r) => folding::measured(
                &mut self.state,
                &*self.store,
                &self.id,
                r.usage.input_tokens,
                &provider_name,
                &model_name,
                turn,
            )?,
            None => None,
        };
        if let Some(r) = response {
            self.state.last_request = Some(super::LastRequest {
                input_tokens: r.usage.input_tokens,
                estimate,
                provider: provider_name.clone(),
                model: model_name.clone(),
                turn,
            });
        }
        let settings = &self.settings.provider;
        let record = RequestRecord {
            seq: 0,
            turn,
            provider: settings.kind.as_str().to_string(),
            model: response
                .and_then(|r| r.model.clone())
                .unwrap_or_else(|| settings.model.clone()),
            started_at,
            latency_ms: response.map_or_else(
                || now_millis() - started_at,
                |r| r.latency.as_millis() as i64,
            ),
            ttft_ms: response.and_then(|r| r.ttft).map(|d| d.as_millis() as i64),
            retries: response.map_or(0, |r| r.retries as i64),
            input_tokens: response.and_then(|r| as_i64(r.usage.input_tokens)),
            cached_tokens: response.and_then(|r| as_i64(r.usage.cached_tokens)),
            cache_creation_tokens: response.and_then(|r| as_i64(r.usage.cache_creation_tokens)),
            output_tokens: response.and_then(|r| as_i64(r.usage.output_tokens)),
            estimate_tokens: estimate as i64,
            error_kind: error.as_ref().map(|(k, _)| k.to_string()),
            error: error.map(|(_, m)| m),
            fold_measurement: measurement.map(|m| m.to_string()),
        };
        self.store.record_request(&self.id, &record)?;
        Ok(())
    }

    fn end_turn(
        &mut self,
        turn: i64,
        status: TurnStatus,
        text: String,
        error: Option<(String, String)>,
        events: &EventSink,
    ) -> Result<TurnEnd, GatewayError> {
        self.store.end_turn(&self.id, turn, status)?;
        self.state.now = folds::Now {
            turn: None,
            running: None,
        };
        let _ = events.send(Event::TurnFinished {
            turn,
            status: status.as_str().to_string(),
            text: text.clone(),
        });
        Ok(TurnEnd {
            turn,
            status,
            text,
            error,
        })
    }
}

fn unreachable_turn(turn: i64) -> Result<TurnEnd, GatewayError> {
    // `1u32..` ends only after four billion requests.
    Err(GatewayError::CorruptHistory {
        seq: turn,
        detail: "the turn ran out of request numbers".into(),
    })
}

/// Host calls a block makes while it runs (MCP calls, `mcp.*`, are answered by the hub).
fn answer_host_call(ctx: &mut FoldCtx<'_>, method: &str, params: &Value) -> CallAnswer {
    let text = |name: &str| -> Result<String, CallError> {
        match params.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(CallError(format!("{method}: `{name}` must be a string"))),
            None => Err(CallError(format!("{method}: `{name}` is missing"))),
        }
    };
    match method {
        "fold_session" => Ok(folding::fold(ctx, &text("key")?, &text("gist")?, false)?),
        "read_session" => folding::read(ctx, &text("key")?),
        _ => Err(CallError(format!(
            "the gateway has no '{method}' call; see doc('vis') for what blocks can call"
        ))),
    }
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

/// Repairs the turns a stopped gateway left `running`: a chat turn's unanswered calls are
/// recorded as interrupted by the restart (the model is told so in their tool results), a
/// turn cut off mid-response gets a notice, and every such turn is closed as interrupted.
pub(super) fn repair_running_turns(
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
                entries.push(Entry {
                    seq,
                    turn,
                    iteration: None,
                    item,
                    tokens,
                    meta: None,
                });
            }
            for (k, call) in calls.iter().enumerate() {
                let iteration = store.next_iteration(id, turn)?;
                let output = if k == 0 {
                    "[vis] interrupted by a restart of the gateway: this block was running (or about to run) when the gateway stopped. Its effects on files are unknown; variables are lost; definitions are restored in the new worker.".to_string()
                } else {
                    "[vis] not run: the gateway stopped before this call ran.".to_string()
                };
                let code = code_of(call).unwrap_or_else(|_| call.arguments.clone());
                let item = HistoryItem::ToolResult {
                    call_id: call.id.clone(),
                    output: output.clone(),
                    is_error: true,
                };
                let tokens = history::estimate_item(&item);
                let seq = store.record_tool_result(
                    &IterationRecord {
                        session_id: id,
                        turn,
                        iteration,
                        code: &code,
                        output: &output,
                        status: Status::Interrupted.into(),
                        started_at: now_millis(),
                        duration_ms: 0,
                        exec_us: 0,
                        artifact: None,
                        worker_exit: None,
                        defs_set: &[],
                        defs_deleted: &[],
                    },
                    &call.id,
                    tokens as i64,
                )?;
                entries.push(Entry {
                    seq,
                    turn,
                    iteration: Some(iteration),
                    item,
                    tokens,
                    meta: None,
                });
            }
            notes.push(format!(
                "[vis] turn {turn} was interrupted by a restart of the gateway{}",
                match calls.len() {
                    0 => ": its unfinished answer was discarded".to_string(),
                    1 => "; its running block is recorded as interrupted".to_string(),
                    n => format!("; its {n} unfinished calls are recorded as interrupted"),
                }
            ));
        }
        store.end_turn(id, turn, TurnStatus::Interrupted)?;
    }
    Ok(notes)
}
