//! The catalog core: the manifest of public names, `apropos`/`doc` discovery, permissions, and
//! the token-budgeted catalog the gateway puts in the prompt.
//!
//! Pure Rust at its core: the worker builds a [`Manifest`] from the prelude's entries
//! (functions, namespaces, documentation pages, skills) with the config's [`DenyList`], set
//! once per worker (`python`: the pyo3 face, [`set_deny_list`]), and sends the visible
//! [`ManifestEntry`] values to the host, which builds its own [`Manifest`] from them. Then:
//!
//! - [`apropos`] searches names with a regex, in manifest order, paginated;
//! - [`doc`] documents one name (unknown names get suggestions);
//! - [`render_catalog`] renders the prompt catalog as a content-addressed [`Snapshot`] (full
//!   signatures when they fit the budget, namespace summaries plus pinned signatures otherwise);
//! - [`catalog_update`] turns two snapshots into the text to append mid-session;
//! - the store keeps snapshots (`store::CatalogSnapshots`).
//!
//! One file per responsibility; the submodules are private and everything other code may use
//! is re-exported below:
//!
//! | file | owns |
//! |---|---|
//! | `manifest.rs` | entries, the deny list, manifest order and lookups |
//! | `names.rs` | dotted-name validation, path helpers, "did you mean" suggestions |
//! | `apropos.rs`, `doc.rs` | the two discovery calls and their text |
//! | `snapshot.rs` | the rendered catalog as a value: content address, items, item diffs |
//! | `render.rs` | manifest + budget → snapshot (full, summary, index and empty modes) |
//! | `update.rs` | two snapshots → the text to append mid-session |
//! | `tokens.rs` | the o200k encoder and line-additive counting |
//! | `python.rs` | the native `Manifest` class and helpers for the worker |
//!
//! Design notes (details in each file and in `docs/catalog.md`):
//!
//! - *Manifest order* is core, then extensions by name, then MCP servers by name, each in
//!   registration order; a namespace's row comes right before its first member
//!   (`manifest.rs`). It drives `apropos` and `doc` member lists.
//! - *Canonical order* is sorting by name; it drives the rendered catalog, which therefore
//!   depends only on the set of visible entries, never on load order (`render.rs`).
//! - Names are validated, never sanitized (`names.rs`).
//! - Skills' `SKILL.md` front matter is real YAML (`front_matter.rs`).
//! - Denied entries are dropped when the manifest is built, so no later step can leak them.
//! - Token counts use o200k_base (lazily loaded once per process) and are exact; the renderer
//!   counts line by line and stops at the budget (`tokens.rs`).

mod apropos;
mod doc;
mod error;
mod front_matter;
mod manifest;
mod names;
mod python;
mod render;
mod snapshot;
mod tokens;
mod update;

pub use apropos::{apropos, AproposPage, AproposRow, DEFAULT_LIMIT};
pub use doc::doc;
pub use error::{CatalogError, Result};
pub use front_matter::parse_front_matter;
pub use manifest::{DenyList, EntryKind, Manifest, ManifestEntry, NamespaceInfo, Origin, Row};
pub use names::{spell_segment, validate_name, validate_namespace, NameRule, PYTHON_KEYWORDS};
pub use python::{manifest_entries_of, register as register_native, set_deny_list};
pub use render::{render_catalog, render_catalog_text, DEFAULT_BUDGET_TOKENS};
pub use snapshot::{RenderMode, Snapshot, SnapshotItem};
pub use tokens::{count_tokens, warm_up as warm_up_tokenizer};
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
