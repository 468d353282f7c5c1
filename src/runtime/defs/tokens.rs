//! Python's tokenizer, as far as the host needs it: the tokens of a block's source, so the
//! host can tell where each top-level statement begins and ends the way the worker's Python
//! reads it.
//!
//! It follows CPython's tokenizer (`Parser/tokenizer.c`, `Parser/lexer/`) on every point that
//! moves a statement boundary:
//! - newlines: `\r\n` and a lone `\r` are newlines ([`normalize_newlines`]; Python translates
//!   them before tokenizing source text);
//! - indentation: spaces, tabs (to the next multiple of 8, and consistent with a tab size of 1
//!   or it is a `TabError`) and form feeds (which reset the column to 0, so `"    \fx = 1"` is
//!   at the top level); blank and comment-only lines do not count;
//! - backslash continuations, and newlines inside brackets, which join lines;
//! - strings (scanned in `strings`): prefixes, triple quotes, escapes; f-strings, whose
//!   replacement fields are code since Python 3.12 (PEP 701: `f"{d["k"]}"` is one string
//!   there, not in 3.11), and template strings (`t"…"`, 3.14);
//! - comments, numbers, operators; identifiers are NFKC-normalized (`ｆ` is `f`).
//!
//! Comments and blank lines yield no token. A source Python would reject at this stage (an
//! unterminated string, an unclosed bracket, a bad dedent, a character that is not Python) is
//! an error, never a guess.

use std::borrow::Cow;

/// Which Python's rules to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dialect {
    /// PEP 701 (3.12): f-string replacement fields are tokenized as code, so they may hold
    /// strings with the f-string's own quote, comments and newlines.
    pub nested_fstrings: bool,
    /// PEP 750 (3.14): `t"…"` template strings (tokenized like f-strings).
    pub template_strings: bool,
}

impl Dialect {
    pub const fn of_version(major: u32, minor: u32) -> Dialect {
        Dialect {
            nested_fstrings: major > 3 || (major == 3 && minor >= 12),
            template_strings: major > 3 || (major == 3 && minor >= 14),
        }
    }

    /// The Python this binary links, which its workers run (recorded by the build).
    pub fn linked() -> Dialect {
        let mut parts = env!("VIS_PYTHON_VERSION")
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let major = parts.next().unwrap_or(3);
        let minor = parts.next().unwrap_or(0);
        Dialect::of_version(major, minor)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Name,
    Number,
    /// A string or bytes literal (with its prefix; adjacent literals are separate tokens).
    String,
    /// An f-string or template string, replacement fields included.
    FString,
    Op,
    /// The end of a logical line.
    Newline,
    Indent,
    Dedent,
}

/// One token: its kind and its byte range in the (normalized) source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

impl Token {
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        source.get(self.start..self.end).unwrap_or_default()
    }
}

/// Why a source is not Python (as Python would say at this stage, roughly).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SourceError {
    pub line: usize,
    pub message: &'static str,
}

/// `code` with `\r\n` and lone `\r` turned into `\n`, as Python reads source text.
pub fn normalize_newlines(code: &str) -> Cow<'_, str> {
    if !code.contains('\r') {
        return Cow::Borrowed(code);
    }
    Cow::Owned(code.replace("\r\n", "\n").replace('\r', "\n"))
}

/// An identifier as Python binds it: NFKC-normalized (PEP 3131).
pub fn identifier(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    use unicode_normalization::UnicodeNormalization;
    Cow::Owned(text.nfkc().collect())
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || unicode_ident::is_xid_start(c))
        && chars.all(|c| c == '_' || unicode_ident::is_xid_continue(c))
}

/// The tokens of `source`, which must already have its newlines normalized
/// ([`normalize_newlines`]; a `\r` left in it is an error).
pub fn tokenize(source: &str, dialect: Dialect) -> Result<Vec<Token>, SourceError> {
    let mut scanner = Scanner {
        src: source.as_bytes(),
        text: source,
        pos: 0,
        line: 1,
        dialect,
        fstring_depth: 0,
    };
    scanner.run()
}

const THREE_CHAR_OPS: [&[u8]; 5] = [b"**=", b"//=", b">>=", b"<<=", b"..."];
const TWO_CHAR_OPS: [&[u8]; 20] = [
    b"**", b"//", b">>", b"<<", b"<=", b">=", b"==", b"!=", b"->", b":=", b"+=", b"-=", b"*=",
    b"/=", b"%=", b"&=", b"|=", b"^=", b"@=", b"<>",
];
const ONE_CHAR_OPS: &[u8] = b"+-*/%@&|^~<>()[]{},:.;=!";

/// The scanner's state; string literals are scanned in `strings`.
pub(super) struct Scanner<'a> {
    pub(super) src: &'a [u8],
    pub(super) text: &'a str,
    pub(super) pos: usize,
    pub(super) line: usize,
    pub(super) dialect: Dialect,
    /// f-strings open around the scanner (3.12 and later).
    pub(super) fstring_depth: usize,
}

impl Scanner<'_> {
    pub(super) fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    pub(super) fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.pos += 1;
        if c == b'\n' {
            self.line += 1;
        }
        Some(c)
    }

    pub(super) fn error(&self, message: &'static str) -> SourceError {
        SourceError {
            line: self.line,
            message,
        }
    }

    pub(super) fn skip_comment(&mut self) {
        while self.peek().is_some_and(|c| c != b'\n') {
            self.pos += 1;
        }
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\x0c')) {
            self.pos += 1;
        }
    }

    /// The column of the first character of a line, and the same with a tab size of 1 (two
    /// lines that agree on one and not the other are a `TabError`).
    fn indentation(&mut self) -> (usize, usize) {
        let (mut col, mut alt) = (0, 0);
        loop {
            match self.peek() {
                Some(b' ') => {
                    col += 1;
                    alt += 1;
                }
                Some(b'\t') => {
                    col = (col / 8 + 1) * 8;
                    alt += 1;
                }
                // A form feed resets the column (CPython does the same).
                Some(b'\x0c') => {
                    col = 0;
                    alt = 0;
                }
                _ => return (col, alt),
            }
            self.pos += 1;
        }
    }

    fn run(&mut self) -> Result<Vec<Token>, SourceError> {
        let mut out = Vec::new();
        let mut indents: Vec<(usize, usize)> = vec![(0, 0)];
        let mut brackets: Vec<u8> = Vec::new();
        let mut at_line_start = true;
        let mut line_has_tokens = false;
        loop {
            if at_line_start {
                at_line_start = false;
                let (col, alt) = self.indentation();
                if brackets.is_empty() {
                    if matches!(self.peek(), None | Some(b'#' | b'\n')) {
                        // A blank or comment-only line: no tokens, no indentation.
                        self.skip_comment();
                        if self.bump().is_none() {
                            break;
                        }
                        at_line_start = true;
                        continue;
                    }
                    self.indent_to(col, alt, &mut indents, &mut out)?;
                }
            }
            self.skip_spaces();
            let Some(c) = self.peek() else { break };
            let start = self.pos;
            match c {
                b'#' => self.skip_comment(),
                b'\n' => {
                    self.bump();
                    if brackets.is_empty() && line_has_tokens {
                        out.push(Token {
                            kind: Kind::Newline,
                            start,
                            end: start + 1,
                        });
                        line_has_tokens = false;
                    }
                    at_line_start = true;
                }
                b'\\' => self.continuation()?,
                b'(' | b'[' | b'{' => {
                    self.pos += 1;
                    brackets.push(c);
                    line_has_tokens = true;
                    out.push(self.token(Kind::Op, start));
                }
                b')' | b']' | b'}' => {
                    self.pos += 1;
                    let open = brackets
                        .pop()
                        .ok_or(self.error("unmatched closing bracket"))?;
                    if !matches!((open, c), (b'(', b')') | (b'[', b']') | (b'{', b'}')) {
                        return Err(self.error("closing bracket does not match the opening one"));
                    }
                    line_has_tokens = true;
                    out.push(self.token(Kind::Op, start));
                }
                _ => {
                    let kind = self.scan_token()?;
                    line_has_tokens = true;
                    out.push(self.token(kind, start));
                }
            }
        }
        if !brackets.is_empty() {
            return Err(self.error("a bracket was never closed"));
        }
        let end = self.src.len();
        if line_has_tokens {
            out.push(Token {
                kind: Kind::Newline,
                start: end,
                end,
            });
        }
        for _ in 1..indents.len() {
            out.push(Token {
                kind: Kind::Dedent,
                start: end,
                end,
            });
        }
        Ok(out)
    }

    fn token(&self, kind: Kind, start: usize) -> Token {
        Token {
            kind,
            start,
            end: self.pos,
        }
    }

    /// INDENT or DEDENT tokens for a logical line starting at column `col`.
    fn indent_to(
        &self,
        col: usize,
        alt: usize,
        indents: &mut Vec<(usize, usize)>,
        out: &mut Vec<Token>,
    ) -> Result<(), SourceError> {
        let here = Token {
            kind: Kind::Indent,
            start: self.pos,
            end: self.pos,
        };
        let (top, alt_top) = indents.last().copied().unwrap_or((0, 0));
        if col == top {
            if alt != alt_top {
                return Err(self.error("inconsistent use of tabs and spaces in indentation"));
            }
        } else if col > top {
            if alt <= alt_top {
                return Err(self.error("inconsistent use of tabs and spaces in indentation"));
            }
            indents.push((col, alt));
            out.push(here);
        } else {
            while indents.len() > 1 && indents.last().is_some_and(|&(c, _)| col < c) {
                indents.pop();
                out.push(Token {
                    kind: Kind::Dedent,
                    ..here
                });
            }
            let (top, alt_top) = indents.last().copied().unwrap_or((0, 0));
            if col != top {
                return Err(self.error("unindent does not match any outer indentation level"));
            }
            if alt != alt_top {
                return Err(self.error("inconsistent use of tabs and spaces in indentation"));
            }
        }
        Ok(())
    }

    /// A backslash that joins this line to the next.
    pub(super) fn continuation(&mut self) -> Result<(), SourceError> {
        self.pos += 1;
        match self.peek() {
            Some(b'\n') => {
                self.bump();
                Ok(())
            }
            None => Err(self.error("unexpected end of source after a line continuation")),
            Some(_) => Err(self.error("unexpected character after line continuation character")),
        }
    }

    /// One name, number, string or operator (not a bracket of the line's own nesting).
    pub(super) fn scan_token(&mut self) -> Result<Kind, SourceError> {
        let Some(c) = self.peek() else {
            return Err(self.error("unexpected end of source"));
        };
        if c == b'\'' || c == b'"' {
            return self.scan_string("");
        }
        if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 {
            let start = self.pos;
            while self
                .peek()
                .is_some_and(|c| c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80)
            {
                self.pos += 1;
            }
            let name = self.text.get(start..self.pos).unwrap_or_default();
            if matches!(self.peek(), Some(b'\'' | b'"')) && self.is_string_prefix(name) {
                return self.scan_string(name);
            }
            if !name.is_ascii() && !is_identifier(&identifier(name)) {
                return Err(self.error("invalid character in identifier"));
            }
            return Ok(Kind::Name);
        }
        if c.is_ascii_digit() || (c == b'.' && self.peek_at(1).is_some_and(|d| d.is_ascii_digit()))
        {
            self.scan_number();
            return Ok(Kind::Number);
        }
        let rest = &self.src[self.pos..];
        let len = if THREE_CHAR_OPS.iter().any(|op| rest.starts_with(op)) {
            3
        } else if TWO_CHAR_OPS.iter().any(|op| rest.starts_with(op)) {
            2
        } else if ONE_CHAR_OPS.contains(&c) {
            1
        } else {
            return Err(self.error("invalid character"));
        };
        self.pos += len;
        Ok(Kind::Op)
    }

    fn is_string_prefix(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "r" | "u" | "b" | "br" | "rb" | "f" | "fr" | "rf" => true,
            "t" | "tr" | "rt" => self.dialect.template_strings,
            _ => false,
        }
    }

    fn scan_number(&mut self) {
        let digits = |s: &mut Self, hex: bool| {
            while s
                .peek()
                .is_some_and(|c| c == b'_' || c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()))
            {
                s.pos += 1;
            }
        };
        if self.peek() == Some(b'0')
            && matches!(
                self.peek_at(1),
                Some(b'x' | b'X' | b'o' | b'O' | b'b' | b'B')
            )
        {
            self.pos += 2;
            digits(self, true);
            return;
        }
        digits(self, false);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            digits(self, false);
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(self.peek_at(1), Some(b'+' | b'-')));
            if self.peek_at(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1 + sign;
                digits(self, false);
            }
        }
        if matches!(self.peek(), Some(b'j' | b'J')) {
            self.pos += 1;
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const PY311: Dialect = Dialect::of_version(3, 11);

    /// Each token's kind and text (these tests and those of `strings`).
    pub(in crate::runtime::defs) fn kinds(source: &str, dialect: Dialect) -> Vec<(Kind, String)> {
        tokenize(source, dialect)
            .unwrap()
            .iter()
            .map(|t| (t.kind, t.text(source).to_string()))
            .collect()
    }

    pub(in crate::runtime::defs) fn texts(source: &str, dialect: Dialect) -> Vec<String> {
        kinds(source, dialect).into_iter().map(|(_, t)| t).collect()
    }

    #[test]
    fn carriage_returns_are_newlines() {
        assert_eq!(normalize_newlines("a\r\nb\rc\n"), "a\nb\nc\n");
        assert!(matches!(normalize_newlines("a\nb"), Cow::Borrowed(_)));
        let src = normalize_newlines("import os\rprint(1)");
        let newlines = tokenize(&src, PY311)
            .unwrap()
            .iter()
            .filter(|t| t.kind == Kind::Newline)
            .count();
        assert_eq!(newlines, 2);
    }

    #[test]
    fn indentation_follows_tabs_and_form_feeds() {
        use Kind::*;
        let k =
            |s: &str| -> Vec<Kind> { tokenize(s, PY311).unwrap().iter().map(|t| t.kind).collect() };
        // The last line back at the top level, or still inside the block.
        let back = [
            Name, Name, Op, Newline, Indent, Name, Newline, Dedent, Name, Newline,
        ];
        let inside = [
            Name, Name, Op, Newline, Indent, Name, Newline, Name, Newline, Dedent,
        ];
        assert_eq!(k("if x:\n    y\nz\n"), back);
        // A form feed resets the column: this `z` is at the top level again.
        assert_eq!(k("if x:\n    y\n    \x0cz\n"), back);
        // Blank and comment-only lines do not count, whatever their indentation.
        assert_eq!(k("if x:\n    y\n  # c\n\x0c\n\n    w\n"), inside);
        // A tab counts to the next multiple of 8, and must agree with a tab size of 1.
        assert_eq!(k("if x:\n\ty\n\tz\n"), inside);
        let e = tokenize("if x:\n\ty\n        z\n", PY311).unwrap_err();
        assert!(e.message.contains("tabs and spaces"), "{e}");
        let e = tokenize("if x:\n    y\n  z\n", PY311).unwrap_err();
        assert!(e.message.contains("unindent"), "{e}");
    }

    #[test]
    fn continuations_and_brackets_join_lines() {
        assert_eq!(
            texts("x = 1 \\\n + 2\ny = (3,\n  4)\n", PY311),
            ["x", "=", "1", "+", "2", "\n", "y", "=", "(", "3", ",", "4", ")", "\n"]
        );
        assert!(tokenize("x = 1 \\ 2\n", PY311).is_err());
        assert!(tokenize("x = (1,\n", PY311).is_err());
        assert!(tokenize("x = (1]\n", PY311).is_err());
    }

    #[test]
    fn numbers_operators_and_names() {
        assert_eq!(
            texts("a**=0x1F+1.5e-3j...b!=c:=d->e<<=f", PY311),
            [
                "a", "**=", "0x1F", "+", "1.5e-3j", "...", "b", "!=", "c", ":=", "d", "->", "e",
                "<<=", "f", ""
            ]
        );
        assert_eq!(texts("1if x else 2", PY311)[..2], ["1", "if"]);
        assert_eq!(identifier("ｆ"), "f");
        assert_eq!(kinds("ｆ = 1", PY311)[0].0, Kind::Name);
        for bad in [
            "x = 1\x0b",
            "x = $",
            "x\u{a0}= 1",
            "\u{feff}x = 1",
            "x = `1`",
        ] {
            assert!(tokenize(bad, PY311).is_err(), "{bad:?}");
        }
        // A vertical tab in a comment or string is fine.
        assert!(tokenize("x = 1 # \x0b\ny = '\x0b'\n", PY311).is_ok());
    }
}
