//! One server's connection: starting it (a stdio process or a streamable HTTP session),
//! listing its tools, and stopping it with everything it started.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::errors::ServerError;
use super::http::{header_map, install_crypto_provider, LimitedHttp};
use super::{lock, McpHub, Slot};
use crate::config::{expand_env, Transport, INHERITED_ENV};
use crate::mcp::framing::{LineTransport, Side};
use crate::mcp::guard::spawn_guarded;

/// How much of a server's stderr is kept for error messages.
const STDERR_TAIL_CHARS: usize = 1500;
pub(super) struct Conn {
    service: RunningService<RoleClient, Events>,
    child: Option<ChildProc>,
    generation: u64,
}

/// How long a guard gets to kill its server's tree and exit once its channel closed.
const GUARD_GRACE: Duration = Duration::from_secs(5);

/// A stdio server: its guard process (see `mcp::guard`), and the end of its stderr.
struct ChildProc {
    /// The guard's pid (the server runs under it, in the guard's process group).
    pid: i32,
    child: tokio::process::Child,
    /// Closing it makes the guard kill the server's whole tree.
    channel: Option<std::os::unix::net::UnixStream>,
    stderr: Arc<Mutex<String>>,
}

/// Our side of a client session: notices list changes.
#[derive(Clone)]
struct Events {
    list_changed: Arc<AtomicBool>,
    hub_changed: Arc<AtomicBool>,
}

impl ClientHandler for Events {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.list_changed.store(true, Ordering::SeqCst);
        self.hub_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("vis", env!("CARGO_PKG_VERSION")),
        )
    }
}

impl McpHub {
    /// The connected peer of `slot`, starting the server if needed.
    pub(super) async fn peer(
        &self,
        slot: &Arc<Slot>,
    ) -> Result<(Peer<RoleClient>, u64), ServerError> {
        let mut guard = slot.conn.lock().await;
        if let Some(conn) = guard.as_ref() {
            if !conn.service.peer().is_transport_closed() {
                return Ok((conn.service.peer().clone(), conn.generation));
            }
            // It died between calls: say how, then start a new one.
            if let Some(mut dead) = guard.take() {
                let how = finish(&mut dead, None).await;
                let message = format!(
                    "MCP server `{}` {how} between calls; it was started again",
                    slot.spec.name
                );
                let mut info = lock(&slot.info);
                info.connected = false;
                info.error = Some(message);
            }
        }
        let generation = slot.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let started = tokio::time::timeout(
            self.inner.settings.startup_timeout,
            self.start(slot, generation),
        )
        .await;
        let conn = match started {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                let mut info = lock(&slot.info);
                info.connected = false;
                info.error = Some(e.to_string());
                return Err(e);
            }
            Err(_) => {
                let e = ServerError::StartTimeout {
                    name: slot.spec.name.clone(),
                    launch: slot.spec.launch_line(),
                    within: self.inner.settings.startup_timeout,
                };
                let mut info = lock(&slot.info);
                info.connected = false;
                info.error = Some(e.to_string());
                return Err(e);
            }
        };
        let peer = conn.service.peer().clone();
        {
            let mut info = lock(&slot.info);
            info.connected = true;
            info.starts += 1;
            if let Some(server) = conn.service.peer().peer_info() {
                info.title = server
                    .server_info
                    .as_ref()
                    .and_then(|i| i.title.clone().or_else(|| i.description.clone()));
                info.instructions = server.instructions.clone();
            }
        }
        *guard = Some(conn);
        drop(guard);
        // A (re)started server may list different tools.
        if lock(&slot.info).tools_live {
            slot.list_changed.store(true, Ordering::SeqCst);
            self.inner.changed.store(true, Ordering::SeqCst);
        }
        Ok((peer, generation))
    }

    /// Fetches `slot`'s tool list from the live server.
    pub(super) async fn list_tools(&self, slot: &Arc<Slot>) -> Result<(), ServerError> {
        let (peer, generation) = self.peer(slot).await?;
        let listed =
            tokio::time::timeout(self.inner.settings.startup_timeout, list_bounded(&peer)).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                let how = self.lost(slot, generation, None).await;
                let e = ServerError::ListFailed {
                    name: slot.spec.name.clone(),
                    how,
                    reason: e.to_string(),
                };
                self.record_error(slot, &e.to_string());
                return Err(e);
            }
            Err(_) => {
                self.lost(slot, generation, Some("was stopped")).await;
                let e = ServerError::ListTimeout {
                    name: slot.spec.name.clone(),
                    within: self.inner.settings.startup_timeout,
                };
                self.record_error(slot, &e.to_string());
                return Err(e);
            }
        };
        let tools: Vec<Value> = tools
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        let mut info = lock(&slot.info);
        if info.tools.as_ref() != Some(&tools) {
            self.inner.changed.store(true, Ordering::SeqCst);
            info.tools_unsaved = true;
        } else if !info.tools_live {
            info.tools_unsaved = true;
        }
        info.set_tools(&slot.spec.name, tools, &self.inner.settings.deny);
        info.tools_live = true;
        Ok(())
    }

    /// Drops `slot`'s connection `generation` (if it is still the current one), stopping the
    /// server; returns how it ended ("exited with code 1: <stderr>").
    pub(super) async fn lost(&self, slot: &Slot, generation: u64, forced: Option<&str>) -> String {
        let mut guard = slot.conn.lock().await;
        let current = guard.as_ref().map(|c| c.generation);
        if current != Some(generation) {
            return forced.unwrap_or("stopped").to_string();
        }
        let Some(mut conn) = guard.take() else {
            return "stopped".into();
        };
        drop(guard);
        lock(&slot.info).connected = false;
        finish(&mut conn, forced).await
    }

    /// Stops every server.
    pub async fn shutdown(&self) {
        for slot in &self.inner.slots {
            let conn = slot.conn.lock().await.take();
            if let Some(mut conn) = conn {
                finish(&mut conn, Some("was stopped")).await;
                lock(&slot.info).connected = false;
            }
        }
    }

    pub(super) async fn start(&self, slot: &Slot, generation: u64) -> Result<Conn, ServerError> {
        let name = &slot.spec.name;
        let events = Events {
            list_changed: slot.list_changed.clone(),
            hub_changed: self.inner.changed.clone(),
        };
        match &slot.spec.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let what = |field: &str| format!("[mcp.servers.{name}] {field}");
                let command = expand_env(command, &what("command"))?;
                let args: Vec<String> = args
                    .iter()
                    .map(|a| expand_env(a, &what("args")))
                    .collect::<Result<_, _>>()?;
                let mut envs: Vec<(String, String)> = INHERITED_ENV
                    .iter()
                    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                    .collect();
                for (k, v) in env {
                    envs.push((k.clone(), expand_env(v, &what(&format!("env.{k}")))?));
                }
                let dir = match cwd {
                    Some(c) if c.is_absolute() => c.clone(),
                    Some(c) => self.inner.settings.workspace.join(c),
                    None => self.inner.settings.workspace.clone(),
                };
                let guarded =
                    spawn_guarded(&self.inner.settings.program, &command, &args, envs, &dir)
                        .await
                        .map_err(|reason| ServerError::Spawn {
                            name: name.clone(),
                            command: command.clone(),
                            dir: dir.clone(),
                            file: slot.spec.file.clone(),
                            reason,
                        })?;
                let mut child = guarded.child;
                let (Some(stdin), Some(stdout), Some(stderr)) =
                    (child.stdin.take(), child.stdout.take(), child.stderr.take())
                else {
                    return Err(ServerError::PipesMissing(name.clone()));
                };
                let tail = Arc::new(Mutex::new(String::new()));
                spawn_stderr_reader(
                    stderr,
                    tail.clone(),
                    self.inner
                        .settings
                        .artifact_dir
                        .join(format!("mcp-{name}.stderr.log")),
                );
                let mut proc = ChildProc {
                    pid: guarded.guard_pid,
                    child,
                    channel: Some(guarded.channel),
                    stderr: tail,
                };
                let transport = LineTransport::<RoleClient, _, _>::new(
                    stdout,
                    stdin,
                    Side::Client {
                        server: name.clone(),
                    },
                    self.inner.settings.max_message_bytes,
                    "",
                );
                match events.serve(transport).await {
                    Ok(service) => Ok(Conn {
                        service,
                        child: Some(proc),
                        generation,
                    }),
                    Err(e) => {
                        let how = stop_child(&mut proc, None).await;
                        Err(ServerError::Handshake {
                            name: name.clone(),
                            launch: slot.spec.launch_line(),
                            how,
                            reason: e.to_string(),
                        })
                    }
                }
            }
            Transport::Http { url, headers } => {
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                use rmcp::transport::StreamableHttpClientTransport;
                install_crypto_provider();
                let what = |field: &str| format!("[mcp.servers.{name}] {field}");
                let url = expand_env(url, &what("url"))?;
                let map = header_map(name, headers, &slot.spec.file)?;
                let client =
                    reqwest::Client::builder()
                        .build()
                        .map_err(|e| ServerError::HttpClient {
                            name: name.clone(),
                            reason: e.to_string(),
                        })?;
                let limit = self.inner.settings.max_message_bytes;
                let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                    .custom_headers(map)
                    .max_sse_event_size(limit)
                    .max_json_response_size(limit);
                slot.http_over_limit.store(false, Ordering::SeqCst);
                let client = LimitedHttp {
                    inner: client,
                    over_limit: slot.http_over_limit.clone(),
                };
                let transport = StreamableHttpClientTransport::with_client(client, config);
                match events.serve(transport).await {
                    Ok(service) => Ok(Conn {
                        service,
                        child: None,
                        generation,
                    }),
                    Err(e) => Err(ServerError::HttpHandshake {
                        name: name.clone(),
                        url,
                        reason: e.to_string(),
                    }),
                }
            }
        }
    }
}

/// The pages of a tool list read at most (each one message, bounded in size).
const MAX_LIST_PAGES: usize = 50;

/// A server's tools, page by page, until the last page, [`MAX_LIST_PAGES`] pages, or more
/// tools than become functions: a server that hands out cursors forever cannot keep the hub
/// listing (and growing) until the startup timeout.
async fn list_bounded(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer.list_tools(Some(params)).await?;
        tools.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() || tools.len() > crate::mcp::schema::MAX_TOOLS_PER_SERVER {
            break;
        }
    }
    Ok(tools)
}

/// Ends a connection: closes the session, stops the process; says how it ended.
async fn finish(conn: &mut Conn, forced: Option<&str>) -> String {
    conn.service.cancellation_token().cancel();
    match &mut conn.child {
        Some(child) => stop_child(child, forced).await,
        None => forced.unwrap_or("closed the connection").to_string(),
    }
}

/// Stops a server process (and everything it started) unless it already exited; returns how
/// it ended, with the end of its stderr.
async fn stop_child(proc: &mut ChildProc, forced: Option<&str>) -> String {
    // A crashed server has usually exited already (its stdout closed); give it a moment.
    let exited = match forced {
        Some(_) => None,
        None => tokio::time::timeout(Duration::from_millis(500), proc.child.wait())
            .await
            .ok()
            .and_then(Result::ok),
    };
    let how = match exited {
        // The guard exits the way the server did, after killing what the server left.
        Some(status) => {
            proc.channel = None;
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(c), _) => format!("exited with code {c}"),
                (None, Some(s)) => format!("was killed by signal {s}"),
                _ => "exited".to_string(),
            }
        }
        None => {
            // Closing the channel makes the guard kill the server's whole tree and exit.
            proc.channel = None;
            let ended = tokio::time::timeout(GUARD_GRACE, proc.child.wait()).await;
            if !matches!(ended, Ok(Ok(_))) && proc.pid > 0 {
                // A guard that does not answer: kill its process group and tree from here.
                crate::runtime::kill_tree(proc.pid, true);
                let _ = tokio::time::timeout(GUARD_GRACE, proc.child.wait()).await;
            }
            forced.unwrap_or("was stopped").to_string()
        }
    };
    let tail = lock(&proc.stderr).trim().to_string();
    if tail.is_empty() {
        how
    } else {
        format!("{how} (its stderr ends: {})", tail.replace('\n', " | "))
    }
}

fn spawn_stderr_reader(
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<String>>,
    log: PathBuf,
) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let mut file = None;
        while let Ok(Some(line)) = lines.next_line().await {
            {
                let mut t = lock(&tail);
                let mut kept: VecDeque<char> = t.chars().collect();
                kept.extend(line.chars());
                kept.push_back('\n');
                while kept.len() > STDERR_TAIL_CHARS {
                    kept.pop_front();
                }
                *t = kept.into_iter().collect();
            }
            if file.is_none() {
                file = open_log(&log);
            }
            if let Some(f) = file.as_mut() {
                use std::io::Write;
                let _ = writeln!(f, "{line}");
            }
        }
    });
}

fn open_log(path: &Path) -> Option<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok()?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ok()
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;

    /// A real process running `script` under `sh`, its stderr read as a server's is (tail and
    /// log); returns it once its stderr closed, so the tail is complete.
    async fn run(script: &str, log: &Path) -> ChildProc {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let tail = Arc::new(Mutex::new(String::new()));
        spawn_stderr_reader(stderr, tail.clone(), log.to_path_buf());
        let pid = child.id().unwrap() as i32;
        // The reader holds the last reference to its tail while it runs.
        while Arc::strong_count(&tail) > 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        ChildProc {
            pid,
            child,
            channel: None,
            stderr: tail,
        }
    }

    #[tokio::test]
    async fn an_exited_server_reports_its_code_and_the_end_of_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("logs/mcp-fx.stderr.log");
        let mut proc = run("echo 'no token' >&2; echo 'giving up' >&2; exit 3", &log).await;
        assert_eq!(
            stop_child(&mut proc, None).await,
            "exited with code 3 (its stderr ends: no token | giving up)"
        );
        // The whole stderr is in the artifact log (its directory made on the first line).
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "no token\ngiving up\n"
        );
    }

    #[tokio::test]
    async fn a_killed_server_reports_the_signal_and_a_silent_one_no_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("mcp-fx.stderr.log");
        let mut proc = run("kill -9 $$", &log).await;
        assert_eq!(stop_child(&mut proc, None).await, "was killed by signal 9");
        // Nothing written: no log file either.
        assert!(!log.exists());
    }

    #[tokio::test]
    async fn only_the_end_of_a_long_stderr_is_kept_for_messages() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("mcp-fx.stderr.log");
        let script = "i=0; while [ $i -lt 100 ]; do echo \"line $i $(printf '%040d' 0)\" >&2; \
                      i=$((i+1)); done";
        let proc = run(script, &log).await;
        let tail = lock(&proc.stderr).clone();
        assert_eq!(tail.chars().count(), STDERR_TAIL_CHARS);
        assert!(tail.ends_with(&format!("line 99 {:040}\n", 0)), "{tail}");
        assert!(!tail.contains("line 0 "));
        assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 100);
    }
}
