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
//! - Stdio servers are our own child processes (not the SDK's), each under a guard
//!   (`vis mcp guard`, [`crate::mcp::run_guard`]) so its whole tree dies with this process
//!   however it ends: their own process group (a terminal Ctrl-C reaches only vis), an
//!   environment of a few safe variables plus the server's `env` (no API keys of the host),
//!   stdin/stdout for MCP through the bounded line transport (`framing`), stderr kept as a
//!   tail for error messages and appended to `<artifacts>/mcp-<server>.stderr.log`. Stopping
//!   one closes its guard's channel, which kills its whole process tree.
//! - What a server sends is untrusted: one message is at most `[mcp] max_message_mb` (an
//!   answer over it fails its call with the limit named, over stdio and HTTP alike), a tool
//!   list is read at most 50 pages and 1,000 tools deep, and schemas become signatures
//!   within bounds (`schema`).
//!
//! Files: `connection` (start, list, stop), `call` (`mcp.call`), `http` (the HTTP client
//! under the SDK's transport), `errors`.
//! - `notifications/tools/list_changed` only sets flags; the tool list is fetched again when
//!   the host next assembles a model request or runs a block ([`McpHub::refresh`]), so nothing
//!   wakes up on its own (SPEC §1).
//! - The deny list applies by dotted name (`github.create_issue`, or `github` for a whole
//!   server): denied tools are never sent to the worker and a call to one is refused as if it
//!   did not exist; a denied server is not started at all.

mod call;
mod connection;
mod errors;
mod http;
mod tool_hub;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::schema::{server_functions, LeftOut};
use super::{McpPlan, Skipped};
use crate::catalog::DenyList;
use crate::config::ServerSpec;
use crate::protocol::format_seconds as seconds;
use crate::protocol::{McpFunction, McpNamespace};
use connection::Conn;

/// Longest server instructions kept as the namespace's doc.
const MAX_INSTRUCTIONS_CHARS: usize = 4000;

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
    /// The largest message a server may send (`[mcp] max_message_mb`); a tool's answer over
    /// it fails the call with an error naming the limit.
    pub max_message_bytes: usize,
    /// The vis binary, which runs each stdio server's guard (`vis mcp guard`, see
    /// `mcp::guard`).
    pub program: PathBuf,
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
    /// The SDK refused an answer of this HTTP server for its size (see `http`).
    http_over_limit: Arc<AtomicBool>,
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
                    http_over_limit: Arc::new(AtomicBool::new(false)),
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
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn one_line(s: &str) -> String {
    crate::protocol::clip(&s.split_whitespace().collect::<Vec<_>>().join(" "), 80)
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

#[cfg(test)]
mod tests;
