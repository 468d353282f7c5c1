//! The output cap: what the model gets back from a block (or a shell command) that printed a
//! lot. Head and tail are kept, cut at line boundaries when one is near, with a marker that says
//! how much was cut and where the full text was saved.

use std::path::Path;

/// Default cap on block output, in characters.
pub const DEFAULT_OUTPUT_LIMIT: usize = 20_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    pub text: String,
    pub total_chars: usize,
    pub cut_chars: usize,
    /// The raw bytes were not valid UTF-8 (invalid sequences became U+FFFD).
    pub lossy: bool,
}

/// Decodes `raw` (invalid UTF-8 becomes U+FFFD) and caps it to `limit` characters.
///
/// `artifact` is the path the full output is (or will be) saved under; the marker names it so
/// the model can `cat` or `grep` it.
pub fn cap_output(raw: &[u8], limit: usize, artifact: Option<&Path>) -> Capped {
    let decoded = String::from_utf8_lossy(raw);
    let lossy = matches!(decoded, std::borrow::Cow::Owned(_));
    let text: &str = &decoded;
    let total_chars = text.chars().count();
    if total_chars <= limit {
        return Capped {
            text: text.to_string(),
            total_chars,
            cut_chars: 0,
            lossy,
        };
    }
    let head_chars = limit / 2;
    let tail_chars = limit - head_chars;
    let head_end = snap_back_to_line(text, byte_index_of_char(text, head_chars));
    let tail_start = snap_forward_to_line(text, byte_index_of_char(text, total_chars - tail_chars));
    let head = &text[..head_end];
    let tail = &text[tail_start..];
    let cut_chars = total_chars - head.chars().count() - tail.chars().count();
    let whereto = match artifact {
        Some(p) => format!("; full output: {}", p.display()),
        None => String::new(),
    };
    let mut out = String::with_capacity(head.len() + tail.len() + 160);
    out.push_str(head);
    if !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "[… vis: {} of {} characters cut{} …]\n",
        group_thousands(cut_chars),
        group_thousands(total_chars),
        whereto
    ));
    out.push_str(tail);
    Capped {
        text: out,
        total_chars,
        cut_chars,
        lossy,
    }
}

/// Byte offset of the `n`th character (or the end).
fn byte_index_of_char(text: &str, n: usize) -> usize {
    text.char_indices()
        .nth(n)
        .map(|(i, _)| i)
        .unwrap_or(text.len())
}

/// How far a cut may move to land on a line boundary.
const LINE_SNAP_BYTES: usize = 400;

fn snap_back_to_line(text: &str, end: usize) -> usize {
    let window_start = end.saturating_sub(LINE_SNAP_BYTES);
    match text.as_bytes()[window_start..end]
        .iter()
        .rposition(|&b| b == b'\n')
    {
        Some(pos) => window_start + pos + 1,
        None => end,
    }
}

fn snap_forward_to_line(text: &str, start: usize) -> usize {
    let window_end = (start + LINE_SNAP_BYTES).min(text.len());
    match text.as_bytes()[start..window_end]
        .iter()
        .position(|&b| b == b'\n')
    {
        Some(pos) => start + pos + 1,
        None => start,
    }
}

/// `1234567` → `1,234,567`.
pub fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_passes_unchanged() {
        let c = cap_output(b"hello\n", 100, None);
        assert_eq!(c.text, "hello\n");
        assert_eq!((c.total_chars, c.cut_chars, c.lossy), (6, 0, false));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_names_the_artifact() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let c = cap_output(text.as_bytes(), 1000, Some(Path::new("/tmp/a.txt")));
        assert!(c.text.starts_with("line 0\n"));
        assert!(c.text.ends_with("line 9999\n"));
        assert!(
            c.text.contains("characters cut; full output: /tmp/a.txt"),
            "{}",
            c.text
        );
        assert!(c.cut_chars > 0 && c.cut_chars < c.total_chars);
        // Cuts land on line boundaries.
        for line in c.text.lines() {
            assert!(
                line.starts_with("line ") || line.starts_with("[… vis:"),
                "{line:?}"
            );
        }
    }

    #[test]
    fn a_single_huge_line_is_cut_by_characters() {
        let text = "é".repeat(1_000_000);
        let c = cap_output(text.as_bytes(), 2000, None);
        assert_eq!(c.total_chars, 1_000_000);
        assert_eq!(c.cut_chars, 1_000_000 - 2000);
        assert!(c.text.chars().count() < 2200);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_flagged() {
        let c = cap_output(b"ok \xff\xfe done", 100, None);
        assert!(c.lossy);
        assert_eq!(c.text, "ok \u{fffd}\u{fffd} done");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(1234567), "1,234,567");
    }
}
