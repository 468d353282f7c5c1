//! String literals, as Python's tokenizer reads them: prefixes, triple quotes, escapes, and
//! f-strings, whose replacement fields are code from Python 3.12 (PEP 701) and so may hold
//! strings with the f-string's own quote, comments and newlines (before 3.12 an f-string is
//! scanned like any string: its fields could hold neither the quote nor a backslash).

use super::tokens::{Kind, Scanner, SourceError};

/// How deeply f-strings may nest in one another (CPython allows 150); the scanner recurses
/// per level, so a block cannot exhaust the host's stack.
const MAX_FSTRING_NESTING: usize = 150;

/// What a quote opened: its character, whether it is tripled.
#[derive(Clone, Copy)]
struct Quote {
    char: u8,
    triple: bool,
}

impl Scanner<'_> {
    /// A string whose `prefix` was just read; the scanner is at its opening quote.
    pub(super) fn scan_string(&mut self, prefix: &str) -> Result<Kind, SourceError> {
        let lower = prefix.to_ascii_lowercase();
        let formatted = lower.contains('f') || lower.contains('t');
        let raw = lower.contains('r');
        let quote = self.open_quote()?;
        if formatted && self.dialect.nested_fstrings {
            if self.fstring_depth >= MAX_FSTRING_NESTING {
                return Err(self.error("too many nested f-strings"));
            }
            self.fstring_depth += 1;
            let scanned = self.fstring_literal(quote, raw);
            self.fstring_depth -= 1;
            scanned?;
        } else {
            self.plain_string(quote)?;
        }
        Ok(if formatted {
            Kind::FString
        } else {
            Kind::String
        })
    }

    fn open_quote(&mut self) -> Result<Quote, SourceError> {
        let char = self.bump().ok_or(self.error("unexpected end of source"))?;
        let triple = self.peek() == Some(char) && self.peek_at(1) == Some(char);
        if triple {
            self.pos += 2;
        }
        Ok(Quote { char, triple })
    }

    /// Consumes the closing quote if the scanner is at it.
    fn at_close(&mut self, quote: Quote) -> bool {
        let len = if quote.triple { 3 } else { 1 };
        let closes = (0..len).all(|i| self.peek_at(i) == Some(quote.char));
        if closes {
            self.pos += len;
        }
        closes
    }

    /// The rest of a string literal (or an f-string before 3.12, where the replacement fields
    /// could hold neither the quote nor a backslash): a backslash escapes the next character,
    /// a raw string's included.
    fn plain_string(&mut self, quote: Quote) -> Result<(), SourceError> {
        loop {
            if self.at_close(quote) {
                return Ok(());
            }
            if self.peek() == Some(b'\n') && !quote.triple {
                return Err(self.error("unterminated string literal"));
            }
            match self.bump() {
                None => return Err(self.error("unterminated string literal")),
                Some(b'\\') => {
                    if self.bump().is_none() {
                        return Err(self.error("unterminated string literal"));
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// The literal part of an f-string (3.12 and later), up to its closing quote.
    fn fstring_literal(&mut self, quote: Quote, raw: bool) -> Result<(), SourceError> {
        let mut named_escape = false;
        loop {
            if self.at_close(quote) {
                return Ok(());
            }
            if self.peek() == Some(b'\n') && !quote.triple {
                return Err(self.error("unterminated f-string literal"));
            }
            match self.bump() {
                None => return Err(self.error("unterminated f-string literal")),
                Some(b'\\') => match self.peek() {
                    // `\{` is not an escape: the brace opens a field.
                    Some(b'{' | b'}') => {}
                    Some(b'N') if !raw => {
                        self.bump();
                        if self.peek() == Some(b'{') {
                            self.bump();
                            named_escape = true;
                        }
                    }
                    Some(_) => {
                        self.bump();
                    }
                    None => return Err(self.error("unterminated f-string literal")),
                },
                Some(b'{') => {
                    if self.peek() == Some(b'{') {
                        self.bump();
                    } else {
                        self.fstring_field(quote)?;
                    }
                }
                Some(b'}') => {
                    if named_escape {
                        named_escape = false;
                    } else if self.peek() == Some(b'}') {
                        self.bump();
                    } else {
                        return Err(self.error("f-string: single '}' is not allowed"));
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// A replacement field after its `{`: code up to `}`, or up to `:` and a format spec.
    fn fstring_field(&mut self, quote: Quote) -> Result<(), SourceError> {
        let mut depth = 0usize;
        loop {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\x0c' | b'\n')) {
                self.bump();
            }
            match self.peek() {
                None => return Err(self.error("f-string: expecting '}'")),
                Some(b'#') => self.skip_comment(),
                Some(b'\\') => self.continuation()?,
                Some(b'}') if depth == 0 => {
                    self.bump();
                    return Ok(());
                }
                Some(b':') if depth == 0 => {
                    self.bump();
                    return self.fstring_spec(quote);
                }
                Some(b'(' | b'[' | b'{') => {
                    self.bump();
                    depth += 1;
                }
                Some(b')' | b']' | b'}') => {
                    self.bump();
                    depth = depth
                        .checked_sub(1)
                        .ok_or(self.error("f-string: unmatched closing bracket"))?;
                }
                Some(_) => {
                    self.scan_token()?;
                }
            }
        }
    }

    /// A format spec after its `:`, through the `}` that ends the field.
    fn fstring_spec(&mut self, quote: Quote) -> Result<(), SourceError> {
        loop {
            let closing =
                (0..if quote.triple { 3 } else { 1 }).all(|i| self.peek_at(i) == Some(quote.char));
            if closing {
                return Err(self.error("f-string: expecting '}'"));
            }
            if self.peek() == Some(b'\n') && !quote.triple {
                return Err(self.error("unterminated f-string literal"));
            }
            match self.bump() {
                None => return Err(self.error("f-string: expecting '}'")),
                Some(b'{') => {
                    // A field in a format spec: bounded like nested f-strings (Python allows
                    // two levels).
                    if self.fstring_depth >= MAX_FSTRING_NESTING {
                        return Err(self.error("too many nested f-strings"));
                    }
                    self.fstring_depth += 1;
                    let scanned = self.fstring_field(quote);
                    self.fstring_depth -= 1;
                    scanned?;
                }
                Some(b'}') => return Ok(()),
                Some(b'\\') => match self.peek() {
                    Some(b'{' | b'}') => {}
                    Some(_) => {
                        self.bump();
                    }
                    None => return Err(self.error("unterminated f-string literal")),
                },
                Some(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tests::{kinds, texts};
    use super::super::tokens::{tokenize, Dialect, Kind};

    const PY311: Dialect = Dialect::of_version(3, 11);
    const PY312: Dialect = Dialect::of_version(3, 12);

    #[test]
    fn strings_hide_what_looks_like_code() {
        let src = "s = '''a\ndef g():\n    pass'''\nt = \"x\\\"; import os\"\nu = r'\\'' # c; d\n";
        assert_eq!(
            texts(src, PY311),
            [
                "s",
                "=",
                "'''a\ndef g():\n    pass'''",
                "\n",
                "t",
                "=",
                "\"x\\\"; import os\"",
                "\n",
                "u",
                "=",
                "r'\\''",
                "\n"
            ]
        );
        assert!(tokenize("s = 'abc\n", PY311).is_err());
        assert!(tokenize("s = '''abc\n", PY311).is_err());
        assert_eq!(kinds("b'x' rb\"y\" Rb'z'", PY311)[1].0, Kind::String);
        // Not a prefix: a name, then a string.
        assert_eq!(kinds("ub'x'", PY311)[0], (Kind::Name, "ub".to_string()));
    }

    #[test]
    fn fstrings_nest_quotes_from_python_3_12() {
        let src = "x = f\"{d[\"k\"]}\"\n";
        // 3.12: one f-string.
        assert_eq!(texts(src, PY312), ["x", "=", "f\"{d[\"k\"]}\"", "\n"]);
        // 3.11: the f-string ends at the second quote (and the rest is another string).
        assert_eq!(texts(src, PY311)[2], "f\"{d[\"");
        let nested = "f'{x:{w}.{p}}' f'{a!r:>{n}}' f'{{}}' f'{\"}\"}' f'\\N{DASH}{1}' rf'\\{x}'";
        assert_eq!(
            kinds(nested, PY312)
                .iter()
                .filter(|(k, _)| *k == Kind::FString)
                .count(),
            6
        );
        // A field may span lines and hold comments in a triple-quoted f-string.
        let multi = "f'''{\n  x  # why\n  + 1}'''\n";
        assert_eq!(texts(multi, PY312), [multi.trim_end(), "\n"]);
        assert!(tokenize("f'{x'\n", PY312).is_err());
        assert!(tokenize("f'}'\n", PY312).is_err());
        assert!(tokenize("f'{x:abc'\n", PY312).is_err());
        let deep = format!("{}1{}", "f'{".repeat(400), "}'".repeat(400));
        assert_eq!(
            tokenize(&deep, PY312).unwrap_err().message,
            "too many nested f-strings"
        );
        let specs = format!("f'{}{}'", "{x:".repeat(400), "}".repeat(400));
        assert_eq!(
            tokenize(&specs, PY312).unwrap_err().message,
            "too many nested f-strings"
        );
        // Template strings are strings only from 3.14.
        assert_eq!(
            kinds("t'x'", Dialect::of_version(3, 14))[0].0,
            Kind::FString
        );
        assert_eq!(kinds("t'x'", PY312)[0].0, Kind::Name);
    }
}
