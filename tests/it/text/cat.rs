//! cat and the line model.

use std::path::Path;

use vis::text::{cat, grep, Address, CatOptions, GrepOptions, LineHash};

use super::support::Ws;

fn cat_text(w: &Ws, rel: &str, start: Option<usize>, end: Option<usize>) -> String {
    let options = CatOptions {
        start: start.map(Into::into),
        end: end.map(Into::into),
        ..CatOptions::default()
    };
    cat(&w.ws, Path::new(rel), &options).expect("cat").render()
}

#[test]
fn header_and_addressed_lines() {
    let w = Ws::new();
    w.write("a.py", "def f():\n    return 1\n");
    let out = cat_text(&w, "a.py", None, None);
    let h1 = LineHash::of(b"def f():");
    let h2 = LineHash::of(b"    return 1");
    assert_eq!(
        out,
        format!("a.py (2 lines)\n1:{h1}|def f():\n2:{h2}|    return 1")
    );
}

#[test]
fn range_is_inclusive_and_clamped() {
    let w = Ws::new();
    w.write(
        "n.txt",
        (1..=10).map(|i| format!("line {i}\n")).collect::<String>(),
    );
    let out = cat_text(&w, "n.txt", Some(3), Some(5));
    assert!(out.starts_with("n.txt (lines 3-5 of 10)\n3:"), "{out}");
    assert_eq!(out.lines().count(), 4);
    let out = cat_text(&w, "n.txt", Some(9), Some(99));
    assert!(out.starts_with("n.txt (lines 9-10 of 10)"), "{out}");
}

#[test]
fn start_past_end_is_an_error() {
    let w = Ws::new();
    w.write("n.txt", "a\nb\n");
    let err = cat(
        &w.ws,
        Path::new("n.txt"),
        &CatOptions {
            start: Some(5.into()),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("start=5 is past the end") && err.contains("2 lines"),
        "{err}"
    );
}

#[test]
fn hash_ignores_trailing_whitespace_and_cr_but_not_indentation() {
    assert_eq!(LineHash::of(b"x = 1"), LineHash::of(b"x = 1  \t\r"));
    assert_ne!(LineHash::of(b"x = 1"), LineHash::of(b"    x = 1"));
}

#[test]
fn crlf_bom_and_missing_final_newline_share_addresses() {
    let w = Ws::new();
    w.write("lf.txt", "alpha\nbeta\ngamma\n");
    w.write("crlf.txt", "\u{feff}alpha\r\nbeta\r\ngamma");
    assert_eq!(w.addresses("lf.txt"), w.addresses("crlf.txt"));
    let out = cat_text(&w, "crlf.txt", None, None);
    assert!(
        out.contains("|alpha\n") && !out.contains('\r') && !out.contains('\u{feff}'),
        "{out:?}"
    );
}

#[test]
fn empty_file_and_empty_lines() {
    let w = Ws::new();
    w.write("e.txt", "");
    assert_eq!(cat_text(&w, "e.txt", None, None), "e.txt (0 lines)");
    w.write("blank.txt", "\n\n");
    let out = cat_text(&w, "blank.txt", None, None);
    assert_eq!(out.lines().count(), 3, "{out}");
}

#[test]
fn non_utf8_is_shown_with_replacement_and_said() {
    let w = Ws::new();
    w.write("latin1.txt", b"caf\xe9\nok\n");
    let out = cat_text(&w, "latin1.txt", None, None);
    assert!(out.contains("not valid UTF-8"), "{out}");
    assert!(out.contains("caf\u{fffd}"), "{out}");
}

#[test]
fn long_lines_are_cut_but_hashed_whole() {
    let w = Ws::new();
    let long_a = "a".repeat(5000);
    let long_b = format!("{}b", "a".repeat(4999));
    w.write("long.txt", format!("{long_a}\n{long_b}\n"));
    let out = cat(&w.ws, Path::new("long.txt"), &CatOptions::default()).expect("cat");
    let lines = out.lines();
    assert!(
        lines[0].text.contains("line cut: 4000 more chars"),
        "{}",
        lines[0].text
    );
    assert!(lines[0].text.chars().count() < 1100);
    // Same shown prefix, different content past the cut: different hashes (whole line hashed).
    assert_eq!(lines[0].address.hash, LineHash::of(long_a.as_bytes()));
    assert_eq!(lines[1].address.hash, LineHash::of(long_b.as_bytes()));
}

#[test]
fn cat_and_grep_agree_on_addresses() {
    let w = Ws::new();
    let content = "\u{feff}first line\r\n  second\tline  \r\nthird\nfourth line";
    w.write("mixed.txt", content);
    let from_cat: Vec<String> = w.addresses("mixed.txt");
    let options = GrepOptions {
        limit: None,
        ..GrepOptions::default()
    };
    let found = grep(&w.ws, "line|third", &[], &options).expect("grep");
    let from_grep: Vec<String> = found
        .matches()
        .iter()
        .map(|m| m.address.to_string())
        .collect();
    assert_eq!(from_grep, from_cat);
}

#[test]
fn address_parsing() {
    let h = LineHash::of(b"x");
    let a: Address = format!("12:{h}").parse().expect("parse");
    assert_eq!(a.line, 12);
    let copied: Address = format!("12:{h}|    some content")
        .parse()
        .expect("parse with content");
    assert_eq!(copied, a);
    for bad in [
        "12", "x:kodu", "0:kodu", "12:", "12:abcd", "12:kodux", "-3:kodu", "",
    ] {
        assert!(bad.parse::<Address>().is_err(), "{bad} should be malformed");
    }
}

#[test]
fn binary_file_is_refused() {
    let w = Ws::new();
    w.write("bin.dat", b"abc\x00def\n");
    let err = cat(&w.ws, Path::new("bin.dat"), &CatOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("binary file") && err.contains("offset 3"),
        "{err}"
    );
}
