//! The catalog core as seen from Python (`vis._native`): a native manifest object so that
//! `apropos` and `doc` run in Rust, plus name validation for the extension API.
//!
//! - `Manifest(entries_json, deny)` builds a [`Manifest`] from the JSON entries the prelude
//!   collects (see [`ManifestEntry`]) and the config's deny list;
//! - `.apropos(pattern, namespace, limit, offset)` returns `(text, rows, total, remaining,
//!   next_offset)`, where `rows` are `(name, kind, line)` of this page only;
//! - `.doc(name)` returns the text; `.entries_json()` the visible entries (what the worker sends
//!   to the host); `.visible(name)`/`.callable(name)`;
//! - `validate_name(name, kind)` raises `ValueError` naming the bad segment;
//! - `line_address(line_no, text)` is the `LINE:HASH` address of one line (the same hash `cat`
//!   and `patch` use), for extensions that print file lines (e.g. `git.diff`).
//!
//! Errors map to Python exceptions: invalid regex, names and arguments are `ValueError`;
//! unknown names and namespaces are `LookupError`. Messages are the catalog's own.

use pyo3::exceptions::{PyLookupError, PyValueError};
use pyo3::prelude::*;

use super::error::CatalogError;
use super::manifest::{DenyList, EntryKind, Manifest, ManifestEntry};
use super::names::{self, NameRule};

fn to_pyerr(e: CatalogError) -> PyErr {
    match e {
        CatalogError::UnknownName { .. } | CatalogError::UnknownNamespace { .. } => {
            PyLookupError::new_err(e.to_string())
        }
        other => PyValueError::new_err(other.to_string()),
    }
}

/// The visible manifest of a session (deny list applied), with `apropos` and `doc`.
#[pyclass(name = "Manifest", module = "vis._native", frozen)]
pub struct PyManifest {
    inner: Manifest,
}

#[pymethods]
impl PyManifest {
    #[new]
    #[pyo3(signature = (entries_json, deny=Vec::new()))]
    fn new(py: Python<'_>, entries_json: &str, deny: Vec<String>) -> PyResult<Self> {
        let entries: Vec<ManifestEntry> = serde_json::from_str(entries_json)
            .map_err(|e| PyValueError::new_err(format!("manifest entries are not valid: {e}")))?;
        let deny = DenyList::new(deny).map_err(to_pyerr)?;
        let inner = py
            .detach(move || Manifest::build(entries, &deny))
            .map_err(to_pyerr)?;
        Ok(PyManifest { inner })
    }

    /// `(text, rows, total, remaining, next_offset)`; `rows` are `(name, kind, line)`.
    #[pyo3(signature = (pattern, namespace=None, limit=50, offset=0))]
    #[allow(clippy::type_complexity)]
    fn apropos(
        &self,
        pattern: &str,
        namespace: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> PyResult<(
        String,
        Vec<(String, &'static str, String)>,
        usize,
        usize,
        Option<usize>,
    )> {
        if limit < 1 {
            return Err(PyValueError::new_err(format!(
                "invalid argument: limit must be at least 1, got {limit} (the default is 50)"
            )));
        }
        if offset < 0 {
            return Err(PyValueError::new_err(format!(
                "invalid argument: offset must be 0 or more, got {offset}"
            )));
        }
        let page = self
            .inner
            .apropos(pattern, namespace, limit as usize, offset as usize)
            .map_err(to_pyerr)?;
        let text = page.render();
        let rows = page
            .rows
            .into_iter()
            .map(|r| (r.name, r.kind.as_str(), r.line))
            .collect();
        Ok((text, rows, page.total, page.remaining, page.next_offset))
    }

    fn doc(&self, name: &str) -> PyResult<String> {
        self.inner.doc(name).map_err(to_pyerr)
    }

    /// The visible entries as a JSON array (manifest entries, deny list applied).
    fn entries_json(&self) -> PyResult<String> {
        serde_json::to_string(self.inner.entries())
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn visible(&self, name: &str) -> bool {
        self.inner.is_visible(name)
    }

    fn callable(&self, name: &str) -> bool {
        self.inner.is_callable(name)
    }

    /// Visible function names, manifest order.
    fn function_names(&self) -> Vec<String> {
        self.inner
            .rows()
            .iter()
            .filter(|r| r.kind == EntryKind::Function)
            .map(|r| r.name.clone())
            .collect()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<vis manifest: {} rows, {} functions>",
            self.inner.len(),
            self.inner.function_count()
        )
    }
}

/// Validates a dotted name for `kind` (`function`, `namespace`, `page`, `skill`); raises
/// `ValueError` naming the bad segment. Names are never sanitized.
#[pyfunction]
#[pyo3(signature = (name, kind="function"))]
fn validate_name(name: &str, kind: &str) -> PyResult<()> {
    let rule = match kind {
        "function" | "namespace" => NameRule::Identifier,
        "page" | "skill" | "deny" => NameRule::Slug,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown kind `{other}`: use function, namespace, page or skill"
            )))
        }
    };
    names::validate_name(name, rule).map_err(to_pyerr)
}

/// `LINE:HASH` for one line's content (line ending excluded), as `cat` prints it.
#[pyfunction]
fn line_address(line_no: usize, text: &str) -> String {
    format!("{line_no}:{}", crate::text::LineHash::of(text.as_bytes()))
}

/// Adds the catalog's classes and functions to `vis._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyManifest>()?;
    m.add_function(wrap_pyfunction!(validate_name, m)?)?;
    m.add_function(wrap_pyfunction!(line_address, m)?)?;
    Ok(())
}
