//! Line addresses: `LINE:HASH`.
//!
//! HASH is four lowercase letters shaped consonant-vowel-consonant-vowel (`kodu`, `bate`),
//! derived from xxh3 of the line's content with trailing whitespace removed. There are
//! 19 × 5 × 19 × 5 = 9,025 hashes, so a line whose content changed at the same number passes a
//! stale check with probability 1/9,025 (the requirement is ≤ 1/4,096).
//!
//! Why this alphabet: measured with the o200k tokenizer over 47k lines of the CPython standard
//! library, a pronounceable CVCV hash costs 1.27 tokens per address against 1.46 for three
//! random letters, 1.69 for three base32 characters, 1.90 for three hex digits and 2.47 for four
//! hex digits (see docs/text.md and `benches/address_cost.rs`). The letters-only alphabet
//! also keeps the hash visually distinct from the line number.

use std::fmt;
use std::str::FromStr;

use xxhash_rust::xxh3::xxh3_64;

const CONSONANTS: &[u8; 19] = b"bcdfghjklmnprstvwxz";
const VOWELS: &[u8; 5] = b"aeiou";

/// How many distinct hashes exist; a changed line keeps its hash with probability 1/HASH_SPACE.
pub const HASH_SPACE: u64 = 19 * 5 * 19 * 5;

/// The short content hash of one line, always four ASCII letters.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LineHash([u8; 4]);

impl LineHash {
    /// Hash a line's content. `content` excludes the line ending; trailing whitespace (and any
    /// stray `\r`) is dropped here so that editors which trim trailing blanks don't invalidate
    /// addresses, while indentation stays significant.
    pub fn of(content: &[u8]) -> LineHash {
        let end = content
            .iter()
            .rposition(|b| !is_trailing_space(*b))
            .map_or(0, |i| i + 1);
        let mut h = xxh3_64(&content[..end]);
        let mut out = [0u8; 4];
        for (i, slot) in out.iter_mut().enumerate() {
            let alphabet: &[u8] = if i % 2 == 0 { CONSONANTS } else { VOWELS };
            let n = alphabet.len() as u64;
            *slot = alphabet[(h % n) as usize];
            h /= n;
        }
        LineHash(out)
    }

    /// The hash as text.
    pub fn as_str(&self) -> &str {
        // The bytes are always drawn from the ASCII alphabets above.
        std::str::from_utf8(&self.0).unwrap_or("????")
    }

    /// Parse a hash written by a model; `None` unless it is a well-formed CVCV hash.
    pub fn parse(text: &str) -> Option<LineHash> {
        let bytes = text.as_bytes();
        if bytes.len() != 4 {
            return None;
        }
        let mut out = [0u8; 4];
        for (i, b) in bytes.iter().enumerate() {
            let alphabet: &[u8] = if i % 2 == 0 { CONSONANTS } else { VOWELS };
            if !alphabet.contains(b) {
                return None;
            }
            out[i] = *b;
        }
        Some(LineHash(out))
    }
}

fn is_trailing_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

impl fmt::Display for LineHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for LineHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LineHash({})", self.as_str())
    }
}

/// A `LINE:HASH` address; `line` is 1-based.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Address {
    pub line: usize,
    pub hash: LineHash,
}

impl Address {
    pub fn new(line: usize, hash: LineHash) -> Address {
        Address { line, hash }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.hash)
    }
}

/// Why an address string could not be parsed. The message tells the model what a good one
/// looks like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressParseError {
    pub input: String,
    pub reason: &'static str,
}

impl fmt::Display for AddressParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed address {:?}: {}; an address is LINE:HASH as printed by cat or grep, \
             e.g. '42:kodu'",
            self.input, self.reason
        )
    }
}

impl std::error::Error for AddressParseError {}

impl FromStr for Address {
    type Err = AddressParseError;

    /// Accepts `LINE:HASH`, optionally followed by `|content` (a whole line copied from cat or
    /// grep output); surrounding whitespace is ignored.
    fn from_str(input: &str) -> Result<Address, AddressParseError> {
        let fail = |reason| AddressParseError {
            input: input.to_string(),
            reason,
        };
        let trimmed = input.trim();
        let addr = trimmed.split_once('|').map_or(trimmed, |(a, _)| a);
        let (line, hash) = addr
            .split_once(':')
            .ok_or_else(|| fail("no ':' between line number and hash"))?;
        if line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
            return Err(fail("the line number is not a positive integer"));
        }
        let line: usize = line
            .parse()
            .map_err(|_| fail("the line number is too large"))?;
        if line == 0 {
            return Err(fail("line numbers start at 1"));
        }
        let hash = LineHash::parse(hash.trim_end()).ok_or_else(|| {
            fail("the hash is not 4 letters shaped consonant-vowel-consonant-vowel")
        })?;
        Ok(Address { line, hash })
    }
}
