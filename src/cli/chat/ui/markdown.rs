//! Streaming Markdown for the terminal.
//!
//! Text arrives in deltas that split lines anywhere, so nothing is drawn until it is complete:
//! a line is rendered when its newline arrives, a fenced code block when its closing fence
//! does (then it is highlighted as a whole), a pipe table when its last row does (then its
//! columns are aligned). What is still incomplete is shown by the spinner as a preview and
//! rendered by [`MarkdownStream::finish`] at the end of the response, so the final output is
//! never garbled by a split.
//!
//! Each line goes through `pulldown-cmark` on its own, which gets headings, emphasis, inline
//! code, links, list items and quotes right; the block structure that spans lines (fences,
//! tables, indentation of nested lists) is tracked here. Every piece of text is escaped with
//! `term::escape_controls` after parsing, since entities like `&#27;` decode to control
//! characters.
//!
//! Time is linear in the text, whatever it holds and however it is split: lines are cut from
//! the deltas without searching text twice ([`LineBuffer`]), the preview reads only the end of
//! the held line, and a line's styles and link texts are kept as it is rendered rather than
//! recomputed per event (nested emphasis, quotes or images cost nothing more per level).

use crossterm::style::Color;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::highlight::highlight;
use super::lines::LineBuffer;
use super::style::{self, Style, ACCENT, DIM};
use crate::cli::term::escape_controls;

const HEADING: Style = Style::fg(Color::Magenta).bold();
const CODE: Style = Style::fg(Color::Cyan);
const LINK: Style = Style::fg(Color::Blue).underline();
/// The gutter before lines of fenced code.
pub const CODE_GUTTER: &str = "  │ ";

#[derive(Default)]
pub struct MarkdownStream {
    /// The incomplete last line.
    pending: LineBuffer,
    fence: Option<Fence>,
    table: Vec<String>,
    /// The last line drawn was blank (runs of blank lines are drawn as one).
    blank: bool,
    /// Something was drawn (leading blank lines are dropped).
    started: bool,
}

struct Fence {
    marker: char,
    len: usize,
    lang: String,
    lines: Vec<String>,
}

impl MarkdownStream {
    /// Adds a delta; returns what became complete, rendered (whole lines).
    pub fn push(&mut self, delta: &str, width: usize) -> String {
        let mut out = String::new();
        for line in self.pending.push(delta).split_terminator('\n') {
            self.line(line.trim_end_matches('\r'), width, &mut out);
        }
        out
    }

    /// Renders everything still held (the response is complete) and starts afresh.
    pub fn finish(&mut self, width: usize) -> String {
        let mut out = String::new();
        let rest = self.pending.take();
        if !rest.is_empty() {
            self.line(&rest, width, &mut out);
        }
        if let Some(fence) = self.fence.take() {
            code_block(&fence, &mut out);
        }
        self.flush_table(width, &mut out);
        self.blank = false;
        self.started = false;
        out
    }

    /// Forgets everything not yet drawn (the attempt that streamed it failed).
    pub fn discard(&mut self) {
        *self = MarkdownStream::default();
    }

    /// What is held but not drawn, as plain text for a one-line preview: at most the last
    /// `chars` characters of the held line (a terminal's width), so the spinner can ask on
    /// every frame.
    pub fn preview(&self, chars: usize) -> String {
        if let Some(fence) = &self.fence {
            let lang = if fence.lang.is_empty() {
                "code".to_string()
            } else {
                escape_controls(&fence.lang).into_owned()
            };
            return format!("writing {lang}, {} lines", fence.lines.len());
        }
        if !self.table.is_empty() {
            return format!("writing a table, {} rows", self.table.len());
        }
        escape_controls(&self.pending.tail(chars)).replace('\t', " ")
    }

    fn line(&mut self, line: &str, width: usize, out: &mut String) {
        if let Some(fence) = &mut self.fence {
            if closes(line, fence.marker, fence.len) {
                if let Some(fence) = self.fence.take() {
                    code_block(&fence, out);
                    self.started = true;
                    self.blank = false;
                }
            } else {
                fence.lines.push(line.to_string());
            }
            return;
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.starts_with('|') && indent <= 3 {
            self.table.push(trimmed.to_string());
            return;
        }
        self.flush_table(width, out);
        if trimmed.is_empty() {
            if self.started && !self.blank {
                out.push('\n');
                self.blank = true;
            }
            return;
        }
        if indent <= 3 {
            if let Some(fence) = opens(trimmed) {
                self.fence = Some(fence);
                return;
            }
        }
        let pad: String = line[..indent].replace('\t', "    ");
        out.push_str(&pad);
        out.push_str(&inline(trimmed, width.saturating_sub(pad.len())));
        out.push('\n');
        self.blank = false;
        self.started = true;
    }

    fn flush_table(&mut self, width: usize, out: &mut String) {
        if self.table.is_empty() {
            return;
        }
        let rows = std::mem::take(&mut self.table);
        table(&rows, width, out);
        self.blank = false;
        self.started = true;
    }
}

fn opens(trimmed: &str) -> Option<Fence> {
    let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|c| *c == marker).count();
    if len < 3 {
        return None;
    }
    let info = trimmed[len..].trim();
    if marker == '`' && info.contains('`') {
        return None;
    }
    Some(Fence {
        marker,
        len,
        lang: info.split_whitespace().next().unwrap_or("").to_string(),
        lines: Vec::new(),
    })
}

fn closes(line: &str, marker: char, len: usize) -> bool {
    let trimmed = line.trim();
    let run = trimmed.chars().take_while(|c| *c == marker).count();
    run >= len && run == trimmed.chars().count() && line.len() - line.trim_start().len() <= 3
}

fn code_block(fence: &Fence, out: &mut String) {
    let gutter = DIM.paint(CODE_GUTTER);
    for line in highlight(&fence.lines.join("\n"), &fence.lang) {
        out.push_str(&gutter);
        out.push_str(&line);
        out.push('\n');
    }
}

/// A pipe table with aligned columns; the delimiter row becomes a rule.
fn table(rows: &[String], width: usize, out: &mut String) {
    let cells: Vec<Option<Vec<String>>> = rows
        .iter()
        .map(|row| {
            let inner = row.trim().trim_start_matches('|');
            let inner = inner.strip_suffix('|').unwrap_or(inner);
            let parts: Vec<&str> = inner.split('|').map(str::trim).collect();
            let delimiter = parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| matches!(c, '-' | ':' | ' ')));
            (!delimiter).then(|| parts.iter().map(|p| inline(p, width)).collect())
        })
        .collect();
    let columns = cells.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in cells.iter().flatten() {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(style::width(cell));
        }
    }
    let sep = DIM.paint(" │ ");
    for (n, row) in cells.iter().enumerate() {
        match row {
            None => {
                let total: usize = widths.iter().sum::<usize>() + 3 * columns.saturating_sub(1);
                out.push_str(&DIM.paint(&"─".repeat(total.min(width.max(3)))));
            }
            Some(row) => {
                for (i, w) in widths.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&sep);
                    }
                    let cell = row.get(i).map(String::as_str).unwrap_or("");
                    // The header row (before the delimiter) is bold.
                    let header = n == 0 && matches!(cells.get(1), Some(None));
                    if header {
                        out.push_str(&Style::PLAIN.bold().paint(&style::strip(cell)));
                    } else {
                        out.push_str(cell);
                    }
                    if i + 1 < widths.len() {
                        out.push_str(&" ".repeat(w.saturating_sub(style::width(cell))));
                    }
                }
            }
        }
        out.push('\n');
    }
}

/// One line of Markdown (no leading indentation) as styled text.
pub fn inline(text: &str, width: usize) -> String {
    let mut line = Line::default();
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, options) {
        line.event(event, width);
    }
    line.out
}

/// A line being rendered from pulldown-cmark's events.
#[derive(Default)]
struct Line {
    out: String,
    /// What `out` shows inside the open links, without styles: a link's text is compared
    /// with its address.
    shown: String,
    /// The style of each open tag, each merged with the ones around it.
    styles: Vec<Style>,
    list_number: Option<u64>,
    /// Open links and images: the address, and where the text starts in `shown`.
    links: Vec<(String, usize)>,
}

impl Line {
    fn current(&self) -> Style {
        self.styles.last().copied().unwrap_or(Style::PLAIN)
    }

    fn open(&mut self, style: Style) {
        self.styles.push(self.current().merge(style));
    }

    /// `text` (escaped here) in `style`.
    fn put(&mut self, style: Style, text: &str) {
        let text = escape_controls(text);
        self.out.push_str(&style.paint(&text));
        if !self.links.is_empty() {
            self.shown.push_str(&text);
        }
    }

    fn event(&mut self, event: Event<'_>, width: usize) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.put(self.current(), &t),
            Event::Code(t) => self.put(self.current().merge(CODE), &t),
            Event::Html(t) | Event::InlineHtml(t) => {
                self.put(self.current(), t.trim_end_matches('\n'))
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => self.put(CODE, &t),
            Event::FootnoteReference(t) => self.put(DIM, &format!("[^{t}]")),
            Event::SoftBreak | Event::HardBreak => self.put(Style::PLAIN, " "),
            Event::Rule => self.put(DIM, &"─".repeat(width.clamp(3, 60))),
            Event::TaskListMarker(done) => self.put(ACCENT, if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { level, .. } => self.open(if level == pulldown_cmark::HeadingLevel::H1 {
                HEADING.underline()
            } else {
                HEADING
            }),
            Tag::Emphasis => self.open(Style::PLAIN.italic()),
            Tag::Strong => self.open(Style::PLAIN.bold()),
            Tag::Strikethrough => self.open(Style::PLAIN.strike()),
            Tag::BlockQuote(_) => {
                self.put(DIM, "│ ");
                self.open(DIM.italic());
            }
            Tag::List(start) => self.list_number = start,
            Tag::Item => match self.list_number.as_mut() {
                Some(n) => {
                    let marker = format!("{n}. ");
                    *n += 1;
                    self.put(ACCENT, &marker);
                }
                None => self.put(ACCENT, "• "),
            },
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push((dest_url.to_string(), self.shown.len()));
                self.open(LINK);
            }
            Tag::CodeBlock(_) => self.open(CODE),
            _ => self.open(Style::PLAIN),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::List(_) | TagEnd::Item => {}
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some((url, at)) = self.links.pop() {
                    // A comparison of lengths first: nested links cost no rescan.
                    let text = self.shown.get(at..).unwrap_or("");
                    if !url.is_empty() && text != url && !url.starts_with('#') {
                        self.put(DIM, &format!(" ({url})"));
                    }
                }
                if self.links.is_empty() {
                    self.shown.clear();
                }
            }
            _ => {
                self.styles.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::style::strip;
    use super::*;

    fn render(text: &str) -> String {
        let mut md = MarkdownStream::default();
        let mut out = md.push(text, 80);
        out.push_str(&md.finish(80));
        out
    }

    #[test]
    fn renders_the_usual_markdown() {
        let out = render("# Title\n\nSome **bold**, *it* and `code`.\n- one\n  - two\n3. three\n> quote\n[link](http://x.y) ---\n");
        let text = strip(&out);
        assert_eq!(
            text,
            "Title\n\nSome bold, it and code.\n• one\n  • two\n3. three\n│ quote\nlink (http://x.y) ---\n"
        );
        assert!(out.contains('\u{1b}'));
    }

    #[test]
    fn deltas_split_anywhere_give_the_same_output() {
        let text =
            "## Plan\nRun `pytest` **now**.\n\n```python\ndef f(x):\n    return x\n```\nDone: *ok*";
        let whole = render(text);
        for step in [1, 2, 3, 7] {
            let mut md = MarkdownStream::default();
            let mut out = String::new();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(step) {
                out.push_str(&md.push(&chunk.iter().collect::<String>(), 80));
            }
            out.push_str(&md.finish(80));
            assert_eq!(out, whole, "step {step}");
        }
        assert_eq!(
            strip(&whole),
            "Plan\nRun pytest now.\n\n  │ def f(x):\n  │     return x\nDone: ok\n"
        );
    }

    #[test]
    fn lines_are_drawn_only_when_complete() {
        let mut md = MarkdownStream::default();
        assert_eq!(md.push("Hello **wor", 80), "");
        assert_eq!(md.preview(80), "Hello **wor");
        assert_eq!(md.preview(4), "…*wor");
        assert_eq!(strip(&md.push("ld**\nnext", 80)), "Hello world\n");
        assert_eq!(strip(&md.finish(80)), "next\n");
        assert_eq!(md.preview(80), "");
        md.push("```py\nx = 1\n", 80);
        assert_eq!(md.preview(80), "writing py, 1 lines");
        md.discard();
        assert_eq!(md.preview(80), "");
    }

    #[test]
    fn tables_are_aligned() {
        let out = strip(&render(
            "| a | long header |\n|---|---|\n| `xyz` | y |\nafter\n",
        ));
        assert_eq!(
            out,
            "a   │ long header\n─────────────────\nxyz │ y\nafter\n"
        );
    }

    #[test]
    fn nothing_from_the_model_drives_the_terminal() {
        let out = render("x \u{1b}[2J &#27;]0;t&#7; `\u{9b}` [a](\u{1b}b)\n```\n\u{1b}c\n```\n");
        assert!(!strip(&out).contains('\u{1b}'), "{out:?}");
        assert!(!strip(&out).contains('\u{7}'), "{out:?}");
        assert!(strip(&out).contains("\\x1b[2J"), "{out:?}");
    }

    #[test]
    fn blank_runs_collapse() {
        assert_eq!(strip(&render("\n\na\n\n\n\nb\n")), "a\n\nb\n");
    }

    /// Renders `text` in 64-byte deltas with a preview after each (as the spinner asks) and at
    /// once; both must give the same screen.
    fn streamed_and_whole(text: String) -> String {
        crate::cli::chat::ui::finishes(move || {
            let mut md = MarkdownStream::default();
            let mut streamed = String::new();
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let mut cut = rest.len().min(64);
                while !rest.is_char_boundary(cut) {
                    cut += 1;
                }
                streamed.push_str(&md.push(&rest[..cut], 80));
                assert!(md.preview(120).chars().count() <= 121);
                rest = &rest[cut..];
            }
            streamed.push_str(&md.finish(80));
            let whole = render(&text);
            // (Not assert_eq: a megabyte of difference is no help.)
            assert!(
                streamed == whole,
                "streamed and whole differ: {} and {} bytes",
                streamed.len(),
                whole.len()
            );
            streamed
        })
    }

    /// A megabyte of each input that made a step super-linear: searching the held line for
    /// a newline on every delta and escaping all of it for every preview (a megabyte of
    /// backticks in 16-byte deltas: over 60 s for its first 17%), moving the rest of the text
    /// for every line cut off (a megabyte of short lines: 15.8 s), folding the whole style
    /// stack for every piece of text and stripping a link's whole text again for every
    /// nested link or image.
    #[test]
    fn a_megabyte_of_pathological_markdown_renders_in_linear_time() {
        const MB: usize = 1 << 20;
        let runs = ["`", "*", "_", "[", "<", "~", "\\", "&#"];
        for run in runs {
            let out = strip(&streamed_and_whole(format!(
                "x {}\nafter\n",
                run.repeat(MB / run.len())
            )));
            assert!(
                out.ends_with("after\n"),
                "{run}: {}",
                &out[out.len().saturating_sub(200)..]
            );
        }
        let nested = [
            "> ".repeat(MB / 2),
            "- ".repeat(MB / 2),
            "  ".repeat(MB / 2) + "- deep",
            format!("{}a{}", "![".repeat(MB / 8), "](u)".repeat(MB / 8)),
            format!(
                "{}a{}",
                "**a *b ".repeat(MB / 16),
                " b* a**".repeat(MB / 16)
            ),
            "a\n".repeat(MB / 2),
            "| a ".repeat(MB / 4) + "|\n|---|\n",
        ];
        for text in nested {
            let head: String = text.chars().take(12).collect();
            let out = strip(&streamed_and_whole(text + "\nafter\n"));
            assert!(out.ends_with("after\n"), "{head:?}…");
        }
    }

    #[test]
    fn a_nested_image_in_a_link_keeps_its_addresses() {
        assert_eq!(
            strip(&render(
                "[![alt](img.png)](http://x.y) [same](same) [](http://e)\n"
            )),
            "alt (img.png) (http://x.y) same  (http://e)\n"
        );
    }
}
