//! The plain transcript, printed by `vis chat -m` and when standard input or output is not a
//! terminal: no colors, no spinner, nothing redrawn. Assistant text as it streams (escaped,
//! not rendered), each block as `── t1/i1 python ──` with its code, its output lines as they
//! complete and `── ok · 0.1 s ──` followed by the rest of its result ([`StreamedOutput`]: what
//! did not stream; a call that did not run shows its code the same way), notices and errors as
//! `[vis] …` lines, and `── turn N done ──` at each turn's end.

use super::streamed::StreamedOutput;
use crate::cli::chat::seconds;
use crate::cli::term::escape_controls;
use crate::protocol::Event;

#[derive(Default)]
pub struct Transcript {
    /// The last text written does not end its line.
    mid_line: bool,
    /// The running block's output printed so far.
    streamed: StreamedOutput,
}

impl Transcript {
    /// What `event` adds to the transcript (escaped; `""` for nothing).
    pub fn event(&mut self, event: &Event) -> String {
        let line = |text: &str| format!("{text}\n");
        let out = match event {
            Event::TextDelta { text } => escape_controls(text).into_owned(),
            Event::ReasoningDelta { .. }
            | Event::RequestStarted { .. }
            | Event::TurnStarted { .. }
            | Event::JobStarted { .. }
            | Event::JobFinished { .. }
            | Event::ResponseFinished { .. } => return String::new(),
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
            } => header(*turn, *iteration, code),
            Event::BlockOutput {
                text,
                skipped_bytes,
                ..
            } => escape_controls(&self.streamed.push(text, *skipped_bytes)).into_owned(),
            Event::BlockFinished {
                turn,
                iteration,
                status,
                output,
                wall_ms,
                code,
                ..
            } => {
                // A call that did not run had no `block_started`: its header and code come
                // with its end.
                let mut out = match code {
                    Some(code) => header(*turn, *iteration, code),
                    None => String::new(),
                };
                let streamed = self.streamed.streamed();
                let rest = self.streamed.rest(output).trim_end();
                let status = format!("── {} · {} ──", status.as_str(), seconds(*wall_ms));
                if streamed && rest.is_empty() {
                    out.push_str(&line(&status));
                } else {
                    out.push_str(&line(&format!("{status}\n{}", escape_controls(rest))));
                }
                out
            }
            Event::Notice { text } => line(&format!(
                "[vis] {}",
                escape_controls(text.trim_start_matches("[vis] "))
            )),
            Event::Error { message, .. } => {
                line(&format!("[vis] error: {}", escape_controls(message)))
            }
            Event::ChildStarted { .. } | Event::ChildFinished { .. } => {
                line(&child_line(event).unwrap_or_default())
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
        out
    }

    /// Ends the last line (the turn's events are over).
    pub fn finish(&mut self) -> &'static str {
        if std::mem::take(&mut self.mid_line) {
            "\n"
        } else {
            ""
        }
    }
}

/// The line a sub-session's start or end shows (escaped: the task and answer are the model's).
pub(super) fn child_line(event: &Event) -> Option<String> {
    match event {
        Event::ChildStarted {
            turn,
            iteration,
            child,
            task,
        } => Some(format!(
            "[vis] t{turn}/i{iteration} started sub-session {}: {}",
            escape_controls(child),
            escape_controls(task)
        )),
        Event::ChildFinished {
            child,
            status,
            answer,
        } => Some(format!(
            "[vis] sub-session {} {}{}",
            escape_controls(child),
            escape_controls(status),
            if answer.is_empty() {
                String::new()
            } else {
                format!(": {}", escape_controls(answer))
            }
        )),
        _ => None,
    }
}

fn header(turn: i64, iteration: i64, code: &str) -> String {
    format!(
        "── t{turn}/i{iteration} python ──\n{}\n",
        escape_controls(code.trim_end())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::IterationStatus;

    #[test]
    fn a_call_that_did_not_run_shows_its_header_and_code() {
        let mut t = Transcript::default();
        let mut out = t.event(&Event::TextDelta {
            text: "Calling".into(),
        });
        out.push_str(&t.event(&Event::BlockFinished {
            turn: 1,
            iteration: 2,
            status: IterationStatus::Rejected,
            output: "[vis] the arguments are not JSON".into(),
            wall_ms: 0,
            code: Some("{\"code\": \u{1b}[2J".into()),
            images: Vec::new(),
        }));
        out.push_str(t.finish());
        assert_eq!(
            out,
            "Calling\n── t1/i2 python ──\n{\"code\": \\x1b[2J\n── rejected · 0.0 s ──\n[vis] the arguments are not JSON\n"
        );
    }
}
