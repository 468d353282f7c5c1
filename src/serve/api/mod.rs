//! The HTTP API: sessions, turns as server-sent events, control and inspection. Every
//! handler is annotated for the OpenAPI document (`/openapi.json` is generated from these
//! annotations, so it cannot drift). Errors are JSON `{"code", "message"}` with a stable code.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use utoipa::{IntoParams, ToSchema};

use super::events::Logged;
use super::metrics::Open;
use super::registry::{ModelChoice, Slot};
use super::App;
use crate::protocol::{Event, TurnStatus};
use crate::store::Store;

/// An error as the API reports it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiError {
    /// Stable, machine-readable: `not_found`, `bad_request`, `busy`, `unauthorized`,
    /// `shutting_down`, `worker_cap`, `internal`.
    pub code: &'static str,
    pub message: String,
    #[serde(skip)]
    status: StatusCode,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            status,
        }
    }

    fn not_found(id: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no session '{id}'; GET /api/sessions lists them"),
        )
    }

    fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn busy(id: &str) -> ApiError {
        ApiError::new(
            StatusCode::CONFLICT,
            "busy",
            format!("session '{id}' is running a turn or block; wait for it (GET /api/sessions/{id}/events) or interrupt it (POST /api/sessions/{id}/interrupt)"),
        )
    }

    fn internal(message: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            message.to_string(),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"code": self.code, "message": self.message})),
        )
            .into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

impl From<crate::serve::RegistryError> for ApiError {
    fn from(e: crate::serve::RegistryError) -> Self {
        use crate::gateway::GatewayError;
        use crate::serve::RegistryError;
        use crate::store::StoreError;
        match e {
            RegistryError::Settings(e) => ApiError::bad(e.to_string()),
            RegistryError::Store(StoreError::UnknownSession(id))
            | RegistryError::Gateway(GatewayError::Store(StoreError::UnknownSession(id))) => {
                ApiError::not_found(&id)
            }
            // The server's database, config or a damaged session: not the client's to fix.
            e => ApiError::internal(e),
        }
    }
}

/// A JSON body that failed to parse becomes a `bad_request` with serde's message.
pub struct Body<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for Body<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(e) => Err(ApiError::bad(format!(
                "the request body is not valid: {}",
                e.body_text()
            ))),
        }
    }
}

fn reader(app: &App) -> ApiResult<Box<Store>> {
    Store::open(&app.registry.db).map_err(ApiError::internal)
}

fn require(store: &Store, id: &str) -> ApiResult<crate::store::SessionRow> {
    crate::session::validate_session_id(id).map_err(|e| ApiError::bad(e.to_string()))?;
    store
        .session(id)
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(id))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateSession {
    /// An existing directory on the server: the session's workspace.
    pub workspace: String,
    #[serde(flatten)]
    pub model: ModelChoice,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionSummary {
    pub id: String,
    pub workspace: Vec<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub turns: i64,
    pub iterations: i64,
    pub defs: i64,
    /// `running`, `idle` (worker alive), `parked` (no worker now).
    pub status: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub input_tokens: i64,
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub requests: i64,
    pub failed_requests: i64,
}

fn status_of(slot: Option<&Arc<Slot>>) -> &'static str {
    match slot {
        Some(s) if s.is_working() => "running",
        Some(s) if s.live.load(std::sync::atomic::Ordering::SeqCst) => "idle",
        _ => "parked",
    }
}

/// List sessions, most recently used first.
#[utoipa::path(get, path = "/api/sessions", responses((status = 200, body = [SessionSummary])))]
pub async fn list_sessions(State(app): State<App>) -> ApiResult<Json<Vec<SessionSummary>>> {
    let store = reader(&app)?;
    let slots = app.registry.slots();
    let mut out = Vec::new();
    for s in store.list_sessions().map_err(ApiError::internal)? {
        let model = store.session_model(&s.id).map_err(ApiError::internal)?;
        let totals = store.request_totals(&s.id).map_err(ApiError::internal)?;
        out.push(SessionSummary {
            status: status_of(slots.iter().find(|x| x.id == s.id)).into(),
            id: s.id,
            workspace: s.workspace_roots,
            created_at: s.created_at,
            updated_at: s.updated_at,
            turns: s.turns,
            iterations: s.iterations,
            defs: s.defs,
            provider: model.as_ref().map(|m| m.provider.clone()),
            model: model.map(|m| m.model),
            input_tokens: totals.input_tokens,
            cached_tokens: totals.cached_tokens,
            output_tokens: totals.output_tokens,
            requests: totals.requests,
            failed_requests: totals.failed,
        });
    }
    Ok(Json(out))
}

/// Create a session for a workspace, optionally naming the provider and model.
#[utoipa::path(post, path = "/api/sessions", request_body = CreateSession,
    responses((status = 201, body = Value, description = "{\"id\": …}"), (status = 400, body = ApiError)))]
pub async fn create_session(
    State(app): State<App>,
    Body(body): Body<CreateSession>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let ws = std::path::Path::new(&body.workspace);
    let canonical = ws
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| {
            ApiError::bad(format!(
                "workspace '{}' is not an existing directory on the server",
                body.workspace
            ))
        })?;
    let registry = app.registry.clone();
    let workspace = canonical.to_string_lossy().into_owned();
    let id = tokio::task::spawn_blocking(move || registry.create(&workspace, &body.model))
        .await
        .map_err(ApiError::internal)??;
    Ok((StatusCode::CREATED, Json(json!({"id": id}))))
}

/// A session's turns, iterations, folds, definitions, conversation and request health.
#[utoipa::path(get, path = "/api/sessions/{id}", params(("id" = String, Path)),
    responses((status = 200, body = Value), (status = 404, body = ApiError)))]
pub async fn get_session(State(app): State<App>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let store = reader(&app)?;
    let row = require(&*store, &id)?;
    let e = ApiError::internal;
    let slot = app.registry.slots().into_iter().find(|s| s.id == id);
    Ok(Json(json!({
        "session": row,
        "status": status_of(slot.as_ref()),
        "model": store.session_model(&id).map_err(e)?,
        "turns": store.turns(&id).map_err(e)?,
        "iterations": store.iterations(&id).map_err(e)?,
        "folds": store.folds(&id).map_err(e)?.iter().map(|f| json!({
            "id": f.id, "turn": f.turn, "iteration": f.iteration, "key": f.key,
            "spans": serde_json::from_str::<Value>(&f.spans).unwrap_or(Value::Null),
            "gist": f.gist, "automatic": f.automatic, "absorbed_by": f.absorbed_by,
            "receipt": serde_json::from_str::<Value>(&f.receipt).unwrap_or(Value::Null),
            "measurement": serde_json::from_str::<Value>(&f.measurement).unwrap_or(Value::Null),
        })).collect::<Vec<_>>(),
        "defs": store.load_defs(&id).map_err(e)?,
        "history": store.history(&id).map_err(e)?,
        "requests": store.requests(&id).map_err(e)?,
    })))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct DeleteQuery {
    /// `keep` (default: the worker ends, the history stays) or `delete` (everything goes).
    pub history: Option<String>,
}

/// End a session's worker; keep or remove its history.
#[utoipa::path(delete, path = "/api/sessions/{id}", params(("id" = String, Path), DeleteQuery),
    responses((status = 200, body = Value), (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub async fn delete_session(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(q): Query<DeleteQuery>,
) -> ApiResult<Json<Value>> {
    let mut store = reader(&app)?;
    require(&*store, &id)?;
    let remove = match q.history.as_deref() {
        None | Some("keep") => false,
        Some("delete") => true,
        Some(other) => {
            return Err(ApiError::bad(format!(
                "history must be 'keep' or 'delete', not '{other}'"
            )))
        }
    };
    let slot = app.registry.slot(&id);
    if slot.try_begin().is_none() {
        return Err(ApiError::busy(&id));
    }
    {
        let mut guard = slot.session.lock().await;
        if let Some(session) = guard.as_mut() {
            session.shutdown().await;
        }
        *guard = None;
    }
    slot.end(false);
    app.registry.forget(&id);
    app.registry.update_live_gauge();
    if remove {
        store.delete_session(&id).map_err(ApiError::internal)?;
    }
    Ok(Json(
        json!({"id": id, "worker": "ended", "history": if remove { "deleted" } else { "kept" }}),
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PostTurn {
    /// The person's message.
    pub message: String,
}

/// Post a message: the turn streams back as server-sent events (`text_delta`,
/// `block_started`, `block_finished`, `response_finished` with usage, `error`,
/// `turn_finished`, …; each `data` is the JSON event). Reconnect with
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
    let after = slot.log.next() - 1;
    let stream = stream_events(slot.clone(), after, true);
    tokio::spawn(run(app.clone(), slot, stop, Work::Turn(body.message)));
    Ok(sse(stream))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PostExec {
    /// Python source of one block.
    pub code: String,
}

/// Run one block directly, without the model (as `vis exec` does).
#[utoipa::path(post, path = "/api/sessions/{id}/exec", params(("id" = String, Path)), request_body = PostExec,
    responses((status = 200, body = Value, description = "{turn, status, output}"), (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub async fn post_exec(
    State(app): State<App>,
    Path(id): Path<String>,
    Body(body): Body<PostExec>,
) -> ApiResult<Json<Value>> {
    crate::runtime::validate_code(&body.code).map_err(|e| ApiError::bad(e.to_string()))?;
    let slot = begin(&app, &id)?;
    let stop = slot.try_begin().ok_or_else(|| ApiError::busy(&id))?;
    let (kept, mut rx) = slot.log.subscribe(slot.log.next() - 1);
    drop(kept);
    tokio::spawn(run(app.clone(), slot, stop, Work::Exec(body.code)));
    // The block's result is its `block_finished` event; the reply waits for `turn_finished`,
    // published once the session is free, so the client can send its next block at once (and
    // the worker counts as live for the cap on live workers).
    let mut result: Option<ApiResult<Json<Value>>> = None;
    loop {
        match rx.recv().await {
            Ok(Logged {
                event:
                    Event::BlockFinished {
                        turn,
                        status,
                        output,
                        ..
                    },
                ..
            }) => {
                result = Some(Ok(Json(
                    json!({"turn": turn, "status": status, "output": output}),
                )));
            }
            Ok(Logged {
                event: Event::Error { kind, message },
                ..
            }) => {
                result.get_or_insert(Err(ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "runtime",
                    format!("{kind}: {message}"),
                )));
            }
            Ok(Logged {
                event: Event::TurnFinished { .. },
                ..
            }) => {
                return result.unwrap_or_else(|| {
                    Err(ApiError::internal("the block ended without a result"))
                });
            }
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return Err(ApiError::internal("the block's events stopped")),
        }
    }
}

fn begin(app: &App, id: &str) -> ApiResult<Arc<Slot>> {
    if app.registry.drain.is_cancelled() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down; retry after it restarts",
        ));
    }
    let store = reader(app)?;
    require(&*store, id)?;
    Ok(app.registry.slot(id))
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
                status: TurnStatus::Failed.as_str().into(),
                text: String::new(),
            },
            &mut open,
        );
        return;
    };
    for note in notes.unwrap_or_default() {
        push(Event::Notice { text: note }, &mut open);
    }
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
    if let Some(e) = failed {
        push(
            Event::Error {
                kind: "gateway".into(),
                message: e.to_string(),
            },
            &mut open,
        );
        let end = Event::TurnFinished {
            turn: 0,
            status: TurnStatus::Failed.as_str().into(),
            text: String::new(),
        };
        registry.metrics.observe(&slot.id, &end, &mut open);
        finished.push(end);
    }
    let live = session.supervisor().is_running();
    drop(guard);
    slot.end(live);
    registry.update_live_gauge();
    for event in finished {
        slot.log.push(event);
    }
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct EventsQuery {
    /// Replay events after this id (the `Last-Event-ID` header takes precedence).
    pub after: Option<String>,
}

/// The events a client missed (after `Last-Event-ID`), then, while a turn runs, the rest of
/// it live.
#[utoipa::path(get, path = "/api/sessions/{id}/events", params(("id" = String, Path), EventsQuery),
    responses((status = 200, content_type = "text/event-stream"), (status = 404, body = ApiError)))]
pub async fn get_events(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let store = reader(&app)?;
    require(&*store, &id)?;
    let slot = app.registry.slot(&id);
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(q.after);
    let after = slot.log.after(last.as_deref());
    let follow = slot.is_working();
    Ok(sse(stream_events(slot, after, follow)))
}

fn sse<S>(stream: S) -> Response
where
    S: Stream<Item = Result<SseEvent, Infallible>> + Send + 'static,
{
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn event_name(event: &Event) -> String {
    serde_json::to_value(event)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_string))
        .unwrap_or_else(|| "event".into())
}

/// Events after `after`: the kept ones, then live ones while `follow`, until the first
/// `turn_finished` that comes after the start.
fn stream_events(
    slot: Arc<Slot>,
    after: u64,
    follow: bool,
) -> impl Stream<Item = Result<SseEvent, Infallible>> + Send {
    let (kept, rx) = slot.log.subscribe(after);
    let state = (slot, kept.into_iter(), rx, after, follow, false);
    futures::stream::unfold(
        state,
        |(slot, mut kept, mut rx, mut last, follow, done)| async move {
            if done {
                return None;
            }
            let next = match kept.next() {
                Some(l) => Some(l),
                None if !follow => None,
                None => loop {
                    match rx.recv().await {
                        Ok(l) if l.n > last => break Some(l),
                        Ok(_) => continue,
                        Err(RecvError::Lagged(_)) => {
                            // Fell behind the live feed: catch up from the kept log.
                            let (again, fresh) = slot.log.subscribe(last);
                            rx = fresh;
                            kept = again.into_iter();
                            if let Some(l) = kept.next() {
                                break Some(l);
                            }
                        }
                        Err(RecvError::Closed) => break None,
                    }
                },
            }?;
            last = next.n;
            let finished = follow
                && matches!(next.event, Event::TurnFinished { .. })
                && next.n >= slot.work_start.load(std::sync::atomic::Ordering::SeqCst);
            let data = serde_json::to_string(&next.event).unwrap_or_default();
            let event = SseEvent::default()
                .id(slot.log.id(next.n))
                .event(event_name(&next.event))
                .data(data);
            Some((Ok(event), (slot, kept, rx, last, follow, finished)))
        },
    )
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
    let body = session.next_request_body().map_err(ApiError::internal)?;
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
