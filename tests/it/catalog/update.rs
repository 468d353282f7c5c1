use vis::catalog::{
    catalog_update, render_catalog, CatalogUpdate, DenyList, Manifest, ReplaceReason,
};

use super::{big, ext_fn, sample};

fn snap(entries: Vec<vis::catalog::ManifestEntry>, budget: usize) -> vis::catalog::Snapshot {
    render_catalog(&Manifest::new(entries).unwrap(), budget).unwrap()
}

#[test]
fn unchanged_when_equal() {
    let a = snap(sample(), 2000);
    let b = snap(sample(), 2000);
    let u = catalog_update(&a, &b).unwrap();
    assert!(u.is_unchanged());
    assert_eq!(u.text(), "");
}

#[test]
fn delta_lists_added_removed_changed() {
    let old = snap(sample(), 2000);
    let mut entries: Vec<_> = sample()
        .into_iter()
        .filter(|e| e.name != "git.log")
        .collect();
    entries.push(ext_fn(
        "git",
        "git.blame",
        "(path, line=None)",
        "Show who last changed each line.",
    ));
    for e in entries.iter_mut() {
        if e.name == "git.diff" {
            e.signature = "(path=None, staged=False, context=3)".into();
        }
    }
    let new = snap(entries, 2000);
    let u = catalog_update(&old, &new).unwrap();
    let CatalogUpdate::Delta {
        added,
        removed,
        changed,
        text,
        tokens,
    } = &u
    else {
        panic!("{u:?}")
    };
    assert_eq!(
        added.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["git.blame"]
    );
    assert_eq!(
        removed.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["git.log"]
    );
    assert_eq!(
        changed.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["git.diff"]
    );
    assert_eq!(
        text,
        "Catalog update (applies from now on, on top of the catalog above):\n\
         Added:\n\
         git.blame(path, line=None)  — Show who last changed each line.\n\
         Removed (no longer available):\n\
         git.log  [function]\n\
         Changed (new version):\n\
         git.diff(path=None, staged=False, context=3)  — Show the diff of the working tree.\n"
    );
    assert_eq!(*tokens, vis::catalog::count_tokens(text).unwrap());
}

#[test]
fn deny_list_change_is_a_removal() {
    let old = snap(sample(), 2000);
    let new = render_catalog(
        &Manifest::build(sample(), &DenyList::new(["git"]).unwrap()).unwrap(),
        2000,
    )
    .unwrap();
    let u = catalog_update(&old, &new).unwrap();
    let CatalogUpdate::Delta { removed, added, .. } = &u else {
        panic!("{u:?}")
    };
    assert_eq!(removed.len(), 3);
    assert!(added.is_empty());
}

#[test]
fn full_replacement_when_smaller() {
    // Old: 40 functions; new: 3 of them with changed signatures, the rest removed.
    let old_entries = big(40, 100);
    let mut new_entries: Vec<_> = old_entries.iter().take(3).cloned().collect();
    for e in new_entries.iter_mut() {
        e.signature = "(changed)".into();
    }
    let old = snap(old_entries, 100_000);
    let new = snap(new_entries, 100_000);
    let u = catalog_update(&old, &new).unwrap();
    let CatalogUpdate::Replace {
        reason,
        text,
        tokens,
    } = &u
    else {
        panic!("{u:?}")
    };
    assert_eq!(*reason, ReplaceReason::Smaller);
    assert!(text.starts_with(
        "Catalog replaced: disregard the catalog above; this one applies from now on.\n"
    ));
    assert!(text.ends_with(&new.body));
    assert_eq!(*tokens, vis::catalog::count_tokens(text).unwrap());
}

#[test]
fn full_replacement_when_mode_changes() {
    let small = snap(sample(), 2000);
    let mut more = sample();
    more.extend(big(300, 50));
    let large = snap(more, 2000);
    assert_ne!(small.mode, large.mode);
    let u = catalog_update(&small, &large).unwrap();
    assert!(
        matches!(
            &u,
            CatalogUpdate::Replace {
                reason: ReplaceReason::ModeChanged,
                ..
            }
        ),
        "{u:?}"
    );
    assert!(u.text().ends_with(&large.body));

    let empty = snap(vec![], 2000);
    let u = catalog_update(&empty, &small).unwrap();
    assert!(u
        .text()
        .starts_with("Catalog update: functions are now available.\n"));
    let u = catalog_update(&small, &empty).unwrap();
    assert!(matches!(
        u,
        CatalogUpdate::Replace {
            reason: ReplaceReason::ModeChanged,
            ..
        }
    ));
    assert!(u.text().contains("no functions are available any more"));
}

#[test]
fn summary_mode_delta_reports_namespace_counts() {
    let base = big(300, 100);
    let mut more = base.clone();
    more.push(ext_fn("ns001", "ns001.extra", "(x)", "Extra.").with_pinned(true));
    let old = snap(base, 100);
    let new = snap(more, 100);
    let u = catalog_update(&old, &new).unwrap();
    let CatalogUpdate::Delta { added, changed, .. } = &u else {
        panic!("{u:?}")
    };
    assert_eq!(added[0].name, "ns001.extra");
    assert_eq!(
        changed[0].line,
        "ns001  [namespace, 101 functions, partial: 1 shown]"
    );
}
