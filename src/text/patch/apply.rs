//! Step 3 of `patch`: build the new file from the validated splices, in one pass and without
//! I/O.
//!
//! Untouched lines are copied byte for byte (their own endings included, so a mixed-ending
//! file stays mixed); new lines get the file's dominant ending; the BOM and the presence or
//! absence of a final newline are kept. Because this is pure, [`apply_edits`] offers the same
//! checks and the same bytes to code that holds a file in memory (and to the fuzz tests).

use crate::text::lines::{Document, Ending, BOM, DEFAULT_MAX_LINE_CHARS};
use crate::text::Result;

use super::options::{no_edits, Edit};
use super::validate::{validate, Splice};

/// Validate and apply `edits` to `original` in memory, without touching any file or running
/// the syntax gate: the same checks and the same bytes `patch` would write. `display` names
/// the file in error reports.
pub fn apply_edits(original: &[u8], edits: &[Edit], display: &str) -> Result<Vec<u8>> {
    if edits.is_empty() {
        return Err(no_edits());
    }
    let document = Document::parse(original.to_vec());
    let splices = validate(&document, edits, display, DEFAULT_MAX_LINE_CHARS)?;
    Ok(apply(&document, &splices).0)
}

/// Build the new file. Returns the bytes and, per splice, the 0-based range of its new lines.
pub(super) fn apply<'a>(
    document: &'a Document,
    splices: &'a [Splice<'a>],
) -> (Vec<u8>, Vec<(usize, usize)>) {
    let dominant = document.dominant_ending();
    let added: usize = splices
        .iter()
        .flat_map(|s| s.lines.iter())
        .map(|l| l.len() + 2)
        .sum();
    let mut rows: Vec<(&'a [u8], Ending)> = Vec::with_capacity(document.len() + splices.len());
    let mut new_ranges = Vec::with_capacity(splices.len());
    let mut cursor = 0;
    let push_original = |rows: &mut Vec<(&'a [u8], Ending)>, from: usize, to: usize| {
        for index in from..to {
            rows.push((document.content(index), document.ending(index)));
        }
    };
    for splice in splices {
        push_original(&mut rows, cursor, splice.from);
        let start = rows.len();
        for line in &splice.lines {
            rows.push((line.as_bytes(), dominant));
        }
        new_ranges.push((start, rows.len()));
        cursor = splice.to;
    }
    push_original(&mut rows, cursor, document.len());

    // Only the last line may lack an ending, and it does exactly when it did before.
    let last = rows.len().saturating_sub(1);
    let final_newline = document.final_newline();
    let mut out = Vec::with_capacity(document.bytes().len() + added + BOM.len());
    if document.has_bom() {
        out.extend_from_slice(BOM);
    }
    for (i, (content, ending)) in rows.iter().enumerate() {
        out.extend_from_slice(content);
        let ending = match (i == last, final_newline) {
            (true, false) => Ending::None,
            (_, _) if *ending == Ending::None => dominant,
            _ => *ending,
        };
        out.extend_from_slice(ending.as_bytes());
    }
    (out, new_ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::TextError;

    fn at(original: &str, line: usize) -> String {
        Document::parse(original.as_bytes().to_vec())
            .address(line - 1)
            .to_string()
    }

    fn edited(original: &str, edits: &[Edit]) -> String {
        let bytes = apply_edits(original.as_bytes(), edits, "f.txt").expect("valid batch");
        String::from_utf8(bytes).expect("utf8")
    }

    #[test]
    fn replace_insert_and_delete_in_one_pass() {
        let f = "a\nb\nc\nd\n";
        let out = edited(
            f,
            &[
                Edit::replace(at(f, 2), "B"),
                Edit::delete(at(f, 3), at(f, 4)),
                Edit::insert_at_start("top"),
                Edit::insert_after(at(f, 1), "after a"),
            ],
        );
        assert_eq!(out, "top\na\nafter a\nB\n");
    }

    #[test]
    fn crlf_files_get_crlf_lines_and_mixed_endings_are_kept() {
        let f = "a\r\nb\r\nc\n";
        let out = edited(f, &[Edit::replace(at(f, 1), "A\nA2")]);
        assert_eq!(out, "A\r\nA2\r\nb\r\nc\n");
    }

    #[test]
    fn a_bom_is_kept_and_never_part_of_line_one() {
        let f = "\u{feff}first\nsecond\n";
        let out = edited(f, &[Edit::replace(at(f, 1), "FIRST")]);
        assert_eq!(out, "\u{feff}FIRST\nsecond\n");
        let out = edited(f, &[Edit::insert_at_start("zero")]);
        assert_eq!(out, "\u{feff}zero\nfirst\nsecond\n");
    }

    #[test]
    fn a_missing_final_newline_stays_missing() {
        let f = "a\nb";
        assert_eq!(edited(f, &[Edit::insert_at_end("c")]), "a\nb\nc");
        assert_eq!(edited(f, &[Edit::replace(at(f, 2), "B")]), "a\nB");
        assert_eq!(edited(f, &[Edit::delete(at(f, 2), at(f, 2))]), "a");
        // And a present one stays present.
        assert_eq!(edited("a\n", &[Edit::insert_at_end("b")]), "a\nb\n");
    }

    #[test]
    fn an_empty_file_gets_a_final_newline() {
        assert_eq!(edited("", &[Edit::insert_at_start("x")]), "x\n");
        assert_eq!(edited("", &[Edit::insert_at_end("x\ny")]), "x\ny\n");
    }

    #[test]
    fn new_ranges_point_at_the_inserted_lines() {
        let f = "a\nb\nc\n";
        let document = Document::parse(f.as_bytes().to_vec());
        let edits = [Edit::replace(at(f, 2), "B1\nB2"), Edit::insert_at_end("z")];
        let splices = validate(&document, &edits, "f.txt", DEFAULT_MAX_LINE_CHARS).expect("valid");
        let (bytes, ranges) = apply(&document, &splices);
        assert_eq!(bytes, b"a\nB1\nB2\nc\nz\n");
        assert_eq!(ranges, vec![(1, 3), (4, 5)]);
    }

    #[test]
    fn an_empty_batch_and_a_bad_address_change_nothing() {
        let err = apply_edits(b"a\n", &[], "f.txt").expect_err("no edits");
        assert!(matches!(err, TextError::InvalidArgument(_)), "{err}");
        let err =
            apply_edits(b"a\n", &[Edit::replace("1:zzzz", "x")], "f.txt").expect_err("malformed");
        assert!(matches!(err, TextError::Address { .. }), "{err}");
    }
}
