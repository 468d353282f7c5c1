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
//!
//! - this file: the `Children` registry of one session (its children, their slots, their
//!   states) and its lifecycle (opening, repairing what a stopped gateway left, stopping);
//! - `calls`: the host-call side (`SubSessions`: `spawn`, `Sub.status`/`wait`/`cancel`,
//!   `subs()`), checking what a block asks for;
//! - `plan`: what a child starts from (the parent's blueprint, the child's plan) and the
//!   prefixes rendered for children with fewer tools;
//! - `run`: one child's task, from its slot to its end.

mod calls;
mod plan;
mod run;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ChatSettings;
use crate::protocol::{clip, CallError};
use crate::runtime::SubSessions;
use crate::store::{ChatPrefix, ChildRow, Store};
use plan::{Blueprint, RenderedPrefixes};

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

fn store_error(e: crate::store::StoreError) -> CallError {
    CallError(format!("sub-sessions: the store failed: {e}"))
}

fn first_line(text: &str) -> String {
    clip(text.lines().next().unwrap_or_default(), 120)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ChildLink;

    fn link(store: &Store, child: &str, parent: &str) {
        store.ensure_session(child, &["/w".to_string()]).unwrap();
        store
            .link_child(&ChildLink {
                child: child.into(),
                parent: parent.into(),
                turn: 1,
                iteration: 1,
                task: format!("task of {child}"),
            })
            .unwrap();
    }

    #[test]
    fn depth_counts_the_stored_chain_and_repair_marks_only_unfinished_children() {
        let dir = tempfile::tempdir().unwrap();
        let opened = Store::open(&dir.path().join("vis.db")).unwrap();
        let store: &Store = &*opened;
        store.ensure_session("top", &["/w".to_string()]).unwrap();
        link(store, "a", "top");
        link(store, "b", "a");
        link(store, "done", "top");
        store.set_child_state("a", "running", None).unwrap();
        store.set_child_state("done", "done", Some("ok")).unwrap();
        assert_eq!(depth_of(store, "top").unwrap(), 0);
        assert_eq!(depth_of(store, "a").unwrap(), 1);
        assert_eq!(depth_of(store, "b").unwrap(), 2);

        let notes = repair_children(store, "top").unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("sub-session a was interrupted"),
            "{notes:?}"
        );
        assert_eq!(store.child("a").unwrap().unwrap().status, "interrupted");
        let done = store.child("done").unwrap().unwrap();
        assert_eq!(
            (done.status.as_str(), done.answer.as_deref()),
            ("done", Some("ok"))
        );
        // Repaired once: opening the parent again says nothing more.
        assert!(repair_children(store, "top").unwrap().is_empty());
    }
}
