//! A `vis serve` in the test process: the real router on a loopback port, with sessions
//! wired to the fake provider, and a small SSE client.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use vis::serve::{Registry, ServeOptions, SettingsFor};

use super::chat::settings;
use super::fake_provider::FakeProvider;
use super::TestEnv;

pub struct TestServer {
    pub url: String,
    pub registry: Arc<Registry>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub struct ServerConfig {
    pub token: Option<String>,
    pub max_live_workers: usize,
    pub idle_park_after: Duration,
    pub grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            token: None,
            max_live_workers: 8,
            idle_park_after: Duration::from_secs(3600),
            grace: Duration::from_secs(5),
        }
    }
}

impl TestServer {
    pub fn start(env: &TestEnv, fake: &FakeProvider, config: ServerConfig) -> TestServer {
        let base = settings(env, fake, vis::providers::ProviderKind::OpenAi);
        let settings_for: SettingsFor = Arc::new(move |_, _, workspace| {
            let mut s = base.clone();
            s.worker.workspace = Some(workspace.into());
            Ok(s)
        });
        let registry = Arc::new(Registry::new(
            env.db(),
            settings_for,
            config.max_live_workers,
            config.idle_park_after,
        ));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let reg = registry.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready_tx.send(listener.local_addr().unwrap()).unwrap();
                let opts = ServeOptions {
                    listen: listener.local_addr().unwrap(),
                    token: config.token,
                    registry: reg,
                    grace: config.grace,
                };
                vis::serve::serve_on(listener, opts, async move {
                    let _ = rx.await;
                })
                .await
                .unwrap();
            });
        });
        let addr = ready_rx.recv().unwrap();
        TestServer {
            url: format!("http://{addr}"),
            registry,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// Shuts the server down gracefully and waits until it has stopped.
    pub fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }

    /// Begins a graceful shutdown without waiting.
    pub fn begin_stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct Sse {
    pub id: String,
    pub event: String,
    pub data: serde_json::Value,
}

/// Reads SSE events from a response until it ends, or `limit` events were read.
pub async fn read_events(resp: reqwest::Response, limit: usize) -> Vec<Sse> {
    use eventsource_stream::Eventsource;
    let mut stream = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    while let Some(ev) = stream.next().await {
        let Ok(ev) = ev else { break };
        out.push(Sse {
            id: ev.id,
            event: ev.event,
            data: serde_json::from_str(&ev.data).unwrap_or(serde_json::Value::Null),
        });
        if out.len() >= limit {
            break;
        }
    }
    out
}
