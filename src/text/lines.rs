//! The one line model shared by cat, grep and patch.
//!
//! A file is a byte string, optionally starting with a UTF-8 byte-order mark, split after every
//! `\n`. A line's *content* excludes its ending (`\n` or `\r\n`) and, for line 1, the BOM. A
//! last line without `\n` is still a line; a file ending in `\n` has no extra empty line after
//! it; an empty file has zero lines. Everything that prints or checks an address goes through
//! [`line_content`] and [`crate::text::address::LineHash::of`], so cat and grep can never
//! disagree about a line's address.
//!
//! Display is separate from hashing: invalid UTF-8 is shown with U+FFFD and very long lines are
//! cut with a marker, but the hash always covers the whole raw content.

use std::borrow::Cow;

use crate::text::address::{Address, LineHash};

/// The UTF-8 byte-order mark.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Lines longer than this many characters are shown cut (hashing still uses the whole line).
pub const DEFAULT_MAX_LINE_CHARS: usize = 1000;

/// How one line ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    Lf,
    CrLf,
    /// The last line of a file without a final newline.
    None,
}

impl Ending {
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Ending::Lf => b"\n",
            Ending::CrLf => b"\r\n",
            Ending::None => b"",
        }
    }
}

/// Split one raw line (as given by a line-oriented searcher, ending included) into its content
/// and ending, dropping the BOM when it is line 1.
pub fn line_content(raw: &[u8], line_number: u64) -> (&[u8], Ending) {
    let raw = if line_number == 1 {
        raw.strip_prefix(BOM).unwrap_or(raw)
    } else {
        raw
    };
    match raw.strip_suffix(b"\n") {
        Some(rest) => match rest.strip_suffix(b"\r") {
            Some(content) => (content, Ending::CrLf),
            None => (rest, Ending::Lf),
        },
        None => (raw, Ending::None),
    }
}

/// Position of the first NUL byte, which is how binary files are recognized (as ripgrep does).
pub fn find_nul(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(0, bytes)
}

/// One line of a [`Document`]: the byte range of its content and its ending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineSpan {
    pub start: usize,
    pub end: usize,
    pub ending: Ending,
}

/// A whole file split into lines. Owns the bytes so untouched lines can be written back
/// exactly.
#[derive(Clone, Debug)]
pub struct Document {
    bytes: Vec<u8>,
    bom: bool,
    spans: Vec<LineSpan>,
}

impl Document {
    pub fn parse(bytes: Vec<u8>) -> Document {
        let bom = bytes.starts_with(BOM);
        let body = if bom { BOM.len() } else { 0 };
        let mut spans = Vec::with_capacity(bytes.len() / 32 + 1);
        let mut start = body;
        for nl in memchr::memchr_iter(b'\n', &bytes[body..]) {
            let nl = body + nl;
            let (end, ending) = if nl > start && bytes[nl - 1] == b'\r' {
                (nl - 1, Ending::CrLf)
            } else {
                (nl, Ending::Lf)
            };
            spans.push(LineSpan { start, end, ending });
            start = nl + 1;
        }
        if start < bytes.len() {
            spans.push(LineSpan {
                start,
                end: bytes.len(),
                ending: Ending::None,
            });
        }
        Document { bytes, bom, spans }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    pub fn has_bom(&self) -> bool {
        self.bom
    }

    /// Number of lines.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn spans(&self) -> &[LineSpan] {
        &self.spans
    }

    /// Content of the line at 0-based `index` (no ending, no BOM).
    pub fn content(&self, index: usize) -> &[u8] {
        let span = self.spans[index];
        &self.bytes[span.start..span.end]
    }

    pub fn ending(&self, index: usize) -> Ending {
        self.spans[index].ending
    }

    pub fn hash(&self, index: usize) -> LineHash {
        LineHash::of(self.content(index))
    }

    /// The address of the line at 0-based `index`.
    pub fn address(&self, index: usize) -> Address {
        Address::new(index + 1, self.hash(index))
    }

    /// Whether the file ends with a line ending. An empty file counts as ending with one, so
    /// text added to it gets a final newline.
    pub fn final_newline(&self) -> bool {
        self.spans.last().is_none_or(|s| s.ending != Ending::None)
    }

    /// The ending new lines get: the more common of LF and CRLF (LF on a tie or when there are
    /// no endings at all).
    pub fn dominant_ending(&self) -> Ending {
        let crlf = self
            .spans
            .iter()
            .filter(|s| s.ending == Ending::CrLf)
            .count();
        let lf = self.spans.iter().filter(|s| s.ending == Ending::Lf).count();
        if crlf > lf {
            Ending::CrLf
        } else {
            Ending::Lf
        }
    }

    /// Whether the whole file is valid UTF-8.
    pub fn is_utf8(&self) -> bool {
        std::str::from_utf8(&self.bytes).is_ok()
    }

    /// Render lines `[from, to)` (0-based) as `LINE:HASH|content`, one per line, into `out`.
    pub fn render_range(&self, from: usize, to: usize, max_chars: usize, out: &mut String) {
        for index in from..to.min(self.len()) {
            push_addressed(
                out,
                index + 1,
                self.hash(index),
                self.content(index),
                max_chars,
            );
        }
    }
}

/// Append `LINE:HASH|content\n` to `out`, showing `content` lossily and cut at `max_chars`.
pub fn push_addressed(
    out: &mut String,
    line: usize,
    hash: LineHash,
    content: &[u8],
    max_chars: usize,
) {
    push_line_with_sep(out, line, hash, '|', content, max_chars);
}

/// Like [`push_addressed`] with a chosen separator (grep marks context lines with `-`).
pub fn push_line_with_sep(
    out: &mut String,
    line: usize,
    hash: LineHash,
    sep: char,
    content: &[u8],
    max_chars: usize,
) {
    use std::fmt::Write;
    let _ = write!(out, "{line}:{hash}{sep}");
    out.push_str(&display_text(content, max_chars));
    out.push('\n');
}

/// The text shown for a line's content: invalid UTF-8 becomes U+FFFD, a stray trailing `\r`
/// is dropped, and anything past `max_chars` characters is replaced by a marker saying how
/// much was cut.
pub fn display_text(content: &[u8], max_chars: usize) -> Cow<'_, str> {
    let content = content.strip_suffix(b"\r").unwrap_or(content);
    let text = String::from_utf8_lossy(content);
    // Cheap exit: byte length bounds character count.
    if text.len() <= max_chars {
        return text;
    }
    let total = text.chars().count();
    if total <= max_chars {
        return text;
    }
    let cut_at = text
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(i, _)| i);
    Cow::Owned(format!(
        "{}…[line cut: {} more chars]",
        &text[..cut_at],
        total - max_chars
    ))
}
