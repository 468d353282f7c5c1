//! How a turn looks on the screen: the view consumes the turn's [`Event`]s and owns the
//! terminal's output while the turn runs.
//!
//! In the fancy (terminal) form the bottom of the screen is a [`Screen`]: output committed
//! above (it goes into the scrollback once and is never redrawn), a live region of rows that
//! may still change, and a spinner line ("thinking 3.2 s", "running t2/i3 1.1 s"). The
//! answer's Markdown streams through [`MarkdownStream`]: settled blocks are committed, the
//! block still being written is the live region, redrawn as it grows, so the final output is
//! the answer rendered whole. Reasoning is dimmed behind a `┊` gutter, a line at a time; each
//! block shows its highlighted code and its output collapsed (`blocks.rs`), with the block's
//! number for `/expand`.
//!
//! The plain form (stdin or stdout not a terminal, and `vis chat -m`) prints the transcript of
//! `plain.rs`.
//!
//! While a block runs, the region shows the last lines of its output (`live.rs`). Other live
//! views would use the same region: set `View::live` to the
//! rows to show (each fitting the width less one column; [`screen::fit`] cuts the region to
//! the screen's height) and call [`View::emit`], which commits its text above the region and
//! redraws the region and the spinner from the first row that changed. The answer's Markdown
//! owns the region while a response streams and leaves it empty when it ends.

use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::blocks::{block_header, code_lang, code_lines, result_lines, COLLAPSED_CODE_LINES};
use super::lines::LineBuffer;
use super::live::BlockTail;
use super::plain::Transcript;
use super::screen::{self, Screen};
use super::stream::{MarkdownStream, Update};
use super::style::{self, ACCENT, BAD, DIM, WARN};
use super::wrap::{paint, Line};
use crate::cli::chat::seconds;
use crate::cli::term::{escape_controls, print_styled};
use crate::protocol::Event;

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
    /// The live region's rows (the answer's unsettled block), before fitting to the screen;
    /// drawn by the next [`emit`](View::emit).
    live: Vec<String>,
    /// The running block's last lines of output, shown in the live region.
    block_tail: BlockTail,
    /// When the answer's Markdown was last rendered, and how long that took: a timer's
    /// re-render waits four times as long, so a huge block costs a bounded share of the time.
    rendered: (Instant, Duration),
    /// The incomplete last line of reasoning.
    thinking: LineBuffer,
    activity: Activity,
    screen: Screen,
    frame: usize,
    /// Something of the current attempt's answer was committed (a retry must say it is void).
    drew_this_attempt: bool,
    stopping: bool,
    /// The turn's stop token: cancelled when standard output's reader goes away.
    stop: CancellationToken,
    plain: Transcript,
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
            live: Vec::new(),
            block_tail: BlockTail::default(),
            rendered: (Instant::now(), Duration::ZERO),
            thinking: LineBuffer::default(),
            activity: Activity::Idle,
            screen: Screen::default(),
            frame: 0,
            drew_this_attempt: false,
            stopping: false,
            stop: CancellationToken::new(),
            plain: Transcript::default(),
            last: Drawn::Nothing,
        }
    }

    /// `text` (answer or reasoning rows), set apart from a block drawn before it.
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
                    self.refresh_text();
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
        if !self.fancy {
            let end = self.plain.finish();
            self.emit(end);
        }
    }

    fn event(&mut self, event: &Event) {
        if !self.fancy {
            let out = self.plain.event(event);
            return self.emit(&out);
        }
        let width = term_width();
        match event {
            // Job ends reach the model (and the screen) as the notice of the next request.
            Event::TurnStarted { .. } | Event::JobStarted { .. } | Event::JobFinished { .. } => {}
            Event::RequestStarted { .. } => {
                self.drew_this_attempt = false;
                self.activity = Activity::Request {
                    since: Instant::now(),
                };
                self.emit("");
            }
            Event::TextDelta { text } => {
                let thinking = self.flush_thinking();
                let started = Instant::now();
                let update = self.md.push(text, markdown_width());
                if update.live.is_some() {
                    self.rendered = (started, started.elapsed());
                }
                self.show_text(thinking, update);
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
                self.live.clear();
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
                self.blocks_seen += 1;
                let k = self.blocks_seen;
                self.current_block = Some((*turn, *iteration, k));
                let header = self.block_section(block_header(k, *turn, *iteration));
                out.push_str(&header);
                out.push_str(&code_lines(code, "python", Some(COLLAPSED_CODE_LINES), k));
                self.activity = Activity::Block {
                    place: format!("t{turn}/i{iteration}"),
                    since: Instant::now(),
                };
                self.block_tail.clear();
                self.emit(&out);
            }
            Event::BlockOutput {
                text,
                skipped_bytes,
                ..
            } => {
                self.block_tail.push(text, *skipped_bytes);
                self.show_block_tail();
                self.emit("");
            }
            Event::BlockFinished {
                turn,
                iteration,
                status,
                output,
                wall_ms,
                code,
                ..
            } => {
                let mut out = self.flush_text();
                self.block_tail.clear();
                self.live.clear();
                let k = match self.current_block.take() {
                    Some((t, i, k)) if t == *turn && i == *iteration => k,
                    _ => {
                        // A call that did not run (rejected, or skipped after an interrupt):
                        // its header and code come with its end.
                        self.blocks_seen += 1;
                        let k = self.blocks_seen;
                        let header = self.block_section(block_header(k, *turn, *iteration));
                        out.push_str(&header);
                        if let Some(code) = code {
                            let lang = code_lang(status.as_str());
                            out.push_str(&code_lines(code, lang, Some(COLLAPSED_CODE_LINES), k));
                        }
                        k
                    }
                };
                // An interrupted or crashed block may report less than it took: the time seen
                // here counts then.
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
            Event::ChildStarted { .. } | Event::ChildFinished { .. } => {
                let mut out = self.flush_text();
                let text = super::plain::child_line(event).unwrap_or_default();
                out.push_str(&WARN.paint(&text));
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

    /// Draws what the answer's Markdown settled (after `before`, the reasoning it ends) and
    /// its live rows.
    fn show_text(&mut self, before: String, update: Update) {
        let mut out = before;
        if !update.commit.is_empty() {
            self.drew_this_attempt = true;
            out.push_str(&update.commit.join("\n"));
            out.push('\n');
        }
        let out = self.text_section(out);
        if let Some(mut live) = update.live {
            // Text after a block starts with a blank row, as it will when committed.
            if self.last == Drawn::Block && !live.is_empty() {
                live.insert(0, Line::new());
            }
            self.live = screen::fit_with(&live, live_height(), |row| paint(row));
        }
        self.emit(&out);
    }

    /// On the timer: re-renders the answer's Markdown when the budget held it back (at most a
    /// fifth of the time goes to it), and draws the spinner's next frame.
    fn refresh_text(&mut self) {
        if matches!(self.activity, Activity::Block { .. }) {
            // The terminal may have been resized: the block's rows are fitted again.
            self.show_block_tail();
            return self.emit("");
        }
        let (at, took) = self.rendered;
        if self.md.is_dirty() && at.elapsed() >= took * 4 {
            let started = Instant::now();
            let update = self.md.refresh(markdown_width());
            self.rendered = (started, started.elapsed());
            self.show_text(String::new(), update);
        } else {
            self.emit("");
        }
    }

    /// Puts the running block's last lines in the live region, fitted to the terminal.
    fn show_block_tail(&mut self) {
        let (width, height) = term_size();
        self.live = self.block_tail.rows(width, height);
    }

    /// Commits what text and reasoning are still held (the response ended or a block starts).
    fn flush_text(&mut self) -> String {
        let mut out = self.flush_thinking();
        if self.fancy {
            let rows = self.md.finish(markdown_width());
            if !rows.is_empty() {
                self.drew_this_attempt = true;
                out.push_str(&rows.join("\n"));
                out.push('\n');
            }
            self.live.clear();
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

    /// Writes `text` (complete lines) above the live region, then draws the live region and
    /// the spinner again.
    pub fn emit(&mut self, text: &str) {
        let out = if self.fancy {
            let live = screen::fit(&self.live, live_height());
            let spinner = self.spinner_line();
            self.screen
                .frame_at(term_width(), text, &live, spinner.as_deref())
        } else {
            text.to_string()
        };
        if out.is_empty() {
            return;
        }
        if print_styled(&out).is_err() {
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
        if !self.thinking.is_blank() && width > used + 8 {
            let preview = format!("┊ {}", escape_controls(&self.thinking.tail(width)));
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

/// The terminal's columns (at least 20) and rows (80 × 24 when it cannot be asked).
fn term_size() -> (usize, usize) {
    crossterm::terminal::size()
        .map(|(w, h)| ((w as usize).max(20), h as usize))
        .unwrap_or((80, 24))
}

fn term_width() -> usize {
    term_size().0
}

/// Rows the live region may take: the screen's height, less the spinner and a margin.
fn live_height() -> usize {
    term_size().1.saturating_sub(3)
}

/// The answer's rows leave the last column free: a row that fills it makes some terminals
/// wrap, and a wrapped live row could not be redrawn.
fn markdown_width() -> usize {
    term_width() - 1
}
