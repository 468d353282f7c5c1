//! What a patch returns ([`PatchOutput`]) and every text the model sees from it: the summary
//! line with the syntax verdict, the changed regions with fresh addresses, and the report of an
//! edit rejected for a new syntax error.
//!
//! Changed regions get one line of context on each side and are merged when they touch; a
//! region longer than [`REGION_HEAD`] + [`REGION_TAIL`] lines shows its head and tail and says
//! which `cat` call shows the middle, so a large edit never floods the context.

use std::fmt::{self, Write as _};
use std::path::Path;

use crate::text::lines::{display_text, Document};
use crate::text::syntax::Verdict;

/// What a successful patch did.
#[derive(Clone, Debug)]
pub struct PatchOutput {
    pub path: String,
    pub lines_removed: usize,
    pub lines_added: usize,
    pub lines_before: usize,
    pub lines_after: usize,
    /// False when the edits produced the bytes already on disk (nothing was written).
    pub changed: bool,
    /// The syntax gate's verdict on the new text.
    pub syntax: Verdict,
    /// The edited regions in the new file, each as 1-based inclusive line ranges, merged.
    pub regions: Vec<(usize, usize)>,
    /// [`render_regions`] of `regions`, made while the new document was at hand.
    pub(super) rendered_region: String,
}

/// Windows of one line of context around each changed range, merged, as 1-based inclusive
/// ranges in the new file.
pub(super) fn merge_regions(new_ranges: &[(usize, usize)], total: usize) -> Vec<(usize, usize)> {
    let mut regions: Vec<(usize, usize)> = Vec::new();
    for &(from, to) in new_ranges {
        let lo = from.saturating_sub(1);
        let hi = (to + 1).min(total);
        if lo >= hi {
            continue;
        }
        match regions.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => regions.push((lo, hi)),
        }
    }
    regions.into_iter().map(|(lo, hi)| (lo + 1, hi)).collect()
}

/// Long regions show their head and tail only; the model can cat the middle.
const REGION_HEAD: usize = 12;
const REGION_TAIL: usize = 8;

/// The regions as addressed lines, `--` between regions.
pub(super) fn render_regions(
    document: &Document,
    regions: &[(usize, usize)],
    max_chars: usize,
) -> String {
    let mut out = String::new();
    for (i, &(first, last)) in regions.iter().enumerate() {
        if i > 0 {
            out.push_str("--\n");
        }
        let (from, to) = (first - 1, last);
        if to - from > REGION_HEAD + REGION_TAIL + 1 {
            document.render_range(from, from + REGION_HEAD, max_chars, &mut out);
            let hidden = to - from - REGION_HEAD - REGION_TAIL;
            let _ = writeln!(
                out,
                "[… {hidden} more lines; cat(path, {}, {}) shows them]",
                from + REGION_HEAD + 1,
                to - REGION_TAIL
            );
            document.render_range(to - REGION_TAIL, to, max_chars, &mut out);
        } else {
            document.render_range(from, to, max_chars, &mut out);
        }
    }
    out
}

/// The message for an edit that breaks the syntax: the error and the would-be lines.
pub(super) fn syntax_report(
    display: &str,
    verdict: &Verdict,
    new_bytes: &[u8],
    new_ranges: &[(usize, usize)],
    max_chars: usize,
) -> String {
    let Verdict::Worse {
        language,
        before,
        after,
        error,
    } = verdict
    else {
        return format!("patch rejected, nothing changed in {display}: syntax check failed");
    };
    let mut report = format!(
        "patch rejected, nothing changed in {display}: the edit introduces a {} syntax error",
        language.name()
    );
    if *before > 0 {
        let _ = write!(
            report,
            " in or next to the edited lines (the file had {before} error(s) before, {} after; \
             errors elsewhere are not held against the edit)",
            after.count
        );
    } else if after.count > 1 {
        let _ = write!(
            report,
            " ({} error(s) after the edit, none before)",
            after.count
        );
    }
    report.push('\n');
    let error_line = error.rows.map(|(row, _)| row + 1);
    report.push_str(&error.message);
    report.push('\n');
    let new_document = Document::parse(new_bytes.to_vec());
    let total = new_document.len();
    let (from, to) = match error_line {
        Some(line) if line >= 1 => (line.saturating_sub(3), (line + 2).min(total)),
        _ => new_ranges
            .first()
            .map(|&(a, b)| (a.saturating_sub(1), (b + 1).min(total)))
            .unwrap_or((0, total.min(5))),
    };
    if from < to {
        let _ = writeln!(report, "would-be lines {}-{} (not written):", from + 1, to);
        for index in from..to {
            let marker = if Some(index + 1) == error_line {
                ">"
            } else {
                " "
            };
            let _ = writeln!(
                report,
                "{marker}{}|{}",
                index + 1,
                display_text(new_document.content(index), max_chars)
            );
        }
    }
    report.push_str(
        "Fix the new text and send the whole batch again; the old addresses are still valid.",
    );
    report
}

impl PatchOutput {
    /// One-line summary of the syntax verdict.
    fn syntax_note(&self) -> String {
        match &self.syntax {
            Verdict::Clean(language) => format!("{} syntax ok", language.name()),
            Verdict::NoWorse {
                language,
                before,
                after,
            } => {
                let first = after
                    .first
                    .as_ref()
                    .map(|(_, m)| format!(", first: {m}"))
                    .unwrap_or_default();
                if after.count <= *before {
                    format!(
                        "{} syntax: still {} error(s) as before{first}",
                        language.name(),
                        after.count
                    )
                } else {
                    format!(
                        "{} syntax: {} error(s) (before: {before}), none new in or next to the \
                         edited lines{first}",
                        language.name(),
                        after.count
                    )
                }
            }
            Verdict::Worse { .. } => "syntax worse (not written)".into(),
            Verdict::Unchecked => {
                let ext = Path::new(&self.path)
                    .extension()
                    .map(|e| format!(".{} files", e.to_string_lossy()))
                    .unwrap_or_else(|| "this file type".into());
                format!("syntax not checked (no checker for {ext})")
            }
        }
    }

    /// The text the model sees.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{}: -{} +{} lines, {} → {} lines; {}",
            self.path,
            self.lines_removed,
            self.lines_added,
            self.lines_before,
            self.lines_after,
            self.syntax_note()
        );
        if !self.changed {
            out.push_str("; the result equals the file, nothing written");
        }
        out.push('\n');
        out.push_str(&self.rendered_region);
        while out.ends_with('\n') {
            out.pop();
        }
        out
    }
}

impl fmt::Display for PatchOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::syntax::{Language, Problems, SyntaxError};

    fn numbered(lines: usize) -> Document {
        let text: String = (1..=lines).map(|i| format!("line {i}\n")).collect();
        Document::parse(text.into_bytes())
    }

    fn output(path: &str, syntax: Verdict, changed: bool, rendered_region: &str) -> PatchOutput {
        PatchOutput {
            path: path.into(),
            lines_removed: 1,
            lines_added: 2,
            lines_before: 10,
            lines_after: 11,
            changed,
            syntax,
            regions: vec![(2, 4)],
            rendered_region: rendered_region.into(),
        }
    }

    fn problems(count: usize, first: &str) -> Problems {
        Problems {
            count,
            first: Some((Some(3), first.into())),
            errors: Vec::new(),
        }
    }

    #[test]
    fn regions_get_one_line_of_context_and_merge_when_they_touch() {
        // 0-based ranges of new lines in a 20-line file.
        assert_eq!(merge_regions(&[(4, 5)], 20), vec![(4, 6)]);
        assert_eq!(merge_regions(&[(4, 5), (6, 7)], 20), vec![(4, 8)]);
        assert_eq!(
            merge_regions(&[(1, 2), (10, 11)], 20),
            vec![(1, 3), (10, 12)]
        );
        // Clipped at both ends of the file.
        assert_eq!(
            merge_regions(&[(0, 1), (19, 20)], 20),
            vec![(1, 2), (19, 20)]
        );
        // A deletion (no new lines) still shows the lines around where it was.
        assert_eq!(merge_regions(&[(5, 5)], 20), vec![(5, 6)]);
        // Deleting everything leaves nothing to show.
        assert!(merge_regions(&[(0, 0)], 0).is_empty());
    }

    #[test]
    fn short_regions_are_shown_whole_and_separated() {
        let document = numbered(10);
        let out = render_regions(&document, &[(1, 2), (5, 5)], 1000);
        let expected = format!(
            "{}|line 1\n{}|line 2\n--\n{}|line 5\n",
            document.address(0),
            document.address(1),
            document.address(4)
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn a_long_region_shows_head_and_tail_and_how_to_see_the_middle() {
        let document = numbered(100);
        let out = render_regions(&document, &[(1, 50)], 1000);
        let rows: Vec<&str> = out.lines().collect();
        assert_eq!(rows.len(), REGION_HEAD + 1 + REGION_TAIL);
        assert!(rows[0].ends_with("|line 1"), "{out}");
        assert_eq!(
            rows[REGION_HEAD],
            "[… 30 more lines; cat(path, 13, 42) shows them]"
        );
        assert!(rows[rows.len() - 1].ends_with("|line 50"), "{out}");
        // Exactly at the threshold nothing is hidden.
        let whole = REGION_HEAD + REGION_TAIL + 1;
        let out = render_regions(&document, &[(1, whole)], 1000);
        assert_eq!(out.lines().count(), whole);
    }

    #[test]
    fn render_summarizes_counts_and_the_syntax_verdict() {
        let out = output("a.py", Verdict::Clean(Language::Python), true, "2:kodu|x\n");
        assert_eq!(
            out.render(),
            "a.py: -1 +2 lines, 10 → 11 lines; python syntax ok\n2:kodu|x"
        );
        assert_eq!(out.to_string(), out.render());

        let same = output("a.txt", Verdict::Unchecked, false, "");
        assert_eq!(
            same.render(),
            "a.txt: -1 +2 lines, 10 → 11 lines; syntax not checked (no checker for .txt \
             files); the result equals the file, nothing written"
        );
        let bare = output("Makefile", Verdict::Unchecked, true, "");
        assert!(bare.render().ends_with("(no checker for this file type)"));
    }

    #[test]
    fn render_explains_errors_that_were_there_before() {
        let still = output(
            "a.py",
            Verdict::NoWorse {
                language: Language::Python,
                before: 2,
                after: problems(2, "bad indent"),
            },
            true,
            "",
        );
        assert!(still
            .render()
            .ends_with("python syntax: still 2 error(s) as before, first: bad indent"));
        let more = output(
            "a.py",
            Verdict::NoWorse {
                language: Language::Python,
                before: 1,
                after: problems(2, "bad indent"),
            },
            true,
            "",
        );
        assert!(more
            .render()
            .contains("2 error(s) (before: 1), none new in or next to the edited lines"));
    }

    #[test]
    fn a_syntax_report_marks_the_error_line_among_the_would_be_lines() {
        let verdict = Verdict::Worse {
            language: Language::Python,
            before: 0,
            after: problems(1, "invalid syntax"),
            error: SyntaxError {
                rows: Some((2, 2)),
                message: "line 3: invalid syntax".into(),
            },
        };
        let new_bytes = b"a = 1\nb = 2\nc = (\nd = 4\ne = 5\nf = 6\n";
        let report = syntax_report("m.py", &verdict, new_bytes, &[(2, 3)], 1000);
        assert!(
            report.starts_with(
                "patch rejected, nothing changed in m.py: the edit introduces a python syntax error\n"
            ),
            "{report}"
        );
        assert!(report.contains("line 3: invalid syntax\n"), "{report}");
        assert!(
            report.contains("would-be lines 1-5 (not written):\n"),
            "{report}"
        );
        assert!(report.contains(">3|c = (\n"), "{report}");
        assert!(report.contains(" 2|b = 2\n"), "{report}");
        assert!(!report.contains("f = 6"), "{report}");
        assert!(
            report.ends_with("the old addresses are still valid."),
            "{report}"
        );
    }

    #[test]
    fn a_syntax_report_counts_errors_from_before_and_falls_back_to_the_edit() {
        let verdict = Verdict::Worse {
            language: Language::Python,
            before: 1,
            after: problems(3, "x"),
            error: SyntaxError {
                rows: None,
                message: "unexpected EOF".into(),
            },
        };
        let report = syntax_report("m.py", &verdict, b"a\nb\nc\nd\n", &[(1, 2)], 1000);
        assert!(
            report.contains("(the file had 1 error(s) before, 3 after;"),
            "{report}"
        );
        // No error position: the edited lines (with one line of context) are shown.
        assert!(
            report.contains("would-be lines 1-3 (not written):"),
            "{report}"
        );
        // A verdict that is not worse never gets here in practice, but still reads sensibly.
        let other = syntax_report("m.py", &Verdict::Unchecked, b"", &[], 1000);
        assert_eq!(
            other,
            "patch rejected, nothing changed in m.py: syntax check failed"
        );
    }
}
