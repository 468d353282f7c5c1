//! Bounded fuzzing (proptest) of the parsers that take model input: `LINE:HASH` addresses,
//! edit batches (addresses, ranges, inserts, new text) and, through Python, the edit tuples and
//! cat's start/end. Each must never panic, and every rejection must be a clean, explained
//! error that leaves the file alone. Counts are printed with `--nocapture`.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use vis::text::{apply_edits, Address, Edit, LineHash, TextError};

use super::support::Ws;

/// Strings shaped like addresses, near misses included.
fn address_like() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        "[0-9]{1,3}",
        "[0-9]{15,40}",
        Just("0".to_string()),
        Just(String::new()),
        "-[0-9]{1,3}",
        "[٠-٩]{1,3}",
        "[0-9]\\.[0-9]",
    ];
    let hash = prop_oneof![
        "[bcdfghjklmnprstvwxz][aeiou][bcdfghjklmnprstvwxz][aeiou]",
        "[a-z]{0,6}",
        "[A-Z]{4}",
        ".{0,5}",
    ];
    let sep = prop_oneof![
        Just(":"),
        Just(":"),
        Just(""),
        Just("::"),
        Just(";"),
        Just(" : ")
    ];
    let tail = prop_oneof![
        Just(String::new()),
        Just(String::new()),
        "\\|.{0,10}",
        "[ \t\r\n]{1,3}",
    ];
    ("[ \t]{0,2}", number, sep, hash, tail)
        .prop_map(|(lead, n, sep, h, t)| format!("{lead}{n}{sep}{h}{t}"))
}

fn any_address_input() -> impl Strategy<Value = String> {
    prop_oneof![3 => address_like(), 1 => any::<String>(), 1 => ".{0,30}"]
}

static ADDRESS_INPUTS: AtomicUsize = AtomicUsize::new(0);
static BATCH_INPUTS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn fuzz_address_parser() {
    let mut runner = TestRunner::new(Config {
        cases: 30_000,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&any_address_input(), |input| {
            ADDRESS_INPUTS.fetch_add(1, Ordering::Relaxed);
            match input.parse::<Address>() {
                Ok(address) => {
                    prop_assert!(address.line >= 1);
                    // What parses prints back as a canonical address that parses the same.
                    let printed = address.to_string();
                    prop_assert_eq!(printed.parse::<Address>(), Ok(address));
                    prop_assert!(LineHash::parse(address.hash.as_str()).is_some());
                }
                Err(err) => {
                    let message = err.to_string();
                    prop_assert!(message.starts_with("malformed address "), "{}", message);
                    prop_assert!(message.contains("e.g. '42:kodu'"), "{}", message);
                    prop_assert!(!err.reason.is_empty());
                }
            }
            let _ = LineHash::parse(&input);
            Ok(())
        })
        .expect("address parser");
    eprintln!(
        "fuzz_address_parser: {} inputs",
        ADDRESS_INPUTS.load(Ordering::Relaxed)
    );
}

/// A small file: lines of a few shapes, LF or CRLF, with or without a final newline.
fn document() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(
            prop_oneof![Just(String::new()), "[a-z ]{1,8}", "    x = [0-9]", "é字\t"],
            0..8,
        ),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, crlf, final_newline)| {
            let ending = if crlf { "\r\n" } else { "\n" };
            let mut out = lines.join(ending);
            if final_newline && !lines.is_empty() {
                out.push_str(ending);
            }
            out.into_bytes()
        })
}

/// New text with the awkward characters a model might send.
fn new_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\n".to_string()),
        "[a-z \n]{0,12}",
        "[a-z\r\n]{0,8}",
        "[0-9]{1,2}:[a-z]{4}\\|[a-z]{0,4}",
        ".{0,12}",
    ]
}

/// An address: often a real one of the document (by index), else anything address-like.
fn address_for(doc: &[u8]) -> impl Strategy<Value = String> {
    let document = vis::text::Document::parse(doc.to_vec());
    let real: Vec<String> = (0..document.len())
        .map(|i| document.address(i).to_string())
        .collect();
    let pick = if real.is_empty() {
        Just(String::from("1:kodu")).boxed()
    } else {
        prop::sample::select(real).boxed()
    };
    prop_oneof![3 => pick, 1 => any_address_input()]
}

fn edit_for(doc: &[u8]) -> impl Strategy<Value = Edit> {
    let a = || address_for(doc);
    prop_oneof![
        (a(), new_text()).prop_map(|(at, text)| Edit::replace(at, text)),
        (a(), a(), new_text()).prop_map(|(f, l, text)| Edit::replace_range(f, l, text)),
        (a(), new_text()).prop_map(|(at, text)| Edit::insert_before(at, text)),
        (a(), new_text()).prop_map(|(at, text)| Edit::insert_after(at, text)),
        new_text().prop_map(Edit::insert_at_start),
        new_text().prop_map(Edit::insert_at_end),
    ]
}

fn batch() -> impl Strategy<Value = (Vec<u8>, Vec<Edit>)> {
    document().prop_flat_map(|doc| {
        let edits = prop::collection::vec(edit_for(&doc), 0..5);
        (Just(doc), edits)
    })
}

#[test]
fn fuzz_edit_batches() {
    let mut runner = TestRunner::new(Config {
        cases: 6_000,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&batch(), |(doc, edits)| {
            BATCH_INPUTS.fetch_add(1, Ordering::Relaxed);
            match apply_edits(&doc, &edits, "f.txt") {
                Ok(bytes) => {
                    // Only well-formed batches apply: no bare CR can have been written, and an
                    // empty batch is never "applied".
                    prop_assert!(!edits.is_empty());
                    let cr_ok = bytes
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| **b == b'\r')
                        .all(|(i, _)| bytes.get(i + 1) == Some(&b'\n'));
                    let doc_cr_ok = doc
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| **b == b'\r')
                        .all(|(i, _)| doc.get(i + 1) == Some(&b'\n'));
                    prop_assert!(cr_ok || !doc_cr_ok);
                }
                Err(TextError::Address { report, .. }) => {
                    prop_assert!(
                        report.starts_with("patch rejected, nothing changed in f.txt: "),
                        "{}",
                        report
                    );
                    prop_assert!(report.contains("edits["), "{}", report);
                    prop_assert!(
                        report.ends_with("send the whole batch again."),
                        "{}",
                        report
                    );
                }
                Err(TextError::InvalidArgument(message)) => {
                    prop_assert!(edits.is_empty(), "{}", message);
                    prop_assert!(message.contains("no edits"));
                }
                Err(other) => prop_assert!(false, "unexpected error kind: {other:?}"),
            }
            Ok(())
        })
        .expect("edit batches");
    eprintln!(
        "fuzz_edit_batches: {} batches",
        BATCH_INPUTS.load(Ordering::Relaxed)
    );
}

/// A Python expression for the string `s` (Rust's escapes are not Python's).
fn py_str(s: &str) -> String {
    let hex: String = s.bytes().map(|b| format!("{b:02x}")).collect();
    format!("bytes.fromhex('{hex}').decode()")
}

/// Python literals of every shape a model might pass where an edit or a line is expected.
fn py_value(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        Just("None".to_string()),
        Just("True".to_string()),
        Just("1.5".to_string()),
        Just("float('nan')".to_string()),
        "-?[1-9][0-9]{0,3}",
        Just("0".to_string()),
        "-?[1-9][0-9]{18,44}",
        Just("10**400".to_string()),
        Just("b'1:kodu'".to_string()),
        address_like().prop_map(|s| py_str(&s)),
        ".{0,6}".prop_map(|s| py_str(&s)),
        Just("patch.insert_after('1:kodu', 'x')".to_string()),
        Just("patch.insert_at_end(5)".to_string()),
        Just("object()".to_string()),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => prop::collection::vec(py_value(depth - 1), 0..4)
            .prop_map(|items| if items.is_empty() {
                "()".to_string()
            } else {
                format!("({},)", items.join(", "))
            }),
        1 => prop::collection::vec(py_value(depth - 1), 0..4)
            .prop_map(|items| format!("[{}]", items.join(", "))),
    ]
    .boxed()
}

#[test]
fn fuzz_python_edit_tuples_and_cat_lines() {
    // One batch of inputs, run in a single Python call (a Python round trip per case would
    // cost more than the calls themselves).
    let mut runner = TestRunner::deterministic();
    let addressish = || {
        prop_oneof![
            3 => address_like().prop_map(|s| py_str(&s)),
            1 => py_value(0),
        ]
    };
    let text = || prop_oneof![3 => new_text().prop_map(|s| py_str(&s)), 1 => py_value(1)];
    let edit = prop_oneof![
        (addressish(), text()).prop_map(|(a, t)| format!("({a}, {t})")),
        (addressish(), addressish(), text()).prop_map(|(a, b, t)| format!("({a}, {b}, {t})")),
        (addressish(), text()).prop_map(|(a, t)| format!("patch.insert_before({a}, {t})")),
        py_value(2),
    ];
    let values = prop::collection::vec(edit, 1500)
        .new_tree(&mut runner)
        .expect("generate")
        .current();
    let _g = super::python::setup();
    let w = Ws::new();
    w.write("f.txt", "one\ntwo\nthree\n");
    let code = format!(
        r#"
values = [{}]
allowed = (TypeError, ValueError)   # AddressError and PatchError are ValueErrors
seen = {{}}
runs = 0
for v in values:
    for call in (lambda: patch("f.txt", v), lambda: patch("f.txt", [v]),
                 lambda: cat("f.txt", v), lambda: cat("f.txt", 1, v)):
        runs += 1
        try:
            call()
        except allowed as e:
            assert str(e), repr(v)
            seen[type(e).__name__] = seen.get(type(e).__name__, 0) + 1
            assert open("f.txt").read() == "one\ntwo\nthree\n", repr(v)
        except Exception as e:
            raise AssertionError(f"{{type(e).__name__}} for {{v!r}}: {{e}}")
        else:
            # A random address can match by chance (1 in 9,025): then the edit is valid.
            seen["ok"] = seen.get("ok", 0) + 1
            open("f.txt", "w").write("one\ntwo\nthree\n")
out = f"{{runs}} {{sorted(seen.items())}}"
"#,
        values.join(",\n    ")
    );
    let out = super::python::run(w.dir.path(), &code);
    eprintln!("fuzz_python_edit_tuples_and_cat_lines: {out} (calls, outcomes)");
    assert!(out.starts_with("6000 "), "{out}");
    assert_eq!(w.read("f.txt"), b"one\ntwo\nthree\n");
}
