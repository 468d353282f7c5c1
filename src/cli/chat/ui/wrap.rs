//! Styled text laid out in terminal columns: spans of one style, their widths in display
//! columns (wide CJK characters count two, combining marks none), and the two ways a line is
//! cut to a width: word wrapping for prose (at spaces; a word longer than the width is cut
//! where the width ends) and hard wrapping for code (cut at the width, never re-flowed).
//!
//! A span's text is escaped when it is made ([`Span::new`]), so what is measured is what the
//! terminal shows (`\x1b` is four columns), and tabs are spaces: a tab's width depends on the
//! column, which a wrapped line cannot know.

use unicode_width::UnicodeWidthChar;

use super::style::Style;
use crate::cli::term::escape_controls;

/// Text in one style: escaped, without newlines or tabs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub style: Style,
    pub text: String,
}

impl Span {
    /// `text` escaped, newlines and tabs as spaces (a tab as `tab` spaces).
    pub fn new(style: Style, text: &str, tab: usize) -> Span {
        let text = escape_controls(text);
        let text = if text.contains(['\t', '\n', '\r']) {
            text.replace('\t', &" ".repeat(tab))
                .replace(['\n', '\r'], " ")
        } else {
            text.into_owned()
        };
        Span { style, text }
    }
}

/// One row on the screen.
pub type Line = Vec<Span>;

/// Display columns of one character (controls, which spans never hold, count none).
pub fn char_width(c: char) -> usize {
    c.width().unwrap_or(0)
}

pub fn text_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

pub fn line_width(line: &[Span]) -> usize {
    line.iter().map(|s| text_width(&s.text)).sum()
}

/// A line as the terminal gets it: each span painted in its style.
pub fn paint(line: &[Span]) -> String {
    line.iter().map(|s| s.style.paint(&s.text)).collect()
}

/// Appends `text` in `style` to `line`, merging with the last span when the style is the same.
pub fn push(line: &mut Line, style: Style, text: &str) {
    if text.is_empty() {
        return;
    }
    match line.last_mut() {
        Some(last) if last.style == style => last.text.push_str(text),
        _ => line.push(Span {
            style,
            text: text.to_string(),
        }),
    }
}

/// Appends one character (see [`push`]).
fn push_char(line: &mut Line, style: Style, c: char) {
    match line.last_mut() {
        Some(last) if last.style == style => last.text.push(c),
        _ => line.push(Span {
            style,
            text: c.to_string(),
        }),
    }
}

/// Word-wraps `spans` to rows of at most `width` columns: rows break at spaces (the spaces at
/// a break are dropped), a word wider than a row is cut where the row ends, and a
/// [`Piece::Break`] (a hard line break) ends its row. Linear in the text.
pub fn wrap(paragraph: &[Piece], width: usize) -> Vec<Line> {
    let width = width.max(1);
    let mut rows = Vec::new();
    let mut layout = Layout {
        width,
        row: Line::new(),
        column: 0,
        rows: &mut rows,
    };
    let mut word = Line::new();
    let mut word_width = 0;
    let mut space = Line::new();
    let mut space_width = 0;
    for piece in paragraph {
        match piece {
            Piece::Break => {
                layout.place(&mut space, &mut space_width, &mut word, &mut word_width);
                space.clear();
                space_width = 0;
                layout.end_row();
            }
            Piece::Text(span) => {
                for c in span.text.chars() {
                    if c == ' ' {
                        if !word.is_empty() {
                            layout.place(&mut space, &mut space_width, &mut word, &mut word_width);
                        }
                        push_char(&mut space, span.style, ' ');
                        space_width += 1;
                    } else {
                        push_char(&mut word, span.style, c);
                        word_width += char_width(c);
                    }
                }
            }
        }
    }
    layout.place(&mut space, &mut space_width, &mut word, &mut word_width);
    if !layout.row.is_empty() || layout.rows.is_empty() {
        layout.end_row();
    }
    rows
}

/// What a paragraph is made of for [`wrap`]: text, and hard line breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(Span),
    Break,
}

struct Layout<'a> {
    width: usize,
    row: Line,
    column: usize,
    rows: &'a mut Vec<Line>,
}

impl Layout<'_> {
    fn end_row(&mut self) {
        self.rows.push(std::mem::take(&mut self.row));
        self.column = 0;
    }

    /// Places the pending spaces and the word after them; both are emptied.
    fn place(
        &mut self,
        space: &mut Line,
        space_width: &mut usize,
        word: &mut Line,
        word_width: &mut usize,
    ) {
        if word.is_empty() {
            // Spaces before a break or the end are dropped; before the next word they stay.
            return;
        }
        let room = self.width.saturating_sub(self.column + *space_width);
        if *word_width <= room {
            for s in space.drain(..).chain(word.drain(..)) {
                push(&mut self.row, s.style, &s.text);
            }
            self.column += *space_width + *word_width;
        } else if *word_width <= self.width {
            if !self.row.is_empty() {
                self.end_row();
            }
            space.clear();
            self.row = std::mem::take(word);
            self.column = *word_width;
        } else {
            // Longer than a row: it starts on this row when a fair part of it is left, and is
            // cut where each row ends.
            let mut rest = std::mem::take(word);
            if !self.row.is_empty() && room * 4 >= self.width {
                for s in space.drain(..) {
                    push(&mut self.row, s.style, &s.text);
                }
                let mut rows = hard_wrap_from(&rest, room, self.width).into_iter();
                for s in rows.next().unwrap_or_default() {
                    push(&mut self.row, s.style, &s.text);
                }
                rest = rows.flatten().collect();
            }
            space.clear();
            if !self.row.is_empty() {
                self.end_row();
            }
            let mut rows = hard_wrap(&rest, self.width).into_iter().peekable();
            while let Some(row) = rows.next() {
                if rows.peek().is_some() {
                    self.rows.push(row);
                } else {
                    self.column = line_width(&row);
                    self.row = row;
                }
            }
        }
        *space_width = 0;
        *word_width = 0;
    }
}

/// `line` cut into rows of at most `width` columns, at any character (a character wider
/// than `width` gets a row of its own). Linear in the text.
pub fn hard_wrap(line: &[Span], width: usize) -> Vec<Line> {
    hard_wrap_from(line, width, width)
}

/// [`hard_wrap`] with a first row of `first` columns.
fn hard_wrap_from(line: &[Span], first: usize, width: usize) -> Vec<Line> {
    let width = width.max(1);
    let mut rows = vec![Line::new()];
    let mut column = 0;
    let mut room = first.max(1);
    for span in line {
        for c in span.text.chars() {
            let w = char_width(c);
            if column + w > room && column > 0 {
                room = width;
                rows.push(Line::new());
                column = 0;
            }
            if let Some(row) = rows.last_mut() {
                push_char(row, span.style, c);
            }
            column += w;
        }
    }
    rows
}

/// `line` padded with spaces to `width` columns, placed by `align` (`<`, `^`, `>`).
pub fn pad(mut line: Line, width: usize, align: char) -> Line {
    let room = width.saturating_sub(line_width(&line));
    let (left, right) = match align {
        '>' => (room, 0),
        '^' => (room / 2, room - room / 2),
        _ => (0, room),
    };
    if left > 0 {
        line.insert(
            0,
            Span {
                style: Style::PLAIN,
                text: " ".repeat(left),
            },
        );
    }
    push(&mut line, Style::PLAIN, &" ".repeat(right));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Piece {
        Piece::Text(Span::new(Style::PLAIN, s, 4))
    }

    fn rows(pieces: &[Piece], width: usize) -> Vec<String> {
        wrap(pieces, width)
            .iter()
            .map(|row| row.iter().map(|s| s.text.as_str()).collect())
            .collect()
    }

    #[test]
    fn words_wrap_at_spaces_and_long_words_are_cut() {
        assert_eq!(
            rows(&[text("the quick brown fox jumps")], 10),
            ["the quick", "brown fox", "jumps"]
        );
        assert_eq!(
            rows(&[text("see https://example.com/a/long/path now")], 10),
            ["see https:", "//example.", "com/a/long", "/path now"]
        );
        assert_eq!(
            rows(&[text("one"), Piece::Break, text("two")], 10),
            ["one", "two"]
        );
        assert_eq!(rows(&[], 10), [""]);
    }

    #[test]
    fn a_word_across_styles_stays_whole() {
        let bold = Style::PLAIN.bold();
        let pieces = [
            text("aaaa "),
            Piece::Text(Span::new(bold, "bold", 4)),
            text(", x"),
        ];
        let wrapped = wrap(&pieces, 8);
        assert_eq!(wrapped.len(), 2);
        assert_eq!(
            wrapped[1],
            vec![
                Span::new(bold, "bold", 4),
                Span::new(Style::PLAIN, ", x", 4)
            ]
        );
    }

    #[test]
    fn wide_characters_count_two_columns() {
        // Six CJK characters are twelve columns: cut after four.
        assert_eq!(rows(&[text("日本語の文章")], 8), ["日本語の", "文章"]);
        assert_eq!(text_width("日本"), 4);
        let cut = hard_wrap(&[Span::new(Style::PLAIN, "ab日本", 4)], 3);
        let cut: Vec<String> = cut.iter().map(|r| r[0].text.clone()).collect();
        assert_eq!(cut, ["ab", "日", "本"]);
    }

    #[test]
    fn controls_are_escaped_and_measured_as_shown() {
        let span = Span::new(Style::PLAIN, "a\u{1b}[2J\tb", 2);
        assert_eq!(span.text, "a\\x1b[2J  b");
        assert_eq!(text_width(&span.text), 11);
    }

    #[test]
    fn padding_places_by_alignment() {
        let cell = |s: &str| vec![Span::new(Style::PLAIN, s, 4)];
        let shown = |l: Line| l.iter().map(|s| s.text.clone()).collect::<String>();
        assert_eq!(shown(pad(cell("ab"), 5, '<')), "ab   ");
        assert_eq!(shown(pad(cell("ab"), 5, '>')), "   ab");
        assert_eq!(shown(pad(cell("ab"), 5, '^')), " ab  ");
    }
}
