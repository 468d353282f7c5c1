//! The images a session's blocks showed (`show()`), for the web view's `<img>` elements.
//!
//! The bytes came from a block, so they are served only as the image format the host
//! validated (never a type the bytes claim or a browser would sniff): `Content-Type` from the
//! stored, checked format, `X-Content-Type-Options: nosniff`, a `default-src 'none'` content
//! policy and `inline` disposition. A hash is served only for a session whose history shows
//! it; the content behind a hash never changes, so it may be cached privately for long.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::{reader, require, ApiError, ApiResult};
use crate::serve::App;

/// An image a tool result of session `id` shows, by its blake3 hash (from the session's
/// `history[].images[].hash`).
#[utoipa::path(get, path = "/api/sessions/{id}/images/{hash}",
    params(("id" = String, Path), ("hash" = String, Path)),
    responses((status = 200, description = "the image (PNG, JPEG, GIF or WebP)"), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
pub async fn get_image(
    State(app): State<App>,
    Path((id, hash)): Path<(String, String)>,
) -> ApiResult<Response> {
    let store = reader(&app)?;
    require(&*store, &id)?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad(format!(
            "'{}' is not an image hash (64 hex digits, from the session's history)",
            crate::protocol::clip(&hash, 80)
        )));
    }
    let (format, data) = store
        .image(&id, &hash)
        .map_err(ApiError::internal)?
        .ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "not_found",
                format!("session '{id}' shows no image {hash}"),
            )
        })?;
    Ok((
        [
            (header::CONTENT_TYPE, format.media_type()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; sandbox",
            ),
            (header::CONTENT_DISPOSITION, "inline"),
            (
                header::CACHE_CONTROL,
                "private, max-age=31536000, immutable",
            ),
        ],
        data,
    )
        .into_response())
}
