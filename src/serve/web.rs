//! The web view: one page, shipped inside the binary (no build step for users). It talks to
//! the same API as every other client, with the bearer token the person gives it.

use axum::http::header;
use axum::response::{IntoResponse, Response};

static INDEX: &str = include_str!("web/index.html");

pub async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // The page loads nothing from elsewhere.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:",
            ),
        ],
        INDEX,
    )
        .into_response()
}
