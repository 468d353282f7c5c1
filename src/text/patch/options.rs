//! What the caller asks `patch` to do: the edits ([`Edit`]) and the knobs ([`PatchOptions`]).
//!
//! Addresses stay the strings the caller gave until validation, so a malformed one is reported
//! together with every other problem in the batch instead of failing the call on its own.

use crate::text::atomic::Hook;
use crate::text::lines::DEFAULT_MAX_LINE_CHARS;
use crate::text::TextError;

/// One edit. Addresses are kept as the strings the caller gave so that malformed ones can be
/// reported together with every other problem in the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Replace the inclusive range `first..=last` with `text` (empty text deletes).
    Replace {
        first: String,
        last: String,
        text: String,
    },
    InsertBefore {
        at: String,
        text: String,
    },
    InsertAfter {
        at: String,
        text: String,
    },
    InsertAtStart {
        text: String,
    },
    InsertAtEnd {
        text: String,
    },
}

impl Edit {
    /// Replace one line.
    pub fn replace(at: impl Into<String>, text: impl Into<String>) -> Edit {
        let at = at.into();
        Edit::Replace {
            first: at.clone(),
            last: at,
            text: text.into(),
        }
    }

    /// Replace an inclusive range of lines.
    pub fn replace_range(
        first: impl Into<String>,
        last: impl Into<String>,
        text: impl Into<String>,
    ) -> Edit {
        Edit::Replace {
            first: first.into(),
            last: last.into(),
            text: text.into(),
        }
    }

    /// Delete an inclusive range of lines.
    pub fn delete(first: impl Into<String>, last: impl Into<String>) -> Edit {
        Edit::replace_range(first, last, "")
    }

    pub fn insert_before(at: impl Into<String>, text: impl Into<String>) -> Edit {
        Edit::InsertBefore {
            at: at.into(),
            text: text.into(),
        }
    }

    pub fn insert_after(at: impl Into<String>, text: impl Into<String>) -> Edit {
        Edit::InsertAfter {
            at: at.into(),
            text: text.into(),
        }
    }

    pub fn insert_at_start(text: impl Into<String>) -> Edit {
        Edit::InsertAtStart { text: text.into() }
    }

    pub fn insert_at_end(text: impl Into<String>) -> Edit {
        Edit::InsertAtEnd { text: text.into() }
    }

    /// The new text of the edit (empty for a deletion).
    pub(super) fn text(&self) -> &str {
        match self {
            Edit::Replace { text, .. }
            | Edit::InsertBefore { text, .. }
            | Edit::InsertAfter { text, .. }
            | Edit::InsertAtStart { text }
            | Edit::InsertAtEnd { text } => text,
        }
    }

    /// How the edit reads in messages.
    pub(super) fn describe(&self) -> String {
        match self {
            Edit::Replace { first, last, .. } if first == last => format!("replace {first}"),
            Edit::Replace { first, last, .. } => format!("replace {first}..{last}"),
            Edit::InsertBefore { at, .. } => format!("insert before {at}"),
            Edit::InsertAfter { at, .. } => format!("insert after {at}"),
            Edit::InsertAtStart { .. } => "insert at start".to_string(),
            Edit::InsertAtEnd { .. } => "insert at end".to_string(),
        }
    }
}

/// Knobs for `patch`; the defaults are what the model gets.
#[derive(Clone, Debug)]
pub struct PatchOptions {
    /// Run the syntax gate (default true).
    pub check_syntax: bool,
    /// Edit a read-only file (no write bit for the caller) anyway; its mode is kept.
    pub force: bool,
    /// Fault injection: fail after the temp file is written, before the rename.
    pub fail_before_rename: bool,
    /// Testing hook: runs after the new version is written to the temp file, just before the
    /// checks that precede the commit — where a concurrent writer or a symlink swap would
    /// strike.
    pub before_commit: Option<Hook>,
    /// Testing hook: runs right after the new version took the file's name, while the old
    /// one is under the temp name — what a writer whose `open` resolved the name just before
    /// the swap reaches.
    pub after_exchange: Option<Hook>,
    pub max_line_chars: usize,
}

impl Default for PatchOptions {
    fn default() -> Self {
        PatchOptions {
            check_syntax: true,
            force: false,
            fail_before_rename: false,
            before_commit: None,
            after_exchange: None,
            max_line_chars: DEFAULT_MAX_LINE_CHARS,
        }
    }
}

/// The error for a batch with no edits (an empty list is a mistake, not a no-op).
pub(super) fn no_edits() -> TextError {
    TextError::InvalidArgument(
        "patch got no edits; pass a list like [(\"12:kodu\", \"new text\")]".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_build_the_variant_they_name() {
        assert_eq!(
            Edit::replace("3:kodu", "x"),
            Edit::Replace {
                first: "3:kodu".into(),
                last: "3:kodu".into(),
                text: "x".into()
            }
        );
        assert_eq!(
            Edit::delete("1:kodu", "2:bate"),
            Edit::replace_range("1:kodu", "2:bate", "")
        );
        assert_eq!(Edit::insert_at_end("z").text(), "z");
        assert_eq!(Edit::delete("1:kodu", "2:bate").text(), "");
    }

    #[test]
    fn describe_names_the_kind_and_the_addresses() {
        assert_eq!(Edit::replace("3:kodu", "x").describe(), "replace 3:kodu");
        assert_eq!(
            Edit::replace_range("3:kodu", "5:bate", "x").describe(),
            "replace 3:kodu..5:bate"
        );
        assert_eq!(
            Edit::insert_before("2:kodu", "x").describe(),
            "insert before 2:kodu"
        );
        assert_eq!(
            Edit::insert_after("2:kodu", "x").describe(),
            "insert after 2:kodu"
        );
        assert_eq!(Edit::insert_at_start("x").describe(), "insert at start");
        assert_eq!(Edit::insert_at_end("x").describe(), "insert at end");
    }

    #[test]
    fn defaults_are_what_the_model_gets() {
        let options = PatchOptions::default();
        assert!(options.check_syntax);
        assert!(!options.force);
        assert!(!options.fail_before_rename);
        assert!(options.before_commit.is_none());
        assert!(options.after_exchange.is_none());
        assert_eq!(options.max_line_chars, DEFAULT_MAX_LINE_CHARS);
    }

    #[test]
    fn no_edits_says_what_a_batch_looks_like() {
        let message = no_edits().to_string();
        assert!(message.contains("no edits"), "{message}");
        assert!(message.contains("12:kodu"), "{message}");
    }
}
