//! How a block looks: its header (`● python t2/i1 · block 3`), its highlighted code, its
//! status and output (collapsed to [`COLLAPSED_LINES`] while a turn runs, whole for
//! `/expand`), and the one-line summary the resume recap shows.

use super::highlight::highlight;
use super::style::{self, Style, ACCENT, BAD, DIM, GOOD, WARN};
use crate::cli::chat::seconds;
use crate::cli::term::escape_controls;
use crate::protocol::IterationRow;

/// Output lines shown for a block before "… N more lines".
pub const COLLAPSED_LINES: usize = 6;
/// Code lines shown for a block before it is cut (the rest is a `/expand` away).
pub const COLLAPSED_CODE_LINES: usize = 30;

pub fn block_header(k: usize, turn: i64, iteration: i64) -> String {
    format!(
        "{} {}{}\n",
        ACCENT.bold().paint("●"),
        Style::PLAIN.bold().paint("python"),
        DIM.paint(&format!(" t{turn}/i{iteration} · block {k}"))
    )
}

/// How a call's code is highlighted: a rejected call's "code" is its arguments as the model
/// sent them, not Python.
pub fn code_lang(status: &str) -> &'static str {
    if status == "rejected" {
        "text"
    } else {
        "python"
    }
}

/// A block's code, highlighted as `lang`, cut after `limit` lines (with the way to see the
/// rest).
pub fn code_lines(code: &str, lang: &str, limit: Option<usize>, k: usize) -> String {
    let lines = highlight(code.trim_end(), lang);
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
pub fn result_lines(
    status: &str,
    wall_ms: u64,
    output: &str,
    collapse: Option<(usize, usize)>,
) -> String {
    let paint = status_style(status);
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
    out.push_str(&code_lines(
        &row.code,
        code_lang(row.status.as_str()),
        None,
        k,
    ));
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

/// Block `k` in one line, for the resume recap: where it ran, its status and time, the first
/// line of its code and the size of its output, cut to `width` columns.
pub fn summary_line(k: usize, row: &IterationRow, width: usize) -> String {
    let status = row.status.as_str();
    let head = format!("  ● block {k} · t{}/i{} · ", row.turn, row.iteration);
    let time = match row.status {
        crate::protocol::IterationStatus::Rejected => String::new(),
        _ => format!(" · {}", seconds(row.duration_ms.max(0) as u64)),
    };
    let lines = row.output.trim_end().lines().count();
    let size = match lines {
        0 => " · no output".to_string(),
        1 => " · 1 line out".to_string(),
        n => format!(" · {} lines out", crate::protocol::group_thousands(n)),
    };
    let mut code_lines = row.code.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = escape_controls(code_lines.next().unwrap_or("")).replace('\t', " ");
    let more = if code_lines.next().is_some() {
        " …"
    } else {
        ""
    };
    let fixed = style::width(&head) + status.len() + style::width(&time) + style::width(&size);
    let room = width.saturating_sub(fixed + 3);
    let code = if room >= 8 {
        format!(" · {}", style::clip(&format!("{first}{more}"), room))
    } else {
        String::new()
    };
    format!(
        "{}{}{}\n",
        DIM.paint(&head),
        status_style(status).paint(status),
        DIM.paint(&format!("{time}{code}{size}"))
    )
}

fn status_style(status: &str) -> Style {
    match status {
        "ok" => GOOD,
        "error" | "crashed" => BAD,
        _ => WARN,
    }
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
