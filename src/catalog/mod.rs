//! The catalog core: the manifest of public names, `apropos`/`doc` discovery, permissions, and
//! the token-budgeted catalog the gateway puts in the prompt.
//!
//! Pure Rust at its core: the worker builds a [`Manifest`] from the prelude's entries
//! (functions, namespaces, documentation pages, skills) with the config's [`DenyList`], set
//! once per worker (`python`: the pyo3 face, [`set_deny_list`]), and sends the visible
//! [`ManifestEntry`] values to the host, which builds its own [`Manifest`] from them. Then:
//!
//! - [`apropos`](apropos::apropos) searches names with a regex, in manifest order, paginated;
//! - [`doc`](doc::doc) documents one name (unknown names get suggestions);
//! - [`render_catalog`] renders the prompt catalog as a content-addressed [`Snapshot`] (full
//!   signatures when they fit the budget, namespace summaries plus pinned signatures otherwise);
//! - [`catalog_update`] turns two snapshots into the text to append mid-session;
//! - the store keeps snapshots (`store::CatalogSnapshots`).
//!
//! Design notes (details in each module and in `docs/catalog.md`):
//!
//! - *Manifest order* is core, then extensions by name, then MCP servers by name, each in
//!   registration order; a namespace's row comes right before its first member
//!   ([`manifest`]). It drives `apropos` and `doc` member lists.
//! - *Canonical order* is sorting by name; it drives the rendered catalog, which therefore
//!   depends only on the set of visible entries, never on load order ([`render`]).
//! - Names are validated, never sanitized ([`names`]).
//! - Denied entries are dropped when the manifest is built, so no later step can leak them.
//! - Token counts use o200k_base (lazily loaded once per process) and are exact; the renderer
//!   counts line by line and stops at the budget ([`tokens`]).

pub mod apropos;
pub mod doc;
pub mod error;
pub mod manifest;
pub mod names;
pub mod python;
pub mod render;
pub mod tokens;
pub mod update;

pub use apropos::{apropos, AproposPage, AproposRow, DEFAULT_LIMIT};
pub use doc::doc;
pub use error::{CatalogError, Result};
pub use manifest::{DenyList, EntryKind, Manifest, ManifestEntry, NamespaceInfo, Origin, Row};
pub use python::{manifest_entries_of, set_deny_list};
pub use render::{
    render_catalog, render_catalog_text, RenderMode, Snapshot, SnapshotItem, DEFAULT_BUDGET_TOKENS,
};
pub use update::{catalog_update, CatalogUpdate, ReplaceReason};

impl Manifest {
    /// `apropos(pattern, namespace, limit, offset)` over this manifest.
    pub fn apropos(
        &self,
        pattern: &str,
        namespace: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<AproposPage> {
        apropos::apropos(self, pattern, namespace, limit, offset)
    }

    /// `doc(name)` over this manifest.
    pub fn doc(&self, name: &str) -> Result<String> {
        doc::doc(self, name)
    }
}
