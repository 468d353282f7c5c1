//! patch: edit forms, preservation of file properties, syntax gate, result text.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use vis::text::{patch, Edit, PatchOptions, TextError};

use super::support::Ws;

fn apply(w: &Ws, rel: &str, edits: &[Edit]) -> Result<String, TextError> {
    patch(&w.ws, Path::new(rel), edits, &PatchOptions::default()).map(|o| o.render())
}

#[test]
fn replace_range_delete_and_inserts_in_one_batch() {
    let w = Ws::new();
    w.write("f.txt", "a\nb\nc\nd\ne\nf\n");
    let a = w.addresses("f.txt");
    let out = apply(
        &w,
        "f.txt",
        &[
            Edit::replace(&a[0], "A"),
            Edit::replace_range(&a[1], &a[2], "BC"),
            Edit::delete(&a[3], &a[3]),
            Edit::insert_after(&a[4], "e2\ne3\n"),
            Edit::insert_at_start("top"),
            Edit::insert_at_end("bottom"),
        ],
    )
    .expect("patch");
    assert_eq!(w.read("f.txt"), b"top\nA\nBC\ne\ne2\ne3\nf\nbottom\n");
    assert!(
        out.starts_with("f.txt: -4 +6 lines, 6 → 8 lines; syntax not checked"),
        "{out}"
    );
}

#[test]
fn insert_before_and_text_splitting() {
    let w = Ws::new();
    w.write("f.txt", "x\ny\n");
    let a = w.addresses("f.txt");
    apply(&w, "f.txt", &[Edit::insert_before(&a[1], "\n")]).expect("patch");
    assert_eq!(
        w.read("f.txt"),
        b"x\n\ny\n",
        "\"\\n\" inserts one empty line"
    );
}

#[test]
fn crlf_bom_mode_and_missing_final_newline_are_preserved() {
    let w = Ws::new();
    let path = w.write("w.txt", "\u{feff}one\r\ntwo\r\nthree");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let a = w.addresses("w.txt");
    apply(
        &w,
        "w.txt",
        &[
            Edit::replace(&a[1], "TWO\nTWO-B"),
            Edit::insert_at_end("four"),
        ],
    )
    .expect("patch");
    assert_eq!(
        w.read("w.txt"),
        "\u{feff}one\r\nTWO\r\nTWO-B\r\nthree\r\nfour".as_bytes()
    );
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640);
}

#[test]
fn deleting_last_line_keeps_no_final_newline() {
    let w = Ws::new();
    w.write("f.txt", "a\nb");
    let a = w.addresses("f.txt");
    apply(&w, "f.txt", &[Edit::delete(&a[1], &a[1])]).expect("patch");
    assert_eq!(w.read("f.txt"), b"a");
}

#[test]
fn mixed_endings_keep_untouched_lines_and_use_the_dominant_one() {
    let w = Ws::new();
    w.write("m.txt", "a\r\nb\nc\r\nd\r\n");
    let a = w.addresses("m.txt");
    apply(&w, "m.txt", &[Edit::replace(&a[0], "A")]).expect("patch");
    assert_eq!(w.read("m.txt"), b"A\r\nb\nc\r\nd\r\n");
}

#[test]
fn symlink_edits_its_target() {
    let w = Ws::new();
    w.write("real.txt", "a\nb\n");
    std::os::unix::fs::symlink(w.path("real.txt"), w.path("link.txt")).expect("symlink");
    let a = w.addresses("link.txt");
    apply(&w, "link.txt", &[Edit::replace(&a[0], "A")]).expect("patch");
    assert_eq!(w.read("real.txt"), b"A\nb\n");
    assert!(std::fs::symlink_metadata(w.path("link.txt"))
        .expect("meta")
        .file_type()
        .is_symlink());
}

#[test]
fn result_shows_changed_region_with_fresh_addresses() {
    let w = Ws::new();
    w.write(
        "f.txt",
        (1..=20).map(|i| format!("l{i}\n")).collect::<String>(),
    );
    let a = w.addresses("f.txt");
    let out = apply(&w, "f.txt", &[Edit::replace(&a[9], "TEN")]).expect("patch");
    let fresh = w.addresses("f.txt");
    let expected = format!("{}|l9\n{}|TEN\n{}|l11", fresh[8], fresh[9], fresh[10]);
    assert!(out.ends_with(&expected), "{out}");
}

#[test]
fn python_syntax_error_is_rejected_with_would_be_lines() {
    let w = Ws::new();
    let original = "def f():\n    return 1\n";
    w.write("m.py", original);
    let a = w.addresses("m.py");
    let err = apply(&w, "m.py", &[Edit::replace(&a[1], "    return (1")]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TextError::Syntax { .. }), "{msg}");
    assert!(
        msg.contains("python syntax error") && msg.contains("would-be lines"),
        "{msg}"
    );
    assert!(msg.contains("2|    return (1"), "{msg}");
    assert_eq!(w.read("m.py"), original.as_bytes());
}

#[test]
fn python_compile_errors_beyond_parsing_are_caught() {
    let w = Ws::new();
    w.write("m.py", "x = 1\n");
    let a = w.addresses("m.py");
    let err = apply(&w, "m.py", &[Edit::replace(&a[0], "return 1")]).unwrap_err();
    assert!(
        err.to_string().contains("'return' outside function"),
        "{err}"
    );
}

#[test]
fn already_broken_file_may_be_edited_if_not_worse() {
    let w = Ws::new();
    w.write("b.py", "def f(:\n    pass\nx = 1\n");
    let a = w.addresses("b.py");
    let out = apply(&w, "b.py", &[Edit::replace(&a[2], "x = 2")]).expect("not worse");
    assert!(out.contains("still 1 error(s) as before"), "{out}");
    // Fixing it is of course fine.
    let a = w.addresses("b.py");
    let out = apply(&w, "b.py", &[Edit::replace(&a[0], "def f():")]).expect("fix");
    assert!(out.contains("python syntax ok"), "{out}");
}

#[test]
fn json_toml_rust_js_ts_gates() {
    let w = Ws::new();
    let cases: &[(&str, &str, &str)] = &[
        ("c.json", "{\n  \"a\": 1\n}\n", "  \"a\": 1,,"),
        ("c.toml", "[a]\nb = 1\n", "b = = 1"),
        (
            "m.rs",
            "fn main() {\n    let x = 1;\n}\n",
            "    let x = (1;",
        ),
        ("m.js", "function f() {\n  return 1;\n}\n", "  return (1;"),
        (
            "m.ts",
            "function f(): number {\n  return 1;\n}\n",
            "  return (1;",
        ),
        (
            "m.tsx",
            "const a = () => {\n  return <div/>;\n}\n",
            "  return <div>;",
        ),
    ];
    for (name, good, bad_line) in cases {
        w.write(name, good);
        let a = w.addresses(name);
        let err = apply(&w, name, &[Edit::replace(&a[1], *bad_line)]).unwrap_err();
        assert!(matches!(err, TextError::Syntax { .. }), "{name}: {err}");
        assert_eq!(w.read(name), good.as_bytes(), "{name} unchanged");
        let out = apply(&w, name, &[Edit::insert_after(&a[1], "")]).expect("no-op insert ok");
        assert!(out.contains("syntax ok"), "{name}: {out}");
    }
}

#[test]
fn never_relocates_a_stale_address() {
    let w = Ws::new();
    w.write("f.txt", "x\ntarget\ny\n");
    let stale = w.addr("f.txt", 2);
    // Move "target" to line 1: its hash now appears at another number.
    w.write("f.txt", "target\nx\ny\n");
    let err = apply(&w, "f.txt", &[Edit::replace(&stale, "T")]).unwrap_err();
    assert!(err.to_string().contains("is stale"), "{err}");
    assert_eq!(w.read("f.txt"), b"target\nx\ny\n");
}

#[test]
fn identical_result_is_not_written() {
    let w = Ws::new();
    w.write("f.txt", "a\n");
    let a = w.addresses("f.txt");
    let out = apply(&w, "f.txt", &[Edit::replace(&a[0], "a")]).expect("patch");
    assert!(out.contains("nothing written"), "{out}");
}

#[test]
fn big_insert_region_is_abbreviated() {
    let w = Ws::new();
    w.write("f.txt", "a\n");
    let a = w.addresses("f.txt");
    let text: String = (0..100).map(|i| format!("n{i}\n")).collect();
    let out = apply(&w, "f.txt", &[Edit::insert_after(&a[0], text)]).expect("patch");
    assert!(out.contains("more lines; cat(path,"), "{out}");
    assert!(out.lines().count() < 30, "{out}");
}
