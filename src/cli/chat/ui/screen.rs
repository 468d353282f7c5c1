//! The bottom of the terminal while a turn runs: output committed above (it scrolls into the
//! scrollback and is never touched again), then a **live region** of rows that may still
//! change, then the spinner line. [`Screen::frame`] turns "commit this, show these live rows
//! and this spinner" into the bytes that bring the terminal there from what it shows, redrawing
//! only from the first row that changed.
//!
//! The live region is redrawn by moving the cursor up over it (`CSI n A`) and clearing to the
//! end of the screen (`CSI J`), so each live row must fit in one terminal row (callers wrap them
//! to the width less one) and the region must fit on the screen ([`fit`]). Rows committed
//! that are already drawn as the first live rows are kept where they are: a settled block does
//! not flicker.
//!
//! Resizes: the width each row took when drawn is remembered; after the terminal narrowed, a
//! row wider than the new width is counted as the rows it now wraps to (terminals that reflow,
//! tmux among them) and the whole region is redrawn, so no copy of it is left behind.
//!
//! Who uses it: the answer's Markdown (`stream.rs`) puts the block still being written in the
//! live region; anything else that shows a bounded, changing view while a turn runs (the tail
//! of a running block's output) can own the region the same way, through the view's
//! `set_live` in `render.rs`.

use super::style::{self, DIM};

#[derive(Default)]
pub struct Screen {
    /// The live rows on the terminal now, each followed by a newline.
    drawn: Vec<String>,
    /// The display width of each drawn row, and of the spinner line drawn after them (the
    /// cursor at its end) if one is.
    widths: Vec<usize>,
    spinner: Option<usize>,
}

impl Screen {
    /// The bytes that write `commit` (complete lines, `""` for none) above the live region,
    /// then show `live` and `spinner` (no newline after it) at the bottom, on a terminal whose
    /// rows never wrap.
    #[cfg(test)]
    pub fn frame(&mut self, commit: &str, live: &[String], spinner: Option<&str>) -> String {
        self.frame_at(usize::MAX, commit, live, spinner)
    }

    /// [`frame`](Screen::frame) on a terminal now `columns` wide (it may have narrowed since
    /// the last frame).
    pub fn frame_at(
        &mut self,
        columns: usize,
        commit: &str,
        live: &[String],
        spinner: Option<&str>,
    ) -> String {
        let columns = columns.max(1);
        let rows_of = |width: usize| width.div_ceil(columns).max(1);
        let reflowed = self
            .widths
            .iter()
            .chain(&self.spinner)
            .any(|&w| rows_of(w) > 1);
        let committed: Vec<&str> = commit.split_terminator('\n').collect();
        // Committed rows drawn already as the first live rows stay where they are (unless a
        // narrowing reflowed them: then everything is drawn again).
        let kept = if reflowed {
            0
        } else {
            committed
                .iter()
                .zip(&self.drawn)
                .take_while(|(c, d)| *c == d)
                .count()
        };
        self.drawn.drain(..kept);
        self.widths.drain(..kept);
        let rest = &committed[kept..];
        let first_change = if rest.is_empty() && !reflowed {
            self.drawn
                .iter()
                .zip(live)
                .take_while(|(drawn, new)| drawn == new)
                .count()
        } else {
            0
        };
        // Terminal rows to go up: those of the changed live rows, and the spinner's own wrapped
        // rows above the cursor.
        let up: usize = self.widths[first_change..]
            .iter()
            .map(|&w| rows_of(w))
            .sum::<usize>()
            + self.spinner.map_or(0, |w| rows_of(w) - 1);
        let unchanged = rest.is_empty() && up == 0 && first_change == live.len();
        let mut out = String::new();
        if !(unchanged && self.spinner.is_none() && spinner.is_none()) {
            out.push('\r');
            if up > 0 {
                out.push_str(&format!("\x1b[{up}A"));
            }
            if up > 0 || self.spinner.is_some() {
                out.push_str("\x1b[J");
            }
        }
        for row in rest {
            out.push_str(row);
            out.push('\n');
        }
        for row in &live[first_change..] {
            out.push_str(row);
            out.push('\n');
        }
        if let Some(spinner) = spinner {
            out.push_str(spinner);
        }
        self.drawn = live.to_vec();
        self.widths = live.iter().map(|row| style::width(row)).collect();
        self.spinner = spinner.map(style::width);
        out
    }
}

/// `rows` cut to their last `height` rows, the first of them saying how many are above (they
/// are drawn when they settle). Copies only the rows shown: a frame costs the screen's height,
/// not the region's.
pub fn fit(rows: &[String], height: usize) -> Vec<String> {
    fit_with(rows, height, String::clone)
}

/// [`fit`] for rows that `paint` turns into text: only the rows shown are painted.
pub fn fit_with<T>(rows: &[T], height: usize, paint: impl Fn(&T) -> String) -> Vec<String> {
    let height = height.max(2);
    let hidden = if rows.len() <= height {
        0
    } else {
        rows.len() - (height - 1)
    };
    let mut out = Vec::with_capacity(height);
    if hidden > 0 {
        out.push(DIM.paint(&format!(
            "  ⋮ {hidden} more rows above, drawn when complete"
        )));
    }
    out.extend(rows[hidden..].iter().map(paint));
    out
}

/// A terminal as far as [`Screen`] drives it, for tests: rows of text, the cursor, and the
/// sequences the chat writes (carriage return, newline, cursor up, erase below and in line;
/// colors are dropped).
#[cfg(test)]
pub mod term {
    #[derive(Default)]
    pub struct Terminal {
        pub rows: Vec<String>,
        row: usize,
        column: usize,
    }

    impl Terminal {
        pub fn write(&mut self, bytes: &str) {
            let mut chars = bytes.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '\r' => self.column = 0,
                    '\n' => {
                        self.row += 1;
                        self.column = 0;
                    }
                    '\u{1b}' => {
                        assert_eq!(chars.next(), Some('['), "only CSI sequences");
                        let mut arg = String::new();
                        let end = loop {
                            match chars.next() {
                                Some(c) if c.is_ascii_digit() || c == ';' => arg.push(c),
                                Some(c) => break c,
                                None => panic!("a cut sequence"),
                            }
                        };
                        let n: usize = arg.parse().unwrap_or(1);
                        match end {
                            'A' => self.row = self.row.saturating_sub(n),
                            'J' => {
                                let column = self.column;
                                self.line().truncate(column);
                                self.rows.truncate(self.row + 1);
                            }
                            'K' => {
                                let column = self.column;
                                self.line().truncate(column);
                            }
                            'm' => {}
                            other => panic!("unexpected sequence {arg}{other}"),
                        }
                    }
                    c => {
                        let column = self.column;
                        let line = self.line();
                        let mut cells: Vec<char> = line.chars().collect();
                        while cells.len() < column {
                            cells.push(' ');
                        }
                        if column < cells.len() {
                            cells[column] = c;
                        } else {
                            cells.push(c);
                        }
                        *line = cells.into_iter().collect();
                        self.column += 1;
                    }
                }
            }
        }

        fn line(&mut self) -> &mut String {
            while self.rows.len() <= self.row {
                self.rows.push(String::new());
            }
            &mut self.rows[self.row]
        }

        /// Everything written, rows trimmed, without the empty row the cursor may be on.
        pub fn text(&self) -> String {
            let mut rows: Vec<&str> = self.rows.iter().map(|r| r.trim_end()).collect();
            while rows.last() == Some(&"") {
                rows.pop();
            }
            rows.iter().map(|r| format!("{r}\n")).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::term::Terminal;
    use super::*;

    fn rows(rows: &[&str]) -> Vec<String> {
        rows.iter().map(|r| r.to_string()).collect()
    }

    #[test]
    fn the_live_region_is_redrawn_from_its_first_change() {
        let mut screen = Screen::default();
        let mut term = Terminal::default();
        term.write(&screen.frame("before\n", &rows(&["a", "b"]), Some("⠋ thinking")));
        assert_eq!(term.text(), "before\na\nb\n⠋ thinking\n");
        // Only the second row changed: the first is not written again.
        let bytes = screen.frame("", &rows(&["a", "b2", "c"]), Some("⠙ thinking"));
        assert_eq!(bytes, "\r\x1b[1A\x1b[Jb2\nc\n⠙ thinking");
        term.write(&bytes);
        assert_eq!(term.text(), "before\na\nb2\nc\n⠙ thinking\n");
        // A tick: the spinner line alone.
        let bytes = screen.frame("", &rows(&["a", "b2", "c"]), Some("⠹ thinking"));
        assert_eq!(bytes, "\r\x1b[J⠹ thinking");
        term.write(&bytes);
        // The first rows settle as drawn: nothing is rewritten above the change.
        let bytes = screen.frame("a\nb2\n", &rows(&["c", "d"]), Some("⠸ thinking"));
        assert_eq!(bytes, "\r\x1b[Jd\n⠸ thinking");
        term.write(&bytes);
        assert_eq!(term.text(), "before\na\nb2\nc\nd\n⠸ thinking\n");
        // Settled rows that differ from the live ones replace them, from the first that
        // differs.
        let bytes = screen.frame("c\nd!\n", &[], None);
        assert_eq!(bytes, "\r\x1b[1A\x1b[Jd!\n");
        term.write(&bytes);
        assert_eq!(term.text(), "before\na\nb2\nc\nd!\n");
        assert!(screen.drawn.is_empty());
        assert_eq!(screen.frame("", &[], None), "");
        term.write(&screen.frame("after\n", &[], None));
        assert_eq!(term.text(), "before\na\nb2\nc\nd!\nafter\n");
    }

    #[test]
    fn after_a_narrowing_the_whole_region_is_erased_as_the_terminal_rewrapped_it() {
        let mut screen = Screen::default();
        let wide = "w".repeat(70);
        screen.frame_at(80, "", &rows(&[&wide, "b"]), Some("⠋ running"));
        // Unchanged width: only the spinner is redrawn.
        let bytes = screen.frame_at(80, "", &rows(&[&wide, "b"]), Some("⠙ running"));
        assert_eq!(bytes, "\r\x1b[J⠙ running");
        // At 30 columns the 70-column row takes 3 rows: 3 + 1 rows above the spinner's, and
        // every row is drawn again.
        let bytes = screen.frame_at(30, "", &rows(&["w…", "b"]), Some("⠹ running"));
        assert_eq!(bytes, "\r\x1b[4A\x1b[Jw…\nb\n⠹ running");
        // A spinner that wraps counts its own rows above the cursor.
        let mut screen = Screen::default();
        screen.frame_at(80, "", &[], Some(&"s".repeat(50)));
        assert_eq!(screen.frame_at(20, "", &[], None), "\r\x1b[2A\x1b[J");
    }

    #[test]
    fn a_tall_region_shows_its_last_rows() {
        let all: Vec<String> = (1..=10).map(|i| format!("row {i}")).collect();
        let fitted = fit(&all, 4);
        assert_eq!(fitted.len(), 4);
        assert!(fitted[0].contains("7 more rows above"), "{fitted:?}");
        assert_eq!(&fitted[1..], ["row 8", "row 9", "row 10"]);
    }
}
