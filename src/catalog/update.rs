//! Catalog updates mid-session: what to append when the visible catalog changes.
//!
//! The prompt prefix is never rewritten (prompt caches must keep hitting), so a change is
//! communicated by appending text. [`catalog_update`] compares two snapshots:
//!
//! - same hash → [`CatalogUpdate::Unchanged`] (append nothing);
//! - rendering mode changed (including to or from an empty catalog) →
//!   [`CatalogUpdate::Replace`] with [`ReplaceReason::ModeChanged`];
//! - otherwise a delta of items (added, removed, changed line; found by the snapshot's own
//!   [`diff_items`]) unless the full replacement is
//!   strictly smaller in o200k tokens, then [`CatalogUpdate::Replace`] with
//!   [`ReplaceReason::Smaller`]. Ties go to the delta.
//!
//! A delta can be empty while the hash changed (e.g. only the count of unlisted pages changed in
//! summary mode): its text is then empty, and the caller records the new hash without appending.

use serde::Serialize;

use super::error::Result;
use super::snapshot::{diff_items, ItemDiff, RenderMode, Snapshot, SnapshotItem};
use super::tokens;

const DELTA_HEADER: &str = "Catalog update (applies from now on, on top of the catalog above):\n";
const REPLACE_HEADER: &str =
    "Catalog replaced: disregard the catalog above; this one applies from now on.\n";
const NOW_AVAILABLE_HEADER: &str = "Catalog update: functions are now available.\n";
const NOW_EMPTY_TEXT: &str =
    "Catalog update: no functions are available any more; disregard the catalog above.\n";

/// Why a full replacement was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceReason {
    ModeChanged,
    Smaller,
}

/// What to append to the conversation when the catalog changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CatalogUpdate {
    Unchanged,
    Delta {
        added: Vec<SnapshotItem>,
        removed: Vec<SnapshotItem>,
        /// The new version of each changed item.
        changed: Vec<SnapshotItem>,
        text: String,
        tokens: usize,
    },
    Replace {
        reason: ReplaceReason,
        text: String,
        tokens: usize,
    },
}

impl CatalogUpdate {
    /// The text to append (empty when there is nothing to say).
    pub fn text(&self) -> &str {
        match self {
            CatalogUpdate::Unchanged => "",
            CatalogUpdate::Delta { text, .. } | CatalogUpdate::Replace { text, .. } => text,
        }
    }

    /// o200k tokens of [`CatalogUpdate::text`].
    pub fn tokens(&self) -> usize {
        match self {
            CatalogUpdate::Unchanged => 0,
            CatalogUpdate::Delta { tokens, .. } | CatalogUpdate::Replace { tokens, .. } => *tokens,
        }
    }

    pub fn is_unchanged(&self) -> bool {
        matches!(self, CatalogUpdate::Unchanged)
    }
}

/// Compares `old` (what the conversation shows) with `new` (what it should show).
pub fn catalog_update(old: &Snapshot, new: &Snapshot) -> Result<CatalogUpdate> {
    if old.hash == new.hash && old.mode == new.mode {
        return Ok(CatalogUpdate::Unchanged);
    }
    if old.mode != new.mode {
        return replacement(old, new, ReplaceReason::ModeChanged);
    }
    let diff = diff_items(&old.items, &new.items);
    if diff.is_empty() {
        return Ok(CatalogUpdate::Delta {
            added: Vec::new(),
            removed: Vec::new(),
            changed: Vec::new(),
            text: String::new(),
            tokens: 0,
        });
    }
    let ItemDiff {
        added,
        removed,
        changed,
    } = diff;
    let mut lines: Vec<String> = vec![DELTA_HEADER.to_string()];
    if !added.is_empty() {
        lines.push("Added:\n".into());
        lines.extend(added.iter().map(|i| format!("{}\n", i.line)));
    }
    if !removed.is_empty() {
        lines.push("Removed (no longer available):\n".into());
        lines.extend(removed.iter().map(|i| format!("{}\n", i.label())));
    }
    if !changed.is_empty() {
        lines.push("Changed (new version):\n".into());
        lines.extend(changed.iter().map(|i| format!("{}\n", i.line)));
    }
    let replace_tokens = tokens::count_tokens(REPLACE_HEADER)? + new.tokens()?;
    let (delta_tokens, exceeded) =
        tokens::count_lines_until(lines.iter().map(String::as_str), replace_tokens)?;
    if exceeded {
        return replacement(old, new, ReplaceReason::Smaller);
    }
    Ok(CatalogUpdate::Delta {
        added,
        removed,
        changed,
        text: lines.concat(),
        tokens: delta_tokens,
    })
}

fn replacement(old: &Snapshot, new: &Snapshot, reason: ReplaceReason) -> Result<CatalogUpdate> {
    let text = if new.mode == RenderMode::Empty {
        NOW_EMPTY_TEXT.to_string()
    } else if old.mode == RenderMode::Empty {
        format!("{NOW_AVAILABLE_HEADER}{}", new.body)
    } else {
        format!("{REPLACE_HEADER}{}", new.body)
    };
    let header = match (old.mode, new.mode) {
        (_, RenderMode::Empty) => NOW_EMPTY_TEXT,
        (RenderMode::Empty, _) => NOW_AVAILABLE_HEADER,
        _ => REPLACE_HEADER,
    };
    let tokens = tokens::count_tokens(header)? + new.tokens()?;
    Ok(CatalogUpdate::Replace {
        reason,
        text,
        tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::manifest::EntryKind;

    fn item(name: &str, line: &str) -> SnapshotItem {
        SnapshotItem {
            name: name.into(),
            kind: EntryKind::Function,
            line: line.into(),
        }
    }

    /// A full-mode snapshot whose body is a header plus its items' lines.
    fn full(items: &[SnapshotItem]) -> Snapshot {
        let mut body = String::from("Functions:\n");
        for i in items {
            body.push_str(&i.line);
            body.push('\n');
        }
        Snapshot::new(RenderMode::Full, body, items.to_vec())
    }

    #[test]
    fn the_same_snapshot_needs_nothing_appended() {
        let s = full(&[item("a", "a()")]);
        let update = catalog_update(&s, &s.clone()).expect("update");
        assert!(update.is_unchanged());
        assert_eq!((update.text(), update.tokens()), ("", 0));
    }

    #[test]
    fn a_small_change_is_a_delta_listing_each_kind_of_change() {
        let many: Vec<SnapshotItem> = (0..30)
            .map(|i| {
                item(
                    &format!("f{i:02}"),
                    &format!("f{i:02}(x)  — Does thing {i}."),
                )
            })
            .collect();
        let old = full(&[many.clone(), vec![item("gone", "gone()")]].concat());
        let mut new_items = many;
        new_items[3].line = "f03(x, y)  — Does thing 3.".into();
        new_items.push(item("zz_new", "zz_new()"));
        let new = full(&new_items);
        let update = catalog_update(&old, &new).expect("update");
        let CatalogUpdate::Delta {
            added,
            removed,
            changed,
            text,
            tokens,
        } = &update
        else {
            panic!("expected a delta, got {update:?}");
        };
        assert_eq!(added.len(), 1);
        assert_eq!(removed.len(), 1);
        assert_eq!(changed.len(), 1);
        assert_eq!(
            text,
            &format!(
                "{DELTA_HEADER}Added:\nzz_new()\nRemoved (no longer available):\n\
                 gone  [function]\nChanged (new version):\nf03(x, y)  — Does thing 3.\n"
            )
        );
        assert_eq!(*tokens, tokens::count_tokens(text).expect("count"));
    }

    #[test]
    fn a_delta_bigger_than_the_new_catalog_becomes_a_replacement() {
        let old = full(&[item("a", "a()"), item("b", "b()")]);
        let new = full(&[item("c", "c()")]);
        let update = catalog_update(&old, &new).expect("update");
        match &update {
            CatalogUpdate::Replace {
                reason,
                text,
                tokens,
            } => {
                assert_eq!(*reason, ReplaceReason::Smaller);
                assert_eq!(text, &format!("{REPLACE_HEADER}{}", new.body));
                assert_eq!(*tokens, tokens::count_tokens(text).expect("count"));
            }
            other => panic!("expected a replacement, got {other:?}"),
        }
    }

    #[test]
    fn a_mode_change_always_replaces() {
        let full_snapshot = full(&[item("a", "a()")]);
        let summary = Snapshot::new(
            RenderMode::Summary,
            "Summary:\na()\n".into(),
            vec![item("a", "a()")],
        );
        let update = catalog_update(&full_snapshot, &summary).expect("update");
        assert!(matches!(
            update,
            CatalogUpdate::Replace {
                reason: ReplaceReason::ModeChanged,
                ..
            }
        ));
        let to_empty = catalog_update(&full_snapshot, &Snapshot::empty()).expect("update");
        assert_eq!(to_empty.text(), NOW_EMPTY_TEXT);
        let from_empty = catalog_update(&Snapshot::empty(), &full_snapshot).expect("update");
        assert_eq!(
            from_empty.text(),
            format!("{NOW_AVAILABLE_HEADER}{}", full_snapshot.body)
        );
    }

    #[test]
    fn a_new_hash_with_the_same_items_appends_nothing() {
        let items = [item("a", "a()")];
        let old = Snapshot::new(RenderMode::Summary, "a()\n1 page\n".into(), items.to_vec());
        let new = Snapshot::new(RenderMode::Summary, "a()\n2 pages\n".into(), items.to_vec());
        let update = catalog_update(&old, &new).expect("update");
        assert!(!update.is_unchanged());
        assert_eq!((update.text(), update.tokens()), ("", 0));
    }
}
