//! Syntax highlighting of code (blocks the model runs, fenced code in answers) with
//! tree-sitter: Python, plus Rust and JavaScript whose grammars the catalog already links.
//!
//! A configuration (the compiled highlight query) is built once per language on first use.
//! Each source span is escaped ([`Span::new`]) before it is painted, so code that holds
//! terminal escapes shows them as text.

use std::sync::OnceLock;

use crossterm::style::Color;
use tree_sitter_highlight::{HighlightConfiguration, HighlightEvent, Highlighter};

use super::style::{Style, DIM};
use super::wrap::{paint, push, Line, Span};

/// The capture names we color (tree-sitter picks the longest matching prefix).
const NAMES: &[&str] = &[
    "comment",
    "keyword",
    "string",
    "escape",
    "number",
    "constant",
    "constant.builtin",
    "boolean",
    "function",
    "function.builtin",
    "function.method",
    "function.macro",
    "type",
    "type.builtin",
    "constructor",
    "attribute",
    "label",
    "variable.builtin",
    "embedded",
];

fn style_of(name: &str) -> Style {
    match name {
        "comment" => DIM.italic(),
        "keyword" => Style::fg(Color::Magenta),
        "string" => Style::fg(Color::Green),
        "escape" => Style::fg(Color::Cyan),
        "number" | "constant" | "constant.builtin" | "boolean" => Style::fg(Color::Yellow),
        "function" | "function.method" | "function.macro" => Style::fg(Color::Blue),
        "function.builtin" => Style::fg(Color::Cyan),
        "type" | "type.builtin" | "constructor" => Style::fg(Color::Cyan),
        "attribute" | "label" => Style::fg(Color::Yellow),
        "variable.builtin" => Style::fg(Color::Red),
        _ => Style::PLAIN,
    }
}

#[derive(Clone, Copy)]
enum Lang {
    Python,
    Rust,
    JavaScript,
}

impl Lang {
    fn from_name(name: &str) -> Option<Lang> {
        match name.trim().to_ascii_lowercase().as_str() {
            "python" | "py" | "python3" | "py3" | "pycon" => Some(Lang::Python),
            "rust" | "rs" => Some(Lang::Rust),
            "javascript" | "js" | "jsx" | "mjs" | "node" => Some(Lang::JavaScript),
            _ => None,
        }
    }

    fn config(self) -> Option<&'static HighlightConfiguration> {
        static PYTHON: OnceLock<Option<HighlightConfiguration>> = OnceLock::new();
        static RUST: OnceLock<Option<HighlightConfiguration>> = OnceLock::new();
        static JAVASCRIPT: OnceLock<Option<HighlightConfiguration>> = OnceLock::new();
        let (cell, language, name, query) = match self {
            Lang::Python => (
                &PYTHON,
                tree_sitter_python::LANGUAGE,
                "python",
                tree_sitter_python::HIGHLIGHTS_QUERY,
            ),
            Lang::Rust => (
                &RUST,
                tree_sitter_rust::LANGUAGE,
                "rust",
                tree_sitter_rust::HIGHLIGHTS_QUERY,
            ),
            Lang::JavaScript => (
                &JAVASCRIPT,
                tree_sitter_javascript::LANGUAGE,
                "javascript",
                tree_sitter_javascript::HIGHLIGHT_QUERY,
            ),
        };
        cell.get_or_init(|| {
            // A query that does not compile only costs the colors.
            let mut config =
                HighlightConfiguration::new(language.into(), name, query, "", "").ok()?;
            config.configure(NAMES);
            Some(config)
        })
        .as_ref()
    }
}

/// `code` as painted lines (no trailing newlines); plain when `lang` is unknown.
pub fn highlight(code: &str, lang: &str) -> Vec<String> {
    highlight_spans(code, lang)
        .iter()
        .map(|line| paint(line))
        .collect()
}

/// `code` as lines of styled spans (escaped, tabs as four spaces); plain when `lang` is
/// unknown.
pub fn highlight_spans(code: &str, lang: &str) -> Vec<Line> {
    let code = code.strip_suffix('\n').unwrap_or(code);
    let Some(config) = Lang::from_name(lang).and_then(Lang::config) else {
        return plain(code);
    };
    painted(code, config).unwrap_or_else(|| plain(code))
}

fn plain(code: &str) -> Vec<Line> {
    code.split('\n')
        .map(|line| piece(Style::PLAIN, line.strip_suffix('\r').unwrap_or(line)))
        .collect()
}

/// One piece of a line as a span (none when empty).
fn piece(style: Style, text: &str) -> Line {
    if text.is_empty() {
        Line::new()
    } else {
        vec![Span::new(style, text, TAB)]
    }
}

/// Spaces a tab in code becomes.
const TAB: usize = 4;

fn painted(code: &str, config: &HighlightConfiguration) -> Option<Vec<Line>> {
    let styles: Vec<Style> = NAMES.iter().map(|n| style_of(n)).collect();
    let mut highlighter = Highlighter::new();
    let events = highlighter
        .highlight(config, code.as_bytes(), None, |_| None)
        .ok()?;
    let mut lines = vec![Line::new()];
    let mut stack: Vec<Style> = Vec::new();
    for event in events {
        match event.ok()? {
            HighlightEvent::Source { start, end } => {
                let bytes = code.as_bytes().get(start..end)?;
                let text = String::from_utf8_lossy(bytes);
                let style = stack.last().copied().unwrap_or(Style::PLAIN);
                for (i, part) in text.split('\n').enumerate() {
                    if i > 0 {
                        lines.push(Line::new());
                    }
                    let part = part.strip_suffix('\r').unwrap_or(part);
                    if let (Some(line), false) = (lines.last_mut(), part.is_empty()) {
                        let span = Span::new(style, part, TAB);
                        push(line, span.style, &span.text);
                    }
                }
            }
            HighlightEvent::HighlightStart(h) => {
                stack.push(styles.get(h.0).copied().unwrap_or(Style::PLAIN))
            }
            HighlightEvent::HighlightEnd => {
                stack.pop();
            }
        }
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::super::style::strip;
    use super::*;

    #[test]
    fn python_is_colored_and_keeps_its_text() {
        let code = "def square(n):\n    # why\n    return n * 2  # 'x'\nprint(\"hi\")\n";
        let lines = highlight(code, "python");
        assert_eq!(lines.len(), 4);
        assert!(lines[0].contains('\u{1b}'), "{:?}", lines[0]);
        let text: Vec<String> = lines.iter().map(|l| strip(l)).collect();
        assert_eq!(text.join("\n") + "\n", code);
    }

    #[test]
    fn escapes_in_code_are_shown_not_sent() {
        for lang in ["python", "text"] {
            let lines = highlight("print('\u{1b}]0;pwned\u{7}')\r\nx = 1", lang);
            let all = lines.join("\n");
            assert!(!strip(&all).contains('\u{1b}'), "{all:?}");
            assert!(strip(&all).contains("\\x1b]0;pwned\\x07"), "{all:?}");
            assert!(!strip(&all).contains("\\x0d"), "{all:?}");
        }
    }

    #[test]
    fn other_languages() {
        assert!(highlight("fn main() {}", "rust")[0].contains('\u{1b}'));
        assert!(highlight("const x = 1;", "js")[0].contains('\u{1b}'));
        assert_eq!(highlight("a b", "text"), vec!["a b".to_string()]);
    }
}
