//! Streamed text cut into complete lines, in time linear in its length however the deltas
//! split it: only a delta is searched for newlines (the text held before it has none), and
//! the preview of the incomplete line reads its end only.

/// The incomplete last line of a stream, and the complete lines as they arrive.
#[derive(Default)]
pub struct LineBuffer {
    /// Text after the last newline seen.
    pending: String,
    /// `pending` has more than white space (kept as it grows, not searched again).
    visible: bool,
}

impl LineBuffer {
    /// Adds `delta`; returns the lines it completed, each with its `\n` ("" when none).
    pub fn push(&mut self, delta: &str) -> String {
        match delta.rfind('\n') {
            None => {
                self.pending.push_str(delta);
                self.visible |= !delta.trim().is_empty();
                String::new()
            }
            Some(end) => {
                let mut lines = std::mem::take(&mut self.pending);
                lines.push_str(&delta[..=end]);
                self.pending.push_str(&delta[end + 1..]);
                self.visible = !self.pending.trim().is_empty();
                lines
            }
        }
    }

    /// The incomplete line, taken (the stream ended).
    pub fn take(&mut self) -> String {
        self.visible = false;
        std::mem::take(&mut self.pending)
    }

    /// The incomplete line has nothing but white space.
    pub fn is_blank(&self) -> bool {
        !self.visible
    }

    pub fn clear(&mut self) {
        self.take();
    }

    /// The end of the incomplete line, at most `chars` characters, trimmed; with a leading
    /// `…` when it was cut. Reads only that end, so a spinner can show it on every frame.
    pub fn tail(&self, chars: usize) -> String {
        let start = match self.pending.char_indices().rev().nth(chars) {
            Some((at, c)) => at + c.len_utf8(),
            None => 0,
        };
        let tail = self.pending[start..].trim_end();
        if start == 0 {
            tail.trim_start().to_string()
        } else {
            format!("…{tail}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_out_whole_however_the_text_is_split() {
        let text = "one\ntwo\r\n\nthree and a half";
        for step in [1, 2, 3, 5, 100] {
            let mut buf = LineBuffer::default();
            let mut lines = String::new();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(step) {
                lines.push_str(&buf.push(&chunk.iter().collect::<String>()));
            }
            assert_eq!(lines, "one\ntwo\r\n\n", "step {step}");
            assert_eq!(buf.tail(100), "three and a half");
            assert_eq!(buf.tail(4), "…half");
            assert!(!buf.is_blank());
            assert_eq!(buf.take(), "three and a half");
            assert!(buf.is_blank());
            buf.push("  \t");
            assert!(buf.is_blank());
        }
    }

    #[test]
    fn a_megabyte_line_in_small_deltas_is_linear() {
        // Before: every delta searched the whole held line again, and every spinner frame
        // escaped all of it (8.5 s for a megabyte in 1,000-byte deltas; minutes in deltas of
        // 16 bytes, the size models send).
        let lines = crate::cli::chat::ui::finishes(|| {
            let delta = "`".repeat(16);
            let mut buf = LineBuffer::default();
            for n in 1..=64 * 1024 {
                assert_eq!(buf.push(&delta), "");
                let shown = buf.tail(80).chars().count();
                assert_eq!(shown, if n * 16 > 80 { 81 } else { n * 16 });
            }
            buf.push("\n".repeat(100_000).as_str())
        });
        assert_eq!(lines.len(), 1024 * 1024 + 100_000);
    }
}
