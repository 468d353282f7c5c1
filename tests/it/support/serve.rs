//! `vis serve` for tests: in the test process (the real router and listener on a loopback
//! port, sessions wired to the fake provider), or as the real `vis serve` binary; and a small
//! SSE client. Both authenticate as a real client does: with the server's token, or a browser
//! through the one-time login URL.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use vis::gateway::ChatSettings;
use vis::providers::ProviderSettings;
use vis::serve::{
    Access, ConnectionLimits, Registry, RegistryOptions, ServeOptions, ServeProviders, ServeToken,
    SettingsFor, WorkspacePolicy,
};

use super::chat::settings;
use super::fake_provider::FakeProvider;
use super::TestEnv;

pub struct TestServer {
    pub url: String,
    pub registry: Arc<Registry>,
    /// The server's token (what `serve-token` would hold).
    pub token: String,
    access: Arc<Access>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A change to every session's settings.
pub type Tweak = Arc<dyn Fn(&mut ChatSettings) + Send + Sync>;

pub struct ServerConfig {
    pub max_live_workers: usize,
    pub idle_park_after: Duration,
    pub grace: Duration,
    /// `[serve] workspaces`.
    pub workspaces: Vec<String>,
    pub public_name: Option<String>,
    pub limits: ConnectionLimits,
    pub event_log_bytes: usize,
    /// `[serve.providers.NAME]`.
    pub providers: Vec<(String, ProviderSettings)>,
    /// Changes every session's settings (the sandbox, say).
    pub tweak: Option<Tweak>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_live_workers: 8,
            idle_park_after: Duration::from_secs(3600),
            grace: Duration::from_secs(5),
            workspaces: Vec::new(),
            public_name: None,
            limits: ConnectionLimits::default(),
            event_log_bytes: vis::serve::DEFAULT_LOG_BYTES,
            providers: Vec::new(),
            tweak: None,
        }
    }
}

impl TestServer {
    pub fn start(env: &TestEnv, fake: &FakeProvider, config: ServerConfig) -> TestServer {
        let base = settings(env, fake, vis::providers::ProviderKind::OpenAi);
        let tweak = config.tweak.clone();
        let settings_for: SettingsFor = Arc::new(move |provider, workspace| {
            let mut s = base.clone();
            s.provider = provider;
            s.worker.workspace = Some(workspace.into());
            if let Some(tweak) = &tweak {
                tweak(&mut s);
            }
            Ok(s)
        });
        let registry = Arc::new(Registry::new(RegistryOptions {
            db: env.db(),
            providers: ServeProviders::new(
                fake.settings(vis::providers::ProviderKind::OpenAi),
                config.providers,
            ),
            settings_for,
            workspaces: WorkspacePolicy::for_server(&config.workspaces, &env.db()),
            max_live_workers: config.max_live_workers,
            idle_park_after: config.idle_park_after,
            event_log_bytes: config.event_log_bytes,
        }));
        let token = ServeToken::generate().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let reg = registry.clone();
        let public_name = config.public_name.clone();
        let serve_token = token.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = vis::serve::bind("127.0.0.1:0".parse().unwrap())
                    .await
                    .unwrap();
                let port = listener.local_addr().unwrap().port();
                let access = Arc::new(Access::new(serve_token, public_name.as_deref(), port));
                ready_tx
                    .send((listener.local_addr().unwrap(), access.clone()))
                    .unwrap();
                let opts = ServeOptions {
                    access,
                    registry: reg,
                    grace: config.grace,
                    limits: config.limits,
                    node: Default::default(),
                };
                vis::serve::serve_on(listener, opts, async move {
                    let _ = rx.await;
                })
                .await;
            });
        });
        let (addr, access) = ready_rx.recv().unwrap();
        TestServer {
            url: format!("http://{addr}"),
            registry,
            token: token.as_str().to_string(),
            access,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// A new one-time login URL, as `vis serve` prints one at start.
    pub fn login_url(&self) -> String {
        self.access.login_url(&self.url).unwrap()
    }

    /// The name of the web view's session cookie.
    pub fn cookie_name(&self) -> String {
        self.access.cookie_name().to_string()
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
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                // Kept as an event of its own, so a test that misses the rest says why the
                // stream ended (the server closed it, the body broke off, ...).
                out.push(Sse {
                    id: String::new(),
                    event: "stream_error".into(),
                    data: serde_json::Value::String(e.to_string()),
                });
                break;
            }
        };
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

/// The real `vis serve` binary, listening on a free loopback port, with what it printed at
/// start (the address, where the token is, the one-time login URL). Stopped with SIGTERM when
/// dropped.
pub struct ServeProcess {
    pub child: Child,
    pub url: String,
    pub login_url: String,
    /// Everything it printed to stderr until it was ready.
    pub banner: String,
}

impl ServeProcess {
    /// Runs `cmd` (a `vis … serve` command; `--listen 127.0.0.1:0` is added) and waits until
    /// it prints its login URL; panics with what it printed if it exits first.
    pub fn start(mut cmd: Command) -> ServeProcess {
        cmd.args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut banner = String::new();
        let login_url = loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    banner.push_str(&line);
                    banner.push('\n');
                    if let Some((_, url)) = line.split_once("one-time login link: ") {
                        break url.trim().to_string();
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("vis serve did not start:\n{banner}");
                }
            }
        };
        let url = login_url.split("/login?").next().unwrap().to_string();
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        ServeProcess {
            child,
            url,
            login_url,
            banner,
        }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        // SAFETY: a signal to the child we started.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// `/metrics` text without the `node="…"` label every sample carries (the node id has a random
/// port in it), so tests can compare whole lines: `vis_x{node="h:1"} 3` reads `vis_x 3`.
pub fn without_node_label(text: &str) -> String {
    text.lines()
        .map(|line| {
            let Some(open) = line.find("{node=\"") else {
                return line.to_string();
            };
            let after = &line[open + 7..];
            let Some(close) = after.find('"') else {
                return line.to_string();
            };
            let rest = &after[close + 1..];
            match rest.strip_prefix(',') {
                Some(more) => format!("{}{{{more}", &line[..open]),
                None => format!("{}{}", &line[..open], rest.trim_start_matches('}')),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
