//! Text bound for a terminal, and the only way the command line writes it.
//!
//! [`escape_controls`] is the one escaping function: C0 and C1 control characters (but newline
//! and tab), DEL, bidi controls and invisible format characters are shown as `\x1b` /
//! `\u{202e}`, so nothing a block, a file, a model or a stored row holds can move the cursor,
//! retitle the window, write the clipboard (OSC 52), query the terminal, or make a line read
//! differently from what it is (Trojan Source reordering, zero-width or tag characters hiding
//! text). The store keeps the raw bytes.
//!
//! The command line prints only through this module (`print_stdout`/`print_stderr` are denied
//! by clippy everywhere else): [`outln!`] and [`out!`] escape the whole text, [`errln!`] too (on
//! standard error); [`print_styled`] writes text the chat UI built from escaped pieces and its
//! own colors. JSON for people ([`escape_json`]) writes the same characters as `\uXXXX`, which
//! keeps it valid JSON with the same value.
//!
//! A reader that goes away (`vis sessions show ID | head`) is not an error: the one-shot
//! commands stop at the next write and the process ends as if killed by SIGPIPE (what `cat`
//! does; status 141 in a shell). `vis chat` notices it through [`print_styled`], ends the turn
//! and its worker first, and then ends the same way ([`exit_code`]).

use std::borrow::Cow;
use std::io::Write;
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, Ordering};

/// Invisible characters that change how the text around them reads, or hide text: bidi
/// controls, zero-width characters, fillers, variation selectors (but the two emoji
/// presentation selectors U+FE0E/U+FE0F), tag characters. Mostly Unicode's
/// Default_Ignorable_Code_Point, plus the line and paragraph separators, which some terminals
/// take as line breaks.
const INVISIBLE: &[RangeInclusive<u32>] = &[
    0x00AD..=0x00AD,   // soft hyphen
    0x034F..=0x034F,   // combining grapheme joiner
    0x061C..=0x061C,   // Arabic letter mark (bidi)
    0x115F..=0x1160,   // Hangul choseong and jungseong fillers
    0x17B4..=0x17B5,   // Khmer inherent vowels
    0x180B..=0x180F,   // Mongolian variation selectors and vowel separator
    0x200B..=0x200F,   // zero-width space, non-joiner, joiner; LRM, RLM
    0x2028..=0x2029,   // line and paragraph separators
    0x202A..=0x202E,   // bidi embeddings, overrides, pop
    0x2060..=0x206F,   // word joiner, invisible operators, bidi isolates, deprecated formats
    0x3164..=0x3164,   // Hangul filler
    0xFE00..=0xFE0D,   // variation selectors 1-14
    0xFEFF..=0xFEFF,   // zero-width no-break space (byte order mark)
    0xFFA0..=0xFFA0,   // halfwidth Hangul filler
    0xFFF0..=0xFFFB,   // unassigned specials, interlinear annotation
    0x1BCA0..=0x1BCA3, // shorthand format controls
    0x1D173..=0x1D17A, // musical symbol format controls
    0xE0000..=0xE0FFF, // tag characters (invisible ASCII), variation selectors supplement
];

/// `c` must not reach a terminal as it is.
fn needs_escape(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_control() && c != '\n' && c != '\t';
    }
    let n = c as u32;
    c.is_control() || INVISIBLE.iter().any(|r| r.contains(&n))
}

/// `text` with control characters (but newline and tab) written as `\x1b`-style escapes, DEL
/// as `\x7f`, and bidi controls and invisible characters as `\u{202e}`-style escapes.
/// Idempotent: its output has nothing left to escape.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(needs_escape) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if needs_escape(c) {
            let n = c as u32;
            if n <= 0xff {
                out.push_str(&format!("\\x{n:02x}"));
            } else {
                out.push_str(&format!("\\u{{{n:x}}}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// JSON text with every character [`escape_controls`] would escape written as a JSON `\uXXXX`
/// escape: still valid JSON with the same value, and safe to show. (Such characters can only
/// be inside strings: serializers write control characters below U+0020 escaped already.)
pub fn escape_json(json: &str) -> Cow<'_, str> {
    let Some(first) = json.find(needs_escape) else {
        return Cow::Borrowed(json);
    };
    let mut out = String::with_capacity(json.len() + 16);
    out.push_str(&json[..first]);
    let mut units = [0u16; 2];
    for c in json[first..].chars() {
        if needs_escape(c) {
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Standard output's reader went away.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static KEEP_RUNNING: AtomicBool = AtomicBool::new(false);

/// From now on a closed standard output does not end the process at once: writes report it
/// ([`print_styled`], [`stdout_closed`]) so `vis chat` can end its turn and worker first.
pub fn keep_running_when_stdout_closes() {
    KEEP_RUNNING.store(true, Ordering::Relaxed);
}

/// Standard output's reader went away during this run.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Writes `text` to standard output as it is: text built from escaped pieces and the chat
/// UI's own styles (or a block's output going into a pipe, which is the model's exact text).
/// When the reader went away: the process ends as SIGPIPE would, or, after
/// [`keep_running_when_stdout_closes`], the error says so. Any other failure ends a one-shot
/// command with one line saying why (exit 1); in `vis chat` it is ignored (the turn goes on and
/// is recorded).
pub fn print_styled(text: &str) -> Result<(), StdoutClosed> {
    if stdout_closed() {
        return Err(StdoutClosed);
    }
    let written = {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    let keep_running = KEEP_RUNNING.load(Ordering::Relaxed);
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            if !keep_running {
                die_of_broken_pipe();
            }
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Err(StdoutClosed)
        }
        Err(_) if keep_running => Ok(()),
        Err(e) => {
            eprint_escaped(&format!("vis: cannot write the output: {e}\n"));
            std::process::exit(1);
        }
    }
}

/// Writes `text`, escaped, to standard output (a closed pipe as in [`print_styled`]).
pub fn print_escaped(text: &str) {
    let _ = print_styled(&escape_controls(text));
}

/// Writes `text`, escaped, to standard error (a failure to do so has nowhere to be told).
pub fn eprint_escaped(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(escape_controls(text).as_bytes());
    let _ = err.flush();
}

/// Ends the process as a SIGPIPE would (status 141 in a shell), like any Unix filter whose
/// reader closed the pipe. Rust ignores SIGPIPE, so the default action is restored first.
pub fn die_of_broken_pipe() -> ! {
    // SAFETY: setting a signal's disposition to its default and raising it in this process;
    // no handler runs, the default action ends the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Reached only when SIGPIPE is blocked: the status a shell shows for it.
    std::process::exit(128 + libc::SIGPIPE)
}

/// The process's exit `code`, unless standard output was closed on it (then it ends as
/// SIGPIPE would, after the command cleaned up).
pub fn exit_code(code: i32) -> i32 {
    if stdout_closed() {
        die_of_broken_pipe();
    }
    code
}

/// `print!` for the command line: the formatted text, escaped, to standard output.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::term::print_escaped(&format!($($arg)*))
    };
}

/// `println!` for the command line: the formatted line, escaped, to standard output.
macro_rules! outln {
    () => {
        $crate::cli::term::print_escaped("\n")
    };
    ($($arg:tt)*) => {
        $crate::cli::term::print_escaped(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` for the command line: the formatted line, escaped, to standard error.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::term::eprint_escaped(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_everything_that_could_drive_a_terminal() {
        assert_eq!(escape_controls("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(
            escape_controls("\u{1b}]52;c;aGk=\u{7}x\r\u{9b}2J\u{7f}"),
            "\\x1b]52;c;aGk=\\x07x\\x0d\\x9b2J\\x7f"
        );
    }

    #[test]
    fn escapes_bidi_controls_and_invisible_characters() {
        // Trojan Source: overrides and isolates that would show code in another order.
        // in another order.
        assert_eq!(
            escape_controls("a\u{202e}b\u{2066}c\u{2069}d\u{200f}\u{61c}"),
            "a\\u{202e}b\\u{2066}c\\u{2069}d\\u{200f}\\u{61c}"
        );
        for c in [
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{202a}',
            '\u{202d}',
            '\u{2067}',
            '\u{2068}',
            '\u{200e}',
            '\u{3164}',
            '\u{2028}',
            '\u{e0041}',
            '\u{e0100}',
            '\u{fe00}',
        ] {
            let escaped = escape_controls(&format!("x{c}y")).into_owned();
            assert_eq!(escaped, format!("x\\u{{{:x}}}y", c as u32));
        }
        // Up to U+00FF the short form, as for C1 controls.
        assert_eq!(escape_controls("\u{85}\u{ad}"), "\\x85\\xad");
        // Visible text, emoji presentation selectors and ordinary non-ASCII stay as they are.
        for text in [
            "héllo wörld",
            "日本語",
            "❤\u{fe0f}",
            "☺\u{fe0e}",
            "tab\tand\nnewline",
        ] {
            assert!(matches!(escape_controls(text), Cow::Borrowed(_)), "{text}");
        }
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let once = escape_controls("\u{1b}[2J\u{202e}\u{200b}\\x1b");
        assert_eq!(escape_controls(&once), once);
    }

    #[test]
    fn json_keeps_its_value_and_loses_its_dangerous_characters() {
        let value = serde_json::json!({"text": "a\u{1b}[2J\u{202e}b\u{7f}\u{9b}\u{e0041}é\n"});
        let text = serde_json::to_string_pretty(&value).unwrap();
        assert!(
            text.contains('\u{202e}'),
            "serde_json writes it raw: {text}"
        );
        let safe = escape_json(&text);
        assert_eq!(
            escape_controls(&safe),
            safe,
            "nothing left to escape: {safe}"
        );
        assert!(
            safe.contains("\\u202e") && safe.contains("\\udb40\\udc41"),
            "{safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
        assert!(matches!(escape_json("{\"a\": \"é\"}"), Cow::Borrowed(_)));
    }
}
