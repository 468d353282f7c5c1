//! `POST /api/sessions/{id}/rewind`: `vis rewind` over HTTP (see `crate::checkpoints`).
//! Refused while the session runs a turn or block (the slot is claimed for the rewind, so
//! none starts meanwhile).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::{begin, ApiError, ApiResult, Body};
use crate::checkpoints::{parse_point, CheckpointError, Point, RewindOptions};
use crate::gateway::GatewayError;
use crate::serve::App;

#[derive(Debug, Deserialize, ToSchema)]
pub struct PostRewind {
    /// The turn to go back to before: `t3`.
    pub turn: String,
    /// Keep the conversation; the model is told at its next request what was rewound.
    #[serde(default)]
    pub code_only: bool,
    /// Overwrite files changed outside Vis since the session wrote them.
    #[serde(default)]
    pub force: bool,
}

/// Restore every file the session changed to its state before a turn (all or none), and cut
/// the conversation there unless `code_only`. A file changed outside Vis since is refused
/// (409, `conflict`, with its three versions in the message) unless `force`.
#[utoipa::path(post, path = "/api/sessions/{id}/rewind", params(("id" = String, Path)), request_body = PostRewind,
    responses((status = 200, body = Value, description = "{turn, restored, removed, kept, not_restored, overwritten, truncated}"),
        (status = 400, body = ApiError), (status = 404, body = ApiError), (status = 409, body = ApiError)))]
pub async fn post_rewind(
    State(app): State<App>,
    Path(id): Path<String>,
    Body(body): Body<PostRewind>,
) -> ApiResult<Json<Value>> {
    let turn = match parse_point(&body.turn) {
        Ok(Point::BeforeTurn(turn)) => turn,
        Ok(Point::Start) => return Err(ApiError::bad("a rewind point is a turn, such as t3")),
        Err(e) => return Err(ApiError::bad(e.to_string())),
    };
    let slot = begin(&app, &id)?;
    if slot.try_begin().is_none() {
        return Err(ApiError::busy(&id));
    }
    let result = async {
        let mut guard = slot.session.lock().await;
        app.registry.load(&id, &mut guard)?;
        let Some(session) = guard.as_mut() else {
            return Err(ApiError::internal("the session could not be opened"));
        };
        let options = RewindOptions {
            code_only: body.code_only,
            force: body.force,
        };
        let outcome = session.rewind(turn, options).await.map_err(refusal)?;
        let live = session.supervisor().is_running();
        Ok((outcome, live))
    }
    .await;
    let (outcome, live) = match result {
        Ok(done) => done,
        Err(e) => {
            slot.end(false);
            app.registry.release_if_idle(&slot);
            return Err(e);
        }
    };
    slot.end(live);
    app.registry.release_if_idle(&slot);
    let files = &outcome.files;
    Ok(Json(json!({
        "turn": outcome.turn,
        "restored": files.restored,
        "removed": files.removed,
        "kept": files.kept,
        "not_restored": files.not_restored.iter().map(|(p, why)| json!({"path": p, "why": why})).collect::<Vec<_>>(),
        "overwritten": outcome.overwritten,
        "truncated": outcome.truncated,
    })))
}

fn refusal(e: GatewayError) -> ApiError {
    match e {
        GatewayError::Checkpoint(e) => match e {
            CheckpointError::BadKey { .. } | CheckpointError::NoSuchTurn { .. } => {
                ApiError::bad(e.to_string())
            }
            CheckpointError::NoCheckpoints(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
            }
            CheckpointError::Refused(_) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            e => ApiError::internal(e),
        },
        e => ApiError::internal(e),
    }
}
