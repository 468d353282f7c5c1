//! Where a resumed session was: its last [`RECAP_TURNS`] turns, compactly, printed before the
//! prompt of `vis chat --resume`. Each turn shows the person's message, the model's answers
//! (rendered Markdown, long ones shortened to their first and last rows), one line per block
//! (number, place, status, time, first line of code, size of the output), the folds made there
//! (what they replaced and what they saved), and how the turn ended when it did not end
//! normally. Folds in force made in earlier turns are listed first.
//!
//! Everything is read from the store's records (`store::api`): turns, the conversation,
//! iterations, folds; never from request bytes. It is all untrusted text (a model's answer, a
//! block's code, a person's paste): every piece is escaped where it is painted.

use super::blocks::summary_line;
use super::markdown;
use super::style::{self, Style, ACCENT, DIM, WARN};
use crate::cli::term::escape_controls;
use crate::protocol::{AssistantMessage, IterationRow, Measurement, TurnRow, TurnStatus};
use crate::store::{FoldRow, HistoryKind, HistoryRow, Store, TurnRange};

/// Turns shown.
pub const RECAP_TURNS: i64 = 3;
/// Lines of a person's message shown.
const MESSAGE_LINES: usize = 4;
/// Rows of a long answer shown: its first and its last.
const ANSWER_HEAD: usize = 8;
const ANSWER_TAIL: usize = 4;
/// Folds made before the turns shown that are listed one by one.
const EARLIER_FOLDS: usize = 3;

/// The recap of session `id` for a terminal `width` columns wide (`""` for a session without
/// turns).
pub fn recap(store: &Store, id: &str, width: usize) -> crate::store::Result<String> {
    let counts = store.counts(id)?;
    if counts.turns == 0 {
        return Ok(String::new());
    }
    let range = TurnRange {
        first: counts.turns - RECAP_TURNS + 1,
        last: i64::MAX,
    };
    let turns = store.turns_in(id, range)?;
    let history = store.history_in(id, range)?;
    let iterations = store.iterations_in(id, range)?;
    let folds: Vec<FoldRow> = store
        .folds(id)?
        .into_iter()
        .filter(|f| f.absorbed_by.is_none())
        .collect();
    let first_turn = turns.first().map_or(1, |t| t.turn);
    // Blocks are numbered in the session's order; those shown are the last ones.
    let blocks_before = (counts.iterations as usize).saturating_sub(iterations.len());
    let width = width.saturating_sub(1).max(20);

    let mut out = String::new();
    let title = if counts.turns > turns.len() as i64 {
        format!(
            "── the last {} of {} turns (vis sessions show {} shows them all) ──",
            turns.len(),
            counts.turns,
            escape_controls(id)
        )
    } else {
        format!(
            "── the session so far: {} ──",
            super::plural(counts.turns, "turn")
        )
    };
    out.push_str(&DIM.paint(&title));
    out.push('\n');
    let earlier: Vec<&FoldRow> = folds.iter().filter(|f| f.turn < first_turn).collect();
    for fold in earlier.iter().take(EARLIER_FOLDS) {
        out.push_str(&fold_line(fold));
    }
    if earlier.len() > EARLIER_FOLDS {
        out.push_str(&DIM.paint(&format!(
            "  … {} more folds in force (/status, vis sessions show)",
            earlier.len() - EARLIER_FOLDS
        )));
        out.push('\n');
    }
    for turn in &turns {
        let shown = Turn {
            row: turn,
            history: history.iter().filter(|h| h.turn == turn.turn).collect(),
            iterations: &iterations,
            blocks_before,
            folds: folds.iter().filter(|f| f.turn == turn.turn).collect(),
        };
        shown.draw(width, &mut out);
    }
    out.push_str(&DIM.paint("──"));
    out.push('\n');
    Ok(out)
}

struct Turn<'a> {
    row: &'a TurnRow,
    history: Vec<&'a HistoryRow>,
    /// The iterations of every turn shown (a block's number is its place among them).
    iterations: &'a [IterationRow],
    blocks_before: usize,
    folds: Vec<&'a FoldRow>,
}

impl Turn<'_> {
    fn draw(&self, width: usize, out: &mut String) {
        out.push('\n');
        match &self.row.user_text {
            Some(text) => message(text, width, out),
            None => {
                out.push_str(&DIM.paint(&format!("turn {} ({})", self.row.turn, self.row.kind)));
                out.push('\n');
            }
        }
        let mut shown = Vec::new();
        for item in &self.history {
            match item.kind {
                HistoryKind::Assistant => answer(&item.body, width, out),
                HistoryKind::ToolResult => {
                    if let Some(i) = item.iteration {
                        self.block(i, width, out);
                        shown.push(i);
                    }
                }
                HistoryKind::User | HistoryKind::Notice => {}
            }
        }
        // Blocks outside the conversation (`vis exec`, `vis mcp`, a call cut off by a stop).
        for it in self.iterations.iter().filter(|it| it.turn == self.row.turn) {
            if !shown.contains(&it.iteration) {
                self.block(it.iteration, width, out);
            }
        }
        for fold in self.folds.iter().filter(|f| f.iteration.is_none()) {
            out.push_str(&fold_line(fold));
        }
        let end = match self.row.status {
            TurnStatus::Done => None,
            TurnStatus::Interrupted => Some(format!("⏹ turn {} interrupted", self.row.turn)),
            TurnStatus::IterationLimit => Some(format!(
                "turn {} stopped at the iteration limit",
                self.row.turn
            )),
            TurnStatus::OutputLimit => Some(format!(
                "turn {}: the answer was cut at the output limit",
                self.row.turn
            )),
            other => Some(format!("turn {} {other}", self.row.turn)),
        };
        if let Some(end) = end {
            out.push_str(&WARN.paint(&end));
            out.push('\n');
        }
    }

    /// Iteration `i` of this turn in one line, with the folds it made.
    fn block(&self, i: i64, width: usize, out: &mut String) {
        let Some(at) = self
            .iterations
            .iter()
            .position(|it| it.turn == self.row.turn && it.iteration == i)
        else {
            return;
        };
        out.push_str(&summary_line(
            self.blocks_before + at + 1,
            &self.iterations[at],
            width,
        ));
        for fold in self.folds.iter().filter(|f| f.iteration == Some(i)) {
            out.push_str(&fold_line(fold));
        }
    }
}

/// The person's message: its first lines after `›`.
fn message(text: &str, width: usize, out: &mut String) {
    let text = escape_controls(text.trim());
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().take(MESSAGE_LINES).enumerate() {
        let mark = if n == 0 { "› " } else { "  " };
        out.push_str(&ACCENT.paint(mark));
        out.push_str(&Style::PLAIN.bold().paint(&style::clip(
            &line.replace('\t', " "),
            width.saturating_sub(2),
        )));
        out.push('\n');
    }
    if lines.len() > MESSAGE_LINES {
        out.push_str(&DIM.paint(&format!("  … {} more lines", lines.len() - MESSAGE_LINES)));
        out.push('\n');
    }
}

/// An answer's text, rendered, its middle left out when long.
fn answer(body: &str, width: usize, out: &mut String) {
    let Ok(message) = serde_json::from_str::<AssistantMessage>(body) else {
        out.push_str(&DIM.paint("  (an answer that cannot be read back)"));
        out.push('\n');
        return;
    };
    let text = message.text();
    if text.trim().is_empty() {
        return;
    }
    let rows = markdown::render(&text, width);
    let keep = ANSWER_HEAD + ANSWER_TAIL;
    for row in rows.iter().take(if rows.len() > keep + 1 {
        ANSWER_HEAD
    } else {
        rows.len()
    }) {
        out.push_str(row);
        out.push('\n');
    }
    if rows.len() > keep + 1 {
        out.push_str(&DIM.paint(&format!(
            "  … {} rows of this answer left out …",
            rows.len() - keep
        )));
        out.push('\n');
        for row in &rows[rows.len() - ANSWER_TAIL..] {
            out.push_str(row);
            out.push('\n');
        }
    }
}

/// A fold in one line: what it replaced and what it saved.
fn fold_line(fold: &FoldRow) -> String {
    let labels: Vec<&str> = fold.spans.iter().map(|s| s.label.as_str()).collect();
    let saving = match &fold.measurement {
        Measurement::Measured {
            net_reduction_tokens,
            ..
        } => format!("{}, measured", saved(*net_reduction_tokens)),
        _ => format!("~{}, estimated", saved(fold.receipt.estimated_net_tokens)),
    };
    let automatic = if fold.automatic { ", automatic" } else { "" };
    format!(
        "{}\n",
        DIM.paint(&format!(
            "  ⤷ fold {} replaced {} with a gist ({saving}{automatic})",
            fold.id,
            escape_controls(&labels.join(", "))
        ))
    )
}

/// `1,800 tokens less`, or `200 tokens more` for a fold that cost more than it removed.
fn saved(net: i64) -> String {
    let grouped = crate::protocol::group_thousands(net.unsigned_abs() as usize);
    if net < 0 {
        format!("{grouped} tokens more")
    } else {
        format!("{grouped} tokens less")
    }
}
