//! The rendered catalog as a value: a content-addressed [`Snapshot`], and what differs between
//! two of them.
//!
//! A snapshot is identified by `blake3(body)` alone, so the same rendering is the same snapshot
//! wherever and whenever it was made, and a stored one can be checked against its address
//! (the store does, on every load). Beside the exact
//! bytes it keeps the rendering as structured [`SnapshotItem`]s, sorted by (name, kind), so that
//! two snapshots can be compared item by item ([`diff_items`]) for a mid-session update.
//!
//! How a snapshot is produced from a manifest and a token budget is `render.rs`'s business;
//! what text a change turns into is `update.rs`'s.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::error::Result;
use super::manifest::EntryKind;
use super::tokens;

/// How a snapshot renders the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RenderMode {
    Empty,
    Full,
    Summary,
}

impl RenderMode {
    /// `"empty"`, `"full"` or `"summary"` (the value stored in the database).
    pub fn as_str(self) -> &'static str {
        match self {
            RenderMode::Empty => "empty",
            RenderMode::Full => "full",
            RenderMode::Summary => "summary",
        }
    }

    /// Inverse of [`RenderMode::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "empty" => Some(RenderMode::Empty),
            "full" => Some(RenderMode::Full),
            "summary" => Some(RenderMode::Summary),
            _ => None,
        }
    }
}

/// One structured line of a snapshot: what a delta compares. In full mode: every function,
/// page and skill. In summary mode: namespace lines (kind `namespace`, name `""` for the top
/// level), the functions shown, and pinned pages and skills.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SnapshotItem {
    pub name: String,
    pub kind: EntryKind,
    /// The rendered line, without its newline.
    pub line: String,
}

impl SnapshotItem {
    /// How a removed item is named in an update: `git.log  [function]`.
    pub fn label(&self) -> String {
        let name = if self.name.is_empty() {
            "(top level)"
        } else {
            self.name.as_str()
        };
        format!("{name}  [{}]", self.kind.as_str())
    }
}

/// A rendered catalog: mode, exact bytes, blake3 content address, and the structured items.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub mode: RenderMode,
    /// The rendering (empty in [`RenderMode::Empty`]); ends with `\n` otherwise.
    pub body: String,
    /// `blake3(body)`, lowercase hex.
    pub hash: String,
    /// Sorted by (name, kind).
    pub items: Vec<SnapshotItem>,
    tokens: OnceLock<usize>,
}

impl PartialEq for Snapshot {
    fn eq(&self, other: &Self) -> bool {
        self.mode == other.mode
            && self.hash == other.hash
            && self.body == other.body
            && self.items == other.items
    }
}

impl Eq for Snapshot {}

impl Snapshot {
    /// Builds a snapshot from parts; the hash is computed here, items are sorted.
    pub fn new(mode: RenderMode, body: String, mut items: Vec<SnapshotItem>) -> Self {
        items.sort();
        Snapshot {
            mode,
            hash: blake3::hash(body.as_bytes()).to_hex().to_string(),
            body,
            items,
            tokens: OnceLock::new(),
        }
    }

    /// Like [`Snapshot::new`], when the renderer already knows the body's token count.
    pub(super) fn with_tokens(
        mode: RenderMode,
        body: String,
        items: Vec<SnapshotItem>,
        tokens: usize,
    ) -> Self {
        let s = Self::new(mode, body, items);
        let _ = s.tokens.set(tokens);
        s
    }

    /// The snapshot of a catalog with no visible function.
    pub fn empty() -> Self {
        Self::with_tokens(RenderMode::Empty, String::new(), Vec::new(), 0)
    }

    /// True in [`RenderMode::Empty`]: the catalog and its instructions are omitted.
    pub fn is_empty(&self) -> bool {
        self.mode == RenderMode::Empty
    }

    /// o200k tokens of `body` (known after rendering; computed once after loading).
    pub fn tokens(&self) -> Result<usize> {
        if let Some(&t) = self.tokens.get() {
            return Ok(t);
        }
        let t = tokens::count_tokens(&self.body)?;
        Ok(*self.tokens.get_or_init(|| t))
    }

    /// What `vis catalog` prints: the rendering, then `mode: …` and `hash: …` lines.
    pub fn text(&self) -> String {
        let mut out = if self.is_empty() {
            "(no functions are visible: the catalog and its instructions are omitted)\n".to_string()
        } else {
            self.body.clone()
        };
        match self.tokens.get() {
            Some(t) => out.push_str(&format!("mode: {}, {t} o200k tokens\n", self.mode.as_str())),
            None => out.push_str(&format!("mode: {}\n", self.mode.as_str())),
        }
        out.push_str(&format!("hash: {}\n", self.hash));
        out
    }
}

/// The item-level difference between two snapshots.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ItemDiff {
    /// Items only in the new snapshot.
    pub(super) added: Vec<SnapshotItem>,
    /// Items only in the old snapshot.
    pub(super) removed: Vec<SnapshotItem>,
    /// The new version of each item whose line changed.
    pub(super) changed: Vec<SnapshotItem>,
}

impl ItemDiff {
    pub(super) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Compares two item lists sorted by (name, kind), as [`Snapshot::items`] are, in one merge
/// walk; an item is identified by (name, kind), and changed when its line differs.
pub(super) fn diff_items(old: &[SnapshotItem], new: &[SnapshotItem]) -> ItemDiff {
    let mut diff = ItemDiff::default();
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        let key_old = old.get(i).map(|x| (&x.name, x.kind));
        let key_new = new.get(j).map(|x| (&x.name, x.kind));
        match (key_old, key_new) {
            (Some(a), Some(b)) if a == b => {
                if old[i].line != new[j].line {
                    diff.changed.push(new[j].clone());
                }
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                diff.removed.push(old[i].clone());
                i += 1;
            }
            (Some(_), None) => {
                diff.removed.push(old[i].clone());
                i += 1;
            }
            _ => {
                diff.added.push(new[j].clone());
                j += 1;
            }
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, kind: EntryKind, line: &str) -> SnapshotItem {
        SnapshotItem {
            name: name.into(),
            kind,
            line: line.into(),
        }
    }

    #[test]
    fn the_hash_is_blake3_of_the_body_and_nothing_else() {
        let body = "Functions:\nf()  — does f\n".to_string();
        let a = Snapshot::new(RenderMode::Full, body.clone(), Vec::new());
        assert_eq!(a.hash, blake3::hash(body.as_bytes()).to_hex().to_string());
        assert_eq!(a.hash.len(), 64);
        assert!(a
            .hash
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        // Items do not enter the address; one changed byte of the body does.
        let b = Snapshot::new(
            RenderMode::Full,
            body.clone(),
            vec![item("f", EntryKind::Function, "f()")],
        );
        assert_eq!(a.hash, b.hash);
        assert_ne!(a, b);
        let c = Snapshot::new(RenderMode::Full, body.replace("f()", "g()"), Vec::new());
        assert_ne!(a.hash, c.hash);
    }

    #[test]
    fn items_are_sorted_by_name_then_kind() {
        let s = Snapshot::new(
            RenderMode::Summary,
            "x\n".into(),
            vec![
                item("git", EntryKind::Namespace, "git ns"),
                item("b", EntryKind::Function, "b()"),
                item("", EntryKind::Namespace, "(top level)"),
                item("git", EntryKind::Function, "git()"),
            ],
        );
        let names: Vec<(&str, EntryKind)> =
            s.items.iter().map(|i| (i.name.as_str(), i.kind)).collect();
        assert_eq!(
            names,
            vec![
                ("", EntryKind::Namespace),
                ("b", EntryKind::Function),
                ("git", EntryKind::Function),
                ("git", EntryKind::Namespace),
            ]
        );
    }

    #[test]
    fn modes_round_trip_and_unknown_ones_are_refused() {
        for mode in [RenderMode::Empty, RenderMode::Full, RenderMode::Summary] {
            assert_eq!(RenderMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(RenderMode::parse("FULL"), None);
        assert_eq!(RenderMode::parse("partial"), None);
    }

    #[test]
    fn the_empty_snapshot_says_the_catalog_is_omitted() {
        let s = Snapshot::empty();
        assert!(s.is_empty());
        assert_eq!(s.body, "");
        assert_eq!(s.tokens().expect("known"), 0);
        assert_eq!(
            s.text(),
            format!(
                "(no functions are visible: the catalog and its instructions are omitted)\n\
                 mode: empty, 0 o200k tokens\nhash: {}\n",
                s.hash
            )
        );
    }

    #[test]
    fn text_gives_the_token_count_only_once_it_is_known() {
        let s = Snapshot::new(RenderMode::Full, "f()\n".into(), Vec::new());
        assert_eq!(s.text(), format!("f()\nmode: full\nhash: {}\n", s.hash));
        let counted = s.tokens().expect("tokenizer");
        assert!(counted > 0);
        assert_eq!(
            s.text(),
            format!(
                "f()\nmode: full, {counted} o200k tokens\nhash: {}\n",
                s.hash
            )
        );
        let known = Snapshot::with_tokens(RenderMode::Full, "f()\n".into(), Vec::new(), 7);
        assert_eq!(known.tokens().expect("known"), 7);
    }

    #[test]
    fn labels_name_the_top_level_and_the_kind() {
        assert_eq!(
            item("git.log", EntryKind::Function, "x").label(),
            "git.log  [function]"
        );
        assert_eq!(
            item("", EntryKind::Namespace, "x").label(),
            "(top level)  [namespace]"
        );
    }

    #[test]
    fn diff_finds_added_removed_and_changed_items() {
        let old = vec![
            item("a", EntryKind::Function, "a()"),
            item("b", EntryKind::Function, "b()"),
            item("c", EntryKind::Page, "c page"),
        ];
        let new = vec![
            item("a", EntryKind::Function, "a(x)"),
            item("c", EntryKind::Page, "c page"),
            item("d", EntryKind::Skill, "d skill"),
        ];
        let diff = diff_items(&old, &new);
        assert_eq!(diff.added, vec![item("d", EntryKind::Skill, "d skill")]);
        assert_eq!(diff.removed, vec![item("b", EntryKind::Function, "b()")]);
        assert_eq!(diff.changed, vec![item("a", EntryKind::Function, "a(x)")]);
        assert!(!diff.is_empty());
        assert!(diff_items(&new, &new).is_empty());
    }

    #[test]
    fn the_same_name_with_another_kind_is_another_item() {
        let old = vec![item("git", EntryKind::Function, "git()")];
        let new = vec![item("git", EntryKind::Namespace, "git ns")];
        let diff = diff_items(&old, &new);
        assert_eq!(diff.removed.len(), 1);
        assert_eq!(diff.added.len(), 1);
        assert!(diff.changed.is_empty());
    }

    #[test]
    fn diff_against_nothing_is_all_added_or_all_removed() {
        let items = vec![
            item("a", EntryKind::Function, "a()"),
            item("b", EntryKind::Function, "b()"),
        ];
        assert_eq!(diff_items(&[], &items).added, items);
        assert_eq!(diff_items(&items, &[]).removed, items);
        assert!(diff_items(&[], &[]).is_empty());
    }
}
