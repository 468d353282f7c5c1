//! Bad input: each case names its cause and leaves the file unchanged.

use std::path::{Path, PathBuf};

use vis::text::{
    cat, grep, patch, CatOptions, Edit, GrepOptions, PatchOptions, TextError, Workspace,
};

use super::support::Ws;

const ORIGINAL: &str = "one\ntwo\nthree\nfour\nfive\n";

/// Patch `f.txt` (holding ORIGINAL) with `edits`; returns the error message after checking
/// the file did not change.
fn rejected(edits: impl FnOnce(&[String]) -> Vec<Edit>) -> (TextError, String) {
    let w = Ws::new();
    w.write("f.txt", ORIGINAL);
    let a = w.addresses("f.txt");
    let err = patch(
        &w.ws,
        Path::new("f.txt"),
        &edits(&a),
        &PatchOptions::default(),
    )
    .expect_err("must be rejected");
    assert_eq!(
        w.read("f.txt"),
        ORIGINAL.as_bytes(),
        "file must be unchanged"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("nothing changed") || !matches!(err, TextError::Address { .. }),
        "{msg}"
    );
    (err, msg)
}

#[test]
fn malformed_address() {
    let (err, msg) = rejected(|_| vec![Edit::replace("2-kodu", "x"), Edit::replace("3:ab", "y")]);
    assert!(matches!(err, TextError::Address { .. }));
    assert!(
        msg.contains("edits[0]: malformed address \"2-kodu\""),
        "{msg}"
    );
    assert!(
        msg.contains("edits[1]: malformed address \"3:ab\""),
        "{msg}"
    );
    assert!(msg.contains("2 problems"), "{msg}");
}

#[test]
fn address_past_the_end() {
    let (_, msg) = rejected(|a| {
        let hash = a[0].split(':').nth(1).unwrap_or_default().to_string();
        vec![Edit::replace(format!("9:{hash}"), "x")]
    });
    assert!(msg.contains("is past the end: f.txt has 5 lines"), "{msg}");
    // The last lines are shown with fresh addresses.
    assert!(msg.contains("|five"), "{msg}");
}

#[test]
fn stale_address_shows_current_lines() {
    let w = Ws::new();
    w.write("f.txt", ORIGINAL);
    let old = w.addr("f.txt", 3);
    let changed = "one\ntwo\nTHREE\nfour\nfive\n";
    w.write("f.txt", changed);
    let err = patch(
        &w.ws,
        Path::new("f.txt"),
        &[Edit::replace(&old, "x")],
        &PatchOptions::default(),
    )
    .unwrap_err()
    .to_string();
    let fresh = w.addr("f.txt", 3);
    assert!(
        err.contains(&format!("{old} is stale: line 3 is now {fresh}")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{fresh}|THREE")) && err.contains("|one") && err.contains("|five"),
        "{err}"
    );
    assert_eq!(w.read("f.txt"), changed.as_bytes());
}

#[test]
fn reversed_range() {
    let (_, msg) = rejected(|a| vec![Edit::replace_range(&a[3], &a[1], "x")]);
    assert!(msg.contains("reversed range"), "{msg}");
}

#[test]
fn overlapping_edits() {
    let (_, msg) = rejected(|a| {
        vec![
            Edit::replace_range(&a[0], &a[2], "x"),
            Edit::replace(&a[2], "y"),
        ]
    });
    assert!(
        msg.contains("edits[0]") && msg.contains("edits[1]") && msg.contains("overlap"),
        "{msg}"
    );
}

#[test]
fn duplicate_edits_and_inserts_at_one_place() {
    let (_, msg) = rejected(|a| vec![Edit::replace(&a[1], "x"), Edit::replace(&a[1], "y")]);
    assert!(msg.contains("overlap"), "{msg}");
    let (_, msg) = rejected(|a| {
        vec![
            Edit::insert_after(&a[0], "x"),
            Edit::insert_before(&a[1], "y"),
        ]
    });
    assert!(msg.contains("insert at the same place"), "{msg}");
    let (_, msg) = rejected(|a| {
        vec![
            Edit::replace_range(&a[0], &a[2], "x"),
            Edit::insert_after(&a[1], "y"),
        ]
    });
    assert!(msg.contains("overlap"), "{msg}");
}

#[test]
fn every_bad_address_is_named() {
    let (_, msg) = rejected(|a| {
        vec![
            Edit::replace("nope", "x"),
            Edit::replace(&a[4], "ok"),
            Edit::insert_after("77:kodu", "z"),
        ]
    });
    assert!(
        msg.contains("edits[0]") && msg.contains("edits[2]") && !msg.contains("edits[1]"),
        "{msg}"
    );
}

#[test]
fn pasted_address_prefix_in_text() {
    let (_, msg) = rejected(|a| vec![Edit::replace(&a[0], format!("{}|one", a[0]))]);
    assert!(msg.contains("pass only the content"), "{msg}");
}

#[test]
fn edit_to_a_binary_file() {
    let w = Ws::new();
    w.write("b.bin", b"a\n\x00\x01\n");
    let err = patch(
        &w.ws,
        Path::new("b.bin"),
        &[Edit::insert_at_start("x")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, TextError::Binary { .. }), "{err}");
    assert!(err.to_string().contains("binary file"), "{err}");
    assert_eq!(w.read("b.bin"), b"a\n\x00\x01\n");
}

#[test]
fn path_outside_the_workspace() {
    let w = Ws::new();
    let outside = tempfile::tempdir().expect("tempdir");
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "s\n").expect("write");
    let err = cat(&w.ws, &secret, &CatOptions::default()).unwrap_err();
    assert!(matches!(err, TextError::OutsideWorkspace { .. }), "{err}");
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    let dotdot = PathBuf::from("..")
        .join(outside.path().file_name().expect("name"))
        .join("secret.txt");
    let err = patch(
        &w.ws,
        &dotdot,
        &[Edit::insert_at_start("x")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    let err = grep(
        &w.ws,
        "s",
        std::slice::from_ref(&secret),
        &GrepOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    assert_eq!(std::fs::read(&secret).expect("read"), b"s\n");
}

#[test]
fn path_outside_the_workspace_via_symlink() {
    let w = Ws::new();
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.txt"), "s\n").expect("write");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), w.path("link.txt")).expect("ln");
    std::os::unix::fs::symlink(outside.path(), w.path("dirlink")).expect("ln");
    let err = cat(&w.ws, Path::new("link.txt"), &CatOptions::default()).unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    let err = patch(
        &w.ws,
        Path::new("dirlink/secret.txt"),
        &[Edit::insert_at_start("x")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    let err = grep(
        &w.ws,
        "s",
        &[PathBuf::from("dirlink")],
        &GrepOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    // Walking the workspace does not follow the symlinks out of it.
    let found = grep(&w.ws, "s", &[], &GrepOptions::default()).expect("grep");
    assert_eq!(found.total_matches, 0, "{found}");
    assert_eq!(
        std::fs::read(outside.path().join("secret.txt")).expect("read"),
        b"s\n"
    );
}

#[test]
fn read_only_roots_are_readable_not_patchable() {
    let w = Ws::new();
    let artifacts = tempfile::tempdir().expect("tempdir");
    let file = artifacts.path().join("out.txt");
    std::fs::write(&file, "log\n").expect("write");
    let ws = Workspace::new([w.dir.path()]).with_read_only([artifacts.path()]);
    assert!(cat(&ws, &file, &CatOptions::default()).is_ok());
    let err = patch(
        &ws,
        &file,
        &[Edit::insert_at_start("x")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("read-only root"), "{err}");
}

#[test]
fn a_directory_as_path() {
    let w = Ws::new();
    std::fs::create_dir(w.path("sub")).expect("mkdir");
    let err = cat(&w.ws, Path::new("sub"), &CatOptions::default()).unwrap_err();
    assert!(err.to_string().contains("sub is a directory"), "{err}");
    let err = patch(
        &w.ws,
        Path::new("sub"),
        &[Edit::insert_at_start("x")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, TextError::IsDirectory { .. }), "{err}");
}

#[test]
fn missing_file() {
    let w = Ws::new();
    let err = cat(&w.ws, Path::new("nope.txt"), &CatOptions::default()).unwrap_err();
    assert!(
        matches!(err, TextError::NotFound { .. }) && err.to_string().contains("nope.txt"),
        "{err}"
    );
}

#[test]
fn invalid_regex_names_the_position() {
    let w = Ws::new();
    w.write("f.txt", "x\n");
    let err = grep(&w.ws, "foo(bar", &[], &GrepOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid regex \"foo(bar\""), "{err}");
    assert!(err.contains("unclosed group at position 3"), "{err}");
    assert!(err.contains("fixed=True"), "{err}");
}

#[test]
fn unknown_file_type_and_bad_glob() {
    let w = Ws::new();
    let options = GrepOptions {
        types: vec!["pyton".into()],
        ..GrepOptions::default()
    };
    let err = grep(&w.ws, "x", &[], &options).unwrap_err().to_string();
    assert!(err.contains("pyton"), "{err}");
    let options = GrepOptions {
        globs: vec!["a[".into()],
        ..GrepOptions::default()
    };
    let err = grep(&w.ws, "x", &[], &options).unwrap_err().to_string();
    assert!(err.contains("invalid glob"), "{err}");
}
