//! The sessions a server holds: each a slot with its `ChatSession` (loaded on first use), a
//! busy flag (one turn or block at a time), the stop token of what runs, its event log and
//! its metrics. One session's hang or crash never blocks another: every slot has its own
//! lock, worker and store connection.
//!
//! Live workers are capped: before a session starts a worker, the least recently used idle
//! sessions are parked (their workers stopped; the next block restarts one, restores the
//! definitions and says so), and a background sweep parks sessions idle for longer than the
//! configured time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::events::EventLog;
use super::metrics::Metrics;
use super::node::{Claim, Node};
use super::providers::{ServeProviders, UnknownProvider};
use super::workspaces::{WorkspaceError, WorkspacePolicy};
use crate::gateway::{ChatSession, ChatSettings};
use crate::providers::ProviderSettings;
use crate::store::Store;

/// Builds a session's settings for a provider the server offers and a workspace (the worker's
/// options, limits, folding: everything but the provider comes from the server).
pub type SettingsFor =
    Arc<dyn Fn(ProviderSettings, &str) -> Result<ChatSettings, SettingsError> + Send + Sync>;

/// The server's settings are not usable for a session; the message names the setting and the
/// fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// The MCP servers of a session as namespaces (`None` when it declares none): workspace,
/// session id, a store to read approvals from.
pub type HubFor = Arc<
    dyn Fn(&str, &str, &Store) -> Result<Option<crate::mcp::McpHub>, crate::mcp::HubError>
        + Send
        + Sync,
>;

/// Why a session could not be created or opened.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// The client named a provider the server does not offer (a bad request).
    #[error(transparent)]
    Provider(#[from] UnknownProvider),
    /// The workspace is not one this server allows (a bad request).
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Gateway(#[from] crate::gateway::GatewayError),
    #[error(transparent)]
    Mcp(#[from] crate::mcp::HubError),
    /// Another node runs the session now (the request goes there).
    #[error("session '{session}' is run by node '{}' now; retry the request", .holder.node_id)]
    Elsewhere {
        session: String,
        holder: crate::store::LeaseHolder,
    },
}

pub struct Slot {
    pub id: String,
    pub session: tokio::sync::Mutex<Option<ChatSession>>,
    busy: AtomicBool,
    working: AtomicBool,
    stop: Mutex<CancellationToken>,
    pub log: EventLog,
    last_used: Mutex<Instant>,
    /// The session's worker is alive (kept up to date after every turn and park).
    pub live: AtomicBool,
    /// The number of the first event of what runs now (or ran last).
    pub work_start: std::sync::atomic::AtomicU64,
    /// The lease epoch the loaded session was last used under (0: none): a later epoch than
    /// the next after it means another node ran the session meanwhile.
    epoch: std::sync::atomic::AtomicI64,
    /// The job table whose starts and ends go to `log` (between turns too).
    jobs_watched: Mutex<Option<crate::runtime::Jobs>>,
    /// The session's lease was lost while work ran: what ends the work says so
    /// (`lease_lost`), not just "interrupted".
    lease_lost: AtomicBool,
}

impl Slot {
    /// Marks the slot busy; false when it already is.
    fn claim(&self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Marks the slot busy with a turn or block; `None` when something already runs.
    pub fn try_begin(&self) -> Option<CancellationToken> {
        if !self.claim() {
            return None;
        }
        self.working.store(true, Ordering::SeqCst);
        let token = CancellationToken::new();
        self.work_start.store(self.log.next(), Ordering::SeqCst);
        if let Ok(mut stop) = self.stop.lock() {
            *stop = token.clone();
        }
        Some(token)
    }

    pub fn end(&self, live: bool) {
        self.live.store(live, Ordering::SeqCst);
        self.working.store(false, Ordering::SeqCst);
        if let Ok(mut at) = self.last_used.lock() {
            *at = Instant::now();
        }
        self.busy.store(false, Ordering::SeqCst);
    }

    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// A turn or block runs (not just a park).
    pub fn is_working(&self) -> bool {
        self.working.load(Ordering::SeqCst)
    }

    /// Whether the session's lease was lost since this was last asked (then clears it).
    pub fn take_lease_lost(&self) -> bool {
        self.lease_lost.swap(false, Ordering::SeqCst)
    }

    /// Interrupts what runs; false when nothing does.
    pub fn interrupt(&self) -> bool {
        if !self.is_working() {
            return false;
        }
        if let Ok(stop) = self.stop.lock() {
            stop.cancel();
        }
        true
    }

    /// Sends the session's job starts and ends to the event log as they happen, also
    /// between turns (`job_started`, `job_finished`); once per job table.
    pub fn watch_jobs(self: &Arc<Self>, jobs: &crate::runtime::Jobs) {
        let Ok(mut watched) = self.jobs_watched.lock() else {
            return;
        };
        if watched.as_ref().is_some_and(|w| w.same_table(jobs)) {
            return;
        }
        *watched = Some(jobs.clone());
        let mut changes = jobs.subscribe();
        let slot = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let event = match changes.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                let Some(slot) = slot.upgrade() else { break };
                slot.log.push(event);
            }
        });
    }

    /// Background jobs running in the session now.
    pub fn jobs_running(&self) -> usize {
        self.jobs_watched
            .lock()
            .ok()
            .and_then(|w| w.as_ref().map(|j| j.running().len()))
            .unwrap_or(0)
    }

    /// The session's background jobs, oldest first (none before its first turn here).
    pub fn jobs(&self) -> Vec<crate::runtime::JobInfo> {
        self.jobs_watched
            .lock()
            .ok()
            .and_then(|w| w.as_ref().map(|j| j.list()))
            .unwrap_or_default()
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or_default()
    }
}

/// What a registry is made of: where sessions are stored, what they may use, and its limits.
pub struct RegistryOptions {
    pub db: PathBuf,
    pub providers: ServeProviders,
    pub settings_for: SettingsFor,
    pub workspaces: WorkspacePolicy,
    pub max_live_workers: usize,
    pub idle_park_after: Duration,
    /// Bytes of events kept per session for replay.
    pub event_log_bytes: usize,
}

pub struct Registry {
    pub db: PathBuf,
    boot: String,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    pub providers: ServeProviders,
    settings_for: SettingsFor,
    workspaces: WorkspacePolicy,
    hub_for: Option<HubFor>,
    pub drain: CancellationToken,
    pub max_live_workers: usize,
    pub idle_park_after: Duration,
    event_log_bytes: usize,
    /// Bytes every session's event log keeps, together.
    pub log_bytes: Arc<AtomicU64>,
    pub metrics: Metrics,
    /// `[spawn]` for the sessions' sub-sessions.
    spawn: crate::gateway::SpawnSettings,
    /// This server as a node over the shared store (set once it listens).
    node: std::sync::OnceLock<Arc<Node>>,
}

impl Registry {
    pub fn new(opts: RegistryOptions) -> Registry {
        let boot = crate::session::new_session_id()
            .trim_start_matches("s-")
            .to_string();
        Registry {
            db: opts.db,
            boot,
            slots: Mutex::new(HashMap::new()),
            providers: opts.providers,
            settings_for: opts.settings_for,
            workspaces: opts.workspaces,
            hub_for: None,
            drain: CancellationToken::new(),
            max_live_workers: opts.max_live_workers,
            idle_park_after: opts.idle_park_after,
            event_log_bytes: opts.event_log_bytes,
            log_bytes: Arc::new(AtomicU64::new(0)),
            metrics: Metrics::new(),
            spawn: Default::default(),
            node: std::sync::OnceLock::new(),
        }
    }

    /// Makes this server the node `node` (once, when it listens).
    pub fn set_node(&self, node: Arc<Node>) {
        self.metrics.set_node(&node.id);
        let _ = self.node.set(node);
    }

    pub fn node(&self) -> Option<&Arc<Node>> {
        self.node.get()
    }

    /// Takes the lease of session `id` for this node, or says which node runs it.
    pub fn claim(&self, id: &str) -> Result<i64, RegistryError> {
        let Some(node) = self.node() else {
            return Ok(0);
        };
        match node.claim(id)? {
            Claim::Mine { epoch } => Ok(epoch),
            Claim::Elsewhere(holder) => Err(RegistryError::Elsewhere {
                session: id.to_string(),
                holder,
            }),
        }
    }

    /// Makes the writes of session `id` through `store` conditional on this node's lease
    /// with `epoch` (docs/scaling.md, "Fencing"); nothing without a node (no leases).
    fn fence(&self, id: &str, epoch: i64, store: &Store) {
        if let Some(node) = self.node() {
            store.set_lease_fence(Some(crate::store::LeaseFence::new(
                id,
                &node.instance,
                epoch,
            )));
        }
    }

    /// Gives the lease of a session back when nothing runs in it and it has no worker.
    pub fn release_if_idle(&self, slot: &Slot) {
        if let Some(node) = self.node() {
            if !slot.is_busy() && !slot.live.load(Ordering::SeqCst) {
                node.release(&slot.id);
            }
        }
    }

    /// This node can no longer use session `id` (its lease was lost or not renewed in time):
    /// interrupts what runs, stops the worker and forgets the loaded session, so the next
    /// request loads it afresh from the store.
    pub async fn lose(&self, id: &str) {
        let slot = self.slot(id);
        if slot.is_working() {
            slot.lease_lost.store(true, Ordering::SeqCst);
        }
        slot.interrupt();
        let mut guard = slot.session.lock().await;
        // The work that was running has ended and read the flag (it holds the session until
        // then), or never will: the next work on this slot must not see it.
        slot.lease_lost.store(false, Ordering::SeqCst);
        self.drop_lost(&slot, &mut guard).await;
    }

    /// Stops and forgets the loaded session of `slot` (its lease is lost: the holder's own
    /// renewal said so, or a fenced write was refused): its worker stops, the next request
    /// loads it afresh from the store, wherever its lease is then.
    pub async fn drop_lost(&self, slot: &Slot, guard: &mut Option<ChatSession>) {
        // Counted once per loss: the renewal task and a refused write may both find it.
        if guard.is_some() {
            self.metrics.leases_lost.inc();
        }
        self.drop_loaded(slot, guard).await;
        if let Some(node) = self.node() {
            node.forget_lease(&slot.id);
        }
    }

    /// Stops the worker of `slot` and forgets its loaded session, so the next request loads
    /// it from the store: after a store write failed mid-turn, what is in memory may be ahead
    /// of what was stored, and loading repairs the turn left running (the restart path).
    pub async fn drop_loaded(&self, slot: &Slot, guard: &mut Option<ChatSession>) {
        if let Some(session) = guard.as_mut() {
            session.shutdown().await;
        }
        *guard = None;
        slot.epoch.store(0, Ordering::SeqCst);
        slot.live.store(false, Ordering::SeqCst);
        self.update_live_gauge();
    }

    /// Sessions get their MCP servers from `hub_for`.
    pub fn with_mcp(mut self, hub_for: HubFor) -> Registry {
        self.hub_for = Some(hub_for);
        self
    }

    fn attach_mcp(
        &self,
        session: &mut ChatSession,
        workspace: &str,
        store: &Store,
    ) -> Result<(), RegistryError> {
        if let Some(hub_for) = &self.hub_for {
            if let Some(hub) = hub_for(workspace, session.id(), store)? {
                session.set_mcp(hub);
            }
        }
        Ok(())
    }

    /// The slot of session `id` (made empty if the server has not seen it yet).
    pub fn slot(&self, id: &str) -> Arc<Slot> {
        let mut slots = match self.slots.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        slots
            .entry(id.to_string())
            .or_insert_with(|| {
                Arc::new(Slot {
                    id: id.to_string(),
                    session: tokio::sync::Mutex::new(None),
                    busy: AtomicBool::new(false),
                    working: AtomicBool::new(false),
                    stop: Mutex::new(CancellationToken::new()),
                    log: EventLog::new(&self.boot, self.event_log_bytes, self.log_bytes.clone()),
                    last_used: Mutex::new(Instant::now()),
                    live: AtomicBool::new(false),
                    work_start: std::sync::atomic::AtomicU64::new(0),
                    epoch: std::sync::atomic::AtomicI64::new(0),
                    jobs_watched: Mutex::new(None),
                    lease_lost: AtomicBool::new(false),
                })
            })
            .clone()
    }

    /// Drops the slot of a deleted session: its event log and its metrics go with it.
    pub fn forget(&self, id: &str) {
        if let Ok(mut slots) = self.slots.lock() {
            slots.remove(id);
        }
        if let Some(node) = self.node() {
            node.release(id);
        }
        self.metrics.forget_session(id);
    }

    pub fn slots(&self) -> Vec<Arc<Slot>> {
        self.slots
            .lock()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Creates a session in `workspace` (if this server allows it) with the provider called
    /// `provider` (`None`: the default); its worker starts with the first turn or block.
    pub fn create(&self, workspace: &str, provider: Option<&str>) -> Result<String, RegistryError> {
        let workspace = self.workspaces.check(workspace)?;
        let workspace = workspace.to_string_lossy().into_owned();
        let provider = self.providers.by_name(provider)?;
        let settings = (self.settings_for)(provider.settings.clone(), &workspace)?;
        let id = crate::session::new_session_id();
        let store = Store::open(&self.db)?;
        let approvals = Store::open(&self.db)?;
        let mut session =
            ChatSession::create(store, &self.db, &id, vec![workspace.clone()], settings)?;
        // Its MCP servers from the start, as a session loaded from the store gets them.
        self.attach_mcp(&mut session, &workspace, &*approvals)?;
        let slot = self.slot(&id);
        if let Ok(mut guard) = slot.session.try_lock() {
            *guard = Some(self.with_drain(session));
            self.metrics.sessions_open.inc();
        }
        Ok(id)
    }

    /// Sessions' sub-sessions run with `spawn` (`[spawn]`).
    pub fn with_spawn(mut self, spawn: crate::gateway::SpawnSettings) -> Self {
        self.spawn = spawn;
        self
    }

    fn with_drain(&self, mut session: ChatSession) -> ChatSession {
        session.set_drain(self.drain.clone());
        session.set_spawn(self.spawn.clone());
        session
    }

    /// Whether a stored session's workspace is one this server allows now.
    pub fn allows(&self, row: &crate::store::SessionRow) -> Result<(), WorkspaceError> {
        let workspace = row.workspace_roots.first().map_or("", String::as_str);
        self.workspaces.check(workspace).map(|_| ())
    }

    /// Loads the stored session into `guard` if it is not loaded yet.
    pub fn load(
        &self,
        id: &str,
        guard: &mut Option<ChatSession>,
    ) -> Result<Vec<String>, RegistryError> {
        let epoch = self.claim(id)?;
        if let Some(session) = guard.as_ref() {
            let before = self.slot(id).epoch.swap(epoch, Ordering::SeqCst);
            if self.node().is_none() || epoch == before || epoch == before + 1 {
                self.fence(id, epoch, session.store());
                return Ok(Vec::new());
            }
            // Another node ran the session since this one last did: what is loaded is stale.
            *guard = None;
        }
        self.slot(id).epoch.store(epoch, Ordering::SeqCst);
        let store = Store::open(&self.db)?;
        // Fenced before it opens: repairing an earlier holder's turn is a write under the lease.
        self.fence(id, epoch, &*store);
        let row = store.require_session(id)?;
        let stored = store.session_model(id)?;
        let workspace = row.workspace_roots.first().cloned().unwrap_or_default();
        // Stored sessions obey today's rules: one made where the server no longer allows (or
        // by an older server that allowed anything) does not run.
        self.allows(&row)?;
        let (provider, replaced) = self.providers.for_stored(stored.as_ref());
        let settings = (self.settings_for)(provider.settings.clone(), &workspace)?;
        let approvals = Store::open(&self.db)?;
        let (mut session, mut notes) = ChatSession::open(store, &self.db, id, settings)?;
        let same_model = stored.as_ref().is_some_and(|s| {
            s.provider == provider.settings.kind.as_str() && s.model == provider.settings.model
        });
        if replaced && same_model {
            // `open` notes a change of model; a change of server is noted here.
            notes.push(format!(
                "[vis] the provider this session used is not among those the server offers now; it continues with '{}'",
                provider.name
            ));
        }
        self.attach_mcp(&mut session, &workspace, &*approvals)?;
        *guard = Some(self.with_drain(session));
        self.metrics.sessions_open.inc();
        Ok(notes)
    }

    /// Parks idle sessions, least recently used first, until a new worker fits the cap.
    pub async fn make_room(&self, for_id: &str) {
        let mut live: Vec<Arc<Slot>> = self
            .slots()
            .into_iter()
            .filter(|s| s.id != for_id && s.live.load(Ordering::SeqCst))
            .collect();
        if live.len() < self.max_live_workers {
            return;
        }
        live.sort_by_key(|s| std::cmp::Reverse(s.idle_for()));
        let mut excess = live.len() + 1 - self.max_live_workers;
        for slot in live {
            if excess == 0 {
                break;
            }
            if self.park(&slot).await {
                excess -= 1;
            }
        }
    }

    /// Stops an idle session's worker; false when it is busy or has none.
    pub async fn park(&self, slot: &Slot) -> bool {
        if !slot.claim() {
            return false;
        }
        let mut parked = false;
        if let Ok(mut guard) = slot.session.try_lock() {
            if let Some(session) = guard.as_mut() {
                if session.supervisor().is_running() {
                    session.park().await;
                    parked = true;
                }
            }
        }
        slot.end(false);
        self.release_if_idle(slot);
        parked
    }

    /// Parks every session idle for longer than `idle_park_after`, but not one whose
    /// background jobs still run (parking would kill them; only the live-worker cap does).
    pub async fn sweep(&self) {
        for slot in self.slots() {
            if slot.live.load(Ordering::SeqCst)
                && !slot.is_busy()
                && slot.jobs_running() == 0
                && slot.idle_for() >= self.idle_park_after
            {
                self.park(&slot).await;
            }
        }
        self.update_live_gauge();
    }

    pub fn update_live_gauge(&self) {
        let n = self
            .slots()
            .iter()
            .filter(|s| s.live.load(Ordering::SeqCst))
            .count();
        self.metrics.live_workers.set(n as i64);
    }

    /// Stops every worker (at shutdown).
    pub async fn shutdown_all(&self) {
        for slot in self.slots() {
            let mut guard = slot.session.lock().await;
            if let Some(session) = guard.as_mut() {
                session.shutdown().await;
            }
            slot.live.store(false, Ordering::SeqCst);
        }
        if let Some(node) = self.node() {
            node.release_all();
        }
        self.update_live_gauge();
    }
}
