//! A running block's last [`LIVE_LINES`] lines of output, as the screen's live region shows
//! them above the spinner (`screen.rs` draws and erases the region, so the scrollback never
//! holds it): when the block ends the region goes, and the block's usual view (status and
//! collapsed output) is printed in its place. The host sends output at most ten times a second,
//! and the rows are recomputed for the terminal's width at each spinner frame.
//!
//! The text is the block's, untrusted: each line is cut at its last carriage return (what a
//! terminal would show of a progress bar), tabs become spaces, control characters are escaped,
//! and it is clipped to the width, so every line takes exactly one row. What is kept is
//! bounded: the last lines and the start of the line in progress.

use std::collections::VecDeque;

use super::style::{self, DIM};
use crate::cli::term::escape_controls;

/// Output lines shown above the spinner while a block runs.
pub const LIVE_LINES: usize = 5;

/// The most kept of the line in progress (its start is shown; a carriage return starts it over).
const HELD_BYTES: usize = 4096;

/// The indent of the live lines (as the block's output is indented in its final view).
const INDENT: &str = "    ";

/// What the live region keeps of a running block's output.
#[derive(Default)]
pub struct BlockTail {
    /// The last complete lines of the running block's output (raw).
    lines: VecDeque<String>,
    /// The start of its incomplete last line (raw).
    partial: String,
}

impl BlockTail {
    /// Forgets the output (a block starts or ends); what is on the screen stays until erased.
    pub fn clear(&mut self) {
        self.lines.clear();
        self.partial.clear();
    }

    /// Adds what the running block printed (`skipped_bytes` were printed before it but not
    /// sent: the line in progress lost its middle).
    pub fn push(&mut self, text: &str, skipped_bytes: u64) {
        if skipped_bytes > 0 {
            self.partial.clear();
        }
        let mut pieces = text.split('\n');
        let last = pieces.next_back().unwrap_or_default();
        for piece in pieces {
            self.feed_partial(piece);
            let line = std::mem::take(&mut self.partial);
            if self.lines.len() == LIVE_LINES {
                self.lines.pop_front();
            }
            self.lines.push_back(line);
        }
        self.feed_partial(last);
    }

    fn feed_partial(&mut self, piece: &str) {
        // Only the latest of a line redrawn with `\r` shows; a `\r` at the very end may be the
        // first half of a CRLF, so it stays until the next piece.
        match piece
            .get(..piece.len().saturating_sub(1))
            .and_then(|p| p.rfind('\r'))
        {
            Some(at) => {
                self.partial.clear();
                self.partial.push_str(&piece[at + 1..]);
            }
            None => {
                // A `\r` the last piece ended with was not a CRLF's: the line starts over.
                if self.partial.ends_with('\r') && !piece.is_empty() {
                    self.partial.clear();
                }
                self.partial.push_str(piece);
            }
        }
        if self.partial.len() > HELD_BYTES {
            let mut cut = HELD_BYTES;
            while !self.partial.is_char_boundary(cut) {
                cut -= 1;
            }
            self.partial.truncate(cut);
        }
    }

    /// The live rows for a terminal `width` columns wide and `height` rows high: the last
    /// complete lines and the one in progress, the newest [`LIVE_LINES`] of them (fewer on a
    /// small screen, so the region never scrolls itself off it), indented, escaped, dimmed
    /// and clipped so each takes one row with the last column free.
    pub fn rows(&self, width: usize, height: usize) -> Vec<String> {
        let max = LIVE_LINES.min(height.saturating_sub(3));
        let room = width.saturating_sub(INDENT.len() + 1);
        let partial = (!self.partial.is_empty()).then_some(&self.partial);
        let all: Vec<&String> = self.lines.iter().chain(partial).collect();
        let skip = all.len().saturating_sub(max);
        all[skip..]
            .iter()
            .map(|line| {
                format!(
                    "{INDENT}{}",
                    DIM.paint(&style::clip(&displayable(line), room))
                )
            })
            .collect()
    }
}

/// A line of the block's output as one row can show it: from its last carriage return,
/// control characters escaped, tabs as spaces (to the next stop of 8 columns).
fn displayable(line: &str) -> String {
    use unicode_width::UnicodeWidthChar;
    let line = line.strip_suffix('\r').unwrap_or(line);
    let line = line.rsplit('\r').next().unwrap_or(line);
    let escaped = escape_controls(line);
    if !escaped.contains('\t') {
        return escaped.into_owned();
    }
    let mut out = String::with_capacity(escaped.len() + 8);
    let mut column = 0;
    for c in escaped.chars() {
        if c == '\t' {
            let spaces = 8 - column % 8;
            out.push_str(&" ".repeat(spaces));
            column += spaces;
        } else {
            out.push(c);
            column += c.width().unwrap_or(0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::style::strip;
    use super::*;

    fn tail(chunks: &[&str]) -> BlockTail {
        let mut t = BlockTail::default();
        for c in chunks {
            t.push(c, 0);
        }
        t
    }

    fn shown(t: &BlockTail, width: usize, height: usize) -> String {
        t.rows(width, height)
            .iter()
            .map(|r| strip(r))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_last_lines_show_clipped_and_escaped() {
        let t = tail(&["one\ntwo\nthr", "ee\nfour\nfive\nsix\nsev"]);
        assert_eq!(
            shown(&t, 40, 40),
            "    three\n    four\n    five\n    six\n    sev"
        );
        let t = tail(&["\u{1b}]0;pwned\u{7}\u{1b}[2J\ttab\n", &"x".repeat(100)]);
        let drawn = shown(&t, 30, 40);
        assert!(!drawn.contains('\u{1b}'), "{drawn:?}");
        assert!(drawn.contains("\\x1b]0;pwned\\x07\\x1b[2J"), "{drawn:?}");
        assert!(!drawn.contains('\t'));
        for row in drawn.lines() {
            assert!(style::width(row) < 30, "{row:?} is too wide");
        }
    }

    #[test]
    fn a_progress_bar_shows_its_latest_state() {
        let t = tail(&["10%\r20%\r", "30%", "\r40%\r\ndone\r\n", "50%\r"]);
        assert_eq!(shown(&t, 80, 40), "    40%\n    done\n    50%");
        // A line without an end is bounded; a carriage return starts it over.
        let mut t = BlockTail::default();
        t.push(&"y".repeat(100_000), 0);
        assert!(t.partial.len() <= HELD_BYTES);
        t.push("\rfresh", 0);
        assert_eq!(t.partial, "fresh");
        // Skipped bytes end the line in progress.
        t.push("new line\n", 42);
        assert_eq!(t.lines.back().unwrap(), "new line");
    }

    #[test]
    fn a_small_screen_keeps_its_rows_for_what_is_above() {
        let t = tail(&["1\n2\n3\n4\n5\n6\n"]);
        assert_eq!(shown(&t, 80, 5), "    5\n    6");
    }
}
