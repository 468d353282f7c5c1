//! `cat`: a file (or a line range of it) with every line addressed.
//!
//! Output: a header `PATH (N lines)` or `PATH (lines A-B of N)`, with a note when the file is
//! not valid UTF-8, then one `LINE:HASH|content` row per line. Binary files (a NUL byte
//! anywhere) are refused rather than shown as noise.

use std::fmt;
use std::path::Path;

use crate::text::address::Address;
use crate::text::confine::{Access, Workspace};
use crate::text::lines::{display_text, find_nul, Document, DEFAULT_MAX_LINE_CHARS};
use crate::text::{Result, TextError};

/// Which lines to show and how.
#[derive(Clone, Debug)]
pub struct CatOptions {
    /// First line to show, 1-based (default 1).
    pub start: Option<usize>,
    /// Last line to show, inclusive (default: the last line; clamped to it).
    pub end: Option<usize>,
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
    let resolved = workspace.resolve(path, Access::Read)?;
    let bytes = read_text_file(&resolved.real, &resolved.display, IS_DIR_HINT_CAT)?;
    let document = Document::parse(bytes);
    let total = document.len();
    let start = options.start.unwrap_or(1);
    if start == 0 {
        return Err(TextError::InvalidArgument(
            "start must be 1 or more (line numbers start at 1)".into(),
        ));
    }
    if start > total.max(1) {
        return Err(TextError::InvalidArgument(format!(
            "start={start} is past the end of {} ({total} lines)",
            resolved.display
        )));
    }
    let end = options.end.unwrap_or(total).min(total);
    if let Some(requested) = options.end {
        if requested < start {
            return Err(TextError::InvalidArgument(format!(
                "end={requested} is before start={start}; give start <= end"
            )));
        }
    }
    Ok(CatOutput {
        path: resolved.display,
        total_lines: total,
        start,
        end,
        utf8: document.is_utf8(),
        max_line_chars: options.max_line_chars,
        document,
    })
}

const IS_DIR_HINT_CAT: &str =
    "cat reads files — use grep(pattern, path) to search a directory or sorted(Path(p).iterdir()) to list it";

/// Read a file the text tools may show: refuses directories, special files and binary data.
pub(crate) fn read_text_file(
    real: &Path,
    display: &str,
    dir_hint: &'static str,
) -> Result<Vec<u8>> {
    let io_err = |source| TextError::Io {
        path: display.to_string(),
        source,
    };
    let meta = std::fs::metadata(real).map_err(io_err)?;
    if meta.is_dir() {
        return Err(TextError::IsDirectory {
            path: display.to_string(),
            hint: dir_hint,
        });
    }
    if !meta.is_file() {
        return Err(TextError::NotAFile {
            path: display.to_string(),
        });
    }
    let bytes = std::fs::read(real).map_err(io_err)?;
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
