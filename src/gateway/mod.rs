//! The gateway: a chat session with a model in the loop.
//!
//! A [`ChatSession`] owns one session's store connection, its worker ([`Supervisor`]), its
//! provider client and the conversation in memory. [`ChatSession::run_turn`] is the loop of
//! SPEC §9: the person's message, then requests and `python_execution` calls until the model
//! answers without one (see `turn`). Everything a turn does is written to the store as it
//! completes, so a gateway killed at any moment resumes with every completed iteration
//! ([`ChatSession::open`] repairs a turn that was left running).
//!
//! Data flow of one request:
//!
//! ```text
//! store ─► history::Entry (items + token estimates) ─► assemble::Assembler (cached encodings)
//!        ─► providers::Provider::stream ─► AssistantMessage ─► store (response, then each
//!           iteration with its tool result) ─► next request
//! ```

pub mod assemble;
mod folding;
pub mod folds;
pub mod history;
pub mod prompt;
mod turn;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;

use crate::catalog::{render_catalog, CatalogError, Snapshot};
use crate::protocol::{HistoryItem, ToolSpec};
use crate::providers::{
    anthropic_request, openai_request, Provider, ProviderError, ProviderKind, ProviderSettings,
};
use crate::runtime::{RuntimeError, Supervisor, WorkerOptions};
use crate::store::{ChatPrefix, HistoryKind, NewHistoryItem, Store, StoreError};

use assemble::{Assembler, Wire};
use history::{Entry, NoticeMeta};

pub use folding::{
    receipt_line, FoldError, LimitError, MAX_FOLDS_PER_REQUEST, MAX_GATEWAY_CALLS_PER_BLOCK,
};
pub use folds::DEFAULT_GIST_MAX_TOKENS;
pub use turn::{EventSink, ExecEnd, TurnEnd};

/// Default cap on iterations (tool calls) per turn.
pub const DEFAULT_MAX_ITERATIONS: u32 = 100;
/// Default `max_tokens` for Anthropic (it requires one).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 16_000;

/// Everything a chat session needs besides the store.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    pub provider: ProviderSettings,
    pub worker: WorkerOptions,
    pub max_iterations: u32,
    pub max_output_tokens: u32,
    /// Anthropic extended thinking, off when `None`.
    pub thinking_budget: Option<u32>,
    pub block_timeout: Duration,
    pub output_limit: usize,
    pub catalog_budget: usize,
    pub folding: FoldSettings,
}

/// `[folding]` settings (and `vis chat --introspection`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldSettings {
    /// `read_session` returns originals only when this is on.
    pub introspection: bool,
    /// Gists longer than this many o200k tokens are rejected.
    pub gist_max_tokens: u64,
    /// Overrides of the model table (see `session::utilization`).
    pub input_limit: Option<u64>,
    pub auto_compress_above: Option<u64>,
}

impl Default for FoldSettings {
    fn default() -> Self {
        FoldSettings {
            introspection: false,
            gist_max_tokens: folds::DEFAULT_GIST_MAX_TOKENS,
            input_limit: None,
            auto_compress_above: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("the catalog: {0}")]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("the stored conversation is damaged at item {seq} ({detail}); it was left as it is — export it with `vis sessions export` and start a new session")]
    CorruptHistory { seq: i64, detail: String },
    #[error("the message is empty: type something for the model")]
    EmptyMessage,
    #[error("the workspace {0} of this session no longer exists; pass --workspace DIR to move the session")]
    WorkspaceGone(String),
}

/// A session with a model: the conversation, the worker, the provider.
pub struct ChatSession {
    id: String,
    store: Box<Store>,
    supervisor: Supervisor,
    /// Made at the first request (so inspecting a session needs no API key).
    provider: Option<Provider>,
    settings: ChatSettings,
    roots: Vec<String>,
    artifact_dir: PathBuf,
    /// Cancelled when the gateway shuts down: turns stop before their next request (the
    /// running block may finish).
    drain: tokio_util::sync::CancellationToken,
    state: State,
    /// MCP servers as namespaces (set with [`ChatSession::set_mcp`]); they live as long as
    /// the session, across worker restarts.
    mcp: Option<crate::mcp::McpHub>,
    /// Whether the MCP servers were asked for their tools yet.
    mcp_listed: bool,
}

/// The conversation and what it shows (kept apart from the worker so a running block and the
/// host calls it makes can be served at once).
struct State {
    prefix: Option<ChatPrefix>,
    /// The conversation as requests carry it: stored items, folded ranges replaced.
    entries: Vec<Entry>,
    /// Where every stored item sits (folded or not), for resolving fold keys.
    marks: Vec<folds::Mark>,
    folds: Vec<folds::Fold>,
    /// Folds made since the last request: their group, ids and the request before them.
    pending_group: Option<(i64, Vec<i64>, folds::Before)>,
    /// The latest fold measurement (shown in `session["utilization"]`).
    latest_measurement: Option<serde_json::Value>,
    /// The last answered request: reported input tokens, the estimate then, and who answered.
    last_request: Option<LastRequest>,
    /// The turn in progress and the iteration whose block runs.
    now: folds::Now,
    assembler: Option<Assembler>,
    /// The catalog the conversation shows now (the prefix's or the last update's).
    shown_catalog: Option<String>,
    /// The `AGENTS.md` the conversation shows now.
    shown_agents: Option<Option<String>>,
    /// The supervisor's manifest version last compared with the shown catalog.
    seen_manifest: Option<u64>,
    /// o200k estimate of prefix + conversation.
    estimate: u64,
}

/// What the last answered request tells about the context's size.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LastRequest {
    input_tokens: Option<u64>,
    estimate: u64,
    provider: String,
    model: String,
    turn: i64,
}

impl ChatSession {
    /// A new chat session for `roots` (its worker starts with the first request).
    pub fn create(
        store: Box<Store>,
        db: &Path,
        id: &str,
        roots: Vec<String>,
        settings: ChatSettings,
    ) -> Result<ChatSession, GatewayError> {
        store.ensure_session(id, &roots)?;
        Self::open(store, db, id, settings).map(|(s, _)| s)
    }

    /// Opens a stored session, repairing a turn a stopped gateway left running. Returns the
    /// session and what the person should be told (one line each).
    pub fn open(
        mut store: Box<Store>,
        db: &Path,
        id: &str,
        mut settings: ChatSettings,
    ) -> Result<(ChatSession, Vec<String>), GatewayError> {
        let row = store.require_session(id)?;
        if let Some(missing) = row.workspace_roots.iter().find(|r| !Path::new(r).is_dir()) {
            return Err(GatewayError::WorkspaceGone(missing.clone()));
        }
        let mut notes = Vec::new();
        let (kind, model) = (
            settings.provider.kind.as_str(),
            settings.provider.model.clone(),
        );
        match store.session_model(id)? {
            Some(m) if m.provider != kind || m.model != model => notes.push(format!(
                "[vis] this session used {}/{}; it continues with {kind}/{model}",
                m.provider, m.model
            )),
            _ => {}
        }
        store.set_session_model(id, kind, &model, &settings.provider.base_url)?;
        let prefix = store.chat_prefix(id)?;
        let mut entries = history::from_rows(store.history(id)?)?;
        notes.extend(turn::repair_running_turns(&mut *store, id, &mut entries)?);
        let marks: Vec<folds::Mark> = entries.iter().map(folds::Mark::of).collect();
        let fold_list = folds::load(&*store, id, &mut entries)?;
        let pending_group = fold_list
            .iter()
            .filter(|f| f.measurement["status"] == "pending")
            .filter_map(|f| {
                folds::Before::from_pending(&f.measurement).map(|b| (f.group_id, f.id, b))
            })
            .fold(
                None,
                |acc: Option<(i64, Vec<i64>, folds::Before)>, (g, id, b)| match acc {
                    Some((group, mut ids, before)) if group == g => {
                        ids.push(id);
                        Some((group, ids, before))
                    }
                    _ => Some((g, vec![id], b)),
                },
            );
        let latest_measurement = fold_list.last().map(|f| f.measurement.clone());
        let last_request = store
            .requests(id)?
            .into_iter()
            .rev()
            .find(|r| r.error.is_none())
            .map(|r| LastRequest {
                input_tokens: r.input_tokens.map(|n| n.max(0) as u64),
                estimate: r.estimate_tokens.max(0) as u64,
                provider: r.provider,
                model: r.model,
                turn: r.turn,
            });
        let defs = store.load_defs(id)?;
        settings.worker.workspace = row.workspace_roots.first().map(PathBuf::from);
        // Blocks write their full outputs there, also under the sandbox.
        let artifact_dir = crate::config::artifact_dir(db, id);
        settings.worker.add_session(
            crate::config::store_files(db),
            &artifact_dir,
            &row.workspace_roots,
        );
        let supervisor = Supervisor::new(settings.worker.clone(), defs);
        let (shown_catalog, shown_agents) = shown_state(prefix.as_ref(), &entries);
        let estimate = prefix.as_ref().map_or(0, |p| p.tokens.max(0) as u64)
            + entries.iter().map(|e| e.tokens).sum::<u64>();
        let session = ChatSession {
            id: id.to_string(),
            store,
            supervisor,
            provider: None,
            artifact_dir: crate::config::artifact_dir(db, id),
            roots: row.workspace_roots,
            settings,
            drain: tokio_util::sync::CancellationToken::new(),
            state: State {
                prefix,
                entries,
                marks,
                folds: fold_list,
                pending_group,
                latest_measurement,
                last_request,
                now: folds::Now {
                    turn: None,
                    running: None,
                },
                assembler: None,
                shown_catalog,
                shown_agents,
                seen_manifest: None,
                estimate,
            },
            mcp: None,
            mcp_listed: false,
        };
        Ok((session, notes))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn store(&self) -> &Store {
        &*self.store
    }

    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    pub fn settings(&self) -> &ChatSettings {
        &self.settings
    }

    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    /// The conversation as it stands.
    pub fn entries(&self) -> &[Entry] {
        &self.state.entries
    }

    pub fn prefix(&self) -> Option<&ChatPrefix> {
        self.state.prefix.as_ref()
    }

    /// o200k estimate of the next request (prefix + conversation).
    pub fn estimate_tokens(&self) -> u64 {
        self.state.estimate
    }

    /// The provider client, made on first use.
    fn provider(&mut self) -> Result<&Provider, ProviderError> {
        if self.provider.is_none() {
            self.provider = Some(Provider::new(self.settings.provider.clone())?);
        }
        match &self.provider {
            Some(p) => Ok(p),
            None => Err(ProviderError::Config("no provider".into())),
        }
    }

    /// Gives the session MCP servers as namespaces (call before the first turn). The servers
    /// start with the worker; their calls are answered while blocks run.
    pub fn set_mcp(&mut self, hub: crate::mcp::McpHub) {
        self.mcp = Some(hub);
        self.mcp_listed = false;
    }

    pub fn mcp(&self) -> Option<&crate::mcp::McpHub> {
        self.mcp.as_ref()
    }

    /// Starts the worker and, the first time, the MCP servers (together), and gives the
    /// worker the servers' tools.
    async fn start_worker(&mut self) -> Result<(), GatewayError> {
        match self.mcp.clone() {
            Some(hub) if !self.mcp_listed => {
                let (started, ()) = tokio::join!(self.supervisor.start(), hub.connect_all());
                started?;
                self.mcp_listed = true;
                hub.take_changed();
                let (namespaces, functions) = hub.functions();
                self.supervisor.set_mcp_tools(namespaces, functions).await?;
                Ok(())
            }
            _ => Ok(self.supervisor.start().await?),
        }
    }

    /// Picks up MCP tool-list changes (`notifications/tools/list_changed`, restarts) before a
    /// request is assembled, so the next request carries the catalog update.
    async fn sync_mcp(&mut self) -> Result<(), GatewayError> {
        let Some(hub) = self.mcp.clone() else {
            return Ok(());
        };
        let changed = if self.mcp_listed {
            hub.refresh().await
        } else {
            hub.connect_all().await;
            self.mcp_listed = true;
            hub.take_changed();
            true
        };
        if changed {
            let (namespaces, functions) = hub.functions();
            self.supervisor.set_mcp_tools(namespaces, functions).await?;
        }
        for (server, fingerprint, tools) in hub.take_unsaved_tool_lists() {
            self.store.cache_mcp_tools(&server, &fingerprint, &tools)?;
        }
        Ok(())
    }

    /// Stops the worker and the MCP servers.
    pub async fn shutdown(&mut self) {
        self.supervisor.shutdown().await;
        if let Some(hub) = &self.mcp {
            hub.shutdown().await;
        }
    }

    /// Stops an idle worker to free its memory; the next block starts a new one, restores
    /// the definitions and says why.
    pub async fn park(&mut self) {
        self.supervisor
            .kill_worker("after the session was parked while idle")
            .await;
    }

    /// Turns of this session stop before their next model request once `drain` is
    /// cancelled (a gateway shutting down lets running blocks finish).
    pub fn set_drain(&mut self, drain: tokio_util::sync::CancellationToken) {
        self.drain = drain;
    }

    /// Makes sure the session has its prefix: a new session's first request fixes it from the
    /// worker's catalog and the workspace's `AGENTS.md`.
    async fn ensure_prefix(&mut self) -> Result<(), GatewayError> {
        if self.state.prefix.is_some() {
            return Ok(());
        }
        self.start_worker().await?;
        let snapshot = render_catalog(&self.supervisor.manifest()?, self.settings.catalog_budget)?;
        self.store.save_catalog_snapshot(&snapshot)?;
        let trusted = self.supervisor.options().trusted;
        let agents = self
            .workspace()
            .and_then(|w| prompt::shown_agents_md(&w, trusted));
        let withheld = self
            .workspace()
            .and_then(|w| prompt::withheld_section(&w, trusted));
        let system = prompt::system_text(&snapshot, agents.as_deref(), withheld.as_deref());
        let tool = crate::protocol::tool_spec();
        let tool_json = serde_json::to_string(&tool).unwrap_or_default();
        let tokens =
            crate::catalog::count_tokens(&system)? + crate::catalog::count_tokens(&tool_json)?;
        let prefix = ChatPrefix {
            system,
            tool: tool_json,
            catalog_hash: snapshot.hash.clone(),
            agents_md: agents.clone(),
            tokens: tokens as i64,
        };
        self.store.save_chat_prefix(&self.id, &prefix)?;
        self.state.estimate += tokens as u64;
        self.state.shown_catalog = Some(snapshot.hash.clone());
        self.state.shown_agents = Some(agents);
        self.state.seen_manifest = Some(self.supervisor.manifest_version());
        self.state.prefix = Some(prefix);
        Ok(())
    }

    fn workspace(&self) -> Option<PathBuf> {
        self.roots.first().map(PathBuf::from)
    }

    /// Appends what changed since the conversation last showed them: the catalog (only when
    /// the worker's manifest changed) and `AGENTS.md`.
    fn append_updates(&mut self, turn: i64) -> Result<Vec<String>, GatewayError> {
        let mut notices = Vec::new();
        if self.supervisor.is_running()
            && self.state.seen_manifest != Some(self.supervisor.manifest_version())
        {
            self.state.seen_manifest = Some(self.supervisor.manifest_version());
            let current =
                render_catalog(&self.supervisor.manifest()?, self.settings.catalog_budget)?;
            if self.state.shown_catalog.as_deref() != Some(current.hash.as_str()) {
                let old = match &self.state.shown_catalog {
                    Some(hash) => self
                        .store
                        .catalog_snapshot(hash)?
                        .unwrap_or_else(Snapshot::empty),
                    None => Snapshot::empty(),
                };
                self.store.save_catalog_snapshot(&current)?;
                let update = crate::catalog::catalog_update(&old, &current)?;
                let text = update.text().trim_end().to_string();
                if !text.is_empty() {
                    self.append_notice(turn, &text, NoticeMeta::CatalogHash(current.hash.clone()))?;
                    notices.push(text);
                }
                self.state.shown_catalog = Some(current.hash);
            }
        }
        if let Some(shown) = self.state.shown_agents.clone() {
            let trusted = self.supervisor.options().trusted;
            let now = self
                .workspace()
                .and_then(|w| prompt::shown_agents_md(&w, trusted));
            if now != shown {
                let text = prompt::agents_md_notice(now.as_deref(), trusted);
                self.append_notice(turn, &text, NoticeMeta::AgentsMd(now.clone()))?;
                self.state.shown_agents = Some(now);
                notices.push(text);
            }
        }
        Ok(notices)
    }

    fn append_notice(
        &mut self,
        turn: i64,
        text: &str,
        meta: NoticeMeta,
    ) -> Result<(), GatewayError> {
        let item = HistoryItem::Notice {
            text: text.to_string(),
        };
        let tokens = history::estimate_item(&item);
        let meta_json = history::meta_json(&meta);
        let seq = self.store.append_history(
            &self.id,
            &NewHistoryItem {
                turn,
                kind: HistoryKind::Notice,
                body: text,
                tokens: tokens as i64,
                meta: Some(&meta_json),
            },
        )?;
        self.push_entry(Entry {
            seq,
            turn,
            iteration: None,
            item,
            tokens,
            meta: Some(meta),
        });
        Ok(())
    }

    fn push_entry(&mut self, entry: Entry) {
        self.state.estimate += entry.tokens;
        self.state.marks.push(folds::Mark::of(&entry));
        self.state.entries.push(entry);
    }

    /// The body of the next request, as it would be sent now.
    pub fn next_request_body(&mut self) -> Result<Vec<u8>, GatewayError> {
        let Some(prefix) = &self.state.prefix else {
            return Ok(Vec::new());
        };
        let assembler = match &mut self.state.assembler {
            Some(a) => a,
            None => {
                let a = new_assembler(prefix, &self.settings, &self.id);
                self.state.assembler.insert(a)
            }
        };
        Ok(assembler.body(&self.state.entries))
    }

    /// What `vis context` shows: system text and the conversation's items.
    pub fn context_parts(&self) -> (Option<&ChatPrefix>, &[Entry]) {
        (self.state.prefix.as_ref(), &self.state.entries)
    }

    /// The catalog update the next request would carry if it were made now (starts the
    /// worker to know the current catalog); nothing is recorded.
    pub async fn pending_catalog_update(&mut self) -> Result<Option<String>, GatewayError> {
        let Some(shown) = self.state.shown_catalog.clone() else {
            return Ok(None);
        };
        self.start_worker().await?;
        let current = render_catalog(&self.supervisor.manifest()?, self.settings.catalog_budget)?;
        if current.hash == shown {
            return Ok(None);
        }
        let old = self
            .store
            .catalog_snapshot(&shown)?
            .unwrap_or_else(Snapshot::empty);
        let update = crate::catalog::catalog_update(&old, &current)?;
        let text = update.text().trim_end().to_string();
        Ok((!text.is_empty()).then_some(text))
    }
}

/// The catalog and `AGENTS.md` the conversation shows: the prefix's, updated by notices.
fn shown_state(
    prefix: Option<&ChatPrefix>,
    entries: &[Entry],
) -> (Option<String>, Option<Option<String>>) {
    let mut catalog = prefix.map(|p| p.catalog_hash.clone());
    let mut agents = prefix.map(|p| p.agents_md.clone());
    for entry in entries {
        match &entry.meta {
            Some(NoticeMeta::CatalogHash(h)) => catalog = Some(h.clone()),
            Some(NoticeMeta::AgentsMd(a)) => agents = Some(a.clone()),
            Some(NoticeMeta::Fold { .. }) | None => {}
        }
    }
    (catalog, agents)
}

fn new_assembler(prefix: &ChatPrefix, settings: &ChatSettings, session_id: &str) -> Assembler {
    let tool: ToolSpec =
        serde_json::from_str(&prefix.tool).unwrap_or_else(|_| crate::protocol::tool_spec());
    match settings.provider.kind {
        ProviderKind::OpenAi => Assembler::new(
            Wire::OpenAi,
            openai_request::header(&openai_request::OpenAiRequest {
                model: &settings.provider.model,
                session_id,
                system: &prefix.system,
                tool: &tool,
                max_tokens: None,
            }),
        ),
        ProviderKind::Anthropic => Assembler::new(
            Wire::Anthropic {
                keep_thinking: settings.thinking_budget.is_some(),
            },
            anthropic_request::header(&anthropic_request::AnthropicRequest {
                model: &settings.provider.model,
                system: &prefix.system,
                tool: &tool,
                max_tokens: settings.max_output_tokens,
                thinking_budget: settings.thinking_budget,
            }),
        ),
    }
}

/// Turns a body into what the provider client sends.
fn to_bytes(body: Vec<u8>) -> Bytes {
    Bytes::from(body)
}
