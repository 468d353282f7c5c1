//! `vis serve`: the gateway as a long-running HTTP service for many sessions (axum on tokio).
//!
//! - `listener`: the accept loop (HTTP/1.1, a header-read deadline, a connection cap);
//! - `access`: the checks every request passes first (Host, token or cookie, Origin, JSON
//!   bodies); `token`: the token and its file; `login`: the one-time login URL and cookies;
//! - `api`: the sessions API, turns as server-sent events, control and inspection;
//! - `registry`: the sessions the server holds, the live-worker cap and idle parking;
//!   `providers`: the providers a client may choose by name; `workspaces`: where sessions may
//!   live;
//! - `events`: per-session event logs with ids (bounded in bytes), so clients can resume with
//!   `Last-Event-ID`;
//! - `metrics`: `/metrics` in the Prometheus text format;
//! - `web`: the page at `/` and its ES modules at `/web/…`, shipped inside the binary.
//!
//! Security (docs/serve.md): a token always, generated at the first start; every route checks
//! it, loopback included, except the page and the login routes; Host must name this server
//! and a state-changing request's Origin must be its own, so neither a page on another site
//! nor a DNS-rebinding page can drive it. Providers and workspaces come from the server's
//! configuration only. Shutdown (SIGTERM or Ctrl-C) stops taking turns, lets running blocks
//! finish within the grace period (turns stop before their next model request), then
//! interrupts what still runs, records it, stops the workers and exits.

mod access;
mod api;
mod events;
mod listener;
mod login;
mod metrics;
mod node;
mod providers;
mod registry;
pub(crate) mod route;
mod token;
mod web;
mod workspaces;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use access::Access;
pub use events::DEFAULT_LOG_BYTES;
pub use listener::ConnectionLimits;
pub use node::{NodeConfig, DEFAULT_LEASE_TTL};
pub use providers::{ProviderInfo, ServeProviders, UnknownProvider};
pub use registry::{HubFor, Registry, RegistryError, RegistryOptions, SettingsError, SettingsFor};
pub use token::{ServeToken, TokenError};
pub use workspaces::{WorkspaceError, WorkspacePolicy};

/// What the server needs to run on a bound listener.
pub struct ServeOptions {
    pub access: Arc<Access>,
    pub registry: Arc<Registry>,
    /// How long running blocks get to finish at shutdown.
    pub grace: Duration,
    pub limits: ConnectionLimits,
    /// This server as a node over the shared store (`[serve] node_id`, `advertise`,
    /// `lease_ttl`).
    pub node: NodeConfig,
}

#[derive(Clone)]
pub struct App {
    pub registry: Arc<Registry>,
    access: Arc<Access>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}; pick another address with --listen")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

#[derive(OpenApi)]
#[openapi(info(
    title = "Vis",
    description = "The Vis gateway as a service: sessions, turns as server-sent events, control and inspection. Every route needs `Authorization: Bearer <token>` (or the web view's login cookie). Errors are JSON {code, message}."
))]
struct ApiDoc;

/// The router with every route, and the OpenAPI document generated from the handlers. Every
/// request passes [`access::guard`] first.
fn router(app: App) -> axum::Router {
    let (api_router, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(
            api::sessions::list_sessions,
            api::sessions::create_session
        ))
        .routes(routes!(
            api::sessions::get_session,
            api::sessions::delete_session
        ))
        .routes(routes!(api::sessions::list_providers))
        .routes(routes!(api::work::post_turn))
        .routes(routes!(api::stream::get_events))
        .routes(routes!(api::work::interrupt))
        .routes(routes!(api::work::post_exec))
        .routes(routes!(api::work::get_context))
        .routes(routes!(api::rewind::post_rewind))
        .routes(routes!(api::images::get_image))
        .routes(routes!(login::login_with_token))
        .routes(routes!(login::logout))
        .split_for_parts();
    let openapi = Arc::new(openapi);
    web::with_modules(api_router)
        .route("/metrics", axum::routing::get(metrics))
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let openapi = openapi.clone();
                async move { axum::Json((*openapi).clone()) }
            }),
        )
        .route("/", axum::routing::get(web::index))
        .route("/login", axum::routing::get(login::login_with_code))
        .fallback(not_found)
        // Layers run outside in: access first, then routing to the node that runs a session.
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            route::to_holder,
        ))
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            access::guard,
        ))
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
    let log_bytes = app.registry.log_bytes.load(Ordering::Relaxed);
    app.registry
        .metrics
        .event_log_bytes
        .set(i64::try_from(log_bytes).unwrap_or(i64::MAX));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.registry.metrics.encode(),
    )
        .into_response()
}

/// Binds the listening socket.
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Serves on a bound listener until `shutdown` completes (the command passes
/// [`shutdown_signal`], tests their own), then shuts down gracefully.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    opts: ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let app = App {
        registry: opts.registry.clone(),
        access: opts.access.clone(),
    };
    let registry = opts.registry.clone();
    if let Ok(bound) = listener.local_addr() {
        let (id, address) = node::resolve(&opts.node, bound);
        if let Some(host) = reqwest::Url::parse(&address)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
        {
            opts.access.answer_to_peer_name(&host);
        }
        registry.set_node(Arc::new(node::Node::new(
            id,
            address,
            opts.node.lease_ttl,
            registry.db.clone(),
        )));
    }
    let renewal = tokio::spawn(renew_leases(registry.clone()));
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
    listener::serve_connections(listener, router(app), opts.limits, closed).await;
    sweeper.abort();
    let _ = drain_task.await;
    registry.shutdown_all().await;
    renewal.abort();
}

/// Renews this node's leases every `ttl / 6`; a session whose lease was lost, or not kept
/// within half the ttl, is stopped here (`Registry::lose`) before any other node may take it.
async fn renew_leases(registry: Arc<Registry>) {
    let Some(node) = registry.node().cloned() else {
        return;
    };
    loop {
        tokio::time::sleep(node.renew_every()).await;
        let sent = std::time::Instant::now();
        let renewing = {
            let node = node.clone();
            tokio::task::spawn_blocking(move || node.renew_in_store())
        };
        // A store that hangs must not hold the check back: past the wait the leases are
        // judged by their age alone.
        let outcome = match tokio::time::timeout(node.renew_every(), renewing).await {
            Ok(Ok(Ok(kept))) => Some(kept),
            _ => None,
        };
        for id in node.renew(outcome, sent) {
            let registry = registry.clone();
            tokio::spawn(async move { registry.lose(&id).await });
        }
        registry
            .metrics
            .leases_held
            .set(i64::try_from(node.held_count()).unwrap_or(i64::MAX));
    }
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

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
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
