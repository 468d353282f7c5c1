//! The accept loop: HTTP/1.1 connections served by hyper, with
//! - a deadline for a request's headers, which also closes a keep-alive connection that sits
//!   idle (a client that opens connections and sends nothing cannot hold them);
//! - a cap on open connections: one more is answered `503 too_many_connections` at once and
//!   closed, so a flood costs a write, not a task;
//! - a graceful end: when `closed` fires, no new connection is taken, each open one finishes
//!   the response it is writing, and the loop waits (boundedly) for them.
//!
//! Each request carries the address its connection came in on ([`LocalAddr`]), for the Host
//! check. HTTP/2 is not offered: browsers speak it only over TLS, and one HTTP/2 connection
//! would multiplex past the cap.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::access::LocalAddr;

/// How many connections, and how long a client may take to send a request's headers.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(30),
        }
    }
}

/// How long open connections get to finish once the server stops.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The whole answer to a connection over the cap.
static REFUSAL: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let body = r#"{"code":"too_many_connections","message":"the server has as many connections open as it allows ([serve] max_connections); retry later"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
});

/// Serves `router` on `listener` until `closed` fires, then lets open connections finish.
pub(super) async fn serve_connections(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    closed: CancellationToken,
) {
    let cap = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let permits = Arc::new(Semaphore::new(cap));
    let (stop, stopping) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = closed.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: wait rather than spin.
                if !is_per_connection(&e) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refuse(stream);
            continue;
        };
        let router = match stream.local_addr() {
            Ok(local) => router.clone().layer(axum::Extension(LocalAddr(local))),
            Err(_) => continue,
        };
        let _ = stream.set_nodelay(true);
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let connection =
                http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stopping.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CLOSE_GRACE, connection).await;
                }
            }
        });
    }
    drop(listener);
    let _ = stop.send(());
    // Every permit back means every connection has ended.
    let all = u32::try_from(cap).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(CLOSE_GRACE * 2, permits.acquire_many(all)).await;
}

/// Answers 503 without waiting on the client (a client that does not read gets nothing).
fn refuse(stream: TcpStream) {
    let _ = stream.try_write(&REFUSAL);
}

/// Errors that concern one connection (the next accept may well succeed).
fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_one_well_formed_response() {
        let text = std::str::from_utf8(&REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(body.len(), length);
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["code"], "too_many_connections");
    }
}
