//! What a search returns ([`GrepOutput`]) and the text the model sees.
//!
//! The text is ripgrep's `--heading` layout with addresses: a file's path, then its rows —
//! `LINE:HASH|text` for a match, `LINE:HASH-text` for context, `--` between groups — and a
//! blank line between files. Notes in brackets close it: matches counted but not shown (with
//! how to see them), binary files that were named explicitly, and paths that could not be read.

use std::fmt;

use crate::text::address::Address;
use crate::text::lines::push_line_with_sep;

/// One row printed under a file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrepLine {
    Match {
        address: Address,
        text: String,
    },
    Context {
        address: Address,
        text: String,
    },
    /// A gap between non-adjacent groups of lines (printed `--`).
    Break,
}

/// One matched line, for code that filters results without printing them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepMatch {
    pub path: String,
    pub address: Address,
    pub text: String,
}

/// The matches of one file.
#[derive(Clone, Debug, Default)]
pub struct FileHits {
    pub path: String,
    /// The rows kept for display (within the limit).
    pub lines: Vec<GrepLine>,
    /// Every match in the file (up to `max_count`), shown or not.
    pub matches: u64,
    /// How many of `matches` are in `lines`.
    pub shown: u64,
}

/// Everything a search found.
#[derive(Clone, Debug)]
pub struct GrepOutput {
    pub pattern: String,
    /// The searched paths as given.
    pub paths: Vec<String>,
    /// Files with at least one match, sorted by path.
    pub files: Vec<FileHits>,
    pub total_matches: u64,
    /// Files or directories that could not be read.
    pub errors: Vec<String>,
    /// Explicitly named files skipped because they are binary.
    pub skipped_binary: Vec<String>,
}

impl GrepOutput {
    /// Matched lines within the limit, in output order.
    pub fn matches(&self) -> Vec<GrepMatch> {
        let mut out = Vec::new();
        for hits in &self.files {
            for line in &hits.lines {
                if let GrepLine::Match { address, text } = line {
                    out.push(GrepMatch {
                        path: hits.path.clone(),
                        address: *address,
                        text: text.clone(),
                    });
                }
            }
        }
        out
    }

    /// Files with at least one match.
    pub fn files_matched(&self) -> usize {
        self.files.len()
    }

    /// Matches counted but not shown, and the number of files they are in.
    pub fn omitted(&self) -> (u64, usize) {
        let mut matches = 0;
        let mut files = 0;
        for hits in &self.files {
            if hits.shown < hits.matches {
                matches += hits.matches - hits.shown;
                files += 1;
            }
        }
        (matches, files)
    }

    /// The text the model sees.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.files.is_empty() {
            out.push_str(&format!(
                "no matches for {:?} in {}",
                self.pattern,
                self.paths.join(", ")
            ));
            out.push('\n');
        }
        let mut first = true;
        for hits in self.files.iter().filter(|h| !h.lines.is_empty()) {
            if !first {
                out.push('\n');
            }
            first = false;
            out.push_str(&hits.path);
            out.push('\n');
            for line in &hits.lines {
                match line {
                    GrepLine::Match { address, text } => {
                        push_row(&mut out, address, '|', text);
                    }
                    GrepLine::Context { address, text } => {
                        push_row(&mut out, address, '-', text);
                    }
                    GrepLine::Break => out.push_str("--\n"),
                }
            }
        }
        let (more, more_files) = self.omitted();
        if more > 0 {
            let s = if more == 1 { "" } else { "es" };
            let fs = if more_files == 1 { "" } else { "s" };
            out.push_str(&format!(
                "[{more} more match{s} in {more_files} file{fs} not shown; narrow the search or \
                 raise limit=]\n"
            ));
        }
        if !self.skipped_binary.is_empty() {
            out.push_str(&format!(
                "[skipped binary file(s): {}]\n",
                self.skipped_binary.join(", ")
            ));
        }
        if !self.errors.is_empty() {
            out.push_str(&format!(
                "[{} path(s) could not be read, e.g. {}]\n",
                self.errors.len(),
                self.errors[0]
            ));
        }
        while out.ends_with('\n') {
            out.pop();
        }
        out
    }
}

fn push_row(out: &mut String, address: &Address, sep: char, text: &str) {
    // Text is already cut for display; render with an unlimited width.
    push_line_with_sep(
        out,
        address.line,
        address.hash,
        sep,
        text.as_bytes(),
        usize::MAX,
    );
}

impl fmt::Display for GrepOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::address::LineHash;

    fn address(line: usize, text: &str) -> Address {
        Address::new(line, LineHash::of(text.as_bytes()))
    }

    fn matched(line: usize, text: &str) -> GrepLine {
        GrepLine::Match {
            address: address(line, text),
            text: text.into(),
        }
    }

    fn context(line: usize, text: &str) -> GrepLine {
        GrepLine::Context {
            address: address(line, text),
            text: text.into(),
        }
    }

    fn output(files: Vec<FileHits>) -> GrepOutput {
        GrepOutput {
            pattern: "needle".into(),
            paths: vec![".".into()],
            total_matches: files.iter().map(|f| f.matches).sum(),
            files,
            errors: Vec::new(),
            skipped_binary: Vec::new(),
        }
    }

    fn file(path: &str, lines: Vec<GrepLine>, matches: u64, shown: u64) -> FileHits {
        FileHits {
            path: path.into(),
            lines,
            matches,
            shown,
        }
    }

    #[test]
    fn files_are_headed_and_rows_marked_by_kind() {
        let out = output(vec![
            file(
                "a.py",
                vec![
                    context(1, "before"),
                    matched(2, "needle()"),
                    GrepLine::Break,
                    matched(9, "needle"),
                ],
                2,
                2,
            ),
            file("b.py", vec![matched(3, "x = needle")], 1, 1),
        ]);
        let expected = format!(
            "a.py\n{}-before\n{}|needle()\n--\n{}|needle\n\nb.py\n{}|x = needle",
            address(1, "before"),
            address(2, "needle()"),
            address(9, "needle"),
            address(3, "x = needle"),
        );
        assert_eq!(out.render(), expected);
        assert_eq!(out.to_string(), expected);
    }

    #[test]
    fn no_matches_says_what_was_searched_where() {
        let mut out = output(Vec::new());
        out.paths = vec!["src".into(), "tests".into()];
        assert_eq!(out.render(), "no matches for \"needle\" in src, tests");
        assert!(out.matches().is_empty());
        assert_eq!(out.files_matched(), 0);
    }

    #[test]
    fn omitted_matches_are_counted_with_how_to_see_them() {
        let out = output(vec![
            file("a", vec![matched(1, "needle")], 3, 1),
            file("b", Vec::new(), 1, 0),
        ]);
        assert_eq!(out.omitted(), (3, 2));
        assert!(out
            .render()
            .ends_with("[3 more matches in 2 files not shown; narrow the search or raise limit=]"));
        let one = output(vec![file("a", vec![matched(1, "needle")], 2, 1)]);
        assert!(one
            .render()
            .ends_with("[1 more match in 1 file not shown; narrow the search or raise limit=]"));
    }

    #[test]
    fn binary_files_and_unreadable_paths_are_noted() {
        let mut out = output(Vec::new());
        out.skipped_binary = vec!["img.png".into()];
        out.errors = vec!["x: Permission denied".into(), "y: gone".into()];
        let text = out.render();
        assert!(
            text.contains("\n[skipped binary file(s): img.png]\n"),
            "{text}"
        );
        assert!(
            text.ends_with("[2 path(s) could not be read, e.g. x: Permission denied]"),
            "{text}"
        );
    }

    #[test]
    fn matches_lists_only_match_rows_with_their_path() {
        let out = output(vec![file(
            "a.py",
            vec![context(1, "c"), matched(2, "needle")],
            1,
            1,
        )]);
        assert_eq!(
            out.matches(),
            vec![GrepMatch {
                path: "a.py".into(),
                address: address(2, "needle"),
                text: "needle".into()
            }]
        );
        assert_eq!(out.files_matched(), 1);
    }
}
