//! Sessions: list, create, read (a page of turns at a time), delete; and the providers a
//! client may choose from.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

use super::{reader, require, status_of, ApiError, ApiResult, Body};
use crate::serve::providers::ProviderInfo;
use crate::serve::App;
use crate::store::{CostTotals, TurnRange};

/// Turns per page of `GET /api/sessions/{id}` unless the client asks for fewer.
pub const DEFAULT_PAGE_TURNS: i64 = 50;
/// The most turns one page holds.
pub const MAX_PAGE_TURNS: i64 = 200;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// An existing directory on the server that it allows ([serve] workspaces): the
    /// session's workspace.
    pub workspace: String,
    /// One of the providers the server offers, by name (GET /api/providers); default
    /// `default`. The model, base URL and key come from the server's configuration.
    pub provider: Option<String>,
    /// Refused: a client cannot choose a model.
    #[schema(ignore)]
    #[serde(default)]
    model: Option<serde::de::IgnoredAny>,
    /// Refused: a client cannot choose a base URL.
    #[schema(ignore)]
    #[serde(default)]
    base_url: Option<serde::de::IgnoredAny>,
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
    /// The input in uncached-token units at the cache prices, over the requests whose
    /// provider reported its cache figures (`null`: none did).
    pub weighted_tokens: Option<f64>,
    /// Requests whose cache reads fell under half the expected ones (a prefix bug).
    pub cache_misses: i64,
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
            weighted_tokens: totals.weighted_tokens,
            cache_misses: totals.cache_misses,
        });
    }
    Ok(Json(out))
}

/// The providers a new session may use, by name (the first is the default).
#[utoipa::path(get, path = "/api/providers", responses((status = 200, body = [ProviderInfo])))]
pub async fn list_providers(State(app): State<App>) -> Json<Vec<ProviderInfo>> {
    Json(app.registry.providers.list())
}

/// Create a session for a workspace, optionally naming one of the server's providers.
#[utoipa::path(post, path = "/api/sessions", request_body = CreateSession,
    responses((status = 201, body = Value, description = "{\"id\": …}"), (status = 400, body = ApiError)))]
pub async fn create_session(
    State(app): State<App>,
    Body(body): Body<CreateSession>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    if body.model.is_some() || body.base_url.is_some() {
        return Err(ApiError::bad(format!(
            "a client cannot choose the model or base URL: they come from the server's configuration; send \"provider\" with one of the names it offers ({}; GET /api/providers)",
            app.registry.providers.names().join(", ")
        )));
    }
    let registry = app.registry.clone();
    let id = tokio::task::spawn_blocking(move || {
        registry.create(&body.workspace, body.provider.as_deref())
    })
    .await
    .map_err(ApiError::internal)??;
    Ok((StatusCode::CREATED, Json(json!({"id": id}))))
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct PageQuery {
    /// The first turn of the page (default: the first).
    pub from_turn: Option<i64>,
    /// How many turns (default 50, at most 200).
    pub turns: Option<i64>,
}

/// A page of a session: its turns `from_turn` on, with their iterations, folds, conversation
/// items and requests; `page.next_turn` is where the next page starts (`null`: no more).
/// `session`, `status`, `model`, `defs`, `cost` (the whole session's cost totals and cache
/// shares), `parent` (the sub-session's link, `null` for a top-level session) and `children`
/// (its sub-sessions with their status, answer and tokens) come with every page.
#[utoipa::path(get, path = "/api/sessions/{id}", params(("id" = String, Path), PageQuery),
    responses((status = 200, body = Value), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
pub async fn get_session(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<Value>> {
    let size = q.turns.unwrap_or(DEFAULT_PAGE_TURNS);
    if !(1..=MAX_PAGE_TURNS).contains(&size) {
        return Err(ApiError::bad(format!(
            "turns must be between 1 and {MAX_PAGE_TURNS}, not {size}"
        )));
    }
    let store = reader(&app)?;
    let row = require(&*store, &id)?;
    let e = ApiError::internal;
    let counts = store.counts(&id).map_err(e)?;
    // Turn numbers start at 1; the first page also takes anything recorded before a turn.
    let first = q.from_turn.unwrap_or(1).max(1);
    let range = TurnRange {
        first: if first == 1 { i64::MIN } else { first },
        last: first.saturating_add(size - 1),
    };
    let next = (range.last < counts.turns).then_some(range.last + 1);
    let slot = app.registry.slots().into_iter().find(|s| s.id == id);
    Ok(Json(json!({
        "session": row,
        "status": status_of(slot.as_ref()),
        "model": store.session_model(&id).map_err(e)?,
        "page": {"from_turn": first, "to_turn": range.last.min(counts.turns), "next_turn": next, "turns_total": counts.turns},
        "turns": store.turns_in(&id, range).map_err(e)?,
        "iterations": store.iterations_in(&id, range).map_err(e)?,
        "folds": store.folds_in(&id, range).map_err(e)?.iter().map(|f| json!({
            "id": f.id, "turn": f.turn, "iteration": f.iteration, "key": f.key,
            "spans": f.spans,
            "gist": f.gist, "automatic": f.automatic, "absorbed_by": f.absorbed_by,
            "receipt": f.receipt,
            "measurement": f.measurement,
        })).collect::<Vec<_>>(),
        "defs": store.load_defs(&id).map_err(e)?,
        "history": store.history_in(&id, range).map_err(e)?,
        "requests": store.requests_in(&id, range).map_err(e)?,
        "cost": cost_of(&store.requests(&id).map_err(e)?),
        // Sub-sessions (issue 27 §3): the one that spawned this session, and its own.
        "parent": store.child(&id).map_err(e)?,
        "children": store.children_of(&id).map_err(e)?,
        // Background jobs (issue 27 §1) of the worker this node runs for the session.
        "jobs": slot.as_ref().map(|s| s.jobs()).unwrap_or_default(),
    })))
}

/// The session's cost totals (`CostTotals`) with its measured and expected cache shares.
fn cost_of(requests: &[crate::store::RequestRecord]) -> Value {
    let totals = CostTotals::of(requests);
    let mut value = serde_json::to_value(totals).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.insert("measured_share".into(), json!(totals.measured_share()));
        map.insert("expected_share".into(), json!(totals.expected_share()));
    }
    value
}

#[derive(Debug, Deserialize, IntoParams)]
pub struct DeleteQuery {
    /// `keep` (default: the worker ends, the history stays) or `delete` (everything goes).
    pub history: Option<String>,
}

/// End a session's worker; keep or remove its history. Its event log and metrics go.
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
                "history must be 'keep' or 'delete', not '{}'",
                crate::protocol::clip(other, 40)
            )))
        }
    };
    // No other node may run it while it goes.
    app.registry.claim(&id)?;
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
        // Its checkpoints (workspace content it recorded) go with it.
        let _ = std::fs::remove_dir_all(crate::checkpoints::session_dir(&app.registry.db, &id));
    }
    Ok(Json(
        json!({"id": id, "worker": "ended", "history": if remove { "deleted" } else { "kept" }}),
    ))
}
