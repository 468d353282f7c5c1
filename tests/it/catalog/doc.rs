use vis::catalog::{CatalogError, Manifest};

use super::{big, sample};

#[test]
fn function_doc_has_signature_full_doc_and_origin() {
    let m = Manifest::new(sample()).unwrap();
    assert_eq!(
        m.doc("apropos").unwrap(),
        "apropos(pattern, namespace=None, limit=50, offset=0)\n\nFilter public names with a regex.\n\nLonger text.\n\n(from the core prelude)\n"
    );
    assert!(m
        .doc("git.diff")
        .unwrap()
        .ends_with("(from extension `git`)\n"));
}

#[test]
fn namespace_doc_lists_members() {
    let m = Manifest::new(sample()).unwrap();
    assert_eq!(
        m.doc("git").unwrap(),
        "namespace git  — Git helpers\n\nMembers (3):\n\
         git.status()  — Show the working tree status.\n\
         git.diff(path=None, staged=False)  — Show the diff of the working tree.\n\
         git.log(n=10)  — Show recent commits.\n"
    );
    let big = Manifest::new(big(250, 1000)).unwrap();
    let d = big.doc("ns000").unwrap();
    assert!(d.contains("Members (250):"));
    assert!(
        d.ends_with("… 50 more: apropos(r'^ns000\\.[^.]+$', offset=200) lists them\n"),
        "{d}"
    );
    let rest = big.apropos(r"^ns000\.[^.]+$", None, 50, 200).unwrap();
    assert_eq!(rest.rows[0].name, "ns000.func_00200");
}

#[test]
fn pages_and_skills_return_markdown() {
    let m = Manifest::new(sample()).unwrap();
    assert_eq!(
        m.doc("vis.addresses").unwrap(),
        "# Addresses\n\nEvery line has an address.\n"
    );
    assert!(m
        .doc("release-checklist")
        .unwrap()
        .starts_with("---\nname: release-checklist"));
}

#[test]
fn unknown_names_suggest_closest() {
    let m = Manifest::new(sample()).unwrap();
    for (query, expect) in [
        ("git.dif", "git.diff"),
        ("diff", "git.diff"),
        ("Git.Status", "git.status"),
        ("aprops", "apropos"),
    ] {
        let err = m.doc(query).unwrap_err();
        let CatalogError::UnknownName { suggestions, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(
            suggestions.first().map(String::as_str),
            Some(expect),
            "{query}: {err}"
        );
        assert!(
            err.to_string()
                .contains(&format!("did you mean `{expect}`")),
            "{err}"
        );
    }
    let err = m.doc("zzzzzz").unwrap_err();
    assert!(
        err.to_string()
            .ends_with("; apropos(pattern) searches the names"),
        "{err}"
    );
}
