//! `vis serve`: the gateway as a long-running HTTP service for many sessions (axum on tokio).
//!
//! - `api`: the sessions API, turns as server-sent events, control and inspection;
//! - `registry`: the sessions the server holds, the live-worker cap and idle parking;
//! - `events`: per-session event logs with ids, so clients can resume with `Last-Event-ID`;
//! - `metrics`: `/metrics` in the Prometheus text format;
//! - `web`: the page at `/`, shipped inside the binary.
//!
//! Security: the server listens on loopback unless told otherwise; beyond loopback it
//! refuses to start without a bearer token, and when a token is set every API request must
//! carry it (compared in constant time). Shutdown (SIGTERM or Ctrl-C) stops taking turns,
//! lets running blocks finish within the grace period (turns stop before their next model
//! request), then interrupts what still runs, records it, stops the workers and exits.

mod api;
mod events;
mod metrics;
mod registry;
mod web;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use registry::{HubFor, ModelChoice, Registry, RegistryError, SettingsError, SettingsFor};

/// What the server needs to start.
pub struct ServeOptions {
    pub listen: SocketAddr,
    pub token: Option<String>,
    pub registry: Arc<Registry>,
    /// How long running blocks get to finish at shutdown.
    pub grace: Duration,
}

#[derive(Clone)]
pub struct App {
    pub registry: Arc<Registry>,
    token: Option<Arc<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("listening on {0} (beyond loopback) needs a bearer token: set VIS_SERVE_TOKEN or [serve] token, or listen on 127.0.0.1")]
    TokenRequired(SocketAddr),
    #[error("cannot listen on {addr}: {source}; pick another address with --listen")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(OpenApi)]
#[openapi(info(
    title = "Vis",
    description = "The Vis gateway as a service: sessions, turns as server-sent events, control and inspection. Errors are JSON {code, message}."
))]
struct ApiDoc;

/// The router with every route, and the OpenAPI document generated from the handlers.
pub fn router(app: App) -> axum::Router {
    let (api_router, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(api::list_sessions, api::create_session))
        .routes(routes!(api::get_session, api::delete_session))
        .routes(routes!(api::post_turn))
        .routes(routes!(api::get_events))
        .routes(routes!(api::interrupt))
        .routes(routes!(api::post_exec))
        .routes(routes!(api::get_context))
        .split_for_parts();
    let openapi = Arc::new(openapi);
    let guarded = api_router
        .route("/metrics", axum::routing::get(metrics))
        .layer(axum::middleware::from_fn_with_state(app.clone(), authorize));
    axum::Router::new()
        .merge(guarded)
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let openapi = openapi.clone();
                async move { axum::Json((*openapi).clone()) }
            }),
        )
        .route("/", axum::routing::get(web::index))
        .fallback(not_found)
        .with_state(app)
}

async fn not_found() -> Response {
    api::ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route; GET /openapi.json describes the API",
    )
    .into_response()
}

async fn metrics(State(app): State<App>) -> Response {
    app.registry.update_live_gauge();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.registry.metrics.encode(),
    )
        .into_response()
}

/// Checks the bearer token (when one is set) in constant time.
async fn authorize(State(app): State<App>, request: Request, next: Next) -> Response {
    app.registry.metrics.http_requests.inc();
    if let Some(token) = &app.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        let ok: bool = given.as_bytes().ct_eq(token.as_bytes()).into();
        if !ok {
            return api::ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is required: send `Authorization: Bearer <token>`",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Serves until SIGTERM or Ctrl-C, then shuts down gracefully.
pub async fn serve(opts: ServeOptions) -> Result<(), ServeError> {
    if !opts.listen.ip().is_loopback() && opts.token.as_deref().is_none_or(str::is_empty) {
        return Err(ServeError::TokenRequired(opts.listen));
    }
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: opts.listen,
            source,
        })?;
    serve_on(listener, opts, shutdown_signal()).await
}

/// Serves on a bound listener until `shutdown` completes (tests pass their own).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    opts: ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = App {
        registry: opts.registry.clone(),
        token: opts.token.filter(|t| !t.is_empty()).map(Arc::new),
    };
    let registry = opts.registry.clone();
    let sweeper = tokio::spawn({
        let registry = registry.clone();
        async move {
            let every = (registry.idle_park_after / 4)
                .clamp(Duration::from_millis(100), Duration::from_secs(30));
            loop {
                tokio::time::sleep(every).await;
                registry.sweep().await;
            }
        }
    });
    let closed = tokio_util::sync::CancellationToken::new();
    let drained = {
        let registry = registry.clone();
        let closed = closed.clone();
        let grace = opts.grace;
        async move {
            shutdown.await;
            drain(&registry, grace).await;
            closed.cancel();
        }
    };
    let drain_task = tokio::spawn(drained);
    let server = axum::serve(listener, router(app)).with_graceful_shutdown({
        let closed = closed.clone();
        async move { closed.cancelled().await }
    });
    let result = server.await;
    sweeper.abort();
    let _ = drain_task.await;
    registry.shutdown_all().await;
    result.map_err(ServeError::Io)
}

/// Stop taking work, let running blocks finish within `grace`, then interrupt the rest.
async fn drain(registry: &Registry, grace: Duration) {
    registry.drain.cancel();
    let deadline = tokio::time::Instant::now() + grace;
    loop {
        let working: Vec<_> = registry
            .slots()
            .into_iter()
            .filter(|s| s.is_working())
            .collect();
        if working.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            for slot in &working {
                slot.interrupt();
            }
            // Interrupted turns end quickly (the worker's own grace bounds it).
            let hard = tokio::time::Instant::now() + Duration::from_secs(10);
            while registry.slots().iter().any(|s| s.is_working())
                && tokio::time::Instant::now() < hard
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
