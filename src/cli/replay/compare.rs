//! One iteration's verdict: the recorded output and status against the replayed ones, after
//! normalisation, with a short diff when the outputs differ.

use crate::protocol::IterationStatus;

/// At most this many lines of each side in a diff, and this many characters of a line.
const DIFF_LINES: usize = 6;
const LINE_CHARS: usize = 160;

/// What became of one recorded iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Same,
    DifferentOutput {
        diff: String,
    },
    DifferentStatus {
        recorded: IterationStatus,
        replayed: IterationStatus,
        /// The outputs' diff, when they differ too.
        diff: Option<String>,
    },
    /// It ran, but made calls a replay does not answer (named); not compared.
    NotReplayable {
        calls: Vec<String>,
    },
    /// Not run, and why.
    Skipped {
        why: &'static str,
    },
}

/// Compares normalised outputs and statuses.
pub fn judge(recorded: (&str, IterationStatus), replayed: (&str, IterationStatus)) -> Verdict {
    let diff = (recorded.0 != replayed.0).then(|| short_diff(recorded.0, replayed.0));
    if recorded.1 != replayed.1 {
        return Verdict::DifferentStatus {
            recorded: recorded.1,
            replayed: replayed.1,
            diff,
        };
    }
    match diff {
        Some(diff) => Verdict::DifferentOutput { diff },
        None => Verdict::Same,
    }
}

/// Why a recorded iteration is not run again, or `None` to run it.
pub fn skip_reason(status: IterationStatus) -> Option<&'static str> {
    use crate::protocol::Status;
    match status {
        IterationStatus::Ended(Status::Interrupted) => Some(
            "interrupted in the recording: the moment it was stopped cannot be reproduced, and running it whole would do more than the recording did",
        ),
        IterationStatus::Rejected => Some("rejected in the recording: it never ran"),
        IterationStatus::Running => Some(
            "never finished in the recording (its process stopped): there is no result to compare",
        ),
        IterationStatus::Ended(_) => None,
    }
}

/// The lines that differ, between the common start and the common end: `@@ line N @@`, then up
/// to [`DIFF_LINES`] recorded (`-`) and replayed (`+`) lines, each clipped; what is left out is
/// counted. Never longer than about 2 × 6 lines of 160 characters.
pub fn short_diff(recorded: &str, replayed: &str) -> String {
    let old: Vec<&str> = recorded.split_inclusive('\n').collect();
    let new: Vec<&str> = replayed.split_inclusive('\n').collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let removed = &old[prefix..old.len() - suffix];
    let added = &new[prefix..new.len() - suffix];
    let mut out = format!("@@ line {} @@\n", prefix + 1);
    for (sign, lines) in [('-', removed), ('+', added)] {
        for line in lines.iter().take(DIFF_LINES) {
            out.push(sign);
            out.push_str(&show_line(line));
            out.push('\n');
        }
        if lines.len() > DIFF_LINES {
            out.push_str(&format!(
                "{sign} … {} more line(s)\n",
                lines.len() - DIFF_LINES
            ));
        }
    }
    out
}

/// A line as the diff shows it: clipped, and a missing final newline or a `\r` made visible
/// (they are differences too).
fn show_line(line: &str) -> String {
    let (body, end) = match line.strip_suffix('\n') {
        Some(body) => (body, ""),
        None => (line, "⏎ (no newline at the end)"),
    };
    let (body, cr) = match body.strip_suffix('\r') {
        Some(body) => (body, "\\r"),
        None => (body, ""),
    };
    let clipped: String = body.chars().take(LINE_CHARS).collect();
    let more = if body.chars().count() > LINE_CHARS {
        "…"
    } else {
        ""
    };
    format!("{clipped}{more}{cr}{end}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Status;

    const OK: IterationStatus = IterationStatus::Ended(Status::Ok);
    const ERROR: IterationStatus = IterationStatus::Ended(Status::Error);

    #[test]
    fn same_output_and_status_is_same() {
        assert_eq!(judge(("a\n", OK), ("a\n", OK)), Verdict::Same);
    }

    #[test]
    fn a_changed_line_is_shown_with_its_number() {
        let verdict = judge(("a\nb\nc\n", OK), ("a\nB\nc\n", OK));
        assert_eq!(
            verdict,
            Verdict::DifferentOutput {
                diff: "@@ line 2 @@\n-b\n+B\n".into()
            }
        );
    }

    #[test]
    fn a_different_status_carries_the_diff() {
        let verdict = judge(("1\n", OK), ("Traceback\n", ERROR));
        let Verdict::DifferentStatus { diff, .. } = &verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(diff.as_deref(), Some("@@ line 1 @@\n-1\n+Traceback\n"));
    }

    #[test]
    fn the_diff_is_bounded() {
        let old: String = (0..100).map(|i| format!("{i}\n")).collect();
        let new: String = (0..100)
            .map(|i| format!("{i}{}\n", "x".repeat(500)))
            .collect();
        let diff = short_diff(&old, &new);
        assert_eq!(diff.lines().count(), 1 + 7 + 7, "{diff}");
        assert!(diff.contains("- … 94 more line(s)"));
        assert!(diff.lines().all(|l| l.chars().count() <= LINE_CHARS + 10));
    }

    #[test]
    fn a_missing_newline_and_a_carriage_return_are_visible() {
        assert_eq!(
            short_diff("a\n", "a"),
            "@@ line 1 @@\n-a\n+a⏎ (no newline at the end)\n"
        );
        assert_eq!(short_diff("a\n", "a\r\n"), "@@ line 1 @@\n-a\n+a\\r\n");
    }

    #[test]
    fn interrupted_rejected_and_unfinished_iterations_are_skipped() {
        assert!(skip_reason(IterationStatus::Ended(Status::Interrupted)).is_some());
        assert!(skip_reason(IterationStatus::Rejected).is_some());
        assert!(skip_reason(IterationStatus::Running).is_some());
        for status in [Status::Ok, Status::Error, Status::Timeout, Status::Crashed] {
            assert_eq!(skip_reason(IterationStatus::Ended(status)), None);
        }
    }
}
