//! What a search asks for ([`GrepOptions`]) and its validation: the pattern becomes a
//! `grep-regex` matcher, globs an `ignore` override set, type names a type matcher. Each of
//! these fails here, before any file is read, with a message that names the bad input — a
//! regex error points at its position with a caret and suggests `fixed=True`.

use std::path::Path;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};

use crate::text::lines::DEFAULT_MAX_LINE_CHARS;
use crate::text::{Result, TextError};

/// Search settings; the defaults match `rg -n PATTERN` plus a total limit of 100 matches.
#[derive(Clone, Debug)]
pub struct GrepOptions {
    /// Treat the pattern as literal text, not a regex.
    pub fixed: bool,
    pub ignore_case: bool,
    /// Case-insensitive unless the pattern has an uppercase letter.
    pub smart_case: bool,
    /// Only match whole words.
    pub word: bool,
    /// ripgrep-style globs (`*.py`, `!tests/**`), relative to the first workspace root.
    pub globs: Vec<String>,
    /// ripgrep file type names (`py`, `rust`, `js`, ...).
    pub types: Vec<String>,
    /// Context lines before / after each match.
    pub before: usize,
    pub after: usize,
    /// Stop searching a file after this many matches.
    pub max_count: Option<u64>,
    /// Show at most this many matches in total (the rest are counted).
    pub limit: Option<usize>,
    /// Search hidden files and directories.
    pub hidden: bool,
    /// Don't respect .gitignore/.ignore files.
    pub no_ignore: bool,
    pub max_line_chars: usize,
    /// Walker threads; 0 picks from the number of cores.
    pub threads: usize,
}

impl Default for GrepOptions {
    fn default() -> Self {
        GrepOptions {
            fixed: false,
            ignore_case: false,
            smart_case: false,
            word: false,
            globs: Vec::new(),
            types: Vec::new(),
            before: 0,
            after: 0,
            max_count: None,
            limit: Some(100),
            hidden: false,
            no_ignore: false,
            max_line_chars: DEFAULT_MAX_LINE_CHARS,
            threads: 0,
        }
    }
}

impl GrepOptions {
    /// Most matches one file can contribute rows for: no file needs more than the total limit.
    pub(super) fn per_file_cap(&self) -> u64 {
        match (self.limit, self.max_count) {
            (Some(limit), Some(max)) => (limit as u64).min(max),
            (Some(limit), None) => limit as u64,
            (None, Some(max)) => max,
            (None, None) => u64::MAX,
        }
    }
}

/// Build the matcher; a bad regex becomes an error naming the position.
pub(super) fn build_matcher(pattern: &str, options: &GrepOptions) -> Result<RegexMatcher> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .fixed_strings(options.fixed)
        .case_insensitive(options.ignore_case)
        .case_smart(options.smart_case)
        .word(options.word)
        // `^`/`$` are line anchors: the searcher runs the regex over many lines at once.
        .multi_line(true)
        .line_terminator(Some(b'\n'))
        // `$` matches before `\r\n` too, consistent with the line model dropping `\r`.
        .crlf(true);
    builder
        .build(pattern)
        .map_err(|err| TextError::Pattern(describe_pattern_error(pattern, &err.to_string())))
}

fn describe_pattern_error(pattern: &str, fallback: &str) -> String {
    let parsed = regex_syntax::ParserBuilder::new().build().parse(pattern);
    let (what, offset) = match &parsed {
        Err(regex_syntax::Error::Parse(e)) => (e.kind().to_string(), e.span().start.offset),
        Err(regex_syntax::Error::Translate(e)) => (e.kind().to_string(), e.span().start.offset),
        _ => {
            return format!(
                "invalid regex {pattern:?}: {fallback}\nhint: pass fixed=True to search for the \
                 text literally"
            )
        }
    };
    let column = pattern[..offset.min(pattern.len())].chars().count();
    format!(
        "invalid regex {pattern:?}: {what} at position {column}\n    {pattern}\n    {}^\nhint: \
         escape special characters or pass fixed=True to search for the text literally",
        " ".repeat(column)
    )
}

/// The globs as an override set matched against paths under `base`; `None` without globs.
pub(super) fn build_overrides(base: &Path, globs: &[String]) -> Result<Option<Override>> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut overrides = OverrideBuilder::new(base);
    for glob in globs {
        overrides
            .add(glob)
            .map_err(|e| TextError::InvalidArgument(format!("invalid glob {glob:?}: {e}")))?;
    }
    let overrides = overrides
        .build()
        .map_err(|e| TextError::InvalidArgument(format!("invalid glob: {e}")))?;
    Ok(Some(overrides))
}

/// ripgrep's file types selected by name; `None` without type names.
pub(super) fn build_types(names: &[String]) -> Result<Option<Types>> {
    if names.is_empty() {
        return Ok(None);
    }
    let mut types = TypesBuilder::new();
    types.add_defaults();
    for name in names {
        types.select(name);
    }
    let types = types.build().map_err(|e| {
        TextError::InvalidArgument(format!(
            "{e}; use ripgrep's type names, e.g. py, rust, js, ts, go, c, cpp, java, md, \
             json, toml, yaml"
        ))
    })?;
    Ok(Some(types))
}

#[cfg(test)]
mod tests {
    use grep_matcher::Matcher;

    use super::*;

    fn matches(pattern: &str, options: &GrepOptions, line: &str) -> bool {
        let matcher = build_matcher(pattern, options).expect("valid pattern");
        matcher
            .is_match(line.as_bytes())
            .expect("matching cannot fail")
    }

    #[test]
    fn a_bad_regex_points_at_its_position() {
        let err = build_matcher("foo(bar", &GrepOptions::default()).expect_err("unclosed group");
        let TextError::Pattern(message) = err else {
            panic!("expected a pattern error, got {err}");
        };
        assert!(
            message.starts_with("invalid regex \"foo(bar\": "),
            "{message}"
        );
        assert!(message.contains("at position 3"), "{message}");
        assert!(message.contains("\n    foo(bar\n       ^\n"), "{message}");
        assert!(message.contains("fixed=True"), "{message}");
    }

    #[test]
    fn the_position_counts_characters_not_bytes() {
        let message = describe_pattern_error("é(", "fallback");
        assert!(message.contains("at position 1"), "{message}");
    }

    #[test]
    fn an_error_the_parser_accepts_falls_back_to_the_builders_message() {
        let message = describe_pattern_error("ok", "too big");
        assert_eq!(
            message,
            "invalid regex \"ok\": too big\nhint: pass fixed=True to search for the text literally"
        );
    }

    #[test]
    fn fixed_strings_match_regex_characters_literally() {
        let fixed = GrepOptions {
            fixed: true,
            ..GrepOptions::default()
        };
        assert!(matches("a.b(", &fixed, "x a.b( y"));
        assert!(!matches("a.b", &fixed, "axb"));
        assert!(matches("a.b", &GrepOptions::default(), "axb"));
    }

    #[test]
    fn case_and_word_options_shape_the_matcher() {
        let smart = GrepOptions {
            smart_case: true,
            ..GrepOptions::default()
        };
        assert!(matches("foo", &smart, "FOO"));
        assert!(!matches("Foo", &smart, "FOO"));
        let ignore = GrepOptions {
            ignore_case: true,
            ..GrepOptions::default()
        };
        assert!(matches("Foo", &ignore, "fOO"));
        let word = GrepOptions {
            word: true,
            ..GrepOptions::default()
        };
        assert!(matches("foo", &word, "a foo b"));
        assert!(!matches("foo", &word, "foobar"));
    }

    #[test]
    fn dollar_matches_before_crlf() {
        assert!(matches("end$", &GrepOptions::default(), "the end\r\n"));
    }

    #[test]
    fn bad_globs_and_unknown_types_are_named() {
        let err = build_overrides(Path::new("/"), &["a[".to_string()]).expect_err("bad glob");
        assert!(err.to_string().starts_with("invalid glob \"a[\""), "{err}");
        let err = build_types(&["nosuchtype".to_string()]).expect_err("unknown type");
        assert!(err.to_string().contains("nosuchtype"), "{err}");
        assert!(err.to_string().contains("ripgrep's type names"), "{err}");
        assert!(build_overrides(Path::new("/"), &[])
            .expect("empty")
            .is_none());
        assert!(build_types(&[]).expect("empty").is_none());
        assert!(build_types(&["py".to_string()]).expect("known").is_some());
    }

    #[test]
    fn the_per_file_cap_is_the_smaller_of_limit_and_max_count() {
        let with = |limit, max_count| GrepOptions {
            limit,
            max_count,
            ..GrepOptions::default()
        };
        assert_eq!(with(Some(10), Some(3)).per_file_cap(), 3);
        assert_eq!(with(Some(10), None).per_file_cap(), 10);
        assert_eq!(with(None, Some(7)).per_file_cap(), 7);
        assert_eq!(with(None, None).per_file_cap(), u64::MAX);
    }
}
