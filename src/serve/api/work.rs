//! Work in a session: a turn (streamed back as server-sent events), one block without the
//! model, an interrupt, the next model request; and [`run`], the task that does the work and
//! feeds the session's event log. One turn or block runs per session at a time.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::stream::{sse, Follower};
use super::{begin, reader, require, ApiError, ApiResult, Body};
use crate::protocol::{Event, TurnStatus};
use crate::serve::metrics::Open;
use crate::serve::registry::Slot;
use crate::serve::App;

#[derive(Debug, Deserialize, ToSchema)]
pub struct PostTurn {
    /// The person's message.
    pub message: String,
}

/// Post a message: the turn streams back as server-sent events (`text_delta`,
/// `block_started`, `block_output` while a block runs, `block_finished`, `response_finished`
/// with usage, `error`, `turn_finished`, …; each `data` is the JSON event). Reconnect with
/// `GET /api/sessions/{id}/events` and `Last-Event-ID`.
#[utoipa::path(post, path = "/api/sessions/{id}/turns", params(("id" = String, Path)), request_body = PostTurn,
    responses((status = 200, content_type = "text/event-stream", description = "the turn's events"),
        (status = 404, body = ApiError), (status = 409, body = ApiError), (status = 503, body = ApiError)))]
pub async fn post_turn(
    State(app): State<App>,
    Path(id): Path<String>,
    Body(body): Body<PostTurn>,
) -> ApiResult<Response> {
    if body.message.trim().is_empty() {
        return Err(ApiError::bad("the message is empty"));
    }
    let slot = begin(&app, &id)?;
    let stop = slot.try_begin().ok_or_else(|| ApiError::busy(&id))?;
    let follower = Follower::new(slot.clone(), slot.log.next() - 1, true);
    tokio::spawn(run(app.clone(), slot, stop, Work::Turn(body.message)));
    Ok(sse(follower))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PostExec {
    /// Python source of one block.
    pub code: String,
}

/// Run one block directly, without the model (as `vis exec` does).
#[utoipa::path(post, path = "/api/sessions/{id}/exec", params(("id" = String, Path)), request_body = PostExec,
    responses((status = 200, body = Value, description = "{turn, status, output}"), (status = 404, body = ApiError), (status = 409, body = ApiError),
        (status = 503, body = ApiError, description = "`lease_lost`: the session moved to another node while the block ran; retry (Retry-After)")))]
pub async fn post_exec(
    State(app): State<App>,
    Path(id): Path<String>,
    Body(body): Body<PostExec>,
) -> ApiResult<Json<Value>> {
    crate::runtime::validate_code(&body.code).map_err(|e| ApiError::bad(e.to_string()))?;
    let slot = begin(&app, &id)?;
    let stop = slot.try_begin().ok_or_else(|| ApiError::busy(&id))?;
    let mut follower = Follower::new(slot.clone(), slot.log.next() - 1, true);
    tokio::spawn(run(app.clone(), slot, stop, Work::Exec(body.code)));
    // The block's result is its `block_finished` event; the reply waits for `turn_finished`,
    // published once the session is free, so the client can send its next block at once (and
    // the worker counts as live for the cap on live workers).
    let mut result: Option<ApiResult<Json<Value>>> = None;
    while let Some(logged) = follower.next().await {
        match &logged.event {
            Event::BlockFinished {
                turn,
                status,
                output,
                ..
            } => {
                result = Some(Ok(Json(
                    json!({"turn": turn, "status": status, "output": output}),
                )));
            }
            Event::Error { kind, message } if kind == LEASE_LOST => {
                result = Some(Err(ApiError::lease_lost(message.clone())));
            }
            Event::Error { kind, message } => {
                result.get_or_insert(Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "runtime",
                    format!("{kind}: {message}"),
                )));
            }
            _ => {}
        }
    }
    result.unwrap_or_else(|| Err(ApiError::internal("the block ended without a result")))
}

/// The error kind (API and SSE) of work stopped because this node lost the session's lease.
pub const LEASE_LOST: &str = "lease_lost";

/// What a client is told when the session's lease was lost mid-turn: the cause, that what
/// completed is kept, and that a retry reaches the new holder.
fn lease_lost_message(id: &str) -> String {
    format!(
        "session '{id}' moved to another node while this ran: this node lost its lease on it (it could not renew it in time, or another node took the session over), so it stopped; what completed is stored — send the request again: it goes to the node that runs the session now"
    )
}

/// A store call that failed under the work, as the gateway reports it.
fn store_error(e: &crate::gateway::GatewayError) -> bool {
    use crate::gateway::GatewayError;
    matches!(
        e,
        GatewayError::Store(_) | GatewayError::Run(crate::runtime::RunError::Store(_))
    )
}

/// A store write refused by the lease fence, as the gateway reports it.
fn lease_lost_error(e: &crate::gateway::GatewayError) -> bool {
    use crate::gateway::GatewayError;
    match e {
        GatewayError::Store(e) => e.is_lease_lost(),
        GatewayError::Run(crate::runtime::RunError::Store(e)) => e.is_lease_lost(),
        _ => false,
    }
}

enum Work {
    Turn(String),
    Exec(String),
}

/// Runs a turn or block of `slot` in the background, feeding its event log.
async fn run(app: App, slot: Arc<Slot>, stop: tokio_util::sync::CancellationToken, work: Work) {
    let registry = app.registry.clone();
    registry.make_room(&slot.id).await;
    let mut guard = slot.session.lock().await;
    let push = |event: Event, open: &mut Open| {
        registry.metrics.observe(&slot.id, &event, open);
        slot.log.push(event);
    };
    let mut open = Open::default();
    let notes = registry.load(&slot.id, &mut guard);
    let Some(session) = guard.as_mut().filter(|_| notes.is_ok()) else {
        drop(guard);
        slot.end(false);
        registry.release_if_idle(&slot);
        let message = notes
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "the session could not be opened".into());
        push(
            Event::Error {
                kind: "session".into(),
                message,
            },
            &mut open,
        );
        push(
            Event::TurnFinished {
                turn: 0,
                status: TurnStatus::Failed,
                text: String::new(),
            },
            &mut open,
        );
        return;
    };
    for note in notes.unwrap_or_default() {
        push(Event::Notice { text: note }, &mut open);
    }
    slot.watch_jobs(session.supervisor().jobs());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // The turn's end is published only after the slot is free again, so a client that saw
    // `turn_finished` can start the next turn at once.
    let forward = {
        let slot = slot.clone();
        let registry = registry.clone();
        tokio::spawn(async move {
            let mut open = Open::default();
            let mut finished = Vec::new();
            while let Some(event) = rx.recv().await {
                registry.metrics.observe(&slot.id, &event, &mut open);
                if matches!(event, Event::TurnFinished { .. }) {
                    finished.push(event);
                } else {
                    slot.log.push(event);
                }
            }
            (finished, open)
        })
    };
    let failed = match work {
        Work::Turn(message) => session.run_turn(&message, &tx, &stop).await.err(),
        Work::Exec(code) => session.run_exec(&code, &tx, &stop).await.err(),
    };
    drop(tx);
    let (mut finished, mut open) = forward.await.unwrap_or_default();
    let mut live = session.supervisor().is_running();
    // A fenced write was refused: another node holds the session now; this one lets it go
    // (no retry: the other node may be running it already).
    let refused = failed.as_ref().is_some_and(lease_lost_error);
    if refused {
        registry.drop_lost(&slot, &mut guard).await;
        live = false;
    } else if failed.as_ref().is_some_and(store_error) {
        // The database failed under the turn (a restart, a lost connection): reload it from
        // the store next time, which closes the turn as a restarted node would.
        registry.drop_loaded(&slot, &mut guard).await;
        live = false;
    }
    // Also when the renewal task found the lease lost and stopped the work.
    let lost = slot.take_lease_lost() || refused;
    if lost {
        push(
            Event::Error {
                kind: LEASE_LOST.into(),
                message: lease_lost_message(&slot.id),
            },
            &mut open,
        );
    } else if let Some(e) = &failed {
        push(
            Event::Error {
                kind: "gateway".into(),
                message: e.to_string(),
            },
            &mut open,
        );
    }
    if failed.is_some() {
        let end = Event::TurnFinished {
            turn: 0,
            status: TurnStatus::Failed,
            text: String::new(),
        };
        registry.metrics.observe(&slot.id, &end, &mut open);
        finished.push(end);
    }
    drop(guard);
    slot.end(live);
    registry.release_if_idle(&slot);
    registry.update_live_gauge();
    for event in finished {
        slot.log.push(event);
    }
}

/// Interrupt the running turn or block.
#[utoipa::path(post, path = "/api/sessions/{id}/interrupt", params(("id" = String, Path)),
    responses((status = 200, body = Value), (status = 404, body = ApiError), (status = 409, body = ApiError, description = "nothing runs")))]
pub async fn interrupt(State(app): State<App>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let store = reader(&app)?;
    require(&*store, &id)?;
    if app.registry.slot(&id).interrupt() {
        Ok(Json(json!({"id": id, "interrupted": true})))
    } else {
        Err(ApiError::new(
            StatusCode::CONFLICT,
            "idle",
            format!("session '{id}' is not running anything"),
        ))
    }
}

/// The next model request of a session (as `vis context` prints it): the provider's body and
/// the o200k estimate.
#[utoipa::path(get, path = "/api/sessions/{id}/context", params(("id" = String, Path)),
    responses((status = 200, body = Value), (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub async fn get_context(State(app): State<App>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let store = reader(&app)?;
    require(&*store, &id)?;
    let slot = app.registry.slot(&id);
    let Ok(mut guard) = slot.session.try_lock() else {
        return Err(ApiError::busy(&id));
    };
    let registry = app.registry.clone();
    registry.load(&id, &mut guard)?;
    let Some(session) = guard.as_mut() else {
        return Err(ApiError::internal("the session could not be opened"));
    };
    let body = session.next_request_body();
    registry.release_if_idle(&slot);
    let body = body.map_err(ApiError::internal)?;
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).map_err(ApiError::internal)?
    };
    Ok(Json(json!({
        "provider": session.settings().provider.kind.as_str(),
        "model": session.settings().provider.model,
        "estimate_tokens": session.estimate_tokens(),
        "utilization": session.utilization(),
        "body": body,
    })))
}
