//! Text bound for a terminal: control characters are shown escaped, so nothing a block,
//! a file or a model prints can move the cursor, retitle the window, write the clipboard
//! (OSC 52) or query the terminal. The store keeps the raw bytes.

/// `text` with C0 and C1 control characters (but newline and tab) written as `\x1b`-style
/// escapes, and DEL as `\x7f`.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| (c.is_control() && c != '\n' && c != '\t') || c == '\u{7f}';
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if bad(c) {
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
    std::borrow::Cow::Owned(out)
}

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
}
