//! Sub-sessions (issue 27 §3; `docs/spawn.md`): a block's `spawn(task)` starts a child chat
//! session on the host, a tokio task of the gateway, while the block goes on.
//!
//! A child is a stored session of its own (linked to the parent's session, turn and iteration:
//! `store::ChildRecords`) with its own conversation (the parent's system prompt and catalog,
//! the task as its first message), its own sandboxed worker for the same workspace, and the
//! parent's provider. Its final answer reaches the parent only through `Sub.wait()`: nothing
//! of its work enters the parent's conversation.
//!
//! Limits: `[spawn] max_depth` (a child of a child … at most that deep; the depth comes from
//! the store, so it holds across restarts), `max_parallel` children of one session running at
//! once (more wait in `queued`; per parent, so a child waiting for its own children never
//! holds a slot they need), `max_iterations` per child. A child ends when its turn ends, when
//! `Sub.cancel()` is called, when the block that started it is interrupted or times out, or
//! when the parent session shuts down; a gateway killed outright leaves children that the
//! parent marks `interrupted` when it is opened again (their turns are closed like any
//! interrupted turn).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{ChatSession, ChatSettings};
use crate::catalog::ManifestEntry;
use crate::protocol::{
    clip, CallAnswer, CallError, Event, HistoryItem, HostReply, HostRequest, SpawnParams,
    TurnStatus,
};
use crate::runtime::{CallOrigin, SubSessions, ToolFuture};
use crate::store::{ChatPrefix, ChildLink, ChildRow, LeaseFence, Store};

/// The most iterations one child may be given.
pub const MAX_CHILD_ITERATIONS: i64 = 1000;

/// `[spawn]` as a session runs with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnSettings {
    pub max_depth: u32,
    pub max_parallel: u32,
    /// Models a child may name besides the session's own.
    pub models: Vec<String>,
    /// The model a child runs with when `spawn()` names none (`None`: the session's own).
    pub model: Option<String>,
}

impl Default for SpawnSettings {
    fn default() -> Self {
        SpawnSettings {
            max_depth: 2,
            max_parallel: 4,
            models: Vec::new(),
            model: None,
        }
    }
}

/// Where a child stands, as `Sub.status` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ChildState {
    status: String,
    answer: Option<String>,
}

impl ChildState {
    fn finished(&self) -> bool {
        !matches!(self.status.as_str(), "queued" | "running")
    }
}

/// A child this process runs.
struct Running {
    turn: i64,
    iteration: i64,
    cancel: CancellationToken,
    state: watch::Receiver<ChildState>,
    task: Option<JoinHandle<()>>,
}

/// What a child needs from its parent to start.
#[derive(Clone)]
struct Blueprint {
    db: PathBuf,
    settings: ChatSettings,
    spawn: SpawnSettings,
    /// The parent's prompt prefix, which a child with every tool starts from (so its first
    /// request needs no worker: the worker starts while the request streams).
    prefix: Option<ChatPrefix>,
    window: Option<crate::providers::ServerWindow>,
    /// The parent's worker manifest and its version (see [`SubSessions::parent_manifest`]):
    /// a child without the parent's prefix renders its catalog from it.
    manifest: Option<(u64, Arc<Vec<ManifestEntry>>)>,
}

/// One session's children.
pub struct Children {
    parent: String,
    /// How deep the parent is (0: not a sub-session).
    depth: u32,
    blueprint: Mutex<Blueprint>,
    slots: Arc<Semaphore>,
    running: Mutex<HashMap<String, Running>>,
    /// Prefixes rendered for children with fewer tools, shared by the children.
    rendered: RenderedPrefixes,
    /// The parent's own connection to the store for the children's records (opened at the
    /// first call).
    store: Mutex<Option<Box<Store>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Children {
    pub(super) fn new(
        parent: &str,
        depth: u32,
        db: PathBuf,
        settings: ChatSettings,
        spawn: SpawnSettings,
    ) -> Children {
        let slots = Arc::new(Semaphore::new(spawn.max_parallel.max(1) as usize));
        Children {
            parent: parent.to_string(),
            depth,
            blueprint: Mutex::new(Blueprint {
                db,
                settings,
                spawn,
                prefix: None,
                window: None,
                manifest: None,
            }),
            slots,
            running: Mutex::new(HashMap::new()),
            rendered: RenderedPrefixes::default(),
            store: Mutex::new(None),
        }
    }

    /// The chat settings the parent was opened with.
    pub(super) fn given_settings(&self) -> ChatSettings {
        lock(&self.blueprint).settings.clone()
    }

    /// The parent's prompt prefix and the server's window, once the parent has them.
    pub(super) fn set_parent_prefix(
        &self,
        prefix: Option<ChatPrefix>,
        window: Option<crate::providers::ServerWindow>,
    ) {
        let mut blueprint = lock(&self.blueprint);
        blueprint.prefix = prefix;
        blueprint.window = window;
    }

    /// Runs `f` with the children's store connection.
    fn with_store<T>(
        &self,
        f: impl FnOnce(&mut Store) -> crate::store::Result<T>,
    ) -> Result<T, CallError> {
        let mut guard = lock(&self.store);
        if guard.is_none() {
            let db = lock(&self.blueprint).db.clone();
            *guard = Some(Store::open(&db).map_err(store_error)?);
        }
        match guard.as_mut() {
            Some(store) => f(&mut **store).map_err(store_error),
            None => Err(CallError("the store is not open".into())),
        }
    }

    /// Cancels every child and waits for them to end (their workers stopped).
    async fn stop_all(&self) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut running = lock(&self.running);
            running
                .values_mut()
                .filter_map(|r| {
                    r.cancel.cancel();
                    r.task.take()
                })
                .collect()
        };
        for task in tasks {
            let _ = task.await;
        }
    }

    /// Checks `params` and starts the child; the reply is its first state.
    fn spawn(&self, origin: &CallOrigin, params: SpawnParams) -> CallAnswer {
        let called = crate::trace::now();
        let blueprint = lock(&self.blueprint).clone();
        let task = params.task.trim();
        if task.is_empty() {
            return Err(CallError(
                "spawn: the task is empty; say what the sub-session should do, e.g. spawn(\"review src/app.py for bugs and answer with a list\")".into(),
            ));
        }
        if !(1..=MAX_CHILD_ITERATIONS).contains(&params.max_iterations) {
            return Err(CallError(format!(
                "spawn: max_iterations must be between 1 and {MAX_CHILD_ITERATIONS}, got {}; it bounds the child's tool calls (default 50)",
                params.max_iterations
            )));
        }
        let model = accepted_model(&blueprint.settings, &blueprint.spawn, params.model)?;
        if let Some(tools) = &params.tools {
            for name in tools {
                crate::catalog::validate_name(name, crate::catalog::NameRule::Slug).map_err(
                    |e| CallError(format!("spawn: tools holds {:?}: {e}", clip(name, 60))),
                )?;
            }
        }
        let mut deny = blueprint.settings.worker.deny.clone();
        deny.extend(params.deny.iter().cloned());
        crate::catalog::DenyList::new(deny.iter().cloned())
            .map_err(|e| CallError(format!("spawn: the names to leave out: {e}")))?;
        if self.depth + 1 > blueprint.spawn.max_depth {
            return Err(CallError(if blueprint.spawn.max_depth == 0 {
                "spawn: sub-sessions are turned off ([spawn] max_depth = 0 in config.toml); do the work in this block".to_string()
            } else {
                format!(
                    "spawn: this session is at depth {} and [spawn] max_depth = {} allows no deeper sub-sessions; do the work in this session, or raise max_depth in config.toml",
                    self.depth, blueprint.spawn.max_depth
                )
            }));
        }
        let child = crate::session::new_session_id();
        crate::trace::mark_at(&child, "host: spawn call", called);
        let link = ChildLink {
            child: child.clone(),
            parent: self.parent.clone(),
            turn: origin.turn,
            iteration: origin.iteration,
            task: task.to_string(),
        };
        // Under the parent's lease: a node that lost it starts no child, and every write of
        // the child (its records, turns, end state) carries the same fence.
        let fence = origin.fence.as_ref().map(|f| f.for_sub_session(&child));
        self.with_store(|store| {
            store.set_lease_fence(fence.clone());
            let roots = store.require_session(&self.parent)?.workspace_roots;
            store.ensure_session(&child, &roots)?;
            store.link_child(&link)
        })?;
        crate::trace::mark(&child, "host: child stored");
        let (state_tx, state_rx) = watch::channel(ChildState {
            status: "queued".into(),
            answer: None,
        });
        let cancel = CancellationToken::new();
        let mut settings = blueprint.settings.clone();
        settings.provider.model = model.clone();
        settings.max_iterations = params.max_iterations as u32;
        settings.worker.deny = deny;
        let plan = ChildPlan {
            id: child.clone(),
            task: task.to_string(),
            db: blueprint.db.clone(),
            settings,
            spawn: blueprint.spawn.clone(),
            // A child with fewer tools (or of a parent without a conversation) renders its
            // own catalog, from the parent's manifest when there is one.
            prefix: blueprint.prefix.filter(|_| params.deny.is_empty()),
            manifest: blueprint.manifest,
            rendered: self.rendered.clone(),
            window: blueprint.window,
            live: origin.live.clone(),
            fence,
        };
        // Said before the child's task exists: a child that ends at once must not report its
        // end ahead of its start.
        if let Some(live) = &origin.live {
            let _ = live.send(Event::ChildStarted {
                turn: origin.turn,
                iteration: origin.iteration,
                child: child.clone(),
                task: first_line(task),
            });
        }
        let task_handle = tokio::spawn(run_child(
            plan,
            self.slots.clone(),
            cancel.clone(),
            state_tx,
        ));
        lock(&self.running).insert(
            child.clone(),
            Running {
                turn: origin.turn,
                iteration: origin.iteration,
                cancel,
                state: state_rx,
                task: Some(task_handle),
            },
        );
        crate::trace::mark(&child, "host: task started");
        Ok(HostReply::Sub(json!({
            "id": child,
            "task": task,
            "model": model,
            "status": "queued",
            "answer": Value::Null,
        })))
    }

    /// The child's state now: this process's own, else the store's.
    fn state(
        &self,
        id: &str,
    ) -> Result<(ChildState, Option<watch::Receiver<ChildState>>), CallError> {
        if let Some(r) = lock(&self.running).get(id) {
            return Ok((r.state.borrow().clone(), Some(r.state.clone())));
        }
        let row = self.own_child(id)?;
        Ok((
            ChildState {
                status: row.status,
                answer: row.answer,
            },
            None,
        ))
    }

    /// The stored child `id` of this session, or the error naming the cause.
    fn own_child(&self, id: &str) -> Result<ChildRow, CallError> {
        match self.with_store(|store| store.child(id))? {
            Some(row) if row.link.parent == self.parent => Ok(row),
            _ => Err(CallError(format!(
                "no sub-session {:?} of this session; subs() lists them",
                clip(id, 60)
            ))),
        }
    }

    fn reply(id: &str, state: &ChildState) -> CallAnswer {
        Ok(HostReply::Sub(json!({
            "id": id,
            "status": state.status,
            "answer": state.answer,
        })))
    }

    fn list(&self) -> CallAnswer {
        let rows = self.with_store(|store| store.children_of(&self.parent))?;
        let running = lock(&self.running);
        let items: Vec<Value> = rows
            .into_iter()
            .map(|row| {
                let (status, answer) = match running.get(&row.link.child) {
                    Some(r) => {
                        let state = r.state.borrow();
                        (state.status.clone(), state.answer.clone())
                    }
                    None => (row.status, row.answer),
                };
                json!({
                    "id": row.link.child,
                    "task": row.link.task,
                    "turn": row.link.turn,
                    "iteration": row.link.iteration,
                    "status": status,
                    "answer": answer,
                    "input_tokens": row.input_tokens,
                    "output_tokens": row.output_tokens,
                })
            })
            .collect();
        Ok(HostReply::Sub(Value::Array(items)))
    }
}

impl SubSessions for Children {
    fn answer(&self, origin: CallOrigin, request: HostRequest) -> ToolFuture<'static, CallAnswer> {
        let ready = |answer: CallAnswer| -> ToolFuture<'static, CallAnswer> {
            Box::pin(async move { answer })
        };
        match request {
            HostRequest::Spawn(params) => ready(self.spawn(&origin, params)),
            HostRequest::SubStatus { id } => {
                ready(self.state(&id).and_then(|(s, _)| Self::reply(&id, &s)))
            }
            HostRequest::SubCancel { id } => {
                // One not running here ended (or ran in a process that stopped); `state`
                // answers for it, or says it is not this session's child.
                if let Some(r) = lock(&self.running).get(&id) {
                    r.cancel.cancel();
                }
                ready(self.state(&id).and_then(|(s, _)| Self::reply(&id, &s)))
            }
            HostRequest::SubList {} => ready(self.list()),
            HostRequest::SubWait { id, timeout } => {
                if let Some(t) = timeout.filter(|t| !(t.is_finite() && *t >= 0.0)) {
                    return ready(Err(CallError(format!(
                        "Sub.wait: timeout must be a number of seconds of at least 0, or None to wait until the sub-session ends; got {t}"
                    ))));
                }
                let (state, receiver) = match self.state(&id) {
                    Ok(found) => found,
                    Err(e) => return ready(Err(e)),
                };
                let Some(mut receiver) = receiver.filter(|_| !state.finished()) else {
                    return ready(Self::reply(&id, &state));
                };
                // A timeout too long for a `Duration` (1e20 s) is no limit at all.
                let timeout = timeout.and_then(|t| Duration::try_from_secs_f64(t).ok());
                Box::pin(async move {
                    let state = match timeout {
                        None => receiver
                            .wait_for(ChildState::finished)
                            .await
                            .map(|s| s.clone())
                            .ok(),
                        Some(t) => {
                            let ended =
                                tokio::time::timeout(t, receiver.wait_for(ChildState::finished))
                                    .await
                                    .map(|s| s.map(|s| s.clone()).ok());
                            match ended {
                                Ok(state) => state,
                                Err(_) => Some(receiver.borrow().clone()),
                            }
                        }
                    };
                    let state = state.unwrap_or_else(|| ChildState {
                        status: "failed: the sub-session's task ended without a status".into(),
                        answer: None,
                    });
                    Self::reply(&id, &state)
                })
            }
            other => ready(Err(CallError(format!(
                "the sub-sessions answer no '{}' call",
                other.method()
            )))),
        }
    }

    fn block_interrupted(&self, turn: i64, iteration: i64) {
        for r in lock(&self.running).values() {
            if r.turn == turn && r.iteration == iteration && !r.state.borrow().finished() {
                r.cancel.cancel();
            }
        }
    }

    fn parent_manifest(&self, version: u64, entries: &[ManifestEntry]) {
        let mut blueprint = lock(&self.blueprint);
        // Copied once per change of the manifest (0: no worker has reported one yet).
        let known = blueprint.manifest.as_ref().map(|(v, _)| *v);
        if version != 0 && known != Some(version) {
            blueprint.manifest = Some((version, Arc::new(entries.to_vec())));
        }
    }

    fn shutdown(&self) -> crate::runtime::ShutdownFuture<'_> {
        Box::pin(self.stop_all())
    }
}

/// The sub-sessions of a session that has no conversation of its own (`vis mcp`: the client
/// keeps it): children run with `settings` (the configured provider and model, the worker's
/// options before this session's own paths are added). Children a stopped process left
/// running are repaired first; the lines say so.
pub fn sub_sessions_for(
    store: &Store,
    db: &std::path::Path,
    parent: &str,
    settings: ChatSettings,
    spawn: SpawnSettings,
) -> crate::store::Result<(Arc<dyn SubSessions>, Vec<String>)> {
    let notes = repair_children(store, parent)?;
    let depth = depth_of(store, parent)?;
    let children = Children::new(parent, depth, db.to_path_buf(), settings, spawn);
    Ok((Arc::new(children), notes))
}

/// Marks children a stopped gateway left queued or running as `interrupted` and closes
/// their turns (called when the parent is opened, before it can start new ones).
pub(super) fn repair_children(store: &Store, parent: &str) -> crate::store::Result<Vec<String>> {
    let mut notes = Vec::new();
    for row in store.children_of(parent)? {
        if matches!(row.status.as_str(), "queued" | "running") {
            store.close_dangling_turns(&row.link.child)?;
            store.set_child_state(&row.link.child, "interrupted", None)?;
            notes.push(format!(
                "[vis] sub-session {} was interrupted when the gateway stopped; its records are kept (`vis sessions show {}`)",
                row.link.child, row.link.child
            ));
        }
    }
    Ok(notes)
}

/// How deep session `id` is: 0 for a session no block spawned.
pub(super) fn depth_of(store: &Store, id: &str) -> crate::store::Result<u32> {
    let mut depth = 0;
    let mut current = id.to_string();
    while let Some(row) = store.child(&current)? {
        depth += 1;
        // A damaged chain cannot loop forever.
        if depth > crate::config::MAX_SPAWN_DEPTH + 1 {
            break;
        }
        current = row.link.parent;
    }
    Ok(depth)
}

/// The model a child runs with: the session's own, or one `[spawn] models` lists, either
/// alone or as `PROVIDER/MODEL` with the session's provider.
fn accepted_model(
    settings: &ChatSettings,
    spawn: &SpawnSettings,
    asked: Option<String>,
) -> Result<String, CallError> {
    let own = settings.provider.model.clone();
    let Some(asked) = asked else {
        return Ok(spawn.model.clone().unwrap_or(own));
    };
    let kind = settings.provider.kind.as_str();
    let name = asked
        .strip_prefix(kind)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(&asked)
        .trim();
    if name == own || spawn.models.iter().any(|m| m == name) || spawn.model.as_deref() == Some(name)
    {
        return Ok(name.to_string());
    }
    let listed = if spawn.models.is_empty() {
        "none is listed".to_string()
    } else {
        format!("listed: {}", spawn.models.join(", "))
    };
    Err(CallError(format!(
        "spawn: model {:?} is not configured for sub-sessions; use the session's model ({kind}/{own}) with model=None, or list the model in [spawn] models in config.toml ({listed})",
        clip(&asked, 80)
    )))
}

fn store_error(e: crate::store::StoreError) -> CallError {
    CallError(format!("sub-sessions: the store failed: {e}"))
}

fn first_line(text: &str) -> String {
    clip(text.lines().next().unwrap_or_default(), 120)
}

/// Everything one child's task needs.
struct ChildPlan {
    id: String,
    task: String,
    db: PathBuf,
    settings: ChatSettings,
    spawn: SpawnSettings,
    prefix: Option<ChatPrefix>,
    /// The parent's manifest and its version, for a child that renders its own catalog.
    manifest: Option<(u64, Arc<Vec<ManifestEntry>>)>,
    rendered: RenderedPrefixes,
    window: Option<crate::providers::ServerWindow>,
    live: Option<tokio::sync::mpsc::UnboundedSender<Event>>,
    /// The parent's lease fence, guarding this child's writes (`None`: no lease).
    fence: Option<LeaseFence>,
}

/// What the child's first message says besides the task.
const FRAMING: &str = "[vis] You are a sub-session: a block of another session started you with spawn() to do the task below in a fresh context. Work with python_execution as usual; your final answer (your last message without a tool call) is all the other session receives, so make it complete and self-contained.";

/// One child, from its slot to its end.
async fn run_child(
    plan: ChildPlan,
    slots: Arc<Semaphore>,
    cancel: CancellationToken,
    state: watch::Sender<ChildState>,
) {
    crate::trace::mark(&plan.id, "child: task runs");
    let ended = tokio::select! {
        permit = slots.acquire_owned() => match permit {
            Ok(permit) => {
                crate::trace::mark(&plan.id, "child: slot taken");
                let _ = state.send(ChildState { status: "running".into(), answer: None });
                let ended = run_to_end(&plan, &cancel).await;
                drop(permit);
                ended
            }
            Err(_) => ChildState { status: "failed: the gateway is shutting down".into(), answer: None },
        },
        _ = cancel.cancelled() => ChildState { status: "cancelled".into(), answer: None },
    };
    let store = Store::open(&plan.db).ok();
    if let Some(store) = &store {
        // Refused when the parent's lease was lost: the new holder has marked the child.
        store.set_lease_fence(plan.fence.clone());
        let _ = store.set_child_state(&plan.id, &ended.status, ended.answer.as_deref());
    }
    if let Some(live) = &plan.live {
        let _ = live.send(Event::ChildFinished {
            child: plan.id.clone(),
            status: ended.status.clone(),
            answer: first_line(ended.answer.as_deref().unwrap_or_default()),
        });
    }
    let _ = state.send(ended);
    // The log is folded into the database here, once the child is done and on a blocking
    // thread: left to SQLite's automatic checkpoint, it falls on whichever commit takes the
    // log past 1,000 pages, with its fsyncs (5 ms seen on a sibling's start path).
    if let Some(store) = store {
        let _ = tokio::task::spawn_blocking(move || store.settle_log()).await;
    }
}

/// The prefixes rendered for a session's children with fewer tools, by the parent's manifest
/// version and the child's deny list: children that leave out the same names share one
/// (rendering and storing the catalog and counting the prompt's tokens is a millisecond of
/// every such child's start otherwise).
#[derive(Clone, Default)]
struct RenderedPrefixes(Arc<Mutex<Vec<(PrefixKey, ChatPrefix)>>>);

/// The parent's manifest version and the child's deny list, sorted.
type PrefixKey = (u64, Vec<String>);

/// The child's prefix rendered from the parent's manifest with the child's own deny list
/// applied (what its worker will report: the same extensions, less what it leaves out; the
/// parent's MCP servers are not the child's), so that its first request needs no worker;
/// rendered once per deny list and manifest (`RenderedPrefixes`).
/// `None` (the child's worker renders it) when there is no manifest or rendering fails.
fn catalog_prefix(plan: &ChildPlan, store: &Store) -> Option<ChatPrefix> {
    let (version, _) = plan.manifest.as_ref()?;
    let mut deny = plan.settings.worker.deny.clone();
    deny.sort();
    let key = (*version, deny);
    let found = lock(&plan.rendered.0)
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, prefix)| prefix.clone());
    if found.is_some() {
        return found;
    }
    let prefix = render_prefix(plan, store)?;
    lock(&plan.rendered.0).push((key, prefix.clone()));
    Some(prefix)
}

fn render_prefix(plan: &ChildPlan, store: &Store) -> Option<ChatPrefix> {
    let (_, entries) = plan.manifest.as_ref()?;
    let kept: Vec<ManifestEntry> = entries
        .iter()
        .filter(|e| !matches!(e.origin, crate::catalog::Origin::Mcp(_)))
        .cloned()
        .collect();
    let deny = crate::catalog::DenyList::new(plan.settings.worker.deny.iter().cloned()).ok()?;
    let manifest = crate::catalog::Manifest::build(kept, &deny).ok()?;
    let snapshot = crate::catalog::render_catalog(&manifest, plan.settings.catalog_budget).ok()?;
    // Stored like any catalog the conversation shows (an update is a diff against it).
    store.save_catalog_snapshot(&snapshot).ok()?;
    let workspace = store
        .require_session(&plan.id)
        .ok()?
        .workspace_roots
        .first()
        .map(PathBuf::from);
    super::prompt::chat_prefix(
        &snapshot,
        workspace.as_deref(),
        plan.settings.worker.trusted,
    )
    .ok()
}

/// Opens the child's session, runs its one turn, stops its worker.
async fn run_to_end(plan: &ChildPlan, cancel: &CancellationToken) -> ChildState {
    let failed = |why: String| ChildState {
        status: format!("failed: {why}"),
        answer: None,
    };
    let store = match Store::open(&plan.db) {
        Ok(s) => s,
        Err(e) => return failed(e.to_string()),
    };
    crate::trace::mark(&plan.id, "child: store opened");
    // Fenced before it opens, as the parent's store is: every write of the child's turn
    // checks the parent's lease.
    store.set_lease_fence(plan.fence.clone());
    if let Err(e) = store.set_child_state(&plan.id, "running", None) {
        return failed(e.to_string());
    }
    crate::trace::mark(&plan.id, "child: state written");
    let mut session = match ChatSession::open(store, &plan.db, &plan.id, plan.settings.clone()) {
        Ok((s, _)) => s,
        Err(e) => return failed(e.to_string()),
    };
    crate::trace::mark(&plan.id, "child: session opened");
    session.set_spawn(plan.spawn.clone());
    let prefix = plan
        .prefix
        .clone()
        .or_else(|| catalog_prefix(plan, session.store()));
    if let Some(prefix) = prefix {
        if let Err(e) = session.adopt_prefix(prefix) {
            return failed(e.to_string());
        }
    }
    crate::trace::mark(&plan.id, "child: prefix adopted");
    if let Err(e) = session.settle_limits(plan.window) {
        return failed(e.to_string());
    }
    crate::trace::mark(&plan.id, "child: limits settled");
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let message = format!("{FRAMING}\n\n{}", plan.task);
    let ended = session.run_turn(&message, &events, cancel).await;
    let last_text = session.entries().iter().rev().find_map(|e| match &e.item {
        HistoryItem::Assistant(m) if !m.text().trim().is_empty() => Some(m.text()),
        _ => None,
    });
    session.shutdown().await;
    match ended {
        Err(e) => failed(e.to_string()),
        Ok(end) => match end.status {
            TurnStatus::Done => ChildState {
                status: "done".into(),
                answer: Some(end.text),
            },
            TurnStatus::IterationLimit => ChildState {
                status: "iteration limit".into(),
                answer: last_text,
            },
            TurnStatus::Interrupted if cancel.is_cancelled() => ChildState {
                status: "cancelled".into(),
                answer: last_text,
            },
            TurnStatus::Interrupted => ChildState {
                status: "interrupted".into(),
                answer: last_text,
            },
            TurnStatus::OutputLimit => ChildState {
                status: "failed: its answer was cut at the output limit".into(),
                answer: last_text,
            },
            TurnStatus::Failed | TurnStatus::Running => ChildState {
                status: format!(
                    "failed: {}",
                    end.error
                        .map(|(_, message)| message)
                        .unwrap_or_else(|| "the turn failed".into())
                ),
                answer: last_text,
            },
        },
    }
}
