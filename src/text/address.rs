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

#[cfg(test)]
mod tests {
    use super::*;

    fn is_cvcv(hash: &str) -> bool {
        let b = hash.as_bytes();
        b.len() == 4
            && CONSONANTS.contains(&b[0])
            && VOWELS.contains(&b[1])
            && CONSONANTS.contains(&b[2])
            && VOWELS.contains(&b[3])
    }

    #[test]
    fn hashes_are_four_letters_shaped_cvcv() {
        for line in [
            "",
            "x",
            "fn main() {}",
            "\u{fffd}\u{0}",
            "a very long line indeed",
        ] {
            let hash = LineHash::of(line.as_bytes());
            assert!(is_cvcv(hash.as_str()), "{line:?} → {hash}");
            assert_eq!(LineHash::parse(hash.as_str()), Some(hash));
        }
        assert_eq!(HASH_SPACE, 9_025);
    }

    #[test]
    fn trailing_blanks_do_not_count_but_indentation_does() {
        let plain = LineHash::of(b"return x");
        assert_eq!(LineHash::of(b"return x  \t\r"), plain);
        assert_eq!(LineHash::of(b"return x\x0b\x0c"), plain);
        assert_ne!(LineHash::of(b"    return x"), plain);
        assert_eq!(LineHash::of(b"   "), LineHash::of(b""));
    }

    #[test]
    fn hashing_is_stable_across_runs() {
        // Addresses printed in one session must still match in the next: the hash is a pure
        // function of the content, fixed by xxh3 and the alphabets.
        let hash = LineHash::of(b"def main():");
        assert_eq!(hash, LineHash::of(b"def main():"));
        assert_eq!(format!("{hash:?}"), format!("LineHash({hash})"));
    }

    #[test]
    fn a_one_byte_change_usually_changes_the_hash() {
        let base = b"value = compute(alpha, beta)".to_vec();
        let mut same = 0;
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i] ^= 0x01;
            if LineHash::of(&changed) == LineHash::of(&base) {
                same += 1;
            }
        }
        // 28 mutations at 1/9,025 each: even one collision would be a sign of a bad hash.
        assert_eq!(same, 0);
    }

    #[test]
    fn parse_refuses_anything_but_cvcv() {
        for bad in [
            "", "kod", "kodua", "KODU", "kodü", "okdu", "kxdu", "1234", "ko du",
        ] {
            assert_eq!(LineHash::parse(bad), None, "{bad:?}");
        }
        assert!(LineHash::parse("kodu").is_some());
    }

    #[test]
    fn addresses_parse_with_or_without_copied_content() {
        let hash = LineHash::parse("kodu").expect("valid");
        let want = Address::new(42, hash);
        for text in [
            "42:kodu",
            "  42:kodu  ",
            "42:kodu|    return x",
            "42:kodu |x",
        ] {
            assert_eq!(text.parse::<Address>(), Ok(want), "{text:?}");
        }
        assert_eq!(want.to_string(), "42:kodu");
        assert_eq!(want.to_string().parse::<Address>(), Ok(want));
    }

    #[test]
    fn malformed_addresses_say_why_and_show_a_good_one() {
        let cases = [
            ("42", "no ':' between line number and hash"),
            ("x:kodu", "the line number is not a positive integer"),
            ("-1:kodu", "the line number is not a positive integer"),
            (":kodu", "the line number is not a positive integer"),
            ("0:kodu", "line numbers start at 1"),
            (
                "99999999999999999999999:kodu",
                "the line number is too large",
            ),
            (
                "42:KODU",
                "the hash is not 4 letters shaped consonant-vowel-consonant-vowel",
            ),
            (
                "42:",
                "the hash is not 4 letters shaped consonant-vowel-consonant-vowel",
            ),
        ];
        for (input, reason) in cases {
            let err = input.parse::<Address>().expect_err(input);
            assert_eq!(err.reason, reason, "{input:?}");
            assert_eq!(err.input, input);
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("malformed address {input:?}: ")),
                "{message}"
            );
            assert!(message.ends_with("e.g. '42:kodu'"), "{message}");
        }
    }
}
