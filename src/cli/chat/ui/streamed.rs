//! A running block's output in the plain transcript (`vis chat -m` and piped stdin): its lines
//! are printed as they complete (the printer escapes them) under the block's code; after the status line comes
//! only what of the block's result was not printed already.
//!
//! The result is what the model gets, which is not always what streamed: an unterminated last
//! line, notes Vis adds after the output, a restore notice before it, the cut marker where a
//! long output was capped for the model. [`StreamedOutput::rest`] prints the part of the result
//! between what it shares with the streamed text at the start and at the end (whole lines), so
//! none of the block's lines is printed twice, and the result is printed whole when nothing
//! streamed (a block that ends within a tenth of a second streams nothing).
//!
//! Bounded: a block printing gigabytes streams at most a few kilobytes per update (the host
//! skips the rest and says so, shown as one line), and only the first and last
//! [`KEPT_BYTES`] of what was printed are kept for the comparison.

use crate::runtime::group_thousands;

/// What is kept of the streamed text, at its start and at its end, for the comparison with the
/// result (which is capped at 20,000 characters by default).
const KEPT_BYTES: usize = 256 * 1024;

/// An unterminated line is printed anyway once it is this long (a progress bar redrawn with
/// `\r` never ends its line).
const LONGEST_PENDING: usize = 8 * 1024;

/// One block's streamed output.
#[derive(Default)]
pub struct StreamedOutput {
    /// The incomplete last line, not printed yet.
    pending: String,
    /// The first [`KEPT_BYTES`] printed (raw).
    head: String,
    /// The last [`KEPT_BYTES`] printed (raw), when more than `head` holds was printed.
    tail: String,
    /// Bytes printed in all.
    printed: usize,
    /// Bytes the host skipped.
    skipped: u64,
}

impl StreamedOutput {
    /// Takes `text` (and the count of bytes skipped before it); returns the lines it
    /// completed, raw (escape them to print), each ending in a newline ("" when none).
    pub fn push(&mut self, text: &str, skipped_bytes: u64) -> String {
        let mut out = String::new();
        if skipped_bytes > 0 {
            // The line in progress lost its middle: what was held of it goes, with a note.
            self.pending.clear();
            self.skipped += skipped_bytes;
            out.push_str(&format!(
                "[vis] … {} bytes of output not shown here …\n",
                group_thousands(skipped_bytes as usize)
            ));
        }
        let complete = match text.rfind('\n') {
            Some(end) => {
                let mut lines = std::mem::take(&mut self.pending);
                lines.push_str(&text[..=end]);
                self.pending.push_str(&text[end + 1..]);
                lines
            }
            None => {
                self.pending.push_str(text);
                String::new()
            }
        };
        let complete = if self.pending.len() > LONGEST_PENDING {
            let mut all = complete;
            all.push_str(&std::mem::take(&mut self.pending));
            all
        } else {
            complete
        };
        if !complete.is_empty() {
            self.remember(&complete);
            out.push_str(&complete);
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }

    fn remember(&mut self, printed: &str) {
        self.printed += printed.len();
        let room = KEPT_BYTES.saturating_sub(self.head.len());
        if room > 0 {
            let cut = floor_char_boundary(printed, room.min(printed.len()));
            self.head.push_str(&printed[..cut]);
        }
        if self.printed > self.head.len() {
            self.tail.push_str(printed);
            if self.tail.len() > 2 * KEPT_BYTES {
                let from = ceil_char_boundary(&self.tail, self.tail.len() - KEPT_BYTES);
                self.tail.drain(..from);
            }
        }
    }

    /// Something of the block was printed.
    pub fn streamed(&self) -> bool {
        self.printed > 0 || self.skipped > 0
    }

    /// The block ended with `output`: the part of it not printed yet (raw, whole lines; all of
    /// it when nothing streamed). Ready for the next block afterwards.
    pub fn rest<'a>(&mut self, output: &'a str) -> &'a str {
        let done = std::mem::take(self);
        if !done.streamed() {
            return output;
        }
        // The streamed text's end: its tail when it outgrew its head.
        let end = if done.tail.is_empty() {
            &done.head
        } else {
            &done.tail
        };
        let whole = done.tail.is_empty() && done.skipped == 0;
        let shared = common_prefix(&done.head, output);
        if whole && shared == done.head.len() {
            // The result goes on where the stream stopped (at a line's end).
            return &output[line_start_before(output, shared)..];
        }
        let from = line_start_before(output, shared);
        let rest = &output[from..];
        let suffix = common_suffix(end, rest);
        let to = line_start_after(rest, rest.len() - suffix);
        &rest[..to]
    }
}

/// The longest common prefix of `a` and `b`, in bytes (on a character boundary).
fn common_prefix(a: &str, b: &str) -> usize {
    let n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    floor_char_boundary(b, n)
}

/// The longest common suffix of `a` and `b`, in bytes (on a character boundary of both).
fn common_suffix(a: &str, b: &str) -> usize {
    let n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    b.len() - ceil_char_boundary(b, b.len() - n)
}

/// The start of the line `at` is in (`at` itself when a line starts there).
fn line_start_before(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// The first line start at or after `at` (the end when there is none).
fn line_start_after(text: &str, at: usize) -> usize {
    if at == 0 || text[..at].ends_with('\n') {
        return at;
    }
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(chunks: &[(&str, u64)]) -> (StreamedOutput, String) {
        let mut s = StreamedOutput::default();
        let mut printed = String::new();
        for (text, skipped) in chunks {
            printed.push_str(&s.push(text, *skipped));
        }
        (s, printed)
    }

    #[test]
    fn lines_print_as_they_complete() {
        let (mut s, printed) = stream(&[("one\ntw", 0), ("o\n\u{1b}]0;x\u{7}", 0), ("\n", 0)]);
        assert_eq!(printed, "one\ntwo\n\u{1b}]0;x\u{7}\n");
        assert_eq!(s.rest("one\ntwo\n\u{1b}]0;x\u{7}\n"), "");
    }

    #[test]
    fn the_rest_is_what_the_stream_did_not_show() {
        // The last line had no newline; a note was added after the output.
        let (mut s, printed) = stream(&[("a\nb\n", 0), ("c", 0)]);
        assert_eq!(printed, "a\nb\n");
        assert_eq!(s.rest("a\nb\nc\n[vis] hint\n"), "c\n[vis] hint\n");
        // Nothing streamed: all of it.
        assert_eq!(s.rest("a\nb\n"), "a\nb\n");
        // A restore notice before the output: only the notice.
        let (mut s, _) = stream(&[("x = 1\ny\n", 0)]);
        assert_eq!(
            s.rest("[vis] the worker restarted\nx = 1\ny\n"),
            "[vis] the worker restarted\n"
        );
    }

    #[test]
    fn a_capped_result_adds_only_its_cut_marker() {
        let full: String = (0..3000).map(|i| format!("line {i}\n")).collect();
        let capped = {
            let head: String = (0..100).map(|i| format!("line {i}\n")).collect();
            let tail: String = (2900..3000).map(|i| format!("line {i}\n")).collect();
            format!("{head}[… vis: 20,000 of 30,000 characters cut; full output: /a …]\n{tail}")
        };
        let (mut s, printed) = stream(&[(&full, 0)]);
        assert_eq!(printed, full);
        assert_eq!(
            s.rest(&capped),
            "[… vis: 20,000 of 30,000 characters cut; full output: /a …]\n"
        );
    }

    #[test]
    fn skipped_bytes_are_one_line_and_the_memory_is_bounded() {
        let big = "z".repeat(1000) + "\n";
        let mut s = StreamedOutput::default();
        let mut printed = 0;
        let first = s.push("start\npartial", 0);
        assert_eq!(first, "start\n");
        let note = s.push("tail of a line\nlast\n", 5_000_000);
        assert_eq!(
            note,
            "[vis] … 5,000,000 bytes of output not shown here …\ntail of a line\nlast\n"
        );
        for _ in 0..2000 {
            printed += s.push(&big, 0).len();
        }
        assert_eq!(printed, 2000 * big.len());
        assert!(s.head.len() <= KEPT_BYTES && s.tail.len() <= 2 * KEPT_BYTES);
        // The result's end was printed: only its start differs.
        let output = format!("start\n[… cut …]\n{big}");
        assert_eq!(s.rest(&output), "[… cut …]\n");
    }

    #[test]
    fn an_endless_line_is_printed_in_pieces() {
        let bar = "\r[####    ]".repeat(1000);
        let (_, printed) = stream(&[(&bar, 0)]);
        assert!(
            printed.ends_with('\n') && printed.contains("\r[####"),
            "{printed:.40}"
        );
    }
}
