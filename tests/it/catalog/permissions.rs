use vis::catalog::{render_catalog, CatalogError, DenyList, Manifest, ManifestEntry, Origin};

use super::{ext_fn, sample};

fn slack() -> Vec<ManifestEntry> {
    let mut v = sample();
    v.extend([
        ext_fn("slack", "slack.post", "(channel, text)", "Post a message."),
        ext_fn("slack", "slack.admin", "(action)", "Run an admin action."),
        ext_fn("slack", "slack.admin.invite", "(user)", "Invite."),
        ext_fn("slack", "slack.admin.users.remove", "(user)", "Remove."),
        ManifestEntry::namespace(
            "slack.admin",
            "Admin tools",
            Origin::Extension("slack".into()),
        ),
    ]);
    v
}

#[test]
fn denied_function_is_omitted_everywhere() {
    let deny = DenyList::new(["git.diff"]).unwrap();
    let m = Manifest::build(sample(), &deny).unwrap();
    assert!(!m.is_visible("git.diff") && !m.is_callable("git.diff"));
    assert!(m.is_callable("git.log"));
    assert_eq!(m.apropos("diff", None, 50, 0).unwrap().total, 0);
    assert!(matches!(
        m.doc("git.diff"),
        Err(CatalogError::UnknownName { .. })
    ));
    assert!(!m.doc("git").unwrap().contains("diff"));
    let snap = render_catalog(&m, 2000).unwrap();
    assert!(!snap.body.contains("git.diff"));
    // Suggestions never leak a denied name.
    let err = m.doc("git.dif").unwrap_err().to_string();
    assert!(!err.contains("git.diff"), "{err}");
}

#[test]
fn denied_namespace_denies_all_members_and_the_same_named_function() {
    let deny = DenyList::new(["slack.admin"]).unwrap();
    let m = Manifest::build(slack(), &deny).unwrap();
    for name in [
        "slack.admin",
        "slack.admin.invite",
        "slack.admin.users",
        "slack.admin.users.remove",
    ] {
        assert!(!m.is_visible(name), "{name}");
        assert!(m.doc(name).is_err(), "{name}");
    }
    assert!(m.is_callable("slack.post"));
    assert_eq!(m.apropos("admin", None, 50, 0).unwrap().total, 0);
    assert_eq!(m.namespace("slack").unwrap().children.len(), 1);

    // Denying the whole top-level namespace removes it too.
    let m = Manifest::build(slack(), &DenyList::new(["slack"]).unwrap()).unwrap();
    assert!(!m.is_visible("slack"));
    assert_eq!(m.apropos("slack", None, 50, 0).unwrap().total, 0);
    // A deny path that is only a prefix string (not a path prefix) denies nothing extra.
    let m = Manifest::build(slack(), &DenyList::new(["sla"]).unwrap()).unwrap();
    assert!(m.is_callable("slack.post"));
}

#[test]
fn deny_list_paths_are_validated() {
    let err = DenyList::new(["git", "slack..admin"]).unwrap_err();
    assert!(err.to_string().contains("slack..admin"), "{err}");
    let d = DenyList::new(["release-checklist", "git"]).unwrap();
    assert!(d.denies("git.diff") && d.denies("release-checklist") && !d.denies("gitx"));
    let m = Manifest::build(sample(), &d).unwrap();
    assert!(!m.is_visible("release-checklist"));
}
