use vis::catalog::{validate_name, NameRule};
use vis::catalog::{CatalogError, Manifest, ManifestEntry, Origin};

use super::core_fn;

fn bad(name: &str, rule: NameRule) -> (String, String) {
    match validate_name(name, rule) {
        Err(e @ CatalogError::InvalidName { .. }) => {
            let CatalogError::InvalidName { ref segment, .. } = e else {
                unreachable!()
            };
            (segment.clone(), e.to_string())
        }
        other => panic!("{name}: expected InvalidName, got {other:?}"),
    }
}

#[test]
fn valid_paths() {
    for ok in [
        "git",
        "git.diff",
        "slack.admin.users",
        "_private",
        "match",
        "type.case",
        "données.résumé",
        "x1.y_2",
    ] {
        validate_name(ok, NameRule::Identifier).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    validate_name("skills.release-checklist", NameRule::Slug).unwrap();
}

#[test]
fn bad_segments_are_named_with_a_fix() {
    let (seg, msg) = bad("slack.2fa.reset", NameRule::Identifier);
    assert_eq!(seg, "2fa");
    assert!(
        msg.contains("segment `2fa` starts with a digit") && msg.contains("`slack._2fa.reset`"),
        "{msg}"
    );

    let (seg, msg) = bad("git.import", NameRule::Identifier);
    assert_eq!(seg, "import");
    assert!(
        msg.contains("is a Python keyword") && msg.contains("`git.import_`"),
        "{msg}"
    );

    let (seg, msg) = bad("git..diff", NameRule::Identifier);
    assert_eq!(seg, "");
    assert!(msg.contains("is empty"), "{msg}");

    let (seg, _) = bad("git-tools.diff", NameRule::Identifier);
    assert_eq!(seg, "git-tools");
    let (seg, msg) = bad("my ns.x", NameRule::Identifier);
    assert_eq!(seg, "my ns");
    assert!(msg.contains("contains whitespace"), "{msg}");
    let (seg, _) = bad(".git", NameRule::Identifier);
    assert_eq!(seg, "");
    let (seg, _) = bad("git.", NameRule::Slug);
    assert_eq!(seg, "");
    let (seg, _) = bad("-x", NameRule::Slug);
    assert_eq!(seg, "-x");
    assert!(matches!(
        validate_name("", NameRule::Identifier),
        Err(CatalogError::EmptyName)
    ));
}

#[test]
fn manifest_rejects_bad_names_never_sanitizes() {
    let err = Manifest::new(vec![core_fn("slack.admin-tools.invite", "()", "")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("segment `admin-tools` contains `-`"),
        "{err}"
    );
    // Pages and skills may use '-' in their own segment, not in the namespace part.
    assert!(Manifest::new(vec![ManifestEntry::page(
        "vis.how-to-fold",
        "",
        Origin::Core
    )])
    .is_ok());
    let err = Manifest::new(vec![ManifestEntry::page("my-pages.x", "", Origin::Core)]).unwrap_err();
    assert!(err.to_string().contains("`my-pages`"), "{err}");
}
