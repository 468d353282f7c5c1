//! `cat`: a file (or a line range of it) with every line addressed.
//!
//! Output: a header `PATH (N lines)` or `PATH (lines A-B of N)`, with a note when the file is
//! not valid UTF-8, then one `LINE:HASH|content` row per line. Binary files (a NUL byte
//! anywhere) are refused rather than shown as noise.
//!
//! `start` and `end` may be line numbers or addresses. An address is checked like patch checks
//! it: a malformed, stale or past-the-end one is an error that shows the current lines there
//! with fresh addresses, never silently read as its line number. A number `end` past the last
//! line is clamped (as ranges usually are); an address `end` must name an existing line.

use std::fmt::{self, Write as _};
use std::fs::File;
use std::io::Read;
use std::path::Path;

use rustix::fs::{fstat, openat, Mode, OFlags};

use crate::text::address::Address;
use crate::text::confine::{kind_of, Access, Kind, Located, Workspace};
use crate::text::lines::{display_text, find_nul, Document, DEFAULT_MAX_LINE_CHARS};
use crate::text::{Result, TextError};

/// A line given to cat: a number, or an address that must still be current.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineRef {
    Number(usize),
    /// `LINE:HASH` as printed by cat or grep (kept as given so a malformed one is reported
    /// as such).
    Address(String),
}

impl From<usize> for LineRef {
    fn from(line: usize) -> LineRef {
        LineRef::Number(line)
    }
}

impl From<Address> for LineRef {
    fn from(address: Address) -> LineRef {
        LineRef::Address(address.to_string())
    }
}

impl From<&str> for LineRef {
    fn from(address: &str) -> LineRef {
        LineRef::Address(address.to_string())
    }
}

/// Which lines to show and how.
#[derive(Clone, Debug)]
pub struct CatOptions {
    /// First line to show, 1-based (default 1).
    pub start: Option<LineRef>,
    /// Last line to show, inclusive (default: the last line; a number past it is clamped).
    pub end: Option<LineRef>,
    /// Lines longer than this many characters are shown cut.
    pub max_line_chars: usize,
}

impl Default for CatOptions {
    fn default() -> Self {
        CatOptions {
            start: None,
            end: None,
            max_line_chars: DEFAULT_MAX_LINE_CHARS,
        }
    }
}

/// A file read for display; holds the document so structured lines can be had without
/// re-reading.
#[derive(Clone, Debug)]
pub struct CatOutput {
    /// The path as given (cleaned), used in the header.
    pub path: String,
    /// Total number of lines in the file.
    pub total_lines: usize,
    /// First line shown (1-based; 1 for an empty file).
    pub start: usize,
    /// Last line shown (inclusive; `start - 1` when nothing is shown).
    pub end: usize,
    /// Whether the file is valid UTF-8 (if not, invalid bytes are shown as U+FFFD).
    pub utf8: bool,
    max_line_chars: usize,
    document: Document,
}

/// One shown line, for code that wants structure instead of text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatLine {
    pub address: Address,
    pub text: String,
}

/// Read `path` (resolved inside `workspace`) and address the requested lines.
pub fn cat(workspace: &Workspace, path: &Path, options: &CatOptions) -> Result<CatOutput> {
    let located = workspace.locate(path, Access::Read)?;
    let bytes = read_located(&located, IS_DIR_HINT_CAT)?;
    let display = located.resolved.display;
    let document = Document::parse(bytes);
    let total = document.len();
    let (start, end) = check_addresses(&document, options, &display)?;
    let start = start.unwrap_or(1);
    if start == 0 {
        return Err(TextError::InvalidArgument(
            "start must be 1 or more (line numbers start at 1)".into(),
        ));
    }
    if start > total.max(1) {
        return Err(TextError::InvalidArgument(format!(
            "start={start} is past the end of {display} ({total} lines); give a line from 1 to \
             {}",
            total.max(1)
        )));
    }
    if let Some(requested) = end {
        if requested < start {
            return Err(TextError::InvalidArgument(format!(
                "end={requested} is before start={start}; give start <= end"
            )));
        }
    }
    let end = end.unwrap_or(total).min(total);
    Ok(CatOutput {
        path: display,
        total_lines: total,
        start,
        end,
        utf8: document.is_utf8(),
        max_line_chars: options.max_line_chars,
        document,
    })
}

/// Turn `start`/`end` into line numbers, checking address hashes against the file; every bad
/// address is reported with the current lines there.
fn check_addresses(
    document: &Document,
    options: &CatOptions,
    display: &str,
) -> Result<(Option<usize>, Option<usize>)> {
    let total = document.len();
    let mut report = String::new();
    let mut problems = 0;
    let mut resolve = |name: &str, value: &Option<LineRef>| -> Option<usize> {
        let spec = match value {
            None => return None,
            Some(LineRef::Number(n)) => return Some(*n),
            Some(LineRef::Address(spec)) => spec,
        };
        let (message, show) = match spec.parse::<Address>() {
            Ok(address) if address.line > total => (
                format!(
                    "{name}={spec:?} is past the end: {display} has {total} line(s){}",
                    if total > 0 {
                        "; its last lines are"
                    } else {
                        ""
                    }
                ),
                (total > 0).then(|| (total.saturating_sub(3), total)),
            ),
            Ok(address) => {
                let current = document.hash(address.line - 1);
                if current == address.hash {
                    return Some(address.line);
                }
                (
                    format!(
                        "{name}={spec:?} is stale: line {} is now {}:{current}; current lines \
                         there",
                        address.line, address.line
                    ),
                    Some(around(address.line, total)),
                )
            }
            Err(err) => {
                // Show the line the model probably meant, if the number is usable.
                let line = spec
                    .trim()
                    .split(':')
                    .next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| (1..=total).contains(n));
                let mut message = format!("{name}: {err}");
                if let Some(line) = line {
                    let _ = write!(
                        message,
                        "; line {line} is now {}",
                        document.address(line - 1)
                    );
                }
                (message, line.map(|line| around(line, total)))
            }
        };
        problems += 1;
        report.push_str("- ");
        report.push_str(&message);
        match show {
            Some((from, to)) => {
                report.push_str(":\n");
                document.render_range(from, to, options.max_line_chars, &mut report);
            }
            None => report.push('\n'),
        }
        None
    };
    let start = resolve("start", &options.start);
    let end = resolve("end", &options.end);
    if problems == 0 {
        return Ok((start, end));
    }
    Err(TextError::Address {
        path: display.to_string(),
        report: format!(
            "cat({display:?}): {problems} bad address{}\n{report}Addresses go stale when their \
             line changes; use the fresh ones shown, or plain line numbers.",
            if problems == 1 { "" } else { "es" }
        ),
    })
}

/// Lines `line-2 ..= line+2` as a 0-based half-open range.
fn around(line: usize, total: usize) -> (usize, usize) {
    (line.saturating_sub(3), (line + 2).min(total))
}

const IS_DIR_HINT_CAT: &str =
    "cat reads files — use grep(pattern, path) to search a directory or sorted(Path(p).iterdir()) to list it";

/// Read a located file the text tools may show: refuses directories, special files and binary
/// data. The file is opened relative to its directory's descriptor without following a
/// symlink, so what is read is what was confined.
pub(crate) fn read_located(located: &Located, dir_hint: &'static str) -> Result<Vec<u8>> {
    let display = &located.resolved.display;
    let io_err = |source: std::io::Error| TextError::Io {
        path: display.to_string(),
        source,
    };
    let not_a = |kind| match kind {
        Kind::Directory => TextError::IsDirectory {
            path: display.to_string(),
            hint: dir_hint,
        },
        _ => TextError::NotAFile {
            path: display.to_string(),
        },
    };
    if located.resolved.kind != Kind::File {
        return Err(not_a(located.resolved.kind));
    }
    // O_NONBLOCK so a FIFO planted at the name cannot hang the open; it is refused below.
    let fd = openat(
        &located.parent,
        &located.name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => io_err(std::io::Error::other(
            "a symlink replaced it after its path was checked; try again",
        )),
        e => io_err(e.into()),
    })?;
    let stat = fstat(&fd).map_err(|e| io_err(e.into()))?;
    if kind_of(&stat) != Kind::File {
        return Err(not_a(kind_of(&stat)));
    }
    let mut bytes = Vec::with_capacity(stat.st_size as usize);
    File::from(fd).read_to_end(&mut bytes).map_err(io_err)?;
    if let Some(offset) = find_nul(&bytes) {
        return Err(TextError::Binary {
            path: display.to_string(),
            offset,
        });
    }
    Ok(bytes)
}

impl CatOutput {
    /// The shown lines with their addresses (invalid UTF-8 replaced, long lines cut).
    pub fn lines(&self) -> Vec<CatLine> {
        (self.start.saturating_sub(1)..self.end)
            .map(|index| CatLine {
                address: self.document.address(index),
                text: display_text(self.document.content(index), self.max_line_chars).into_owned(),
            })
            .collect()
    }

    /// The document as read (all lines, not just the shown range).
    pub fn document(&self) -> &Document {
        &self.document
    }

    /// The text the model sees.
    pub fn render(&self) -> String {
        let shown = self.end + 1 - self.start;
        let mut out = String::with_capacity(64 + shown * 48);
        out.push_str(&self.path);
        if self.start == 1 && self.end == self.total_lines {
            let s = if self.total_lines == 1 { "" } else { "s" };
            out.push_str(&format!(" ({} line{s}", self.total_lines));
        } else {
            out.push_str(&format!(
                " (lines {}-{} of {}",
                self.start, self.end, self.total_lines
            ));
        }
        if !self.utf8 {
            out.push_str("; not valid UTF-8: bad bytes shown as \u{FFFD}");
        }
        out.push_str(")\n");
        self.document
            .render_range(self.start - 1, self.end, self.max_line_chars, &mut out);
        if out.ends_with('\n') {
            out.pop();
        }
        out
    }
}

impl fmt::Display for CatOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Files {
        dir: tempfile::TempDir,
        ws: Workspace,
    }

    impl Files {
        fn new(files: &[(&str, &[u8])]) -> Files {
            let dir = tempfile::tempdir().expect("tempdir");
            for (name, bytes) in files {
                std::fs::write(dir.path().join(name), bytes).expect("write");
            }
            let ws = Workspace::new([dir.path()]);
            Files { dir, ws }
        }

        fn cat(
            &self,
            name: &str,
            start: Option<LineRef>,
            end: Option<LineRef>,
        ) -> Result<CatOutput> {
            let options = CatOptions {
                start,
                end,
                ..CatOptions::default()
            };
            cat(&self.ws, Path::new(name), &options)
        }
    }

    fn address(text: &str, line: usize) -> String {
        Document::parse(text.as_bytes().to_vec())
            .address(line - 1)
            .to_string()
    }

    const FIVE: &str = "one\ntwo\nthree\nfour\nfive\n";

    #[test]
    fn a_whole_file_is_headed_by_its_line_count() {
        let f = Files::new(&[
            ("a.txt", FIVE.as_bytes()),
            ("one.txt", b"x"),
            ("e.txt", b""),
        ]);
        let out = f.cat("a.txt", None, None).expect("cat");
        let text = out.render();
        assert!(text.starts_with("a.txt (5 lines)\n1:"), "{text}");
        assert!(text.ends_with("|five"), "{text}");
        assert_eq!(text.lines().count(), 6);
        assert_eq!(out.to_string(), text);
        assert_eq!(
            f.cat("one.txt", None, None).expect("cat").render(),
            format!("one.txt (1 line)\n{}|x", address("x", 1))
        );
        assert_eq!(
            f.cat("e.txt", None, None).expect("cat").render(),
            "e.txt (0 lines)"
        );
    }

    #[test]
    fn a_range_says_which_lines_of_how_many() {
        let f = Files::new(&[("a.txt", FIVE.as_bytes())]);
        let out = f.cat("a.txt", Some(2.into()), Some(3.into())).expect("cat");
        assert_eq!(
            out.render(),
            format!(
                "a.txt (lines 2-3 of 5)\n{}|two\n{}|three",
                address(FIVE, 2),
                address(FIVE, 3)
            )
        );
        let lines = out.lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].text, "two");
        assert_eq!(out.document().len(), 5);
        // A number end past the last line is clamped.
        let clamped = f
            .cat("a.txt", Some(4.into()), Some(usize::MAX.into()))
            .expect("cat");
        assert_eq!((clamped.start, clamped.end), (4, 5));
    }

    #[test]
    fn invalid_utf8_is_shown_lossily_and_said() {
        let f = Files::new(&[("bad.txt", b"caf\xE9\n")]);
        let text = f.cat("bad.txt", None, None).expect("cat").render();
        assert!(
            text.starts_with("bad.txt (1 line; not valid UTF-8: bad bytes shown as \u{FFFD})\n"),
            "{text}"
        );
        assert!(text.ends_with("|caf\u{FFFD}"), "{text}");
    }

    #[test]
    fn current_addresses_work_as_start_and_end() {
        let f = Files::new(&[("a.txt", FIVE.as_bytes())]);
        let out = f
            .cat(
                "a.txt",
                Some(address(FIVE, 2).as_str().into()),
                Some(address(FIVE, 4).as_str().into()),
            )
            .expect("cat");
        assert_eq!((out.start, out.end), (2, 4));
    }

    #[test]
    fn a_stale_address_is_refused_with_the_lines_there_now() {
        let f = Files::new(&[("a.txt", FIVE.as_bytes())]);
        let stale = format!("2:{}", crate::text::LineHash::of(b"not two"));
        assert_ne!(stale, address(FIVE, 2));
        let err = f
            .cat("a.txt", Some(stale.as_str().into()), None)
            .expect_err("stale");
        let TextError::Address { report, .. } = err else {
            panic!("expected an address error, got {err}");
        };
        assert!(
            report.starts_with("cat(\"a.txt\"): 1 bad address\n"),
            "{report}"
        );
        assert!(
            report.contains(&format!(
                "start={stale:?} is stale: line 2 is now {}",
                address(FIVE, 2)
            )),
            "{report}"
        );
        assert!(
            report.contains(&format!("{}|three", address(FIVE, 3))),
            "{report}"
        );
    }

    #[test]
    fn malformed_and_past_the_end_addresses_are_both_reported() {
        let f = Files::new(&[("a.txt", FIVE.as_bytes())]);
        let err = f
            .cat("a.txt", Some("2:ZZZZ".into()), Some("9:kodu".into()))
            .expect_err("two bad addresses");
        let report = err.to_string();
        assert!(report.contains(": 2 bad addresses\n"), "{report}");
        assert!(
            report.contains("start: malformed address \"2:ZZZZ\""),
            "{report}"
        );
        // The number of a malformed address still points at the line meant.
        assert!(
            report.contains(&format!("line 2 is now {}", address(FIVE, 2))),
            "{report}"
        );
        assert!(
            report.contains(
                "end=\"9:kodu\" is past the end: a.txt has 5 line(s); its last lines are"
            ),
            "{report}"
        );
    }

    #[test]
    fn bad_ranges_are_errors_that_give_the_valid_range() {
        let f = Files::new(&[("a.txt", FIVE.as_bytes())]);
        let err = f.cat("a.txt", Some(0.into()), None).expect_err("zero");
        assert!(err.to_string().contains("line numbers start at 1"), "{err}");
        let err = f
            .cat("a.txt", Some(6.into()), None)
            .expect_err("past the end");
        assert!(err.to_string().contains("give a line from 1 to 5"), "{err}");
        let err = f
            .cat("a.txt", Some(4.into()), Some(2.into()))
            .expect_err("reversed");
        assert!(err.to_string().contains("end=2 is before start=4"), "{err}");
    }

    #[test]
    fn directories_binaries_and_missing_files_are_refused() {
        let f = Files::new(&[("bin", b"a\0b")]);
        std::fs::create_dir(f.dir.path().join("sub")).expect("mkdir");
        let err = f.cat("sub", None, None).expect_err("directory");
        assert!(
            matches!(
                err,
                TextError::IsDirectory {
                    hint: IS_DIR_HINT_CAT,
                    ..
                }
            ),
            "{err}"
        );
        let err = f.cat("bin", None, None).expect_err("binary");
        assert!(matches!(err, TextError::Binary { offset: 1, .. }), "{err}");
        let err = f.cat("nope.txt", None, None).expect_err("missing");
        assert!(matches!(err, TextError::NotFound { .. }), "{err}");
    }

    #[test]
    fn line_refs_come_from_numbers_addresses_and_strings() {
        assert_eq!(LineRef::from(3), LineRef::Number(3));
        assert_eq!(LineRef::from("3:kodu"), LineRef::Address("3:kodu".into()));
        let address: Address = "3:kodu".parse().expect("valid");
        assert_eq!(LineRef::from(address), LineRef::Address("3:kodu".into()));
    }
}
