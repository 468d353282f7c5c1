//! The leaf blocks laid out as rows of their own: code (labelled as shown, not run; never
//! re-flowed) and tables (aligned; narrowed and wrapped when too wide). The renderer puts its
//! containers' prefixes before each row.

use pulldown_cmark::Alignment;

use super::super::highlight::highlight_spans;
use super::super::style::{Style, DIM};
use super::super::wrap::{self, hard_wrap, line_width, pad, push, wrap, Line, Piece, Span};
use super::TAB;

/// The gutter before lines of code in an answer (blocks that ran have `│`).
pub const CODE_GUTTER: &str = "  ┆ ";
/// Before the rows that continue a code line too long for the width.
const CODE_CONTINUED: &str = "↪ ";
/// The label above code in an answer: it was shown, not run.
pub const NOT_RUN: &str = "(not run)";

/// A table as its cells arrive.
#[derive(Default)]
pub struct Table {
    pub alignments: Vec<Alignment>,
    pub rows: Vec<Vec<Vec<Piece>>>,
    pub head_rows: usize,
}

/// Code the answer shows: a label saying it did not run, then the highlighted lines in
/// their gutter, long lines continued after `↪`.
pub fn code_rows(lang: &str, code: &str, room: usize) -> Vec<Line> {
    let mut out = Vec::new();
    let name = if lang.is_empty() { "code" } else { lang };
    let label = format!("  ┄ {name} {NOT_RUN}");
    let label = Span::new(DIM, &label, TAB);
    let label = hard_wrap(&[label], room).into_iter().next();
    out.push(label.unwrap_or_default());
    let gutter = Span::new(DIM, CODE_GUTTER, TAB);
    let continued = Span::new(DIM, CODE_CONTINUED, TAB);
    let first_room = room.saturating_sub(wrap::text_width(&gutter.text));
    let rest_room = first_room.saturating_sub(2).max(4);
    for line in highlight_spans(code, lang) {
        let mut row = vec![gutter.clone()];
        if line_width(&line) <= first_room {
            row.extend(line);
            out.push(row);
            continue;
        }
        let mut rows = hard_wrap(&line, first_room.max(4)).into_iter();
        row.extend(rows.next().unwrap_or_default());
        out.push(row);
        let rest: Vec<Span> = rows.flatten().collect();
        for part in hard_wrap(&rest, rest_room) {
            let mut row = vec![gutter.clone(), continued.clone()];
            row.extend(part);
            out.push(row);
        }
    }
    out
}

/// A table: columns aligned as the delimiter row says, the header bold and underlined by a
/// rule; when the columns are wider than the room, the widest are narrowed and their cells
/// wrapped.
pub fn table_rows(table: &Table, room: usize) -> Vec<Line> {
    let mut out = Vec::new();
    let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
    if columns == 0 {
        return out;
    }
    let sep = Span::new(DIM, " │ ", TAB);
    // Each column needs three columns and a separator.
    if 6 * columns > room + 3 {
        // Too many columns to lay out: each row is a paragraph of its cells.
        for row in &table.rows {
            let mut pieces = Vec::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    pieces.push(Piece::Text(sep.clone()));
                }
                pieces.extend(cell.iter().cloned());
            }
            out.extend(wrap(&pieces, room));
        }
        return out;
    }
    let room = room.saturating_sub(3 * (columns - 1));
    let natural: Vec<usize> = (0..columns)
        .map(|i| {
            table
                .rows
                .iter()
                .filter_map(|row| row.get(i))
                .map(|cell| wrap(cell, usize::MAX).iter().map(|l| line_width(l)).max())
                .map(Option::unwrap_or_default)
                .max()
                .unwrap_or(0)
        })
        .collect();
    let widths = fit_columns(&natural, room);
    for (n, row) in table.rows.iter().enumerate() {
        let head = n < table.head_rows;
        let cells: Vec<Vec<Line>> = (0..columns)
            .map(|i| {
                let cell = row.get(i).map(Vec::as_slice).unwrap_or(&[]);
                let mut lines = wrap(cell, widths[i].max(1));
                if head {
                    for line in &mut lines {
                        for span in line {
                            span.style = span.style.merge(Style::PLAIN.bold());
                        }
                    }
                }
                lines
            })
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(1);
        for k in 0..height {
            let mut cells_row = Line::new();
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    push(&mut cells_row, sep.style, &sep.text);
                }
                let align = match table.alignments.get(i) {
                    Some(Alignment::Right) => '>',
                    Some(Alignment::Center) => '^',
                    _ => '<',
                };
                let last = i + 1 == columns;
                let line = cell.get(k).cloned().unwrap_or_default();
                let line = if last && align == '<' {
                    line
                } else {
                    pad(line, widths[i], align)
                };
                for span in line {
                    push(&mut cells_row, span.style, &span.text);
                }
            }
            // No padding after the last column.
            if let Some(last) = cells_row.last_mut().filter(|s| s.style == Style::PLAIN) {
                let end = last.text.trim_end().len();
                last.text.truncate(end);
            }
            out.push(cells_row);
        }
        if head && n + 1 == table.head_rows {
            let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
            out.push(vec![Span::new(DIM, &rule.join("─┼─"), TAB)]);
        }
    }
    out
}

/// Column widths that fit `room`: the natural ones when they do; otherwise the widest columns
/// are narrowed to one common width (at least 3), found by bisection.
fn fit_columns(natural: &[usize], room: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= room {
        return natural.to_vec();
    }
    let fits = |cap: usize| natural.iter().map(|w| (*w).min(cap)).sum::<usize>() <= room;
    let (mut lo, mut hi) = (3usize, natural.iter().copied().max().unwrap_or(3));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    natural.iter().map(|w| (*w).min(lo)).collect()
}
