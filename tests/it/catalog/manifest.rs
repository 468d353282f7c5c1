use vis::catalog::{CatalogError, EntryKind, Manifest, ManifestEntry, Origin};

use super::{core_fn, ext_fn, sample};

fn row_names(m: &Manifest) -> Vec<String> {
    m.rows()
        .iter()
        .map(|r| format!("{}:{}", r.kind.as_str(), r.name))
        .collect()
}

#[test]
fn manifest_order_is_core_then_extensions_by_name_then_mcp() {
    let entries = vec![
        ManifestEntry::function("gh.issues", "()", "", Origin::Mcp("github".into())),
        ext_fn("zeta", "zeta.b", "()", ""),
        ext_fn("alpha", "alpha.y", "()", ""),
        core_fn("doc", "(name)", ""),
        ext_fn("zeta", "zeta.a", "()", ""),
        ext_fn("alpha", "alpha.x", "()", ""),
        core_fn("apropos", "(pattern)", ""),
    ];
    let m = Manifest::new(entries).unwrap();
    assert_eq!(
        row_names(&m),
        [
            "function:doc",
            "function:apropos",
            "namespace:alpha",
            "function:alpha.y",
            "function:alpha.x",
            "namespace:zeta",
            "function:zeta.b",
            "function:zeta.a",
            "namespace:gh",
            "function:gh.issues",
        ]
    );
}

#[test]
fn namespaces_are_implicit_with_ancestors_and_metadata_merges() {
    let entries = vec![
        ext_fn("slack", "slack.admin.users.invite", "(user)", "Invite."),
        ManifestEntry::namespace(
            "slack.admin",
            "Admin tools",
            Origin::Extension("slack".into()),
        ),
        ext_fn("slack", "slack.post", "(channel, text)", "Post."),
    ];
    let m = Manifest::new(entries).unwrap();
    assert_eq!(
        row_names(&m),
        [
            "namespace:slack",
            "namespace:slack.admin",
            "namespace:slack.admin.users",
            "function:slack.admin.users.invite",
            "function:slack.post",
        ]
    );
    let admin = m.namespace("slack.admin").unwrap();
    assert_eq!(admin.summary, "Admin tools");
    assert_eq!(admin.leaf_count, 1);
    let slack = m.namespace("slack").unwrap();
    assert_eq!(slack.function_count, 1);
    assert_eq!(slack.leaf_count, 2);
    assert_eq!(slack.children.len(), 2);
}

#[test]
fn a_path_can_be_both_function_and_namespace() {
    let entries = vec![
        ext_fn("slack", "slack.admin", "(action)", "Run an admin action."),
        ext_fn("slack", "slack.admin.invite", "(user)", "Invite a user."),
    ];
    let m = Manifest::new(entries).unwrap();
    assert_eq!(
        row_names(&m),
        [
            "namespace:slack",
            "function:slack.admin",
            "namespace:slack.admin",
            "function:slack.admin.invite"
        ]
    );
    assert!(m.is_callable("slack.admin"));
    assert!(m.namespace("slack.admin").is_some());
    let d = m.doc("slack.admin").unwrap();
    assert!(
        d.starts_with("slack.admin(action)\n\nRun an admin action."),
        "{d}"
    );
    assert!(d.contains("namespace slack.admin"), "{d}");
    assert!(
        d.contains("slack.admin.invite(user)  — Invite a user."),
        "{d}"
    );
}

#[test]
fn duplicates_are_rejected_with_both_origins() {
    let entries = vec![
        ext_fn("git", "git.diff", "()", ""),
        ext_fn("git2", "git.diff", "(x)", ""),
    ];
    let err = Manifest::new(entries).unwrap_err();
    assert!(matches!(err, CatalogError::DuplicateName { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("`git.diff`")
            && msg.contains("extension `git`")
            && msg.contains("extension `git2`"),
        "{msg}"
    );

    // A page cannot share a function's name either; two namespace entries cannot coexist.
    let err = Manifest::new(vec![
        core_fn("x.y", "()", ""),
        ManifestEntry::page("x.y", "", Origin::Core),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("as a page"), "{err}");
    let err = Manifest::new(vec![
        core_fn("x.y", "()", ""),
        ManifestEntry::namespace("x", "one", Origin::Core),
        ManifestEntry::namespace("x", "two", Origin::Extension("e".into())),
    ])
    .unwrap_err();
    assert!(matches!(err, CatalogError::DuplicateName { .. }));
}

#[test]
fn inconsistent_namespace_field_is_an_error() {
    let mut e = core_fn("git.diff", "()", "");
    e.namespace = "hg".into();
    let err = Manifest::new(vec![e]).unwrap_err();
    assert!(
        err.to_string().contains("`hg`") && err.to_string().contains("`git`"),
        "{err}"
    );
}

#[test]
fn empty_explicit_namespaces_are_dropped() {
    let m = Manifest::new(vec![
        ManifestEntry::namespace("mcp.github", "GitHub", Origin::Core),
        core_fn("doc", "(name)", ""),
    ])
    .unwrap();
    assert!(m.namespace("mcp.github").is_none());
    assert!(!m.is_visible("mcp"));
    assert_eq!(m.len(), 1);
}

#[test]
fn summary_comes_from_first_doc_line_and_is_capped() {
    let long = "word ".repeat(100);
    let m = Manifest::new(vec![
        core_fn("a", "()", "\n\n   First   line here.  \nSecond."),
        core_fn("b", "()", &long),
        core_fn("c", "(x,\n   y)", ""),
    ])
    .unwrap();
    assert_eq!(m.entry("a").unwrap().summary, "First line here.");
    let b = &m.entry("b").unwrap().summary;
    assert!(b.ends_with('…') && b.chars().count() <= 161, "{b}");
    assert_eq!(m.entry("c").unwrap().line(), "c(x, y)");
}

#[test]
fn entries_travel_as_json_with_defaults() {
    let e = ext_fn("git", "git.diff", "(path=None)", "Show the diff.").with_pinned(true);
    let json = serde_json::to_string(&e).unwrap();
    assert!(json.contains(r#""origin":{"extension":"git"}"#), "{json}");
    let back: ManifestEntry = serde_json::from_str(&json).unwrap();
    assert_eq!(back, e);
    let minimal: ManifestEntry =
        serde_json::from_str(r#"{"name": "cat", "kind": "function"}"#).unwrap();
    assert_eq!(minimal.origin, Origin::Core);
    assert_eq!(minimal.kind, EntryKind::Function);
    let mcp: ManifestEntry = serde_json::from_str(
        r#"{"name": "gh.pr", "kind": "function", "origin": {"mcp": "github"}}"#,
    )
    .unwrap();
    assert_eq!(mcp.origin, Origin::Mcp("github".into()));
    assert!(Manifest::new(vec![minimal, mcp]).is_ok());
}

#[test]
fn sample_manifest_builds() {
    let m = Manifest::new(sample()).unwrap();
    assert_eq!(m.function_count(), 7);
    assert!(m.is_visible("vis"));
    assert!(m.is_visible("release-checklist"));
    assert!(!m.is_callable("vis.addresses"));
}
