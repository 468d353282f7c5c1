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

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(document: &Document) -> Vec<&[u8]> {
        (0..document.len()).map(|i| document.content(i)).collect()
    }

    fn endings(document: &Document) -> Vec<Ending> {
        (0..document.len()).map(|i| document.ending(i)).collect()
    }

    #[test]
    fn an_empty_file_has_no_lines_and_counts_as_ending_in_a_newline() {
        let d = Document::parse(Vec::new());
        assert!(d.is_empty());
        assert_eq!(d.len(), 0);
        assert!(d.final_newline());
        assert_eq!(d.dominant_ending(), Ending::Lf);
    }

    #[test]
    fn a_final_newline_adds_no_empty_line_and_its_absence_is_kept() {
        let with = Document::parse(b"a\nb\n".to_vec());
        assert_eq!(contents(&with), [b"a", b"b"]);
        assert!(with.final_newline());
        let without = Document::parse(b"a\nb".to_vec());
        assert_eq!(contents(&without), [b"a", b"b"]);
        assert_eq!(endings(&without), [Ending::Lf, Ending::None]);
        assert!(!without.final_newline());
        let blank = Document::parse(b"\n".to_vec());
        assert_eq!(contents(&blank), [b""]);
        let blanks = Document::parse(b"a\n\n".to_vec());
        assert_eq!(contents(&blanks), [&b"a"[..], b""]);
    }

    #[test]
    fn crlf_belongs_to_the_ending_and_mixed_files_keep_each_ending() {
        let d = Document::parse(b"a\r\nb\nc\r\n".to_vec());
        assert_eq!(contents(&d), [b"a", b"b", b"c"]);
        assert_eq!(endings(&d), [Ending::CrLf, Ending::Lf, Ending::CrLf]);
        assert_eq!(d.dominant_ending(), Ending::CrLf);
        // A tie goes to LF; a bare `\r` is content, not an ending.
        let tie = Document::parse(b"a\r\nb\n".to_vec());
        assert_eq!(tie.dominant_ending(), Ending::Lf);
        let bare = Document::parse(b"a\rb\n".to_vec());
        assert_eq!(contents(&bare), [b"a\rb"]);
        // A lone `\r\n` line is an empty line with a CRLF ending.
        let empty_crlf = Document::parse(b"\r\n".to_vec());
        assert_eq!(contents(&empty_crlf), [b""]);
        assert_eq!(endings(&empty_crlf), [Ending::CrLf]);
    }

    #[test]
    fn the_bom_is_not_part_of_line_one() {
        let d = Document::parse(b"\xEF\xBB\xBFfirst\nsecond\n".to_vec());
        assert!(d.has_bom());
        assert_eq!(contents(&d), [&b"first"[..], b"second"]);
        assert_eq!(d.hash(0), LineHash::of(b"first"));
        assert_eq!(d.spans()[0].start, BOM.len());
        let only_bom = Document::parse(BOM.to_vec());
        assert!(only_bom.has_bom() && only_bom.is_empty());
        // A BOM later in the file is content.
        let late = Document::parse(b"a\n\xEF\xBB\xBFb\n".to_vec());
        assert!(!late.has_bom());
        assert_eq!(late.content(1), b"\xEF\xBB\xBFb");
    }

    #[test]
    fn line_content_agrees_with_the_document() {
        let bytes = b"\xEF\xBB\xBFx\r\ny\nz".to_vec();
        let d = Document::parse(bytes);
        let raws: [&[u8]; 3] = [b"\xEF\xBB\xBFx\r\n", b"y\n", b"z"];
        for (i, raw) in raws.iter().enumerate() {
            let (content, ending) = line_content(raw, i as u64 + 1);
            assert_eq!(content, d.content(i), "line {}", i + 1);
            assert_eq!(ending, d.ending(i), "line {}", i + 1);
        }
        // Only line 1 loses a BOM.
        assert_eq!(line_content(b"\xEF\xBB\xBFq\n", 2).0, b"\xEF\xBB\xBFq");
    }

    #[test]
    fn addresses_and_rendering_use_one_based_lines() {
        let d = Document::parse(b"alpha\nbeta\n".to_vec());
        assert_eq!(d.address(1), Address::new(2, LineHash::of(b"beta")));
        let mut out = String::new();
        d.render_range(0, 2, 100, &mut out);
        assert_eq!(
            out,
            format!("1:{}|alpha\n2:{}|beta\n", d.hash(0), d.hash(1))
        );
        // A range past the end is cut at the last line.
        let mut past = String::new();
        d.render_range(1, 10, 100, &mut past);
        assert_eq!(past, format!("2:{}|beta\n", d.hash(1)));
    }

    #[test]
    fn display_shows_bad_utf8_lossily_and_cuts_long_lines() {
        assert_eq!(display_text(b"ok\r", 10), "ok");
        assert_eq!(display_text(b"a\xFFb", 10), "a\u{FFFD}b");
        assert_eq!(display_text("héllo".as_bytes(), 5), "héllo");
        assert_eq!(
            display_text("héllo wörld".as_bytes(), 5),
            "héllo…[line cut: 6 more chars]"
        );
        // The hash still covers the whole line.
        let long = "x".repeat(5_000);
        let d = Document::parse(long.clone().into_bytes());
        assert_eq!(d.hash(0), LineHash::of(long.as_bytes()));
    }

    #[test]
    fn nul_bytes_are_found_where_they_are() {
        assert_eq!(find_nul(b"abc"), None);
        assert_eq!(find_nul(b"ab\0c\0"), Some(2));
    }

    #[test]
    fn utf8_is_judged_on_the_whole_file() {
        assert!(Document::parse("é\n".as_bytes().to_vec()).is_utf8());
        assert!(!Document::parse(b"ok\n\xC3\n".to_vec()).is_utf8());
        assert_eq!(Document::parse(b"x\n".to_vec()).into_bytes(), b"x\n");
    }
}
