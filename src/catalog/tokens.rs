//! o200k_base token counting with a lazily loaded, process-wide encoder.
//!
//! Loading the encoder parses ~200k base64 ranks and compiles the split regex; it is done once
//! per process on first use (see `docs/catalog.md` for the measured cost) and can be forced
//! early with [`warm_up`].
//!
//! # Line additivity
//!
//! Counting a 5,000-entry catalog whole would cost far more than the render budget, so the
//! renderer counts line by line and stops as soon as a budget is exceeded. This is exact, not an
//! estimate: o200k's pre-tokenizer never produces a piece that contains a `\n` followed by a
//! character other than whitespace or `/` (letter and digit pieces exclude newlines, the
//! punctuation piece only extends over `[\r\n/]`, and the whitespace pieces contain only
//! whitespace). So for text cut right after a `\n` whose next character is neither whitespace
//! nor `/`, the token count of the whole equals the sum of the counts of the parts. Every line
//! the catalog renders starts with a name, `(`, `+`/`-`/`~` or a letter, which satisfies this; a
//! test checks the identity on rendered catalogs.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tiktoken_rs::CoreBPE;

use super::error::{CatalogError, Result};

/// The encoder, or the text of why it failed to load: the loader's error is not `Clone`, and
/// every later call reports the same failure as a [`CatalogError::Tokenizer`].
static ENCODER: OnceLock<std::result::Result<CoreBPE, String>> = OnceLock::new();

/// The shared o200k_base encoder, loading it on first use.
pub fn encoder() -> Result<&'static CoreBPE> {
    ENCODER
        .get_or_init(|| tiktoken_rs::o200k_base().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| CatalogError::Tokenizer(e.clone()))
}

/// Loads the encoder now; returns how long that took (zero when it was already loaded).
pub fn warm_up() -> Result<Duration> {
    if ENCODER.get().is_some() {
        encoder()?;
        return Ok(Duration::ZERO);
    }
    let start = Instant::now();
    encoder()?;
    Ok(start.elapsed())
}

/// o200k_base tokens in `text` (special-token text counts as ordinary text).
pub fn count_tokens(text: &str) -> Result<usize> {
    Ok(encoder()?.encode_ordinary(text).len())
}

/// Sum of the token counts of `lines` (each a `\n`-terminated line that satisfies the
/// additivity rule above), stopping early once the sum exceeds `limit`.
/// Returns `(sum so far, exceeded)`; when `exceeded` is false the sum is exact.
pub(crate) fn count_lines_until<'a, I>(lines: I, limit: usize) -> Result<(usize, bool)>
where
    I: IntoIterator<Item = &'a str>,
{
    let bpe = encoder()?;
    let mut sum = 0usize;
    for line in lines {
        sum += bpe.encode_ordinary(line).len();
        if sum > limit {
            return Ok((sum, true));
        }
    }
    Ok((sum, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_o200k_and_special_tokens_are_plain_text() {
        assert_eq!(count_tokens("").expect("tokenizer"), 0);
        assert_eq!(count_tokens("hello world").expect("tokenizer"), 2);
        assert!(count_tokens("<|endoftext|>").expect("tokenizer") > 1);
    }

    #[test]
    fn warming_up_twice_loads_once() {
        warm_up().expect("tokenizer");
        assert_eq!(warm_up().expect("tokenizer"), Duration::ZERO);
    }

    #[test]
    fn catalog_lines_count_the_same_alone_and_together() {
        let lines = [
            "Functions available (call them directly):\n",
            "git.diff(path=None, staged=False)  — Show the diff.\n",
            "(top level)  [3 functions, complete]\n",
            "release-checklist  [skill]  — How to cut a release\n",
        ];
        let whole = count_tokens(&lines.concat()).expect("tokenizer");
        let (sum, exceeded) = count_lines_until(lines, usize::MAX).expect("tokenizer");
        assert!(!exceeded);
        assert_eq!(sum, whole);
    }

    #[test]
    fn counting_stops_as_soon_as_the_limit_is_passed() {
        let line = "a_function_name(argument=None)  — does one thing.\n";
        let per_line = count_tokens(line).expect("tokenizer");
        let many = std::iter::repeat_n(line, 1_000);
        // Exactly at the limit is not past it.
        let (sum, exceeded) = count_lines_until(many.clone().take(3), 3 * per_line).expect("ok");
        assert_eq!((sum, exceeded), (3 * per_line, false));
        // One line over: the sum stops there, far short of all 1,000 lines.
        let (sum, exceeded) = count_lines_until(many, 3 * per_line).expect("ok");
        assert_eq!((sum, exceeded), (4 * per_line, true));
        let (sum, exceeded) = count_lines_until(std::iter::empty(), 0).expect("ok");
        assert_eq!((sum, exceeded), (0, false));
    }
}
