//! The bottom of the screen while a turn runs: the spinner line and, while a block runs, the
//! last [`LIVE_LINES`] lines of its output under it (the live region), redrawn in place.
//!
//! The renderer erases the region before it writes anything above it and draws it again after,
//! so the scrollback never holds it: when the block ends the region goes, and the block's usual
//! view (status and collapsed output) is printed in its place. It is redrawn with the spinner's
//! frames (ten a second at most) and never on its own, so output arriving in bursts costs no
//! extra redraws.
//!
//! The text is the block's, untrusted: each line is cut at its last carriage return (what a
//! terminal would show of a progress bar), tabs become spaces, control characters are escaped,
//! and it is clipped to the width, so every line takes exactly one row. What is kept is
//! bounded: the last lines and the start of the line in progress.
//!
//! Resizes: the rows drawn are remembered with their widths; after the terminal narrowed, each
//! one is counted as the rows it now wraps to (terminals that reflow, tmux among them), so the
//! erase goes back to the region's first row.

use std::collections::VecDeque;

use super::style::{self, DIM};
use crate::cli::term::escape_controls;

/// Output lines shown under the spinner while a block runs.
pub const LIVE_LINES: usize = 5;

/// The most kept of the line in progress (its start is shown; a carriage return starts it over).
const HELD_BYTES: usize = 4096;

/// The indent of the live lines (as the block's output is indented in its final view).
const INDENT: &str = "    ";

/// The live region and what of it is on the screen.
#[derive(Default)]
pub struct LiveRegion {
    /// The last complete lines of the running block's output (raw).
    lines: VecDeque<String>,
    /// The start of its incomplete last line (raw).
    partial: String,
    /// The display width of each row on the screen (the spinner's first); empty when none is.
    drawn: Vec<usize>,
}

impl LiveRegion {
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

    /// The live lines as shown: the last complete ones and the one in progress, the newest
    /// `max` of them, each escaped and clipped to `width` columns.
    fn shown(&self, max: usize, width: usize) -> Vec<String> {
        let room = width.saturating_sub(INDENT.len() + 1);
        let partial = (!self.partial.is_empty()).then_some(&self.partial);
        let all: Vec<&String> = self.lines.iter().chain(partial).collect();
        let skip = all.len().saturating_sub(max);
        all[skip..]
            .iter()
            .map(|line| style::clip(&displayable(line), room))
            .collect()
    }

    /// Erases what is on the screen (the cursor is at the end of its last row), for a
    /// terminal now `width` columns wide.
    pub fn erase(&mut self, width: usize) -> String {
        if self.drawn.is_empty() {
            return String::new();
        }
        let width = width.max(1);
        let rows: usize = self.drawn.iter().map(|&w| w.div_ceil(width).max(1)).sum();
        self.drawn.clear();
        if rows > 1 {
            format!("\r\x1b[{}A\x1b[J", rows - 1)
        } else {
            "\r\x1b[J".to_string()
        }
    }

    /// Draws `spinner` (one line, already fitted to the width) and the live lines under it,
    /// for a terminal of `width` columns and `height` rows; the cursor ends on the last row.
    pub fn draw(&mut self, spinner: String, width: usize, height: usize) -> String {
        // A few rows stay for what is above, so the region never scrolls itself off a small
        // screen (where it could not be erased).
        let max = LIVE_LINES.min(height.saturating_sub(3));
        let mut out = spinner;
        self.drawn = vec![style::width(&out)];
        for line in self.shown(max, width) {
            self.drawn.push(INDENT.len() + style::width(&line));
            out.push('\n');
            out.push_str(INDENT);
            out.push_str(&DIM.paint(&line));
        }
        out
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

/// The terminal's rows (24 when it cannot be asked).
pub fn term_height() -> usize {
    crossterm::terminal::size()
        .map(|(_, h)| h as usize)
        .unwrap_or(24)
}

#[cfg(test)]
mod tests {
    use super::super::style::strip;
    use super::*;

    fn region(chunks: &[&str]) -> LiveRegion {
        let mut r = LiveRegion::default();
        for c in chunks {
            r.push(c, 0);
        }
        r
    }

    #[test]
    fn the_last_lines_show_under_the_spinner_clipped_and_escaped() {
        let mut r = region(&["one\ntwo\nthr", "ee\nfour\nfive\nsix\nsev"]);
        let drawn = strip(&r.draw("⠋ running".into(), 40, 40));
        assert_eq!(
            drawn,
            "⠋ running\n    three\n    four\n    five\n    six\n    sev"
        );
        let mut r = region(&["\u{1b}]0;pwned\u{7}\u{1b}[2J\ttab\n", &"x".repeat(100)]);
        let drawn = strip(&r.draw("s".into(), 30, 40));
        assert!(!drawn.contains('\u{1b}'), "{drawn:?}");
        assert!(drawn.contains("\\x1b]0;pwned\\x07\\x1b[2J"), "{drawn:?}");
        assert!(!drawn.contains('\t'));
        for row in drawn.lines() {
            assert!(style::width(row) < 30, "{row:?} is too wide");
        }
    }

    #[test]
    fn a_progress_bar_shows_its_latest_state() {
        let mut r = region(&["10%\r20%\r", "30%", "\r40%\r\ndone\r\n", "50%\r"]);
        let drawn = strip(&r.draw("s".into(), 80, 40));
        assert_eq!(drawn, "s\n    40%\n    done\n    50%");
        // A line without an end is bounded; a carriage return starts it over.
        let mut r = LiveRegion::default();
        r.push(&"y".repeat(100_000), 0);
        assert!(r.partial.len() <= HELD_BYTES);
        r.push("\rfresh", 0);
        assert_eq!(r.partial, "fresh");
        // Skipped bytes end the line in progress.
        r.push("new line\n", 42);
        assert_eq!(r.lines.back().unwrap(), "new line");
    }

    #[test]
    fn erasing_goes_back_over_every_row_drawn_even_after_a_narrowing() {
        let mut r = region(&["a\nb\n"]);
        assert_eq!(r.erase(80), "", "nothing drawn yet");
        r.draw("spin".into(), 80, 40);
        assert_eq!(r.erase(80), "\r\x1b[2A\x1b[J");
        assert_eq!(r.erase(80), "", "erased once");
        // Rows 70 columns wide wrap to 3 rows each on a 30-column terminal.
        let mut r = region(&[&format!("{}\n", "w".repeat(66))]);
        r.draw("z".repeat(70), 80, 40);
        assert_eq!(r.erase(30), "\r\x1b[5A\x1b[J");
        // Only the spinner: one row.
        let mut r = LiveRegion::default();
        r.draw("spin".into(), 80, 40);
        assert_eq!(r.erase(80), "\r\x1b[J");
        // A small screen keeps its rows for what is above.
        let mut r = region(&["1\n2\n3\n4\n5\n6\n"]);
        let drawn = r.draw("s".into(), 80, 5);
        assert_eq!(strip(&drawn), "s\n    5\n    6");
    }
}
