//! The styling `vis chat` adds itself: a small style value painted with crossterm's SGR
//! sequences. [`Style::paint`] escapes what it paints (`term::escape_controls`, which changes
//! nothing in text escaped already), so the only escape sequences on the screen are the ones
//! made here.

use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::style::{Attribute, Attributes, Color, ContentStyle};

use crate::cli::term::escape_controls;

/// Colors are on unless `NO_COLOR` is set (<https://no-color.org>).
static COLOR: AtomicBool = AtomicBool::new(true);

pub fn set_color(on: bool) {
    COLOR.store(on, Ordering::Relaxed);
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    fg: Option<Color>,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    strike: bool,
}

impl Style {
    pub const PLAIN: Style = Style {
        fg: None,
        bold: false,
        dim: false,
        italic: false,
        underline: false,
        strike: false,
    };

    pub const fn fg(color: Color) -> Style {
        Style {
            fg: Some(color),
            ..Style::PLAIN
        }
    }

    pub const fn bold(mut self) -> Style {
        self.bold = true;
        self
    }

    pub const fn dim(mut self) -> Style {
        self.dim = true;
        self
    }

    pub const fn italic(mut self) -> Style {
        self.italic = true;
        self
    }

    pub const fn underline(mut self) -> Style {
        self.underline = true;
        self
    }

    pub const fn strike(mut self) -> Style {
        self.strike = true;
        self
    }

    /// `self` with `other` on top (its color wins, attributes add up).
    pub fn merge(self, other: Style) -> Style {
        Style {
            fg: other.fg.or(self.fg),
            bold: self.bold || other.bold,
            dim: self.dim || other.dim,
            italic: self.italic || other.italic,
            underline: self.underline || other.underline,
            strike: self.strike || other.strike,
        }
    }

    /// `text`, escaped, wrapped in this style's SGR sequences and a reset.
    pub fn paint(self, text: &str) -> String {
        let text = escape_controls(text);
        if text.is_empty() || self == Style::PLAIN || !COLOR.load(Ordering::Relaxed) {
            return text.into_owned();
        }
        let mut attributes = Attributes::default();
        for (on, attribute) in [
            (self.bold, Attribute::Bold),
            (self.dim, Attribute::Dim),
            (self.italic, Attribute::Italic),
            (self.underline, Attribute::Underlined),
            (self.strike, Attribute::CrossedOut),
        ] {
            if on {
                attributes.set(attribute);
            }
        }
        let style = ContentStyle {
            foreground_color: self.fg,
            background_color: None,
            underline_color: None,
            attributes,
        };
        style.apply(text).to_string()
    }
}

pub const DIM: Style = Style::PLAIN.dim();
pub const ACCENT: Style = Style::fg(Color::Cyan);
pub const GOOD: Style = Style::fg(Color::Green);
pub const WARN: Style = Style::fg(Color::Yellow);
pub const BAD: Style = Style::fg(Color::Red);

/// `text` without the SGR sequences this module adds (for widths and tests).
pub fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Display columns of `text` (styles not counted).
pub fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(strip(text).as_str())
}

/// Plain `text` cut to `max` display columns, ending in `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    if unicode_width::UnicodeWidthStr::width(text) <= max {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// Plain `text` cut from the left to its last `max` display columns, starting with `…`.
pub fn clip_left(text: &str, max: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    if unicode_width::UnicodeWidthStr::width(text) <= max {
        return text.to_string();
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        kept.push(c);
    }
    let mut out = String::from("…");
    out.extend(kept.into_iter().rev());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn painting_round_trips_through_strip() {
        let s = Style::fg(Color::Blue).bold().paint("héllo");
        assert!(s.contains('\u{1b}'));
        assert_eq!(strip(&s), "héllo");
        assert_eq!(width(&s), 5);
        assert_eq!(Style::PLAIN.paint("x"), "x");
        let painted = Style::fg(Color::Red).paint("\u{1b}]0;title\u{7}\u{202e}");
        assert_eq!(strip(&painted), "\\x1b]0;title\\x07\\u{202e}");
    }

    #[test]
    fn clipping_counts_columns() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
        assert_eq!(clip_left("abcdef", 4), "…def");
        assert_eq!(clip("日本語です", 5), "日本…");
    }
}
