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
