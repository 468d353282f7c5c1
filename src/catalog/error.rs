//! The one error type of the catalog core.
//!
//! Every message names the cause and what to do about it: these texts reach the model (through
//! the Python surface) and users (through `vis catalog`) verbatim.

use thiserror::Error;

/// Errors of the catalog core.
#[derive(Debug, Error)]
pub enum CatalogError {
    /// A name or namespace path is empty.
    #[error("empty name: a name is a dotted path of Python identifiers such as `git.diff`")]
    EmptyName,

    /// A dotted path has a segment that is not allowed. Names are never sanitized; the
    /// message names the segment and suggests a valid spelling.
    #[error(
        "invalid name `{name}`: segment `{segment}` {problem}; each segment must be a Python \
         identifier that is not a keyword{extra}; rename it (e.g. `{suggestion}`)"
    )]
    InvalidName {
        /// The whole dotted path as given.
        name: String,
        /// The offending segment (may be empty for `a..b`).
        segment: String,
        /// What is wrong with it.
        problem: String,
        /// A valid spelling the caller could use instead (never applied automatically).
        suggestion: String,
        /// Extra rule text for the kind of name (pages/skills allow `-`).
        extra: &'static str,
    },

    /// Two entries claim the same name (two functions, or a function and a page...).
    #[error(
        "duplicate name `{name}`: registered as {first} and again as {second}; rename one of \
         them or deny one in the config"
    )]
    DuplicateName {
        name: String,
        /// e.g. "a function by extension `git`"
        first: String,
        second: String,
    },

    /// An entry's `namespace` field disagrees with its dotted name.
    #[error(
        "entry `{name}` says its namespace is `{given}`, but its name puts it in `{expected}`; \
         leave `namespace` empty or set it to `{expected}`"
    )]
    InconsistentNamespace {
        name: String,
        given: String,
        expected: String,
    },

    /// The `apropos` pattern does not compile.
    #[error("invalid regular expression at position {position}: {message}\n    {pattern}\n    {caret}\nhint: escape literal characters with a backslash (`\\.`, `\\(`); look-around and backreferences are not supported")]
    InvalidRegex {
        pattern: String,
        /// 0-based character position of the error in the pattern.
        position: usize,
        message: String,
        /// A `^` under the offending character, aligned with `pattern`.
        caret: String,
    },

    /// `apropos(namespace=...)` named a namespace that does not exist (or is denied).
    #[error("unknown namespace `{namespace}`{}", suggest_text(.suggestions, "apropos(pattern) without a namespace searches everything"))]
    UnknownNamespace {
        namespace: String,
        suggestions: Vec<String>,
    },

    /// `doc(name)` (or a lookup) named nothing visible.
    #[error("no function, namespace, page or skill named `{name}`{}", suggest_text(.suggestions, "apropos(pattern) searches the names"))]
    UnknownName {
        name: String,
        suggestions: Vec<String>,
    },

    /// A skill's `SKILL.md` front matter cannot be read; `reason` says where and how to fix it.
    #[error("invalid SKILL.md front matter: {reason}")]
    InvalidFrontMatter { reason: String },

    /// A bad argument value (e.g. `limit=0`).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The process's deny list was set a second time (it is set once, when the worker starts).
    #[error("the deny list is set once, when the worker starts")]
    DenyListAlreadySet,

    /// The o200k tokenizer could not be loaded.
    #[error("the o200k_base tokenizer failed to load: {0}")]
    Tokenizer(String),

    /// SQLite failure while storing or loading snapshots.
    #[error(
        "catalog snapshot storage failed: {0}; check that the `catalog_snapshots` migration ran"
    )]
    Storage(#[from] rusqlite::Error),

    /// JSON (de)serialization of snapshot entries failed.
    #[error("catalog snapshot JSON is malformed: {0}")]
    Json(#[from] serde_json::Error),
}

fn suggest_text(suggestions: &[String], fallback: &str) -> String {
    if suggestions.is_empty() {
        format!("; {fallback}")
    } else {
        let list: Vec<String> = suggestions.iter().map(|s| format!("`{s}`")).collect();
        format!("; did you mean {}? ({fallback})", list.join(", "))
    }
}

/// Result alias for the catalog core.
pub type Result<T, E = CatalogError> = std::result::Result<T, E>;
