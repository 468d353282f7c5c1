//! MCP servers as namespaces: the host's MCP client sessions ([`McpHub`]).
//!
//! The hub lives in the host (the chat gateway, `vis mcp`, `vis exec`), never in the worker:
//! one connection per server serves every block of the session and survives worker restarts,
//! and secrets from `env`/`headers` stay in the host. The worker gets the tool lists as typed
//! [`McpFunction`]s and calls back with the `mcp.call` host call, which [`McpHub::call`]
//! answers.
//!
//! Design notes:
//! - Servers start lazily: on the first call, or when the host asks for their tool lists
//!   (`connect_all`, which the long-lived hosts run while the worker starts). A server that
//!   cannot start, crashes, or does not answer a call in time is stopped and reported in
//!   `session["mcp"]`; the call raises `McpServerError` and the next call starts it again.
//!   The runtime keeps going either way.
//! - Stdio servers are our own child processes (not the SDK's): their own process group (a
//!   terminal Ctrl-C reaches only vis), an environment of a few safe variables plus the
//!   server's `env` (no API keys of the host), stdin/stdout for MCP, stderr kept as a tail for
//!   error messages and appended to `<artifacts>/mcp-<server>.stderr.log`. Stopping one kills
//!   its whole process tree.
//! - `notifications/tools/list_changed` only sets flags; the tool list is fetched again when
//!   the host next assembles a model request or runs a block ([`McpHub::refresh`]), so nothing
//!   wakes up on its own (SPEC §1).
//! - The deny list applies by dotted name (`github.create_issue`, or `github` for a whole
//!   server): denied tools are never sent to the worker and a call to one is refused as if it
//!   did not exist; a denied server is not started at all.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, JsonObject,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use super::config::{expand_env, ServerSpec, Transport};
use super::results;
use super::schema::{server_functions, LeftOut};
use super::{McpPlan, Skipped};
use crate::catalog::DenyList;
use crate::protocol::{McpFunction, McpNamespace};

/// Environment variables a stdio server inherits from the host (plus its own `env`); the
/// same idea as the official SDKs' default environment, so keys of the host never leak.
const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
    "TZ",
];
/// How much of a server's stderr is kept for error messages.
const STDERR_TAIL_CHARS: usize = 1500;
/// Longest server instructions kept as the namespace's doc.
const MAX_INSTRUCTIONS_CHARS: usize = 4000;

/// Why a server could not be reached or listed. The text goes to `session["mcp"]` and, for a
/// call, to the block as a server error it can act on; it never ends the block.
#[derive(Debug, Clone, thiserror::Error)]
enum ServerError {
    #[error("MCP server `{name}` did not start within {}; check that `{launch}` runs and speaks MCP (a slow start needs a larger [mcp] startup_timeout)", seconds(*within))]
    StartTimeout {
        name: String,
        launch: String,
        within: Duration,
    },
    #[error(transparent)]
    Expand(#[from] super::config::ExpandError),
    #[error("MCP server `{name}` could not start `{command}` in {}: {reason}; check `command` in {} (a program on PATH or a path)", dir.display(), file.display())]
    Spawn {
        name: String,
        command: String,
        dir: PathBuf,
        file: PathBuf,
        reason: String,
    },
    #[error("MCP server `{0}`: its pipes are missing")]
    PipesMissing(String),
    #[error(
        "MCP server `{name}` ({launch}) {how} before it finished the MCP handshake ({reason})"
    )]
    Handshake {
        name: String,
        launch: String,
        how: String,
        reason: String,
    },
    #[error("MCP server `{name}`: header `{header}` is not a valid HTTP header; fix it in {}", file.display())]
    BadHeader {
        name: String,
        header: String,
        file: PathBuf,
    },
    #[error("MCP server `{name}`: cannot build the HTTP client: {reason}")]
    HttpClient { name: String, reason: String },
    #[error("MCP server `{name}` at {url} did not answer the MCP handshake ({reason}); check that it runs and that `url` is its MCP endpoint")]
    HttpHandshake {
        name: String,
        url: String,
        reason: String,
    },
    #[error("MCP server `{name}` {how} while listing its tools ({reason})")]
    ListFailed {
        name: String,
        how: String,
        reason: String,
    },
    #[error("MCP server `{name}` did not list its tools within {}, so it was stopped", seconds(*within))]
    ListTimeout { name: String, within: Duration },
}

/// Settings of a hub.
#[derive(Debug, Clone)]
pub struct HubSettings {
    pub call_timeout: Duration,
    pub startup_timeout: Duration,
    /// A server's default working directory (and where relative `cwd`s start).
    pub workspace: PathBuf,
    /// The session's artifact directory: images and resources from results go here.
    pub artifact_dir: PathBuf,
    pub deny: DenyList,
}

/// The MCP client sessions of one vis session. Cheap to clone (shared).
#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Inner>,
}

struct Inner {
    slots: Vec<Arc<Slot>>,
    skipped: Vec<Skipped>,
    settings: HubSettings,
    /// Set when a server's tool list may have changed (a notification, a new connection).
    changed: Arc<AtomicBool>,
}

struct Slot {
    spec: ServerSpec,
    conn: tokio::sync::Mutex<Option<Conn>>,
    info: Mutex<SlotInfo>,
    /// The server said its tool list changed; fetch it again.
    list_changed: Arc<AtomicBool>,
    /// Bumped for every new connection, so a failure report cannot drop a newer one.
    generation: AtomicU64,
}

#[derive(Debug, Default)]
struct SlotInfo {
    /// Raw MCP tool objects, as the server (or the cache) listed them.
    tools: Option<Vec<Value>>,
    /// Listed by the live server in this process (not just from the cache).
    tools_live: bool,
    /// A live list the store has not seen yet.
    tools_unsaved: bool,
    connected: bool,
    starts: u32,
    /// The last problem, as people read it.
    error: Option<String>,
    title: Option<String>,
    instructions: Option<String>,
    /// The functions of `tools` (deny list applied) and the tools left out, computed when
    /// the list changes (not per call: servers can list hundreds of tools).
    visible: Vec<McpFunction>,
    left_out: Vec<LeftOut>,
}

impl SlotInfo {
    fn set_tools(&mut self, server: &str, tools: Vec<Value>, deny: &DenyList) {
        let (fns, left_out) = server_functions(server, &tools);
        self.visible = fns.into_iter().filter(|f| !deny.denies(&f.name)).collect();
        self.left_out = left_out
            .into_iter()
            .filter(|l| !deny.denies(&format!("{server}.{}", super::schema::tool_name(&l.tool))))
            .collect();
        self.tools = Some(tools);
    }
}

struct Conn {
    service: RunningService<RoleClient, Events>,
    child: Option<ChildProc>,
    generation: u64,
}

struct ChildProc {
    pid: i32,
    child: tokio::process::Child,
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

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

impl McpHub {
    /// A hub for `plan`'s servers; nothing starts until it is needed.
    pub fn new(plan: McpPlan, settings: HubSettings) -> McpHub {
        let slots = plan
            .servers
            .into_iter()
            .map(|spec| {
                Arc::new(Slot {
                    spec,
                    conn: tokio::sync::Mutex::new(None),
                    info: Mutex::new(SlotInfo::default()),
                    list_changed: Arc::new(AtomicBool::new(false)),
                    generation: AtomicU64::new(0),
                })
            })
            .collect();
        McpHub {
            inner: Arc::new(Inner {
                slots,
                skipped: plan.skipped,
                settings,
                changed: Arc::new(AtomicBool::new(false)),
            }),
        }
    }

    /// No servers to run and nothing to report.
    pub fn is_empty(&self) -> bool {
        self.inner.slots.is_empty() && self.inner.skipped.is_empty()
    }

    /// The servers this hub runs, in name order.
    pub fn server_names(&self) -> Vec<String> {
        self.inner
            .slots
            .iter()
            .map(|s| s.spec.name.clone())
            .collect()
    }

    /// `(server, fingerprint)` of every server this hub runs (the key of its stored tools).
    pub fn fingerprints(&self) -> Vec<(String, String)> {
        self.inner
            .slots
            .iter()
            .map(|s| (s.spec.name.clone(), s.spec.fingerprint()))
            .collect()
    }

    /// What was not started and why (not approved, shadowed, invalid file).
    pub fn skipped(&self) -> &[Skipped] {
        &self.inner.skipped
    }

    fn slot(&self, name: &str) -> Option<&Arc<Slot>> {
        self.inner.slots.iter().find(|s| s.spec.name == name)
    }

    /// Uses a stored tool list for `server` until the live server is asked.
    pub fn use_cached_tools(&self, server: &str, tools_json: &str) {
        let Some(slot) = self.slot(server) else {
            return;
        };
        let Ok(Value::Array(tools)) = serde_json::from_str::<Value>(tools_json) else {
            return;
        };
        let mut info = lock(&slot.info);
        if info.tools.is_none() {
            info.set_tools(server, tools, &self.inner.settings.deny);
        }
    }

    /// Servers whose tools are not known yet (neither listed live nor cached).
    pub fn unlisted(&self) -> Vec<String> {
        self.inner
            .slots
            .iter()
            .filter(|s| lock(&s.info).tools.is_none())
            .map(|s| s.spec.name.clone())
            .collect()
    }

    /// Live tool lists the store has not seen: `(server, fingerprint, tools JSON)`; each is
    /// returned once.
    pub fn take_unsaved_tool_lists(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for slot in &self.inner.slots {
            let mut info = lock(&slot.info);
            if !info.tools_unsaved {
                continue;
            }
            info.tools_unsaved = false;
            if let Some(tools) = &info.tools {
                out.push((
                    slot.spec.name.clone(),
                    slot.spec.fingerprint(),
                    Value::Array(tools.clone()).to_string(),
                ));
            }
        }
        out
    }

    /// Starts every server that is not running (concurrently) and lists its tools; failures
    /// are recorded for `session["mcp"]`, never returned.
    pub async fn connect_all(&self) {
        let names = self.server_names();
        self.connect(&names).await;
    }

    /// Starts the named servers (if not running) and lists their tools.
    pub async fn connect(&self, names: &[String]) {
        let jobs = names
            .iter()
            .filter_map(|n| self.slot(n).cloned())
            .map(|slot| {
                let hub = self.clone();
                async move {
                    if hub.peer(&slot).await.is_ok() {
                        let _ = hub.list_tools(&slot).await;
                    }
                }
            });
        futures::future::join_all(jobs).await;
    }

    /// Lists the tools of running servers whose list came from the store (a server `vis exec`
    /// started for a call), so the stored list stays current.
    pub async fn list_started(&self) {
        for slot in &self.inner.slots {
            let stale = {
                let info = lock(&slot.info);
                info.connected && !info.tools_live
            };
            if stale {
                let _ = self.list_tools(slot).await;
            }
        }
    }

    /// True (once) when a tool list may have changed since the last call.
    pub fn take_changed(&self) -> bool {
        self.inner.changed.swap(false, Ordering::SeqCst)
    }

    /// Fetches again the tool lists of running servers that said theirs changed. Returns
    /// whether the functions may differ now (then call [`McpHub::functions`] again).
    pub async fn refresh(&self) -> bool {
        let mut any = self.take_changed();
        let flagged: Vec<Arc<Slot>> = self
            .inner
            .slots
            .iter()
            .filter(|s| s.list_changed.swap(false, Ordering::SeqCst))
            .cloned()
            .collect();
        for slot in flagged {
            let _ = self.list_tools(&slot).await;
            any = true;
        }
        any
    }

    /// The namespaces and functions the worker should have now (deny list applied, left-out
    /// tools recorded for `session["mcp"]`).
    pub fn functions(&self) -> (Vec<McpNamespace>, Vec<McpFunction>) {
        let mut namespaces = Vec::new();
        let mut functions = Vec::new();
        for slot in &self.inner.slots {
            let info = lock(&slot.info);
            let name = &slot.spec.name;
            let visible = info.visible.clone();
            if visible.is_empty() {
                continue;
            }
            let what = info
                .title
                .clone()
                .map(|t| format!(": {}", one_line(&t)))
                .unwrap_or_default();
            let noun = if visible.len() == 1 { "tool" } else { "tools" };
            namespaces.push(McpNamespace {
                name: name.clone(),
                summary: format!("MCP server `{name}`{what} ({} {noun})", visible.len()),
                doc: info
                    .instructions
                    .as_deref()
                    .map(|i| crate::protocol::clip(i.trim(), MAX_INSTRUCTIONS_CHARS))
                    .unwrap_or_default(),
            });
            functions.extend(visible);
        }
        (namespaces, functions)
    }

    /// `session["mcp"]`: every server with its state, and what was skipped and how to fix it.
    pub fn status_json(&self) -> Value {
        let mut servers = serde_json::Map::new();
        for slot in &self.inner.slots {
            let info = lock(&slot.info);
            let tools = info.tools.as_ref().map(|_| info.visible.len());
            let status = if info.connected {
                "running"
            } else if info.error.is_some() {
                "stopped after an error; it starts again on the next call"
            } else {
                "not started; it starts on the first call"
            };
            let mut entry = json!({
                "status": status,
                "source": slot.spec.source.as_str(),
                "transport": slot.spec.transport_kind(),
                "tools": tools,
                "starts": info.starts,
            });
            if let Some(e) = &info.error {
                entry["error"] = e.clone().into();
            }
            if info.tools.is_some() && !info.tools_live {
                entry["tools_from"] = "the list this server gave last time".into();
            }
            if !info.left_out.is_empty() {
                entry["left_out"] = info
                    .left_out
                    .iter()
                    .map(|l| json!({"tool": l.tool, "reason": l.reason}))
                    .collect::<Vec<_>>()
                    .into();
            }
            servers.insert(slot.spec.name.clone(), entry);
        }
        let skipped: Vec<Value> = self
            .inner
            .skipped
            .iter()
            .map(|s| {
                let mut v = json!({
                    "server": s.name,
                    "declared_in": s.file.to_string_lossy(),
                    "reason": s.reason,
                    "fix": s.fix,
                });
                if let Some(l) = &s.launch {
                    v["runs"] = l.clone().into();
                }
                v
            })
            .collect();
        json!({"servers": servers, "skipped": skipped})
    }

    /// One line per problem worth telling the person at start (not approved, invalid file).
    pub fn notices(&self) -> Vec<String> {
        self.inner
            .skipped
            .iter()
            .map(|s| {
                if s.name == "*" {
                    format!(
                        "vis: the workspace's MCP servers are skipped: {}; {}",
                        s.reason, s.fix
                    )
                } else {
                    format!(
                        "vis: MCP server `{}` is skipped: {}; {}",
                        s.name, s.reason, s.fix
                    )
                }
            })
            .collect()
    }

    /// Answers an `mcp.*` host call from a block.
    pub async fn answer(&self, method: &str, params: &Value) -> crate::runtime::CallAnswer {
        match method {
            "mcp.call" => self.call(params).await,
            "mcp.status" => Ok(self.status_json()),
            _ => Err(crate::runtime::CallError(format!(
                "there is no host call '{method}'; MCP tools are called as functions, e.g. server.tool(...)"
            ))),
        }
    }

    /// `mcp.call {server, tool, arguments}`: calls the tool and converts the result.
    pub async fn call(&self, params: &Value) -> crate::runtime::CallAnswer {
        let server = params
            .get("server")
            .and_then(Value::as_str)
            .ok_or("mcp.call: `server` must be a string")?;
        let tool = params
            .get("tool")
            .and_then(Value::as_str)
            .ok_or("mcp.call: `tool` must be a string")?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => JsonObject::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => return Err("mcp.call: `arguments` must be an object".into()),
        };
        let Some(slot) = self.slot(server).cloned() else {
            let known = self.server_names();
            return Err(crate::runtime::CallError(if known.is_empty() {
                format!(
                    "there is no MCP server `{server}`: none is configured (see session[\"mcp\"])"
                )
            } else {
                format!(
                    "there is no MCP server `{server}`; the servers are {} (see session[\"mcp\"])",
                    known.join(", ")
                )
            }));
        };
        // The tool must be one the worker was given: known, with its Python name not denied.
        let Some(output_schema) = self.callable(&slot, tool) else {
            return Err(crate::runtime::CallError(format!(
                "MCP server `{server}` has no tool `{tool}`; doc('{server}') lists its tools"
            )));
        };
        let (peer, generation) = match self.peer(&slot).await {
            Ok(p) => p,
            Err(e) => return Ok(results::server_error(e.to_string())),
        };
        let timeout = slot
            .spec
            .timeout
            .unwrap_or(self.inner.settings.call_timeout);
        let request = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let answer = tokio::time::timeout(timeout, peer.call_tool(request)).await;
        match answer {
            Ok(Ok(result)) => {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                Ok(results::convert(
                    &value,
                    output_schema.as_ref(),
                    server,
                    tool,
                    &self.inner.settings.artifact_dir,
                ))
            }
            Ok(Err(ServiceError::McpError(e))) => Ok(results::tool_error(e.message.to_string())),
            Ok(Err(e)) => {
                let how = self.lost(&slot, generation, None).await;
                let message = format!(
                    "MCP server `{server}` {how} during the call to `{tool}` ({e}); it starts again on the next call"
                );
                self.record_error(&slot, &message);
                Ok(results::server_error(message))
            }
            Err(_) => {
                let secs = seconds(timeout);
                self.lost(&slot, generation, Some("was stopped")).await;
                let message = format!(
                    "MCP server `{server}` did not answer the call to `{tool}` within {secs}, so it was stopped; it starts again on the next call (a slow tool needs a longer `timeout` in [mcp.servers.{server}])"
                );
                self.record_error(&slot, &message);
                Ok(results::server_error(message))
            }
        }
    }

    /// `Some(output schema)` when `tool` is one the worker was given (listed, mapped to a
    /// function, not denied).
    fn callable(&self, slot: &Slot, tool: &str) -> Option<Option<Value>> {
        let info = lock(&slot.info);
        let tools = info.tools.as_ref()?;
        if !info.visible.iter().any(|f| f.tool == tool) {
            return None;
        }
        let spec = tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(tool));
        Some(spec.and_then(|t| t.get("outputSchema")).cloned())
    }

    fn record_error(&self, slot: &Slot, message: &str) {
        lock(&slot.info).error = Some(message.to_string());
    }

    /// The connected peer of `slot`, starting the server if needed.
    async fn peer(&self, slot: &Arc<Slot>) -> Result<(Peer<RoleClient>, u64), ServerError> {
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
    async fn list_tools(&self, slot: &Arc<Slot>) -> Result<(), ServerError> {
        let (peer, generation) = self.peer(slot).await?;
        let listed =
            tokio::time::timeout(self.inner.settings.startup_timeout, peer.list_all_tools()).await;
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
    async fn lost(&self, slot: &Slot, generation: u64, forced: Option<&str>) -> String {
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

    async fn start(&self, slot: &Slot, generation: u64) -> Result<Conn, ServerError> {
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
                let mut cmd = tokio::process::Command::new(&command);
                cmd.args(&args)
                    .env_clear()
                    .envs(envs)
                    .current_dir(&dir)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .process_group(0)
                    .kill_on_drop(true);
                let mut child = cmd.spawn().map_err(|e| ServerError::Spawn {
                    name: name.clone(),
                    command: command.clone(),
                    dir: dir.clone(),
                    file: slot.spec.file.clone(),
                    reason: e.to_string(),
                })?;
                let pid = child.id().map(|p| p as i32).unwrap_or(0);
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
                    pid,
                    child,
                    stderr: tail,
                };
                match events.serve((stdout, stdin)).await {
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
                let mut map = std::collections::HashMap::new();
                for (k, v) in headers {
                    let value = expand_env(v, &what(&format!("headers.{k}")))?;
                    let (Ok(hn), Ok(hv)) = (
                        reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                        reqwest::header::HeaderValue::from_str(&value),
                    ) else {
                        return Err(ServerError::BadHeader {
                            name: name.clone(),
                            header: k.clone(),
                            file: slot.spec.file.clone(),
                        });
                    };
                    map.insert(hn, hv);
                }
                let client =
                    reqwest::Client::builder()
                        .build()
                        .map_err(|e| ServerError::HttpClient {
                            name: name.clone(),
                            reason: e.to_string(),
                        })?;
                let config =
                    StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(map);
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn one_line(s: &str) -> String {
    crate::protocol::clip(&s.split_whitespace().collect::<Vec<_>>().join(" "), 80)
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", s as u64)
    } else {
        format!("{s:.1} s")
    }
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
        Some(status) => {
            crate::runtime::kill_tree(proc.pid, false);
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(c), _) => format!("exited with code {c}"),
                (None, Some(s)) => format!("was killed by signal {s}"),
                _ => "exited".to_string(),
            }
        }
        None => {
            if proc.pid > 0 {
                crate::runtime::kill_tree(proc.pid, true);
            }
            let _ = tokio::time::timeout(Duration::from_secs(5), proc.child.wait()).await;
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

/// For tests and benches: the tool lists of a hub by server.
impl McpHub {
    pub fn tool_counts(&self) -> BTreeMap<String, usize> {
        self.inner
            .slots
            .iter()
            .map(|s| {
                (
                    s.spec.name.clone(),
                    lock(&s.info).tools.as_ref().map_or(0, Vec::len),
                )
            })
            .collect()
    }
}
