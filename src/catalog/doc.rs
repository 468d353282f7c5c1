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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::manifest::{DenyList, ManifestEntry, Origin};

    fn manifest(extra: Vec<ManifestEntry>) -> Manifest {
        let git = Origin::Extension("git".into());
        let mut entries = vec![
            ManifestEntry::namespace("git", "Git helpers", git.clone())
                .with_doc("Git helpers\n\nWork with the repository."),
            ManifestEntry::function(
                "git.diff",
                "(path=None)",
                "Show the diff.\n\nArgs: path.",
                git.clone(),
            )
            .with_pinned(true),
            ManifestEntry::function("git.log", "", "", git),
            ManifestEntry::page("vis.addresses", "# Addresses\n\nBody.", Origin::Core),
            ManifestEntry::skill("release", "How to release", "", Origin::Core),
        ];
        entries.extend(extra);
        Manifest::new(entries).expect("valid manifest")
    }

    #[test]
    fn a_function_shows_its_call_form_docstring_and_origin() {
        let text = doc(&manifest(Vec::new()), " git.diff ").expect("known");
        assert_eq!(
            text,
            "git.diff(path=None)\n\nShow the diff.\n\nArgs: path.\n\n(from extension `git`; pinned)\n"
        );
        let bare = doc(&manifest(Vec::new()), "git.log").expect("known");
        assert_eq!(
            bare,
            "git.log(...)\n\n(no documentation)\n\n(from extension `git`)\n"
        );
    }

    #[test]
    fn a_namespace_lists_its_members() {
        let text = doc(&manifest(Vec::new()), "git").expect("known");
        assert!(text.starts_with("namespace git  — Git helpers\n"), "{text}");
        assert!(text.contains("\nWork with the repository.\n"), "{text}");
        assert!(
            text.contains("\nMembers (2):\ngit.diff(path=None)  — Show the diff.\n"),
            "{text}"
        );
    }

    #[test]
    fn pages_and_skills_show_their_text_or_description() {
        let m = manifest(Vec::new());
        assert_eq!(
            doc(&m, "vis.addresses").expect("known"),
            "# Addresses\n\nBody.\n"
        );
        assert_eq!(doc(&m, "release").expect("known"), "How to release\n");
    }

    #[test]
    fn long_member_lists_end_with_the_apropos_call_for_the_rest() {
        let origin = Origin::Extension("big".into());
        let many: Vec<ManifestEntry> = (0..MAX_MEMBERS + 3)
            .map(|i| ManifestEntry::function(format!("big.f{i:03}"), "()", "", origin.clone()))
            .collect();
        let text = doc(&manifest(many), "big").expect("known");
        assert!(
            text.contains(&format!("Members ({}):", MAX_MEMBERS + 3)),
            "{text}"
        );
        assert!(
            text.ends_with(&format!(
                "… 3 more: apropos(r'^big\\.[^.]+$', offset={MAX_MEMBERS}) lists them\n"
            )),
            "{text}"
        );
    }

    #[test]
    fn an_unknown_name_suggests_the_closest_ones() {
        match doc(&manifest(Vec::new()), "git.dif") {
            Err(CatalogError::UnknownName { name, suggestions }) => {
                assert_eq!(name, "git.dif");
                assert_eq!(suggestions.first().map(String::as_str), Some("git.diff"));
            }
            other => panic!("expected UnknownName, got {other:?}"),
        }
        let err = doc(&manifest(Vec::new()), "").expect_err("empty");
        assert!(err.to_string().contains("apropos(pattern)"), "{err}");
    }

    #[test]
    fn a_denied_name_is_unknown_and_never_suggested() {
        let entries = manifest(Vec::new()).entries().to_vec();
        let deny = DenyList::new(["git.diff"]).expect("valid deny list");
        let m = Manifest::build(entries, &deny).expect("valid manifest");
        match doc(&m, "git.diff") {
            Err(CatalogError::UnknownName { suggestions, .. }) => {
                assert!(
                    !suggestions.iter().any(|s| s == "git.diff"),
                    "{suggestions:?}"
                );
            }
            other => panic!("expected UnknownName, got {other:?}"),
        }
        assert!(!doc(&m, "git").expect("known").contains("git.diff"));
    }
}
