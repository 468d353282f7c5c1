//! Step 2 of `patch`: check every edit against the file as it was read, and turn the batch into
//! splices sorted by position.
//!
//! All addresses refer to the pre-batch file, so the order of the edits in the batch does not
//! matter. Nothing stops at the first problem: malformed, past-the-end and stale addresses,
//! reversed ranges, bare `\r`, new text that still carries a `LINE:HASH|` prefix, and overlapping
//! edits are all collected into one report, with the current lines around each bad address, so
//! the model can fix everything in one retry.

use crate::text::address::{Address, LineHash};
use crate::text::lines::Document;
use crate::text::{Result, TextError};

use super::options::Edit;

/// An edit turned into a splice of the original lines: remove `[from, to)` (0-based) and put
/// `lines` there.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Splice<'a> {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) lines: Vec<&'a str>,
    /// Which edit of the batch this came from (for messages).
    pub(super) edit_index: usize,
}

/// A problem with one edit, with the current lines around it when that helps.
struct Problem {
    message: String,
    show: Option<(usize, usize)>,
}

/// Check every edit against `document`; on success, the splices sorted by position. On failure,
/// [`TextError::Address`] whose report lists every problem.
pub(super) fn validate<'a>(
    document: &Document,
    edits: &'a [Edit],
    display: &str,
    max_chars: usize,
) -> Result<Vec<Splice<'a>>> {
    let total = document.len();
    let mut problems: Vec<Problem> = Vec::new();
    let mut splices: Vec<Splice<'a>> = Vec::new();

    // Parse and check one address; records a problem and returns None if it is bad.
    let check =
        |index: usize, spec: &str, problems: &mut Vec<Problem>| -> Option<Address> {
            let address = match spec.parse::<Address>() {
                Ok(address) => address,
                Err(err) => {
                    problems.push(Problem {
                        message: format!("edits[{index}]: {err}"),
                        show: None,
                    });
                    return None;
                }
            };
            if address.line > total {
                let lines = if total == 1 { "line" } else { "lines" };
                problems.push(Problem {
                    message: format!(
                    "edits[{index}]: {address} is past the end: {display} has {total} {lines}{}",
                    if total > 0 { "; its last lines are" } else { "" }
                ),
                    show: (total > 0).then(|| (total.saturating_sub(3), total)),
                });
                return None;
            }
            let current = document.hash(address.line - 1);
            if current != address.hash {
                problems.push(Problem {
                    message: format!(
                        "edits[{index}]: {address} is stale: line {} is now {}:{current}; current \
                     lines there",
                        address.line, address.line
                    ),
                    show: Some((
                        address.line.saturating_sub(3),
                        (address.line + 2).min(total),
                    )),
                });
                return None;
            }
            Some(address)
        };

    for (index, edit) in edits.iter().enumerate() {
        if let Some(line) = bare_cr(edit.text()) {
            // Written as is it would be a line break to some tools and not to others (and
            // the line model keeps it inside the line), so it is refused, not guessed at.
            problems.push(Problem {
                message: format!(
                    "edits[{index}]: the new text has a bare carriage return (\\r not followed \
                     by \\n) on its line {line}; patch gives new lines the file's own ending, so \
                     remove the \\r (separate lines with \\n only)"
                ),
                show: None,
            });
        }
        let lines = split_text(edit.text());
        if let Some(prefix) = lines.iter().find_map(|l| address_prefix(l)) {
            problems.push(Problem {
                message: format!(
                    "edits[{index}]: the new text starts a line with an address ({prefix:?}); \
                     pass only the content, without LINE:HASH|"
                ),
                show: None,
            });
        }
        let splice = |from, to, lines| Splice {
            from,
            to,
            lines,
            edit_index: index,
        };
        match edit {
            Edit::Replace { first, last, .. } => {
                let a = check(index, first, &mut problems);
                let b = if last == first {
                    a
                } else {
                    check(index, last, &mut problems)
                };
                if let (Some(a), Some(b)) = (a, b) {
                    if a.line > b.line {
                        problems.push(Problem {
                            message: format!(
                                "edits[{index}]: reversed range {a}..{b}: the first address must \
                                 not come after the last"
                            ),
                            show: None,
                        });
                    } else {
                        splices.push(splice(a.line - 1, b.line, lines));
                    }
                }
            }
            Edit::InsertBefore { at, .. } => {
                if let Some(a) = check(index, at, &mut problems) {
                    splices.push(splice(a.line - 1, a.line - 1, lines));
                }
            }
            Edit::InsertAfter { at, .. } => {
                if let Some(a) = check(index, at, &mut problems) {
                    splices.push(splice(a.line, a.line, lines));
                }
            }
            Edit::InsertAtStart { .. } => splices.push(splice(0, 0, lines)),
            Edit::InsertAtEnd { .. } => splices.push(splice(total, total, lines)),
        }
    }

    // Conflicts are only meaningful between edits whose addresses are all valid.
    splices.sort_by_key(|s| (s.from, s.to, s.edit_index));
    for pair in splices.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let overlap = a.to > b.from;
        let same_point = a.from == a.to && b.from == b.to && a.from == b.from;
        if overlap || same_point {
            let what = if same_point {
                "insert at the same place; combine their text into one insert"
            } else {
                "overlap; every line may be touched by one edit only — merge them into one edit"
            };
            problems.push(Problem {
                message: format!(
                    "edits[{}] ({}) and edits[{}] ({}) {what}",
                    a.edit_index,
                    edits[a.edit_index].describe(),
                    b.edit_index,
                    edits[b.edit_index].describe(),
                ),
                show: None,
            });
        }
    }

    if problems.is_empty() {
        return Ok(splices);
    }
    Err(TextError::Address {
        path: display.to_string(),
        report: report(document, &problems, display, max_chars),
    })
}

/// The rejection text: a count, one bullet per problem (with current lines where useful), and
/// what to do next.
fn report(document: &Document, problems: &[Problem], display: &str, max_chars: usize) -> String {
    let mut report = format!(
        "patch rejected, nothing changed in {display}: {} problem{}\n",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in problems {
        report.push_str("- ");
        report.push_str(&problem.message);
        if let Some((from, to)) = problem.show {
            report.push_str(":\n");
            document.render_range(from, to, max_chars, &mut report);
        } else {
            report.push('\n');
        }
    }
    report.push_str(
        "All addresses refer to the file before the batch; fix the listed edits and send the \
         whole batch again.",
    );
    report
}

/// Where `text` has a carriage return that does not end a line (`\r` not followed by `\n`):
/// the 1-based line of the text it is on.
fn bare_cr(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let at = memchr::memchr_iter(b'\r', bytes).find(|&i| bytes.get(i + 1) != Some(&b'\n'))?;
    Some(memchr::memchr_iter(b'\n', &bytes[..at]).count() + 1)
}

/// Split replacement text into lines: `""` is no lines, one trailing `\n` is optional, and a
/// `\r` before `\n` is dropped (the file's own ending is used).
fn split_text(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// `"12:kodu|x"` → `Some("12:kodu|")`: a line that begins with an address as printed by cat.
fn address_prefix(line: &str) -> Option<&str> {
    let bar = line.find('|')?;
    let (addr, _) = line.split_at(bar);
    let (number, hash) = addr.split_once(':')?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    LineHash::parse(hash)?;
    Some(&line[..=bar])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::lines::DEFAULT_MAX_LINE_CHARS;

    fn doc(text: &str) -> Document {
        Document::parse(text.as_bytes().to_vec())
    }

    /// The address of 1-based `line` as cat would print it.
    fn at(document: &Document, line: usize) -> String {
        document.address(line - 1).to_string()
    }

    /// A hash that is well-formed but not the one `line` has.
    fn stale(document: &Document, line: usize) -> String {
        let current = document.hash(line - 1);
        let other = ["kodu", "bate", "fika"]
            .into_iter()
            .find(|h| LineHash::parse(h) != Some(current))
            .unwrap_or("kodu");
        format!("{line}:{other}")
    }

    fn report_of(document: &Document, edits: &[Edit]) -> String {
        match validate(document, edits, "f.txt", DEFAULT_MAX_LINE_CHARS) {
            Err(TextError::Address { path, report }) => {
                assert_eq!(path, "f.txt");
                report
            }
            Err(other) => panic!("expected an address error, got {other}"),
            Ok(splices) => panic!("expected a rejection, got {splices:?}"),
        }
    }

    #[test]
    fn valid_edits_become_splices_sorted_by_position() {
        let d = doc("a\nb\nc\nd\n");
        let edits = [
            Edit::insert_at_end("z"),
            Edit::replace_range(at(&d, 2), at(&d, 3), "B\nC\nC2"),
            Edit::insert_before(at(&d, 1), "top"),
            Edit::insert_after(at(&d, 3), "after c"),
        ];
        let splices = validate(&d, &edits, "f.txt", DEFAULT_MAX_LINE_CHARS).expect("valid");
        let got: Vec<(usize, usize, Vec<&str>, usize)> = splices
            .into_iter()
            .map(|s| (s.from, s.to, s.lines, s.edit_index))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 0, vec!["top"], 2),
                (1, 3, vec!["B", "C", "C2"], 1),
                (3, 3, vec!["after c"], 3),
                (4, 4, vec!["z"], 0),
            ]
        );
    }

    #[test]
    fn a_stale_hash_is_rejected_with_the_current_lines() {
        let d = doc("one\ntwo\nthree\n");
        let bad = stale(&d, 2);
        let report = report_of(&d, &[Edit::replace(bad.clone(), "TWO")]);
        assert!(report.contains(&format!("{bad} is stale")), "{report}");
        assert!(
            report.contains(&format!("line 2 is now {}", at(&d, 2))),
            "{report}"
        );
        // The current lines around it are shown with fresh addresses.
        assert!(report.contains(&format!("{}|two", at(&d, 2))), "{report}");
        assert!(report.starts_with("patch rejected, nothing changed in f.txt: 1 problem\n"));
    }

    #[test]
    fn an_address_past_the_end_is_rejected_and_shows_the_last_lines() {
        let d = doc("one\ntwo\n");
        let report = report_of(&d, &[Edit::replace("9:kodu", "x")]);
        assert!(
            report.contains("9:kodu is past the end: f.txt has 2 lines; its last lines are"),
            "{report}"
        );
        assert!(report.contains(&format!("{}|one", at(&d, 1))), "{report}");

        let empty = doc("");
        let report = report_of(&empty, &[Edit::insert_after("1:kodu", "x")]);
        assert!(report.contains("f.txt has 0 lines\n"), "{report}");
    }

    #[test]
    fn malformed_addresses_are_reported_not_guessed() {
        let d = doc("one\n");
        for spec in ["1", "x:kodu", "0:kodu", "1:KODU", "1:kod", ""] {
            let report = report_of(&d, &[Edit::replace(spec, "x")]);
            assert!(report.contains("malformed address"), "{spec}: {report}");
        }
    }

    #[test]
    fn a_reversed_range_is_rejected() {
        let d = doc("a\nb\nc\n");
        let report = report_of(&d, &[Edit::replace_range(at(&d, 3), at(&d, 1), "x")]);
        assert!(report.contains("reversed range"), "{report}");
    }

    #[test]
    fn overlapping_edits_are_rejected_naming_both() {
        let d = doc("a\nb\nc\nd\n");
        let edits = [
            Edit::replace_range(at(&d, 1), at(&d, 3), "x"),
            Edit::replace(at(&d, 3), "y"),
        ];
        let report = report_of(&d, &edits);
        assert!(report.contains("edits[0]"), "{report}");
        assert!(report.contains("edits[1]"), "{report}");
        assert!(report.contains("overlap"), "{report}");
    }

    #[test]
    fn two_inserts_at_one_place_are_rejected_but_adjacent_edits_are_not() {
        let d = doc("a\nb\n");
        let same = [
            Edit::insert_after(at(&d, 1), "x"),
            Edit::insert_before(at(&d, 2), "y"),
        ];
        let report = report_of(&d, &same);
        assert!(report.contains("insert at the same place"), "{report}");

        let adjacent = [
            Edit::replace(at(&d, 1), "A"),
            Edit::replace(at(&d, 2), "B"),
            Edit::insert_after(at(&d, 1), "between"),
        ];
        // Replacing line 1, inserting after it and replacing line 2 touch different places.
        assert!(validate(&d, &adjacent, "f.txt", DEFAULT_MAX_LINE_CHARS).is_ok());
    }

    #[test]
    fn every_problem_in_the_batch_is_listed_at_once() {
        let d = doc("a\nb\nc\n");
        let edits = [
            Edit::replace(stale(&d, 1), "x"),
            Edit::replace("nonsense", "y"),
            Edit::insert_at_end("bad\rcr"),
        ];
        let report = report_of(&d, &edits);
        assert!(report.contains(": 3 problems\n"), "{report}");
        assert!(report.contains("edits[0]"), "{report}");
        assert!(report.contains("edits[1]"), "{report}");
        assert!(report.contains("edits[2]"), "{report}");
        assert!(report.ends_with("send the whole batch again."), "{report}");
    }

    #[test]
    fn new_text_with_a_bare_cr_or_an_address_prefix_is_refused() {
        let d = doc("a\n");
        let report = report_of(&d, &[Edit::replace(at(&d, 1), "ok\nbad\rline")]);
        assert!(report.contains("bare carriage return"), "{report}");
        assert!(report.contains("on its line 2"), "{report}");

        let copied = format!("{}|a", at(&d, 1));
        let report = report_of(&d, &[Edit::replace(at(&d, 1), copied)]);
        assert!(report.contains("starts a line with an address"), "{report}");
    }

    #[test]
    fn bare_cr_finds_only_lone_carriage_returns() {
        assert_eq!(bare_cr("a\r\nb\r\n"), None);
        assert_eq!(bare_cr("a\rb"), Some(1));
        assert_eq!(bare_cr("a\nb\nc\r"), Some(3));
        assert_eq!(bare_cr(""), None);
    }

    #[test]
    fn split_text_drops_one_final_newline_and_crlf() {
        assert!(split_text("").is_empty());
        assert_eq!(split_text("x"), vec!["x"]);
        assert_eq!(split_text("x\n"), vec!["x"]);
        assert_eq!(split_text("x\n\n"), vec!["x", ""]);
        assert_eq!(split_text("a\r\nb\r\n"), vec!["a", "b"]);
        assert_eq!(split_text("\n"), vec![""]);
    }

    #[test]
    fn address_prefix_needs_a_number_a_hash_and_a_bar() {
        assert_eq!(address_prefix("12:kodu|x = 1"), Some("12:kodu|"));
        assert_eq!(address_prefix("12:kodu x = 1"), None);
        assert_eq!(address_prefix("a:kodu|x"), None);
        assert_eq!(address_prefix(":kodu|x"), None);
        assert_eq!(address_prefix("12:KODU|x"), None);
        assert_eq!(address_prefix("x = a|b"), None);
    }
}
