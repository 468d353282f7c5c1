//! The syntax gate of `patch`: reject an edit only if it adds a syntax error where it edited.
//!
//! Files are often already broken mid-refactor, or written in a dialect the checker only
//! half-knows (Flow-typed JavaScript), so the gate compares before and after rather than
//! demanding a clean parse. The new text is checked first; only if it has errors is the old
//! text checked too, so the common case costs one parse.
//!
//! - A clean file that no longer parses is worse.
//! - A file that did not parse cleanly is compared *by position*: every edit gets a window (the
//!   edited lines and [`NEAR`] lines around them, in the old and in the new text), and the edit
//!   is worse only if some window holds more errors after than before. Errors elsewhere are
//!   old ones, shifted by the edit's line delta or re-shuffled by the parser's error recovery,
//!   and never block an edit. An error without a position counts everywhere.
//! - JavaScript that does not parse cleanly with the JavaScript grammar (Flow annotations, for
//!   one) is also parsed with the TSX grammar, and the grammar with fewer errors on the
//!   original is used for both versions.
//!
//! Checkers:
//! - Python: CPython's own `compile(..., "exec")` through pyo3 (catches errors the parser alone
//!   misses, such as `return` outside a function). Warnings are silenced so nothing reaches the
//!   block's stderr. One error at most is reported.
//! - JSON: serde_json; TOML: the `toml` crate; one error at most.
//! - Rust, JavaScript, TypeScript/TSX: tree-sitter; every ERROR or MISSING node is an error
//!   spanning the rows it covers.
//! - Anything else is not checked, and the patch result says so.

use std::ffi::CString;
use std::path::Path;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// Languages with a checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Python,
    Json,
    Toml,
    Rust,
    JavaScript,
    TypeScript,
    Tsx,
}

impl Language {
    pub fn name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Json => "json",
            Language::Toml => "toml",
            Language::Rust => "rust",
            Language::JavaScript => "javascript",
            Language::TypeScript => "typescript",
            Language::Tsx => "tsx",
        }
    }

    /// The checker for a file, from its extension.
    pub fn for_path(path: &Path) -> Option<Language> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "py" | "pyi" | "pyw" => Language::Python,
            "json" => Language::Json,
            "toml" => Language::Toml,
            "rs" => Language::Rust,
            "js" | "mjs" | "cjs" | "jsx" => Language::JavaScript,
            "ts" | "mts" | "cts" => Language::TypeScript,
            "tsx" => Language::Tsx,
            _ => return None,
        })
    }
}

/// One syntax error: where it is and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// 0-based first and last row it covers, when known.
    pub rows: Option<(usize, usize)>,
    pub message: String,
}

/// What a checker found in one text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problems {
    /// Number of errors (Python/JSON/TOML: 0 or 1; tree-sitter: ERROR + MISSING nodes).
    pub count: usize,
    /// The first error: 1-based line (when known) and message.
    pub first: Option<(Option<usize>, String)>,
    /// Every error, in document order.
    pub errors: Vec<SyntaxError>,
}

impl Problems {
    fn clean() -> Problems {
        Problems {
            count: 0,
            first: None,
            errors: Vec::new(),
        }
    }

    fn one(line: Option<usize>, message: String) -> Problems {
        Problems {
            count: 1,
            first: Some((line, message.clone())),
            errors: vec![SyntaxError {
                rows: line.map(|l| (l.saturating_sub(1), l.saturating_sub(1))),
                message,
            }],
        }
    }
}

/// The gate's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Parses cleanly.
    Clean(Language),
    /// Still has errors, but none new in or next to the edited lines.
    NoWorse {
        language: Language,
        before: usize,
        after: Problems,
    },
    /// The edit introduced an error where it edited: reject.
    Worse {
        language: Language,
        /// Errors in the whole file before and after.
        before: usize,
        after: Problems,
        /// The new error to show (the first one in a window that got worse).
        error: SyntaxError,
    },
    /// No checker for this kind of file.
    Unchecked,
}

/// One edit of a batch as the gate sees it: the 0-based half-open line range `old` of the
/// original that was replaced by the range `new` of the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub old: (usize, usize),
    pub new: (usize, usize),
}

/// Lines around an edit where an error still counts as the edit's: parsers often notice a
/// broken construct a line or two after it.
pub const NEAR: usize = 2;

/// Compare `before` and `after`, where `changes` (sorted, not overlapping) say which lines the
/// batch replaced.
pub fn gate_changes(path: &Path, before: &[u8], after: &[u8], changes: &[Change]) -> Verdict {
    let Some(mut language) = Language::for_path(path) else {
        return Verdict::Unchecked;
    };
    let filename = path.to_string_lossy();
    let mut after_problems = check(language, after, &filename);
    if after_problems.count == 0 {
        return Verdict::Clean(language);
    }
    let mut before_problems = check(language, before, &filename);
    if before_problems.count == 0 {
        let error = after_problems
            .errors
            .first()
            .cloned()
            .unwrap_or(SyntaxError {
                rows: None,
                message: "syntax error".into(),
            });
        return Verdict::Worse {
            language,
            before: 0,
            after: after_problems,
            error,
        };
    }
    if language == Language::JavaScript {
        // Flow and other JS dialects: TSX knows type annotations, generics and JSX.
        let tsx_before = check(Language::Tsx, before, &filename);
        if tsx_before.count < before_problems.count {
            language = Language::Tsx;
            before_problems = tsx_before;
            after_problems = check(Language::Tsx, after, &filename);
            if after_problems.count == 0 {
                return Verdict::Clean(language);
            }
        }
    }
    match first_new_error(&before_problems, &after_problems, changes) {
        Some(error) => Verdict::Worse {
            language,
            before: before_problems.count,
            after: after_problems,
            error,
        },
        None => Verdict::NoWorse {
            language,
            before: before_problems.count,
            after: after_problems,
        },
    }
}

/// A group of edits whose windows touch, as half-open row ranges in the old and new text.
struct Window {
    old: (usize, usize),
    new: (usize, usize),
}

fn windows(changes: &[Change]) -> Vec<Window> {
    let mut out: Vec<Window> = Vec::new();
    for change in changes {
        let old = (
            change.old.0.saturating_sub(NEAR),
            change.old.1.saturating_add(NEAR),
        );
        let new = (
            change.new.0.saturating_sub(NEAR),
            change.new.1.saturating_add(NEAR),
        );
        match out.last_mut() {
            Some(last) if old.0 <= last.old.1 || new.0 <= last.new.1 => {
                last.old.1 = last.old.1.max(old.1);
                last.new.1 = last.new.1.max(new.1);
            }
            _ => out.push(Window { old, new }),
        }
    }
    out
}

fn intersects(rows: (usize, usize), window: (usize, usize)) -> bool {
    rows.0 < window.1 && rows.1 >= window.0
}

/// The first error of `after` in a window that holds more errors than the same window did in
/// `before`; `None` when no window got worse.
fn first_new_error(before: &Problems, after: &Problems, changes: &[Change]) -> Option<SyntaxError> {
    // Errors without a position could be anywhere: they are compared as one extra window.
    let unplaced = |p: &Problems| p.errors.iter().filter(|e| e.rows.is_none()).count();
    if unplaced(after) > unplaced(before) {
        return after.errors.iter().find(|e| e.rows.is_none()).cloned();
    }
    for window in windows(changes) {
        let count = |p: &Problems, w: (usize, usize)| {
            p.errors
                .iter()
                .filter(|e| e.rows.is_some_and(|rows| intersects(rows, w)))
                .count()
        };
        if count(after, window.new) > count(before, window.old) {
            // Show an error that was not there before (same message at the same offset into
            // the window), else the first one in the window.
            let old_here: Vec<(usize, &str)> = before
                .errors
                .iter()
                .filter_map(|e| {
                    let rows = e.rows?;
                    intersects(rows, window.old)
                        .then(|| (rows.0.saturating_sub(window.old.0), e.message.as_str()))
                })
                .collect();
            let in_window = after
                .errors
                .iter()
                .filter(|e| e.rows.is_some_and(|rows| intersects(rows, window.new)));
            let mut fallback = None;
            for error in in_window {
                let rows = error.rows.unwrap_or((0, 0));
                let key = (rows.0.saturating_sub(window.new.0), error.message.as_str());
                fallback.get_or_insert(error);
                if !old_here.iter().any(|(offset, message)| {
                    *offset == key.0 && strip_position(message) == strip_position(key.1)
                }) {
                    return Some(error.clone());
                }
            }
            return fallback.cloned();
        }
    }
    None
}

/// A message without its " at line L, column C" suffix, to compare errors that moved.
fn strip_position(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

/// Run one checker.
pub fn check(language: Language, source: &[u8], filename: &str) -> Problems {
    let source_no_bom = source.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(source);
    match language {
        Language::Python => check_python(source, filename),
        Language::Json => match serde_json::from_slice::<serde::de::IgnoredAny>(source_no_bom) {
            Ok(_) => Problems::clean(),
            Err(e) => Problems::one(Some(e.line()), e.to_string()),
        },
        Language::Toml => {
            let text = match std::str::from_utf8(source_no_bom) {
                Ok(text) => text,
                Err(e) => return Problems::one(None, format!("not valid UTF-8: {e}")),
            };
            match toml::from_str::<toml::Table>(text) {
                Ok(_) => Problems::clean(),
                Err(e) => {
                    let line = e
                        .span()
                        .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
                    Problems::one(line, e.message().trim().to_string())
                }
            }
        }
        Language::Rust => check_tree_sitter(tree_sitter_rust::LANGUAGE.into(), source_no_bom),
        Language::JavaScript => {
            check_tree_sitter(tree_sitter_javascript::LANGUAGE.into(), source_no_bom)
        }
        Language::TypeScript => check_tree_sitter(
            tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            source_no_bom,
        ),
        Language::Tsx => {
            check_tree_sitter(tree_sitter_typescript::LANGUAGE_TSX.into(), source_no_bom)
        }
    }
}

fn check_tree_sitter(language: tree_sitter::Language, source: &[u8]) -> Problems {
    let mut parser = tree_sitter::Parser::new();
    if let Err(e) = parser.set_language(&language) {
        return Problems::one(None, format!("tree-sitter grammar unavailable: {e}"));
    }
    let Some(tree) = parser.parse(source, None) else {
        return Problems::one(None, "tree-sitter could not parse the file".into());
    };
    let mut errors: Vec<(usize, usize, SyntaxError)> = Vec::new();
    let mut cursor = tree.walk();
    // Pre-order walk over every node, skipping subtrees that are error-free.
    'walk: loop {
        let node = cursor.node();
        if node.is_error() || node.is_missing() {
            let start = node.start_position();
            let end = node.end_position();
            let what = if node.is_missing() {
                format!("missing `{}`", node.kind())
            } else {
                "unexpected syntax".to_string()
            };
            // A node ending at column 0 of a row does not cover that row.
            let last_row = if end.row > start.row && end.column == 0 {
                end.row - 1
            } else {
                end.row
            };
            errors.push((
                start.row,
                start.column,
                SyntaxError {
                    rows: Some((start.row, last_row.max(start.row))),
                    message: format!(
                        "{what} at line {}, column {}",
                        start.row + 1,
                        start.column + 1
                    ),
                },
            ));
        }
        if node.has_error() && cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                continue 'walk;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    errors.sort_by_key(|(row, column, _)| (*row, *column));
    let first = errors
        .first()
        .map(|(row, _, error)| (Some(row + 1), error.message.clone()));
    Problems {
        count: errors.len(),
        first,
        errors: errors.into_iter().map(|(_, _, error)| error).collect(),
    }
}

const PYTHON_CHECKER: &str = r#"
import warnings

def check(source, filename):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, filename, "exec", dont_inherit=True)
        except SyntaxError as e:
            return (type(e).__name__, e.msg, e.lineno, e.offset)
        except ValueError as e:
            return ("ValueError", str(e), None, None)
    return None
"#;

static PYTHON_CHECK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn check_python(source: &[u8], filename: &str) -> Problems {
    // No-op when the worker already runs an interpreter; pure-Rust callers get one on demand.
    Python::initialize();
    Python::attach(|py| match run_python_check(py, source, filename) {
        Ok(problems) => problems,
        Err(e) => Problems::one(None, format!("the Python syntax check failed to run: {e}")),
    })
}

fn run_python_check(py: Python<'_>, source: &[u8], filename: &str) -> PyResult<Problems> {
    let checker = PYTHON_CHECK.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let code = CString::new(PYTHON_CHECKER)?;
        let module = PyModule::from_code(py, &code, c"<vis.text syntax>", c"_vis_text_syntax")?;
        Ok(module.getattr("check")?.unbind())
    })?;
    let result = checker.call1(py, (pyo3::types::PyBytes::new(py, source), filename))?;
    if result.is_none(py) {
        return Ok(Problems::clean());
    }
    let (kind, msg, line, offset): (String, String, Option<usize>, Option<usize>) =
        result.extract(py)?;
    let position = match (line, offset) {
        (Some(l), Some(o)) => format!(" (line {l}, column {o})"),
        (Some(l), None) => format!(" (line {l})"),
        _ => String::new(),
    };
    Ok(Problems::one(line, format!("{kind}: {msg}{position}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rows: &[usize]) -> Problems {
        Problems {
            count: rows.len(),
            first: None,
            errors: rows
                .iter()
                .map(|&row| SyntaxError {
                    rows: Some((row, row)),
                    message: format!("unexpected syntax at line {}, column 1", row + 1),
                })
                .collect(),
        }
    }

    /// Three lines inserted before row 10.
    const INSERT: Change = Change {
        old: (10, 10),
        new: (10, 13),
    };

    #[test]
    fn old_errors_shifted_by_the_edit_are_not_new() {
        let before = at(&[2, 40]);
        let after = at(&[2, 43]);
        assert_eq!(first_new_error(&before, &after, &[INSERT]), None);
    }

    #[test]
    fn extra_errors_far_from_the_edit_do_not_count() {
        // Error recovery elsewhere re-shuffled: 2 errors became 4, all far away.
        let before = at(&[2, 40]);
        let after = at(&[1, 2, 43, 60]);
        assert_eq!(first_new_error(&before, &after, &[INSERT]), None);
    }

    #[test]
    fn a_new_error_in_or_next_to_the_edit_counts() {
        let before = at(&[2, 40]);
        for row in [10, 12, 14] {
            let after = at(&[2, row, 43]);
            let found = first_new_error(&before, &after, &[INSERT]);
            assert_eq!(found.and_then(|e| e.rows), Some((row, row)), "row {row}");
        }
        // Three rows past the edit is no longer "next to" it.
        let after = at(&[2, 16, 43]);
        assert_eq!(first_new_error(&before, &after, &[INSERT]), None);
    }

    #[test]
    fn an_old_error_inside_a_replaced_range_may_stay() {
        // Rows 10..12 replaced by 10..13; the error that was there is still there.
        let change = Change {
            old: (10, 12),
            new: (10, 13),
        };
        assert_eq!(first_new_error(&at(&[11]), &at(&[12]), &[change]), None);
        assert!(first_new_error(&at(&[11]), &at(&[11, 12]), &[change]).is_some());
    }

    #[test]
    fn a_spanning_error_counts_in_every_window_it_covers() {
        let span = |a, b| Problems {
            count: 1,
            first: None,
            errors: vec![SyntaxError {
                rows: Some((a, b)),
                message: "unexpected syntax".into(),
            }],
        };
        assert_eq!(first_new_error(&span(0, 50), &span(0, 53), &[INSERT]), None);
        assert!(first_new_error(&at(&[40]), &span(5, 53), &[INSERT]).is_some());
    }

    #[test]
    fn errors_without_a_position_count_everywhere() {
        let unplaced = Problems::one(None, "broken".into());
        assert!(first_new_error(&at(&[40]), &unplaced, &[INSERT]).is_some());
        assert_eq!(first_new_error(&unplaced, &unplaced, &[INSERT]), None);
    }
}
