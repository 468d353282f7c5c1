//! `doc(name)`: the documentation of a function, namespace, page or skill.
//!
//! - Function: call form (name + signature), a blank line, the full docstring, then where it
//!   comes from (and `pinned`). If the same path is also a namespace, its member list follows.
//! - Namespace: `namespace NAME — summary`, its doc if any, then its direct members (one row
//!   each, manifest order, at most [`MAX_MEMBERS`], with the `apropos` call for the rest).
//! - Page or skill: its Markdown text as registered.
//! - Unknown (or denied) name: [`CatalogError::UnknownName`] with the closest names.

use super::apropos::py_str;
use super::error::{CatalogError, Result};
use super::manifest::{EntryKind, Manifest, NamespaceInfo};
use super::names;

/// Most members a namespace's `doc` lists.
pub const MAX_MEMBERS: usize = 200;

/// The text `doc(name)` returns.
pub fn doc(manifest: &Manifest, name: &str) -> Result<String> {
    let name = name.trim();
    let entry = manifest.entry(name);
    let ns = manifest.namespace(name);
    let mut out = String::new();
    if let Some(e) = entry {
        match e.kind {
            EntryKind::Function => {
                out.push_str(&e.call_form());
                out.push_str("\n\n");
                let body = e.doc.trim_end();
                if body.is_empty() {
                    out.push_str("(no documentation)\n");
                } else {
                    out.push_str(body);
                    out.push('\n');
                }
                out.push_str(&format!(
                    "\n(from {}{})\n",
                    e.origin,
                    if e.pinned { "; pinned" } else { "" }
                ));
            }
            _ => {
                let body = if e.doc.trim().is_empty() {
                    e.summary.as_str()
                } else {
                    e.doc.as_str()
                };
                out.push_str(body.trim_end());
                out.push('\n');
            }
        }
    }
    if let Some(info) = ns {
        if !out.is_empty() {
            out.push('\n');
        }
        namespace_doc(manifest, info, &mut out);
    }
    if out.is_empty() {
        return Err(CatalogError::UnknownName {
            name: name.to_string(),
            suggestions: names::closest(name, manifest.all_names(), 5),
        });
    }
    Ok(out)
}

fn namespace_doc(manifest: &Manifest, info: &NamespaceInfo, out: &mut String) {
    out.push_str(&format!("namespace {}", info.name));
    if !info.summary.is_empty() {
        out.push_str(&format!("  — {}", info.summary));
    }
    out.push('\n');
    let body = info.doc.trim();
    if !body.is_empty() && body != info.summary {
        out.push('\n');
        out.push_str(body);
        out.push('\n');
    }
    let n = info.children.len();
    out.push_str(&format!("\nMembers ({n}):\n"));
    for &r in info.children.iter().take(MAX_MEMBERS) {
        out.push_str(&manifest.row_line(&manifest.rows()[r]));
        out.push('\n');
    }
    if n > MAX_MEMBERS {
        out.push_str(&format!(
            "… {} more: apropos({}, offset={MAX_MEMBERS}) lists them\n",
            n - MAX_MEMBERS,
            py_str(&format!("^{}\\.[^.]+$", regex::escape(&info.name)))
        ));
    }
}
