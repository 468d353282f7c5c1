//! Routing between nodes: a request for a session another live node runs is passed to that
//! node (proxied, server-sent events streamed through as they come), so a client may talk to
//! any node. Creating and listing sessions are answered by whichever node gets them.
//!
//! Trust: the request is checked here first (token or cookie, Host, Origin: `access::guard`
//! runs before this layer), then sent on with this node's bearer token, which every node of
//! one deployment shares, and without the client's cookie, Origin or token. It goes only to
//! the address the lease table names for that session, never to one a client chose, and a
//! request that arrives forwarded is never forwarded again (one hop at most).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::api::{ApiError, Moved};
use super::App;
use crate::store::LeaseHolder;

/// Set on a request one node passes to another (its value: the sending node's id).
pub const FORWARDED_BY: &str = "x-vis-forwarded-by";

/// Bodies are capped at 2 MB by the API; the router buffers at most that to retry.
const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Headers not passed on: hop-by-hop ones, and the client's own credentials and browser
/// context (the next node sees this node's token instead).
const NOT_FORWARDED: &[&str] = &[
    "host",
    "authorization",
    "cookie",
    "origin",
    "referer",
    "sec-fetch-site",
    "sec-fetch-mode",
    "sec-fetch-dest",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    // The peer's cookies are its own (its login), never the client's of this node.
    "set-cookie",
    FORWARDED_BY,
];

/// The session a path is about: `/api/sessions/{id}` and everything beneath it. A path with
/// a dot segment (`..`, `.`, or either percent-encoded) is about none: the peer's URL parser
/// would resolve it to another route, and only session routes are passed on.
fn session_of(path: &str) -> Option<&str> {
    let dotted = path.split('/').any(|segment| {
        let lower = segment.to_ascii_lowercase();
        lower == "." || lower == ".." || lower.contains("%2e")
    });
    if dotted {
        return None;
    }
    let rest = path.strip_prefix("/api/sessions/")?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

/// The router layer (after `access::guard`).
pub async fn to_holder(State(app): State<App>, request: Request, next: Next) -> Response {
    let Some(node) = app.registry.node().cloned() else {
        return next.run(request).await;
    };
    let Some(id) = session_of(request.uri().path()).map(str::to_string) else {
        return next.run(request).await;
    };
    if crate::session::validate_session_id(&id).is_err() {
        return next.run(request).await;
    }
    let forwarded = request.headers().contains_key(FORWARDED_BY);
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::bad(format!("the request body could not be read: {e}"))
                .into_response()
        }
    };
    // A few rounds: the holder can change (it died, or another node won the session) while
    // this request is under way.
    for _ in 0..4 {
        let holder = if forwarded {
            None
        } else {
            match node.holder_elsewhere(&id) {
                Ok(h) => h,
                Err(e) => return ApiError::internal(e).into_response(),
            }
        };
        if let Some(holder) = holder {
            match forward(&app, &holder, &parts, body.clone()).await {
                Ok(response) => return response,
                Err(Retry::Moved) => continue,
                Err(Retry::Unreachable) => {
                    // Its node is gone (or cut off): it stops using the session before the
                    // lease expires, and then this node may take it.
                    let wait = Duration::from_millis(holder.expires_in_ms.max(0) as u64 + 50)
                        .min(node.ttl + Duration::from_millis(50));
                    tokio::time::sleep(wait).await;
                    continue;
                }
            }
        }
        let local = Request::from_parts(parts.clone(), Body::from(body.clone()));
        let response = next.clone().run(local).await;
        if response.extensions().get::<Moved>().is_none() || forwarded {
            return response;
        }
    }
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "moved",
        format!("session '{id}' kept changing nodes while this request was under way; retry it"),
    )
    .into_response()
}

/// Why a forwarded request is to be tried again.
enum Retry {
    /// The holder could not be reached at all (nothing was sent).
    Unreachable,
    /// The holder no longer runs the session.
    Moved,
}

/// The client for other nodes: no redirects, and never through `HTTP_PROXY` and the like (a
/// proxy would see the shared token); `None` if it cannot be built.
fn peer_client() -> Option<&'static reqwest::Client> {
    static CLIENT: std::sync::OnceLock<Option<reqwest::Client>> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            crate::providers::install_crypto_provider();
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .connect_timeout(Duration::from_secs(3))
                .build()
                .ok()
        })
        .as_ref()
}

async fn forward(
    app: &App,
    holder: &LeaseHolder,
    parts: &axum::http::request::Parts,
    body: axum::body::Bytes,
) -> Result<Response, Retry> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path}", holder.address.trim_end_matches('/'));
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if !NOT_FORWARDED.contains(&name.as_str()) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", app.access.token().as_str())) {
        headers.insert(header::AUTHORIZATION, v);
    }
    if let Some(node) = app.registry.node() {
        if let Ok(v) = HeaderValue::from_str(&node.id) {
            headers.insert(HeaderName::from_static(FORWARDED_BY), v);
        }
    }
    let Some(client) = peer_client() else {
        return Ok(
            ApiError::internal("the HTTP client for other nodes could not be built")
                .into_response(),
        );
    };
    let sent = client
        .request(parts.method.clone(), &url)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let upstream = match sent {
        Ok(r) => r,
        Err(e) if e.is_connect() => return Err(Retry::Unreachable),
        Err(e) => {
            return Ok(ApiError::new(
                StatusCode::BAD_GATEWAY,
                "node_unreachable",
                format!(
                    "node '{}' ({}) that runs this session did not answer: {e}",
                    holder.node_id, holder.address
                ),
            )
            .into_response())
        }
    };
    app.registry.metrics.requests_proxied.inc();
    if upstream.status() == StatusCode::UNAUTHORIZED {
        return Ok(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "node_refused",
            format!("node '{}' that runs this session refused this node's token: every node of one deployment must share the serve token ([serve] token, VIS_SERVE_TOKEN, or the same serve-token file)", holder.node_id),
        )
        .into_response());
    }
    let status = upstream.status();
    let mut response = Response::builder().status(status.as_u16());
    for (name, value) in upstream.headers() {
        if !NOT_FORWARDED.contains(&name.as_str()) {
            response = response.header(name.as_str(), value.as_bytes());
        }
    }
    let moved = status == StatusCode::SERVICE_UNAVAILABLE
        && upstream
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if moved {
        // The holder says it no longer runs the session (its answer is small): try again.
        let bytes = upstream.bytes().await.unwrap_or_default();
        let code = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v["code"].as_str().map(str::to_string));
        if code.as_deref() == Some("moved") {
            return Err(Retry::Moved);
        }
        return Ok(response
            .body(Body::from(bytes))
            .unwrap_or_else(|e| ApiError::internal(e).into_response()));
    }
    // Streamed as it comes: an SSE turn reaches the client event by event.
    Ok(response
        .body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|e| ApiError::internal(e).into_response()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_session_paths_are_routed() {
        assert_eq!(super::session_of("/api/sessions/s-1/turns"), Some("s-1"));
        assert_eq!(super::session_of("/api/sessions/s-1"), Some("s-1"));
        assert_eq!(super::session_of("/api/sessions"), None);
        assert_eq!(super::session_of("/api/sessions/"), None);
        assert_eq!(super::session_of("/metrics"), None);
        // Dot segments would leave the session's routes at the peer: never routed.
        assert_eq!(super::session_of("/api/sessions/s-1/../../login"), None);
        assert_eq!(super::session_of("/api/sessions/s-1/%2E%2e/x"), None);
        assert_eq!(super::session_of("/api/sessions/s-1/./turns"), None);
    }
}
