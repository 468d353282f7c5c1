//! Fold keys: the names of conversation ranges that `fold_session` and `read_session` take.
//!
//! ```text
//! keys  := key ("," key)*                      spaces around commas are allowed
//! key   := "t" N ["/" "i" N ["-" "i" N]]       a turn, one iteration, or a range in one turn
//!        | "-" "t" N ["/" "i" N]               everything from the start through that point
//! N     := a decimal number ≥ 1
//! ```
//!
//! Parsing is purely syntactic: whether turn 7 exists, or a range is reversed, is checked
//! against the session by the gateway. Errors name the position (1-based character) and the
//! form that was expected there.

use std::fmt;

/// One parsed key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldKey {
    /// `t2`: the whole turn.
    Turn(i64),
    /// `t2/i4` (`first == last`) or `t2/i4-i5`.
    Iterations { turn: i64, first: i64, last: i64 },
    /// `-t3`: from the start through the end of turn 3.
    ThroughTurn(i64),
    /// `-t3/i9`: from the start through turn 3 iteration 9.
    ThroughIteration { turn: i64, iteration: i64 },
}

impl fmt::Display for FoldKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoldKey::Turn(t) => write!(f, "t{t}"),
            FoldKey::Iterations { turn, first, last } if first == last => {
                write!(f, "t{turn}/i{first}")
            }
            FoldKey::Iterations { turn, first, last } => write!(f, "t{turn}/i{first}-i{last}"),
            FoldKey::ThroughTurn(t) => write!(f, "-t{t}"),
            FoldKey::ThroughIteration { turn, iteration } => write!(f, "-t{turn}/i{iteration}"),
        }
    }
}

/// A key that does not parse: where, and what was expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad fold key {key:?}: {problem} at position {position}; keys look like t2, t2/i4, t2/i4-i5, -t3, -t3/i9, or several of them separated by commas")]
pub struct KeyError {
    pub key: String,
    /// 1-based character position in the whole key text.
    pub position: usize,
    pub problem: String,
}

const FORMS: &str = "t2, t2/i4, t2/i4-i5, -t3, -t3/i9";

/// Parses a comma-separated list of keys (at least one).
pub fn parse_keys(text: &str) -> Result<Vec<FoldKey>, KeyError> {
    let chars: Vec<char> = text.chars().collect();
    let err = |position: usize, problem: String| KeyError {
        key: text.to_string(),
        position: position + 1,
        problem,
    };
    if text.trim().is_empty() {
        return Err(err(
            0,
            format!("the key is empty (expected one of {FORMS})"),
        ));
    }
    let mut keys = Vec::new();
    let mut p = Parser {
        chars: &chars,
        pos: 0,
    };
    loop {
        p.skip_spaces();
        keys.push(p.key().map_err(|(at, problem)| err(at, problem))?);
        p.skip_spaces();
        match p.peek() {
            None => break,
            Some(',') => {
                p.pos += 1;
                p.skip_spaces();
                if p.peek().is_none() {
                    return Err(err(p.pos, "a key is missing after the last comma".into()));
                }
            }
            Some(c) => {
                return Err(err(
                    p.pos,
                    format!("unexpected {c:?} (expected a comma or the end of the key)"),
                ))
            }
        }
    }
    Ok(keys)
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
}

type Fail = (usize, String);

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: char, what: &str) -> Result<(), Fail> {
        match self.peek() {
            Some(found) if found == c => {
                self.pos += 1;
                Ok(())
            }
            Some(found) => Err((self.pos, format!("expected {what}, found {found:?}"))),
            None => Err((self.pos, format!("expected {what}, found the end"))),
        }
    }

    fn number(&mut self, what: &str) -> Result<i64, Fail> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(match self.peek() {
                Some(found) => (
                    start,
                    format!("expected the {what} number, found {found:?}"),
                ),
                None => (start, format!("expected the {what} number, found the end")),
            });
        }
        let digits: String = self.chars[start..self.pos].iter().collect();
        match digits.parse::<i64>() {
            Ok(0) => Err((start, format!("{what} numbers start at 1"))),
            Ok(n) => Ok(n),
            Err(_) => Err((start, format!("the {what} number {digits} is too large"))),
        }
    }

    fn key(&mut self) -> Result<FoldKey, Fail> {
        let through = self.peek() == Some('-');
        if through {
            self.pos += 1;
        }
        self.expect('t', "'t' and a turn number (as in t2)")?;
        let turn = self.number("turn")?;
        if self.peek() != Some('/') {
            return Ok(if through {
                FoldKey::ThroughTurn(turn)
            } else {
                FoldKey::Turn(turn)
            });
        }
        self.pos += 1;
        self.expect('i', "'i' and an iteration number (as in t2/i4)")?;
        let first = self.number("iteration")?;
        if through {
            if self.peek() == Some('-') {
                return Err((
                    self.pos,
                    "a range cannot follow a -t… key (-t3/i9 already means everything through t3/i9)".into(),
                ));
            }
            return Ok(FoldKey::ThroughIteration {
                turn,
                iteration: first,
            });
        }
        if self.peek() != Some('-') {
            return Ok(FoldKey::Iterations {
                turn,
                first,
                last: first,
            });
        }
        self.pos += 1;
        self.expect(
            'i',
            "'i' and the last iteration of the range (as in t2/i4-i5)",
        )?;
        let last = self.number("iteration")?;
        Ok(FoldKey::Iterations { turn, first, last })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_prints_back() {
        for (text, key) in [
            ("t2", FoldKey::Turn(2)),
            (
                "t2/i4",
                FoldKey::Iterations {
                    turn: 2,
                    first: 4,
                    last: 4,
                },
            ),
            (
                "t2/i4-i5",
                FoldKey::Iterations {
                    turn: 2,
                    first: 4,
                    last: 5,
                },
            ),
            ("-t3", FoldKey::ThroughTurn(3)),
            (
                "-t3/i9",
                FoldKey::ThroughIteration {
                    turn: 3,
                    iteration: 9,
                },
            ),
        ] {
            assert_eq!(parse_keys(text).unwrap(), [key]);
            assert_eq!(key.to_string(), text);
        }
        assert_eq!(
            parse_keys(" t1 , t2/i1-i3,-t4 ").unwrap(),
            [
                FoldKey::Turn(1),
                FoldKey::Iterations {
                    turn: 2,
                    first: 1,
                    last: 3
                },
                FoldKey::ThroughTurn(4)
            ]
        );
    }

    #[test]
    fn errors_give_the_position_and_the_expected_form() {
        let cases = [
            ("", 1, "the key is empty"),
            ("   ", 1, "the key is empty"),
            ("2", 1, "expected 't' and a turn number"),
            ("t", 2, "expected the turn number, found the end"),
            ("t0", 2, "turn numbers start at 1"),
            ("t2/", 4, "expected 'i' and an iteration number"),
            ("t2/x4", 4, "found 'x'"),
            ("t2/i", 5, "expected the iteration number"),
            ("t2/i4-", 7, "the last iteration of the range"),
            ("t2/i4-5", 7, "found '5'"),
            ("t2,", 4, "a key is missing after the last comma"),
            ("t2 t3", 4, "expected a comma"),
            ("-t3/i9-i10", 7, "a range cannot follow"),
            ("t99999999999999999999", 2, "too large"),
            ("t2/i1-i3x", 9, "unexpected 'x'"),
        ];
        for (text, position, problem) in cases {
            let e = parse_keys(text).unwrap_err();
            assert_eq!(e.position, position, "{text}: {e}");
            assert!(e.problem.contains(problem), "{text}: {e}");
            assert!(e.to_string().contains("keys look like t2, t2/i4"), "{e}");
        }
    }
}
