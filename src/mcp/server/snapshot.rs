//! What the resources read without waiting for a running block: the catalog, `defs()` and
//! the documentation pages, as of the last block.

use serde_json::{json, Value};

use crate::catalog::{render_catalog, EntryKind};
use crate::protocol::PersistedDef;
use crate::runtime::Supervisor;

use super::ServeError;

/// What resources read without waiting for a running block.
pub(super) struct Snapshot {
    pub(super) catalog: String,
    pub(super) defs: String,
    /// (name, kind, summary, markdown) of every page and skill.
    pages: Vec<(String, EntryKind, String, String)>,
}

impl Snapshot {
    pub(super) fn of(supervisor: &Supervisor, budget: usize) -> Result<Snapshot, ServeError> {
        let manifest = supervisor.manifest()?;
        let rendered = render_catalog(&manifest, budget)?;
        // Counted so the text says `mode: full, N o200k tokens` as `vis catalog` prints it.
        let _ = rendered.tokens();
        let pages = supervisor
            .manifest_entries()
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Page | EntryKind::Skill))
            .map(|e| {
                let summary = manifest
                    .entry(&e.name)
                    .map(|m| m.summary.clone())
                    .unwrap_or_default();
                (e.name.clone(), e.kind, summary, e.doc.clone())
            })
            .collect();
        Ok(Snapshot {
            catalog: rendered.text(),
            defs: defs_text(supervisor.defs()),
            pages,
        })
    }
}

/// `defs()` as the prelude prints it, from the host's copy of the definitions.
pub fn defs_text(defs: &[PersistedDef]) -> String {
    let funcs: Vec<&PersistedDef> = defs
        .iter()
        .filter(|d| d.kind == "function" || d.kind == "class")
        .collect();
    let names_of = |kind: &str| -> Vec<&str> {
        defs.iter()
            .filter(|d| d.kind == kind)
            .map(|d| d.name.as_str())
            .collect()
    };
    let (imports, constants) = (names_of("import"), names_of("constant"));
    if funcs.is_empty() && imports.is_empty() && constants.is_empty() {
        return "no definitions yet: top-level def/class statements in blocks are kept here\n"
            .into();
    }
    let noun = if funcs.len() == 1 {
        "definition"
    } else {
        "definitions"
    };
    let mut out = format!("{} {noun} (kept across restarts):\n", funcs.len());
    for d in funcs {
        out.push_str("  ");
        out.push_str(&d.signature);
        if !d.doc.is_empty() {
            out.push_str("  — ");
            out.push_str(&d.doc);
        }
        out.push('\n');
    }
    if !imports.is_empty() {
        out.push_str(&format!("imports: {}\n", imports.join(", ")));
    }
    if !constants.is_empty() {
        out.push_str(&format!("constants: {}\n", constants.join(", ")));
    }
    out
}
impl Snapshot {
    /// `resources/list`: defs, the catalog, and every page and skill.
    pub(super) fn resources(&self) -> Vec<Value> {
        let snap = self;
        let mut out = vec![
            json!({"uri": "vis://session/defs", "name": "defs", "title": "defs(): the session's persisted helpers", "mimeType": "text/plain"}),
            json!({"uri": "vis://catalog", "name": "catalog", "title": "The function catalog (as vis catalog renders it)", "mimeType": "text/plain"}),
        ];
        for (name, kind, summary, _) in &snap.pages {
            out.push(json!({
                "uri": format!("vis://doc/{name}"),
                "name": name,
                "description": format!("{} {}", if *kind == EntryKind::Skill { "skill:" } else { "page:" }, summary),
                "mimeType": "text/markdown",
            }));
        }
        out
    }

    /// The text and MIME type of resource `uri`.
    pub(super) fn read(&self, uri: &str) -> Option<(String, &'static str)> {
        let snap = self;
        match uri {
            "vis://session/defs" => Some((snap.defs.clone(), "text/plain")),
            "vis://catalog" => Some((snap.catalog.clone(), "text/plain")),
            _ => {
                let name = uri.strip_prefix("vis://doc/")?;
                snap.pages
                    .iter()
                    .find(|(n, ..)| n == name)
                    .map(|(_, _, _, md)| (md.clone(), "text/markdown"))
            }
        }
    }
}
