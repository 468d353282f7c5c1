//! How a turn looks on the screen: the renderer consumes the turn's [`Event`]s and owns the
//! terminal's output while the turn runs.
//!
//! In the fancy (terminal) form, the bottom line is a spinner ("thinking 3.2 s", "running
//! t2/i3 1.1 s") with a preview of the line being streamed. Everything else is drawn above it:
//! before each write the spinner line is erased, after it the spinner is drawn again, so the
//! scrollback holds only finished output. Assistant text is Markdown rendered line by line as
//! lines complete ([`MarkdownStream`]); reasoning is dimmed behind a `┊` gutter; each block
//! shows its highlighted code and its output collapsed to [`COLLAPSED_LINES`] lines, with the
//! block's number for `/expand`.
//!
//! While a block runs, the last lines of its output show under the spinner ([`LiveRegion`]).
//!
//! The plain form (stdin or stdout not a terminal) prints the transcript `vis chat -m`
//! prints: text as it streams, each block with its code, its output lines as they complete
//! and, after its status, the rest of its result ([`StreamedOutput`]).

use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::highlight::highlight;
use super::lines::LineBuffer;
use super::live::{term_height, LiveRegion};
use super::markdown::MarkdownStream;
use super::style::{self, Style, ACCENT, BAD, DIM, GOOD, WARN};
use crate::cli::chat::seconds;
use crate::cli::chat::streamed::StreamedOutput;
use crate::cli::term::{escape_controls, print_styled};
use crate::protocol::Event;
use crate::store::IterationRow;

/// Output lines shown for a block before "… N more lines".
pub const COLLAPSED_LINES: usize = 6;
/// Code lines shown for a block before it is cut (the rest is a `/expand` away).
pub const COLLAPSED_CODE_LINES: usize = 30;
const FRAMES: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

enum Activity {
    Idle,
    Request { since: Instant },
    Block { place: String, since: Instant },
}

pub struct View {
    fancy: bool,
    /// How many blocks the session has had (a block's number is its place in the session).
    blocks_seen: usize,
    /// `(turn, iteration, number)` of the block that runs.
    current_block: Option<(i64, i64, usize)>,
    md: MarkdownStream,
    /// The incomplete last line of reasoning.
    thinking: LineBuffer,
    activity: Activity,
    /// The spinner and the running block's last lines: what is on the screen below the
    /// output (the cursor is on its last row).
    bottom: LiveRegion,
    /// Plain form: the running block's output printed so far.
    streamed: StreamedOutput,
    frame: usize,
    /// Something of the current attempt's answer was drawn (a retry must say it is void).
    drew_this_attempt: bool,
    stopping: bool,
    /// The turn's stop token: cancelled when standard output's reader goes away.
    stop: CancellationToken,
    /// Plain form: the last line printed is incomplete.
    mid_line: bool,
    /// What was drawn last, for the blank line between text and blocks.
    last: Drawn,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Drawn {
    Nothing,
    Text,
    Block,
}

impl View {
    pub fn new(fancy: bool, blocks_seen: usize) -> View {
        View {
            fancy,
            blocks_seen,
            current_block: None,
            md: MarkdownStream::default(),
            thinking: LineBuffer::default(),
            activity: Activity::Idle,
            bottom: LiveRegion::default(),
            streamed: StreamedOutput::default(),
            frame: 0,
            drew_this_attempt: false,
            stopping: false,
            stop: CancellationToken::new(),
            mid_line: false,
            last: Drawn::Nothing,
        }
    }

    /// `text` (answer or reasoning lines), set apart from a block drawn before it.
    fn text_section(&mut self, text: String) -> String {
        if text.is_empty() {
            return text;
        }
        let gap = self.last == Drawn::Block;
        self.last = Drawn::Text;
        if gap {
            format!("\n{text}")
        } else {
            text
        }
    }

    /// A block's header, set apart from what was drawn before it.
    fn block_section(&mut self, header: String) -> String {
        let gap = self.last != Drawn::Nothing;
        self.last = Drawn::Block;
        if gap {
            format!("\n{header}")
        } else {
            header
        }
    }

    /// Renders the events of one turn until its sender is dropped.
    pub async fn run(mut self, mut events: UnboundedReceiver<Event>, stop: CancellationToken) {
        self.stop = stop.clone();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.event(&event),
                    None => break,
                },
                _ = tick.tick(), if self.fancy => {
                    self.frame = self.frame.wrapping_add(1);
                    self.emit("");
                }
                _ = stop.cancelled(), if !self.stopping => {
                    self.stopping = true;
                    self.emit("");
                }
            }
        }
        self.activity = Activity::Idle;
        let rest = self.flush_text();
        self.emit(&rest);
        if self.mid_line {
            self.emit("\n");
        }
    }

    fn event(&mut self, event: &Event) {
        if !self.fancy {
            return self.plain(event);
        }
        let width = term_width();
        match event {
            Event::TurnStarted { .. } => {}
            Event::RequestStarted { .. } => {
                self.drew_this_attempt = false;
                self.activity = Activity::Request {
                    since: Instant::now(),
                };
                self.emit("");
            }
            Event::TextDelta { text } => {
                let mut out = self.flush_thinking();
                out.push_str(&self.md.push(text, width));
                if !out.is_empty() {
                    self.drew_this_attempt = true;
                }
                let out = self.text_section(out);
                self.emit(&out);
            }
            Event::ReasoningDelta { text } => {
                let mut out = String::new();
                for line in self.thinking.push(text).split_terminator('\n') {
                    out.push_str(&thinking_line(line.trim_end()));
                }
                if !out.is_empty() {
                    self.drew_this_attempt = true;
                }
                let out = self.text_section(out);
                self.emit(&out);
            }
            Event::Retrying {
                attempt,
                delay_ms,
                reason,
            } => {
                self.md.discard();
                self.thinking.clear();
                let mut out = String::new();
                if self.drew_this_attempt {
                    out.push_str(
                        &DIM.paint("  ✗ the partial answer above is void: its attempt failed"),
                    );
                    out.push('\n');
                }
                self.drew_this_attempt = false;
                out.push_str(&WARN.paint(&format!(
                    "↻ retrying (attempt {}, in {:.1} s): {}",
                    attempt + 1,
                    *delay_ms as f64 / 1000.0,
                    escape_controls(reason)
                )));
                out.push('\n');
                self.emit(&out);
            }
            Event::ResponseFinished { .. } => {
                self.activity = Activity::Idle;
                let out = self.flush_text();
                self.emit(&out);
            }
            Event::BlockStarted {
                turn,
                iteration,
                code,
            } => {
                let mut out = self.flush_text();
                self.bottom.clear();
                self.blocks_seen += 1;
                let k = self.blocks_seen;
                self.current_block = Some((*turn, *iteration, k));
                let header = self.block_section(block_header(k, *turn, *iteration));
                out.push_str(&header);
                out.push_str(&code_lines(code, Some(COLLAPSED_CODE_LINES), k));
                self.activity = Activity::Block {
                    place: format!("t{turn}/i{iteration}"),
                    since: Instant::now(),
                };
                self.emit(&out);
            }
            // Drawn with the spinner's next frame.
            Event::BlockOutput {
                text,
                skipped_bytes,
                ..
            } => self.bottom.push(text, *skipped_bytes),
            Event::BlockFinished {
                turn,
                iteration,
                status,
                output,
                wall_ms,
            } => {
                let mut out = self.flush_text();
                self.bottom.clear();
                let k = match self.current_block.take() {
                    Some((t, i, k)) if t == *turn && i == *iteration => k,
                    _ => {
                        // A call that did not run (rejected, or skipped after an interrupt).
                        self.blocks_seen += 1;
                        let header = block_header(self.blocks_seen, *turn, *iteration);
                        let header = self.block_section(header);
                        out.push_str(&header);
                        self.blocks_seen
                    }
                };
                // An interrupted or crashed block may report less than it took: the time seen here
                // counts then.
                let seen = match &self.activity {
                    Activity::Block { since, .. } => since.elapsed().as_millis() as u64,
                    _ => 0,
                };
                let wall_ms = match status.as_str() {
                    "ok" | "error" => *wall_ms,
                    _ => (*wall_ms).max(seen),
                };
                out.push_str(&result_lines(
                    status.as_str(),
                    wall_ms,
                    output,
                    Some((k, width)),
                ));
                self.activity = Activity::Idle;
                self.emit(&out);
            }
            Event::Notice { text } => {
                let mut out = self.flush_text();
                let text = text.trim_start_matches("[vis] ");
                out.push_str(&WARN.paint(&format!("[vis] {}", escape_controls(text))));
                out.push('\n');
                self.emit(&out);
            }
            Event::Error { message, .. } => {
                let mut out = self.flush_text();
                out.push_str(&BAD.paint(&format!("✗ error: {}", escape_controls(message))));
                out.push('\n');
                self.emit(&out);
            }
            Event::TurnFinished { turn, status, .. } => {
                let mut out = self.flush_text();
                self.activity = Activity::Idle;
                let note = match status.as_str() {
                    "done" => None,
                    "interrupted" => Some(format!(
                        "⏹ turn {turn} interrupted; your next message continues the conversation"
                    )),
                    "iteration_limit" => Some(format!(
                        "turn {turn} stopped at the iteration limit; send a message to let the model go on"
                    )),
                    "output_limit" => Some(format!("turn {turn} ended at the output limit")),
                    other => Some(format!("turn {turn} {}", escape_controls(other))),
                };
                if let Some(note) = note {
                    out.push_str(&WARN.paint(&note));
                    out.push('\n');
                }
                self.emit(&out);
            }
        }
    }

    /// The plain transcript (the same form as `vis chat -m`).
    fn plain(&mut self, event: &Event) {
        let line = |text: &str| format!("{text}\n");
        let out = match event {
            Event::TextDelta { text } => escape_controls(text).into_owned(),
            Event::ReasoningDelta { .. }
            | Event::RequestStarted { .. }
            | Event::TurnStarted { .. }
            | Event::ResponseFinished { .. } => return,
            Event::Retrying {
                attempt,
                delay_ms,
                reason,
            } => line(&format!(
                "[vis] retrying (attempt {}, in {:.1} s): {}",
                attempt + 1,
                *delay_ms as f64 / 1000.0,
                escape_controls(reason)
            )),
            Event::BlockStarted {
                turn,
                iteration,
                code,
            } => {
                self.blocks_seen += 1;
                line(&format!(
                    "── t{turn}/i{iteration} python ──\n{}",
                    escape_controls(code.trim_end())
                ))
            }
            Event::BlockOutput {
                text,
                skipped_bytes,
                ..
            } => escape_controls(&self.streamed.push(text, *skipped_bytes)).into_owned(),
            Event::BlockFinished {
                status,
                output,
                wall_ms,
                ..
            } => {
                let streamed = self.streamed.streamed();
                let rest = self.streamed.rest(output).trim_end();
                let status = format!("── {} · {} ──", status.as_str(), seconds(*wall_ms));
                if streamed && rest.is_empty() {
                    line(&status)
                } else {
                    line(&format!("{status}\n{}", escape_controls(rest)))
                }
            }
            Event::Notice { text } => line(&format!(
                "[vis] {}",
                escape_controls(text.trim_start_matches("[vis] "))
            )),
            Event::Error { message, .. } => {
                line(&format!("[vis] error: {}", escape_controls(message)))
            }
            Event::TurnFinished { turn, status, .. } => {
                line(&format!("── turn {turn} {} ──", status.as_str()))
            }
        };
        let starts_line = !matches!(event, Event::TextDelta { .. }) && !out.is_empty();
        let out = if starts_line && self.mid_line {
            format!("\n{out}")
        } else {
            out
        };
        if !out.is_empty() {
            self.mid_line = !out.ends_with('\n');
        }
        self.emit(&out);
    }

    /// Renders what text and reasoning are still held (the response ended or a block starts).
    fn flush_text(&mut self) -> String {
        let mut out = self.flush_thinking();
        if self.fancy {
            out.push_str(&self.md.finish(term_width()));
        }
        self.text_section(out)
    }

    fn flush_thinking(&mut self) -> String {
        let rest = self.thinking.take();
        if rest.trim().is_empty() {
            String::new()
        } else {
            thinking_line(rest.trim_end())
        }
    }

    /// Writes `text` above the spinner, then draws the spinner again if something runs.
    fn emit(&mut self, text: &str) {
        let width = term_width();
        let mut buf = self.bottom.erase(width);
        buf.push_str(text);
        if self.fancy {
            if let Some(line) = self.spinner_line() {
                buf.push_str(&self.bottom.draw(line, width, term_height()));
            }
        }
        if buf.is_empty() {
            return;
        }
        if print_styled(&buf).is_err() {
            // Nobody reads the transcript any more: the turn is interrupted.
            self.stop.cancel();
        }
    }

    fn spinner_line(&self) -> Option<String> {
        let (label, since) = match &self.activity {
            Activity::Idle => return None,
            Activity::Request { since } => ("thinking".to_string(), since),
            Activity::Block { place, since } => (format!("running {place}"), since),
        };
        let elapsed = seconds(since.elapsed().as_millis() as u64);
        let frame = FRAMES[self.frame % FRAMES.len()];
        let hint = if self.stopping {
            " · interrupting…"
        } else {
            " · Ctrl-C interrupts"
        };
        let head = format!("{frame} {label} {elapsed}");
        let width = term_width().saturating_sub(1);
        let mut line = ACCENT.paint(&head) + &DIM.paint(hint);
        let used = style::width(&line);
        let mut preview = self.md.preview(width);
        if preview.is_empty() && !self.thinking.is_blank() {
            preview = format!("┊ {}", escape_controls(&self.thinking.tail(width)));
        }
        if !preview.is_empty() && width > used + 8 {
            let room = width - used - 3;
            line.push_str(&DIM.paint(&format!(" · {}", style::clip_left(&preview, room))));
        }
        if style::width(&line) > width {
            line = style::clip(&format!("{head}{hint}"), width);
        }
        Some(line)
    }
}

fn thinking_line(text: &str) -> String {
    format!(
        "{}{}\n",
        DIM.paint("  ┊ "),
        DIM.italic().paint(&escape_controls(text))
    )
}

fn term_width() -> usize {
    crossterm::terminal::size()
        .map(|(w, _)| w as usize)
        .unwrap_or(80)
        .max(20)
}

fn block_header(k: usize, turn: i64, iteration: i64) -> String {
    format!(
        "{} {}{}\n",
        ACCENT.bold().paint("●"),
        Style::PLAIN.bold().paint("python"),
        DIM.paint(&format!(" t{turn}/i{iteration} · block {k}"))
    )
}

/// A block's code, highlighted, cut after `limit` lines (with the way to see the rest).
fn code_lines(code: &str, limit: Option<usize>, k: usize) -> String {
    let lines = highlight(code.trim_end(), "python");
    let shown = limit.unwrap_or(usize::MAX).min(lines.len());
    let mut out = String::new();
    for line in &lines[..shown] {
        out.push_str(&DIM.paint("  │ "));
        out.push_str(line);
        out.push('\n');
    }
    if shown < lines.len() {
        out.push_str(&DIM.paint(&format!(
            "  │ … {} more lines of code (/expand {k})",
            lines.len() - shown
        )));
        out.push('\n');
    }
    out
}

/// A block's status and output; `collapse` = `(block number, width)` shows only the first
/// lines, each cut to the width.
fn result_lines(
    status: &str,
    wall_ms: u64,
    output: &str,
    collapse: Option<(usize, usize)>,
) -> String {
    let paint = match status {
        "ok" => GOOD,
        "error" | "crashed" => BAD,
        _ => WARN,
    };
    let mut out = format!(
        "  {} {}{}\n",
        DIM.paint("⎿"),
        paint.paint(&escape_controls(status)),
        DIM.paint(&format!(" · {}", seconds(wall_ms)))
    );
    let text = escape_controls(output.trim_end());
    let lines: Vec<&str> = text.split('\n').collect();
    let shown = match collapse {
        Some(_) => lines.len().min(COLLAPSED_LINES),
        None => lines.len(),
    };
    for line in &lines[..shown] {
        let line = line.trim_end_matches('\r');
        out.push_str("    ");
        match collapse {
            Some((_, width)) => out.push_str(&style::clip(line, width.saturating_sub(5))),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    if let Some((k, _)) = collapse {
        if shown < lines.len() {
            let n = lines.len() - shown;
            out.push_str(&DIM.paint(&format!(
                "    … {n} more line{} (/expand {k} or Ctrl-O)",
                if n == 1 { "" } else { "s" }
            )));
            out.push('\n');
        }
    }
    out
}

/// Block number `k` of the session in full: all its code and all its output.
pub fn full_block(k: usize, row: &IterationRow) -> String {
    let mut out = block_header(k, row.turn, row.iteration);
    out.push_str(&code_lines(&row.code, None, k));
    out.push_str(&result_lines(
        row.status.as_str(),
        row.duration_ms.max(0) as u64,
        &row.output,
        None,
    ));
    if let Some(path) = &row.artifact {
        out.push_str(&DIM.paint(&format!(
            "    (the output above was capped; all of it is in {})",
            escape_controls(path)
        )));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::style::strip;
    use super::*;

    #[test]
    fn output_collapses_to_a_few_lines() {
        let output: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let out = strip(&result_lines("ok", 1200, &output, Some((3, 80))));
        assert_eq!(
            out,
            "  ⎿ ok · 1.2 s\n    line 1\n    line 2\n    line 3\n    line 4\n    line 5\n    line 6\n    … 14 more lines (/expand 3 or Ctrl-O)\n"
        );
        let full = strip(&result_lines("ok", 1200, &output, None));
        assert!(full.contains("line 20\n"));
        let long = strip(&result_lines("error", 0, &"x".repeat(500), Some((1, 40))));
        assert!(long.lines().all(|l| l.chars().count() <= 40), "{long}");
    }

    #[test]
    fn block_output_escapes_controls() {
        let out = result_lines("ok", 0, "\u{1b}]0;pwned\u{7}\u{1b}[2J", Some((1, 80)));
        assert!(
            strip(&out).contains("\\x1b]0;pwned\\x07\\x1b[2J"),
            "{out:?}"
        );
        assert!(!strip(&out).contains('\u{1b}'));
    }
}
