//! The syntax gate of `patch`: reject an edit only if it makes the file worse.
//!
//! Files are often already broken mid-refactor, so the gate compares before and after rather
//! than demanding a clean parse. The new text is checked first; only if it has errors is the old
//! text checked too, so the common case costs one parse.
//!
//! - Python: CPython's own `compile(..., "exec")` through pyo3 (catches errors the parser alone
//!   misses, such as `return` outside a function). Warnings are silenced so nothing reaches the
//!   block's stderr. One error at most is reported, so "worse" means "was clean, now is not".
//! - JSON: serde_json; TOML: the `toml` crate. Same clean/broken rule.
//! - Rust, JavaScript, TypeScript/TSX: tree-sitter; worse means more ERROR or MISSING nodes.
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

/// What a checker found in one text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problems {
    /// Number of errors (Python/JSON/TOML: 0 or 1; tree-sitter: ERROR + MISSING nodes).
    pub count: usize,
    /// The first error: 1-based line (when known) and message.
    pub first: Option<(Option<usize>, String)>,
}

impl Problems {
    fn clean() -> Problems {
        Problems {
            count: 0,
            first: None,
        }
    }

    fn one(line: Option<usize>, message: String) -> Problems {
        Problems {
            count: 1,
            first: Some((line, message)),
        }
    }
}

/// The gate's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Parses cleanly.
    Clean(Language),
    /// Still has errors, but no more than before.
    NoWorse { language: Language, after: Problems },
    /// The edit introduced errors: reject.
    Worse {
        language: Language,
        before: usize,
        after: Problems,
    },
    /// No checker for this kind of file.
    Unchecked,
}

/// Compare `before` and `after` versions of the file at `path`.
pub fn gate(path: &Path, before: &[u8], after: &[u8]) -> Verdict {
    let Some(language) = Language::for_path(path) else {
        return Verdict::Unchecked;
    };
    let filename = path.to_string_lossy();
    let after_problems = check(language, after, &filename);
    if after_problems.count == 0 {
        return Verdict::Clean(language);
    }
    let before_count = check(language, before, &filename).count;
    if after_problems.count > before_count {
        Verdict::Worse {
            language,
            before: before_count,
            after: after_problems,
        }
    } else {
        Verdict::NoWorse {
            language,
            after: after_problems,
        }
    }
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
    let mut count = 0;
    let mut first: Option<(usize, usize, String)> = None;
    let mut cursor = tree.walk();
    // Pre-order walk over every node, skipping subtrees that are error-free.
    'walk: loop {
        let node = cursor.node();
        if node.is_error() || node.is_missing() {
            count += 1;
            let pos = node.start_position();
            let message = if node.is_missing() {
                format!("missing `{}`", node.kind())
            } else {
                "unexpected syntax".to_string()
            };
            if first
                .as_ref()
                .is_none_or(|(row, col, _)| (pos.row, pos.column) < (*row, *col))
            {
                first = Some((pos.row, pos.column, message));
            }
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
    Problems {
        count,
        first: first.map(|(row, col, message)| {
            (
                Some(row + 1),
                format!("{message} at line {}, column {}", row + 1, col + 1),
            )
        }),
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
