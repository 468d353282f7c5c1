//! What a child starts from: the parent's [`Blueprint`] (its settings, its prompt prefix, its
//! worker's manifest), the child's own [`ChildPlan`], and the prefixes rendered for children
//! with fewer tools ([`RenderedPrefixes`]: once per deny list and manifest, shared by the
//! parent's children).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{lock, SpawnSettings};
use crate::catalog::ManifestEntry;
use crate::gateway::ChatSettings;
use crate::protocol::Event;
use crate::store::{ChatPrefix, LeaseFence, Store};

/// What a child needs from its parent to start.
#[derive(Clone)]
pub(super) struct Blueprint {
    pub(super) db: PathBuf,
    pub(super) settings: ChatSettings,
    pub(super) spawn: SpawnSettings,
    /// The parent's prompt prefix, which a child with every tool starts from (so its first
    /// request needs no worker: the worker starts while the request streams).
    pub(super) prefix: Option<ChatPrefix>,
    pub(super) window: Option<crate::providers::ServerWindow>,
    /// The parent's worker manifest and its version (see [`SubSessions::parent_manifest`]):
    /// a child without the parent's prefix renders its catalog from it.
    pub(super) manifest: Option<(u64, Arc<Vec<ManifestEntry>>)>,
}

/// Everything one child's task needs.
pub(super) struct ChildPlan {
    pub(super) id: String,
    pub(super) task: String,
    pub(super) db: PathBuf,
    pub(super) settings: ChatSettings,
    pub(super) spawn: SpawnSettings,
    pub(super) prefix: Option<ChatPrefix>,
    /// The parent's manifest and its version, for a child that renders its own catalog.
    pub(super) manifest: Option<(u64, Arc<Vec<ManifestEntry>>)>,
    pub(super) rendered: RenderedPrefixes,
    pub(super) window: Option<crate::providers::ServerWindow>,
    pub(super) live: Option<tokio::sync::mpsc::UnboundedSender<Event>>,
    /// The parent's lease fence, guarding this child's writes (`None`: no lease).
    pub(super) fence: Option<LeaseFence>,
}

/// The prefixes rendered for a session's children with fewer tools, by the parent's manifest
/// version and the child's deny list: children that leave out the same names share one
/// (rendering and storing the catalog and counting the prompt's tokens is a millisecond of
/// every such child's start otherwise).
#[derive(Clone, Default)]
pub(super) struct RenderedPrefixes(Arc<Mutex<Vec<(PrefixKey, ChatPrefix)>>>);

/// The parent's manifest version and the child's deny list, sorted.
type PrefixKey = (u64, Vec<String>);

/// The child's prefix rendered from the parent's manifest with the child's own deny list
/// applied (what its worker will report: the same extensions, less what it leaves out; the
/// parent's MCP servers are not the child's), so that its first request needs no worker;
/// rendered once per deny list and manifest (`RenderedPrefixes`).
/// `None` (the child's worker renders it) when there is no manifest or rendering fails.
pub(super) fn catalog_prefix(plan: &ChildPlan, store: &Store) -> Option<ChatPrefix> {
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
    crate::gateway::prompt::chat_prefix(
        &snapshot,
        workspace.as_deref(),
        plan.settings.worker.trusted,
    )
    .ok()
}
