//! Markdown for the terminal, over `pulldown-cmark` (CommonMark with tables, strikethrough and
//! task lists): headings, emphasis, inline code, links (`text (url)`), lists with their nesting,
//! quotes, rules, tables with aligned (and, when too wide, wrapped) columns, and fenced code,
//! highlighted and marked as code the answer shows, not a block that ran.
//!
//! A document is rendered **one top-level block at a time**: [`block_starts`] finds where each
//! begins, and each block's source is parsed on its own ([`render_block`]). That is what makes
//! streaming exact (see `stream.rs`): once the next top-level block has begun on a complete
//! line, a block can no longer change (CommonMark decides block structure line by line), so it
//! can be drawn for good, and the blocks drawn while streaming are the blocks of the whole
//! answer. (Rendering each block alone means a reference link resolves only against a
//! definition in its own block; models write inline links.) Between two top-level blocks a
//! blank line is drawn where the source has one.
//!
//! Prose is word-wrapped to the width (`wrap.rs`); code is never re-flowed: a line longer than
//! the width continues on the next row after a `↪` marker. Every piece of text is escaped
//! after parsing (entities like `&#27;` decode to control characters). Time is linear in the
//! text: styles and link texts are kept as the events arrive, and container prefixes are
//! bounded (nesting deeper than half the width draws no further `│` or indentation).

use crossterm::style::Color;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

mod leaves;

use leaves::Table;

use super::style::{Style, ACCENT, DIM};
use super::wrap::{self, paint, push, wrap, Line, Piece, Span};

const HEADING: Style = Style::fg(Color::Magenta).bold();
const CODE: Style = Style::fg(Color::Cyan);
const LINK: Style = Style::fg(Color::Blue).underline();
/// Spaces a tab becomes in prose.
const TAB: usize = 4;

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// `src` rendered whole: painted rows of at most `width` columns (one less than a terminal's
/// width leaves the last column free, so no terminal wraps a row by itself).
pub fn render(src: &str, width: usize) -> Vec<String> {
    render_rows(src, width)
        .iter()
        .map(|row| paint(row))
        .collect()
}

/// [`render`] before painting: rows of styled spans.
pub fn render_rows(src: &str, width: usize) -> Vec<Line> {
    let mut out = Vec::new();
    let mut joiner = Joiner::default();
    let starts = block_starts(src);
    let mut from = 0;
    for &start in starts.iter().skip(1) {
        joiner.add(&src[from..start], width, &mut out);
        from = start;
    }
    joiner.add(&src[from..], width, &mut out);
    out
}

/// Joins rendered top-level blocks: a blank row between two where the source has a blank
/// line (runs of blank lines are one row; none before the first block).
#[derive(Debug, Default, Clone)]
pub struct Joiner {
    /// Rows were drawn.
    started: bool,
    /// The source since the last drawn block ended with a blank line.
    gap: bool,
}

impl Joiner {
    /// Renders the source of one top-level block (`block`, from the start of its first line to
    /// the start of the next block's) into `out`.
    pub fn add(&mut self, block: &str, width: usize, out: &mut Vec<Line>) {
        let rows = render_block(block, width);
        if !rows.is_empty() {
            if self.gap && self.started {
                out.push(Line::new());
            }
            out.extend(rows);
            self.started = true;
            self.gap = false;
        }
        if ends_with_blank_line(block) {
            self.gap = true;
        }
    }

    /// The blank row [`add`](Self::add) would draw before the next block.
    pub fn pending_blank(&self) -> bool {
        self.gap && self.started
    }
}

fn ends_with_blank_line(src: &str) -> bool {
    let body = src.strip_suffix('\n').unwrap_or(src);
    match body.rfind('\n') {
        Some(at) => body[at + 1..].trim().is_empty(),
        None => body.trim().is_empty() && src.ends_with('\n'),
    }
}

/// Where each top-level block of `src` begins: the start of its first line, in order.
pub fn block_starts(src: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(src, options()).into_offset_iter() {
        let top = depth == 0;
        match event {
            Event::Start(_) => depth += 1,
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                continue;
            }
            _ => {}
        }
        if top {
            let line = src[..range.start].rfind('\n').map_or(0, |at| at + 1);
            if starts.last() != Some(&line) {
                starts.push(line);
            }
        }
    }
    starts
}

/// One top-level block's source, parsed on its own, as rows.
pub fn render_block(src: &str, width: usize) -> Vec<Line> {
    let mut r = Renderer::new(width.max(8));
    for event in Parser::new_ext(src, options()) {
        r.event(event);
    }
    r.flush_inline();
    r.rows
}

/// A container's mark before its rows: a quote's bar, a list item's marker (then spaces).
struct Prefix {
    /// The marker, until the item's first row takes it.
    first: Option<Span>,
    rest: Span,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Container {
    Quote,
    Item,
}

struct List {
    next_number: Option<u64>,
    /// Set by the first item that shows it: loose lists have paragraphs, tight ones not.
    loose: Option<bool>,
    depth: usize,
}

struct Renderer {
    width: usize,
    rows: Vec<Line>,
    containers: Vec<Container>,
    /// The prefixes drawn, outermost first: those of the outer containers that fit in half the
    /// width (deeper ones are counted in `undrawn`).
    prefixes: Vec<Prefix>,
    prefix_width: usize,
    undrawn: usize,
    lists: Vec<List>,
    /// The paragraph, heading or table cell being collected.
    inline: Vec<Piece>,
    /// An inline run is being collected (a paragraph, a heading, a tight list item's text).
    in_inline: bool,
    styles: Vec<Style>,
    /// Open links and images: the address, and where their text starts in `shown`.
    links: Vec<(String, usize)>,
    /// What the open links show, without styles: a link's text is compared with its address.
    shown: String,
    /// A block ended: the next one is set apart by a blank row (unless in a tight list).
    gap: bool,
    code: Option<(String, String)>,
    table: Option<Table>,
    html: Option<String>,
}

impl Renderer {
    fn new(width: usize) -> Renderer {
        Renderer {
            width,
            rows: Vec::new(),
            containers: Vec::new(),
            prefixes: Vec::new(),
            prefix_width: 0,
            undrawn: 0,
            lists: Vec::new(),
            inline: Vec::new(),
            in_inline: false,
            styles: Vec::new(),
            links: Vec::new(),
            shown: String::new(),
            gap: false,
            code: None,
            table: None,
            html: None,
        }
    }

    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or(Style::PLAIN)
    }

    fn open(&mut self, style: Style) {
        self.styles.push(self.style().merge(style));
    }

    /// Columns left for content after the prefixes.
    fn room(&self) -> usize {
        self.width.saturating_sub(self.prefix_width).max(4)
    }

    fn push_container(&mut self, kind: Container, first: Option<Span>, rest: Span) {
        self.containers.push(kind);
        let w = wrap::text_width(&rest.text);
        if self.undrawn == 0 && self.prefix_width + w <= self.width / 2 {
            self.prefix_width += w;
            self.prefixes.push(Prefix { first, rest });
        } else {
            self.undrawn += 1;
        }
    }

    fn pop_container(&mut self) {
        self.containers.pop();
        if self.undrawn > 0 {
            self.undrawn -= 1;
        } else if let Some(prefix) = self.prefixes.pop() {
            self.prefix_width -= wrap::text_width(&prefix.rest.text);
            if let Some(marker) = prefix.first {
                // An item that drew no row still shows its marker.
                let mut row = self.prefix_row(true);
                push(&mut row, marker.style, marker.text.trim_end());
                self.rows.push(row);
            }
        }
    }

    /// The prefixes of a row; `content` rows take the markers not drawn yet.
    fn prefix_row(&mut self, content: bool) -> Line {
        let mut row = Line::new();
        for prefix in &mut self.prefixes {
            let span = match prefix.first.take() {
                Some(first) if content => first,
                first => {
                    prefix.first = first;
                    prefix.rest.clone()
                }
            };
            push(&mut row, span.style, &span.text);
        }
        row
    }

    fn emit(&mut self, content: Line) {
        let mut row = self.prefix_row(true);
        for span in content {
            push(&mut row, span.style, &span.text);
        }
        self.rows.push(row);
    }

    fn emit_blank(&mut self) {
        let mut row = self.prefix_row(false);
        if let Some(last) = row.last_mut() {
            let trimmed = last.text.trim_end().len();
            last.text.truncate(trimmed);
        }
        row.retain(|s| !s.text.is_empty());
        self.rows.push(row);
    }

    /// A block starts: set apart from the one before, unless both are in a tight list item.
    fn begin_block(&mut self, paragraph_in_item: bool) {
        self.flush_inline();
        let in_item = self.containers.last() == Some(&Container::Item);
        if in_item && paragraph_in_item {
            if let Some(list) = self.lists.last_mut() {
                list.loose.get_or_insert(true);
            }
        }
        let tight = in_item && !self.lists.last().and_then(|l| l.loose).unwrap_or(false);
        if self.gap && !tight {
            self.emit_blank();
        }
        self.gap = false;
    }

    fn end_block(&mut self) {
        self.gap = true;
    }

    /// Text directly in a tight list item starts an inline run of its own.
    fn ensure_inline(&mut self) {
        if !self.in_inline && self.table.is_none() {
            if self.containers.last() == Some(&Container::Item) {
                if let Some(list) = self.lists.last_mut() {
                    list.loose.get_or_insert(false);
                }
            }
            self.begin_block(false);
            self.in_inline = true;
        }
    }

    /// Draws the inline run collected, word-wrapped.
    fn flush_inline(&mut self) {
        if !self.in_inline {
            return;
        }
        self.in_inline = false;
        let pieces = std::mem::take(&mut self.inline);
        for row in wrap(&pieces, self.room()) {
            self.emit(row);
        }
        self.end_block();
    }

    /// Inline `text` (escaped here) in `style`.
    fn put(&mut self, style: Style, text: &str) {
        let span = Span::new(style, text, TAB);
        if !self.links.is_empty() {
            self.shown.push_str(&span.text);
        }
        if let Some(html) = &mut self.html {
            html.push_str(text);
            return;
        }
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        self.ensure_inline();
        self.inline.push(Piece::Text(span));
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => {
                if let Some((_, code)) = &mut self.code {
                    code.push_str(&t);
                } else {
                    self.put(self.style(), &t);
                }
            }
            Event::Code(t) => self.put(self.style().merge(CODE), &t),
            Event::Html(t) => match &mut self.html {
                Some(html) => html.push_str(&t),
                None => self.put(self.style(), t.trim_end_matches('\n')),
            },
            Event::InlineHtml(t) => self.put(self.style(), &t),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.put(CODE, &t),
            Event::FootnoteReference(t) => self.put(DIM, &format!("[^{t}]")),
            Event::SoftBreak => self.put(self.style(), " "),
            Event::HardBreak => {
                self.ensure_inline();
                self.inline.push(Piece::Break);
            }
            Event::Rule => {
                self.begin_block(false);
                let rule = "─".repeat(self.room().clamp(3, 60));
                self.emit(vec![Span::new(DIM, &rule, TAB)]);
                self.end_block();
            }
            Event::TaskListMarker(done) => self.put(ACCENT, if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                self.begin_block(true);
                self.in_inline = true;
                self.open(Style::PLAIN);
            }
            Tag::Heading { level, .. } => {
                self.begin_block(false);
                self.in_inline = true;
                self.open(if level == HeadingLevel::H1 {
                    HEADING.underline()
                } else {
                    HEADING
                });
            }
            Tag::BlockQuote(_) => {
                self.flush_inline();
                let bar = Span::new(DIM, "│ ", TAB);
                self.push_container(Container::Quote, None, bar);
                self.open(DIM.italic());
            }
            Tag::List(start) => {
                self.flush_inline();
                let depth = self.lists.len();
                self.lists.push(List {
                    next_number: start,
                    loose: None,
                    depth,
                });
            }
            Tag::Item => {
                self.flush_inline();
                let marker = match self.lists.last_mut() {
                    Some(List {
                        next_number: Some(n),
                        ..
                    }) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    Some(list) => ["• ", "◦ ", "▪ "][list.depth % 3].to_string(),
                    None => "• ".to_string(),
                };
                let rest = " ".repeat(wrap::text_width(&marker));
                self.push_container(
                    Container::Item,
                    Some(Span::new(ACCENT, &marker, TAB)),
                    Span::new(Style::PLAIN, &rest, TAB),
                );
            }
            Tag::CodeBlock(kind) => {
                self.begin_block(false);
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::HtmlBlock => {
                self.begin_block(false);
                self.html = Some(String::new());
            }
            Tag::Table(alignments) => {
                self.begin_block(false);
                self.table = Some(Table {
                    alignments,
                    ..Table::default()
                });
            }
            Tag::TableHead | Tag::TableRow => {
                if let Some(table) = &mut self.table {
                    table.rows.push(Vec::new());
                }
            }
            Tag::TableCell => self.in_inline = true,
            Tag::Emphasis => self.open(Style::PLAIN.italic()),
            Tag::Strong => self.open(Style::PLAIN.bold()),
            Tag::Strikethrough => self.open(Style::PLAIN.strike()),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.ensure_inline();
                self.links.push((dest_url.to_string(), self.shown.len()));
                self.open(LINK);
            }
            _ => self.open(Style::PLAIN),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush_inline();
            }
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                self.styles.pop();
                self.pop_container();
            }
            TagEnd::List(_) => {
                self.flush_inline();
                self.lists.pop();
            }
            TagEnd::Item => {
                self.flush_inline();
                self.pop_container();
            }
            TagEnd::CodeBlock => {
                if let Some((lang, code)) = self.code.take() {
                    for row in leaves::code_rows(&lang, &code, self.room()) {
                        self.emit(row);
                    }
                }
                self.end_block();
            }
            TagEnd::HtmlBlock => {
                if let Some(html) = self.html.take() {
                    for line in html.trim_end_matches('\n').split('\n') {
                        let pieces = [Piece::Text(Span::new(self.style(), line, TAB))];
                        for row in wrap(&pieces, self.room()) {
                            self.emit(row);
                        }
                    }
                }
                self.end_block();
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    for row in leaves::table_rows(&table, self.room()) {
                        self.emit(row);
                    }
                }
                self.end_block();
            }
            TagEnd::TableHead => {
                if let Some(table) = &mut self.table {
                    table.head_rows = table.rows.len();
                }
            }
            TagEnd::TableRow => {}
            TagEnd::TableCell => {
                self.in_inline = false;
                let cell = std::mem::take(&mut self.inline);
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(cell);
                }
            }
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
mod tests;
