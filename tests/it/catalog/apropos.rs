use vis::catalog::{CatalogError, EntryKind, Manifest};

use super::{big, sample};

#[test]
fn rows_render_call_form_signature_and_first_line() {
    let m = Manifest::new(sample()).unwrap();
    let page = m.apropos("git", None, 50, 0).unwrap();
    let text = page.render();
    assert_eq!(
        text,
        "git  [namespace, 3 members]  — Git helpers\n\
         git.status()  — Show the working tree status.\n\
         git.diff(path=None, staged=False)  — Show the diff of the working tree.\n\
         git.log(n=10)  — Show recent commits.\n\
         [4 matches]\n"
    );
    let p = m.apropos("addresses|checklist", None, 50, 0).unwrap();
    assert_eq!(p.rows[0].line, "vis.addresses  [page]  — Addresses");
    assert_eq!(p.rows[1].kind, EntryKind::Skill);
    assert_eq!(
        p.rows[1].line,
        "release-checklist  [skill]  — How to cut a release"
    );
}

#[test]
fn matches_names_only_case_insensitively() {
    let m = Manifest::new(sample()).unwrap();
    // "commits" appears only in a doc line.
    assert_eq!(m.apropos("commits", None, 50, 0).unwrap().total, 0);
    assert_eq!(m.apropos("GIT\\.DIFF", None, 50, 0).unwrap().total, 1);
    assert_eq!(m.apropos("(?-i)GIT", None, 50, 0).unwrap().total, 0);
    assert_eq!(m.apropos("^d", None, 50, 0).unwrap().rows[0].name, "doc");
}

#[test]
fn pagination_in_manifest_order() {
    let m = Manifest::new(big(120, 1000)).unwrap(); // one namespace `ns000`
    let p1 = m.apropos("func", None, 50, 0).unwrap();
    assert_eq!(
        (p1.total, p1.remaining, p1.next_offset),
        (120, 70, Some(50))
    );
    assert_eq!(p1.rows.first().unwrap().name, "ns000.func_00000");
    assert_eq!(p1.rows.last().unwrap().name, "ns000.func_00049");
    assert!(
        p1.render()
            .ends_with("[1–50 of 120 matches; 70 more: apropos('func', offset=50)]\n"),
        "{}",
        p1.render()
    );
    let p3 = m.apropos("func", None, 50, 100).unwrap();
    assert_eq!((p3.rows.len(), p3.remaining, p3.next_offset), (20, 0, None));
    assert_eq!(p3.rows[0].name, "ns000.func_00100");
    assert!(p3.render().ends_with("[101–120 of 120 matches; end]\n"));
    let past = m.apropos("func", None, 50, 500).unwrap();
    assert!(past.rows.is_empty() && past.next_offset.is_none());
    assert!(
        past.render().contains("use an offset below 120"),
        "{}",
        past.render()
    );
    let custom = m.apropos(r"func_\d+", Some("ns000"), 10, 0).unwrap();
    assert!(
        custom
            .render()
            .contains(r"apropos(r'func_\d+', namespace='ns000', limit=10, offset=10)"),
        "{}",
        custom.render()
    );
    assert!(matches!(
        m.apropos(".", None, 0, 0),
        Err(CatalogError::InvalidArgument(_))
    ));
}

#[test]
fn regex_errors_carry_the_position() {
    let m = Manifest::new(sample()).unwrap();
    let err = m.apropos("git.(diff", None, 50, 0).unwrap_err();
    let CatalogError::InvalidRegex { position, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*position, 4);
    let msg = err.to_string();
    assert!(
        msg.contains("position 4") && msg.contains("unclosed group"),
        "{msg}"
    );
    assert!(msg.contains("    git.(diff\n        ^"), "{msg}");

    let err = m.apropos("éé(", None, 50, 0).unwrap_err();
    let CatalogError::InvalidRegex { position, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*position, 2, "{err}"); // character position, not byte offset
    let err = m.apropos("(?<=git)diff", None, 50, 0).unwrap_err();
    assert!(err.to_string().contains("look-around"), "{err}");
}

#[test]
fn no_match_says_so_and_suggests_wider() {
    let m = Manifest::new(sample()).unwrap();
    let p = m.apropos("^git\\.blame$", None, 50, 0).unwrap();
    assert_eq!(p.total, 0);
    let text = p.render();
    assert!(
        text.starts_with(r"No names match r'^git\.blame$'.") && text.contains("wider pattern"),
        "{text}"
    );
    let p = m.apropos("stat", Some("tests"), 50, 0).unwrap();
    assert!(
        p.render().contains("drop the namespace filter"),
        "{}",
        p.render()
    );
    let p = m.apropos("git.dif", Some("git"), 50, 0).unwrap();
    assert_eq!(p.total, 1);
    let p = m.apropos("statsu", None, 50, 0).unwrap();
    assert!(
        p.render().contains("Closest names: git.status"),
        "{}",
        p.render()
    );
}

#[test]
fn namespace_filter_and_unknown_namespace() {
    let m = Manifest::new(big(300, 100)).unwrap();
    let p = m.apropos(".", Some("ns001"), 500, 0).unwrap();
    assert_eq!(p.total, 100);
    assert!(p.rows.iter().all(|r| r.name.starts_with("ns001.")));
    let err = m.apropos(".", Some("ns01"), 50, 0).unwrap_err();
    assert!(matches!(err, CatalogError::UnknownNamespace { .. }));
    assert!(err.to_string().contains("did you mean `ns001`"), "{err}");
    let err = m.apropos(".", Some("ns000.func_00001"), 50, 0).unwrap_err();
    assert!(matches!(err, CatalogError::UnknownNamespace { .. }));
    let err = m.apropos(".", Some("ns 1"), 50, 0).unwrap_err();
    assert!(matches!(err, CatalogError::InvalidName { .. }), "{err}");
}
