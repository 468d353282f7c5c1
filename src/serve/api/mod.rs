//! The HTTP API: sessions, turns as server-sent events, control and inspection. Every
//! handler is annotated for the OpenAPI document (`/openapi.json` is generated from these
//! annotations, so it cannot drift). Errors are JSON `{"code", "message"}` with a stable code.
//!
//! - `sessions`: list, create, read (paginated by turns), delete; the providers on offer;
//! - `work`: turns, blocks, interrupts, the next request, and the task that runs them;
//! - `stream`: a session's events as server-sent events, live and replayed;
//! - `images`: the images blocks showed (`show()`), served as their validated format;
//! - `rewind`: a session's files (and conversation) back to before a turn.
//!
//! Who may call any of it is checked before a handler runs (`serve::access`).

pub mod images;
pub mod rewind;
pub mod sessions;
pub mod stream;
pub mod work;

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::registry::Slot;
use super::App;
use crate::store::Store;

/// An error as the API reports it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiError {
    /// Stable, machine-readable: `not_found`, `bad_request`, `busy`, `idle`, `unauthorized`, `moved`, `lease_lost`,
    /// `conflict`, `host_not_allowed`, `origin_not_allowed`, `unsupported_media_type`, `shutting_down`,
    /// `too_many_connections`, `runtime`, `internal`.
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

    pub(super) fn not_found(id: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no session '{id}'; GET /api/sessions lists them"),
        )
    }

    pub(super) fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub(super) fn busy(id: &str) -> ApiError {
        ApiError::new(
            StatusCode::CONFLICT,
            "busy",
            format!("session '{id}' is running a turn or block; wait for it (GET /api/sessions/{id}/events) or interrupt it (POST /api/sessions/{id}/interrupt)"),
        )
    }

    /// The session moved to another node while this node ran the request (its lease was
    /// lost): 503 with `Retry-After`, and a retry is routed to the new holder.
    pub(super) fn lease_lost(message: String) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "lease_lost", message)
    }

    pub(super) fn internal(message: impl std::fmt::Display) -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            message.to_string(),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let moved = self.code == "moved";
        let mut response = (
            self.status,
            Json(json!({"code": self.code, "message": self.message})),
        )
            .into_response();
        if moved {
            // The router retries such a request at the node that runs the session now.
            response.extensions_mut().insert(Moved);
        }
        if self.code == "lease_lost" {
            // Not retried by the router (the work may have had effects): the client decides.
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

/// Marks a local answer "another node runs this session now": the router retries there.
#[derive(Debug, Clone, Copy)]
pub struct Moved;

pub(super) type ApiResult<T> = Result<T, ApiError>;

impl From<crate::serve::RegistryError> for ApiError {
    fn from(e: crate::serve::RegistryError) -> Self {
        use crate::gateway::GatewayError;
        use crate::serve::RegistryError;
        use crate::store::StoreError;
        match e {
            RegistryError::Provider(e) => ApiError::bad(e.to_string()),
            RegistryError::Workspace(e) => ApiError::bad(e.to_string()),
            e @ RegistryError::Elsewhere { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "moved", e.to_string())
            }
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

/// `running`, `idle` (worker alive) or `parked` (no worker now).
fn status_of(slot: Option<&Arc<Slot>>) -> &'static str {
    match slot {
        Some(s) if s.is_working() => "running",
        Some(s) if s.live.load(std::sync::atomic::Ordering::SeqCst) => "idle",
        _ => "parked",
    }
}

/// The slot of stored session `id`, to start work in (refused while the server drains).
fn begin(app: &App, id: &str) -> ApiResult<Arc<Slot>> {
    if app.registry.drain.is_cancelled() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down; retry after it restarts",
        ));
    }
    let store = reader(app)?;
    let row = require(&*store, id)?;
    app.registry
        .allows(&row)
        .map_err(|e| ApiError::bad(e.to_string()))?;
    // This node runs the session from here on (or says which node does).
    app.registry.claim(id)?;
    Ok(app.registry.slot(id))
}
