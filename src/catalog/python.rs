//! The catalog core as seen from Python (`vis._native`): a native manifest object so that
//! `apropos` and `doc` run in Rust, plus name validation for the extension API.
//!
//! - `Manifest(entries)` builds a [`Manifest`] from the entry dicts the prelude collects
//!   (read straight into [`ManifestEntry`] values, no JSON text) and the worker's deny list;
//! - the deny list is set once, when the worker starts ([`set_deny_list`]); the manifest and
//!   `denied(name)` (which extensions not to load) both apply that one [`DenyList`];
//! - `.apropos(pattern, namespace, limit, offset)` returns `(text, rows, total, remaining,
//!   next_offset)`, where `rows` are `(name, kind, line)` of this page only;
//! - `.doc(name)` returns the text; `.visible(name)`/`.callable(name)`; the worker takes the
//!   visible entries from the object itself ([`manifest_entries_of`]) to send to the host;
//! - `validate_name(name, kind)` raises `ValueError` naming the bad segment;
//! - `line_address(line_no, text)` is the `LINE:HASH` address of one line (the same hash `cat`
//!   and `patch` use), for extensions that print file lines (e.g. `git.diff`);
//! - `front_matter(text)` is the `{key: value}` dict of a `SKILL.md`'s YAML front matter
//!   (top-level scalars, file order); bad front matter is a `ValueError` saying where.
//!
//! Errors map to Python exceptions: invalid regex, names and arguments are `ValueError`;
//! unknown names and namespaces are `LookupError`. Messages are the catalog's own.

use std::sync::OnceLock;

use pyo3::exceptions::{PyKeyError, PyLookupError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use pyo3::Borrowed;

use super::error::CatalogError;
use super::manifest::{DenyList, EntryKind, Manifest, ManifestEntry, Origin};
use super::names::{self, NameRule};

/// The worker's deny list (`[permissions] deny`), set once at start.
static DENY: OnceLock<DenyList> = OnceLock::new();

/// Sets the deny list every manifest of this process applies. Only the first call counts:
/// a second one is an error naming the cause.
pub fn set_deny_list(deny: DenyList) -> Result<(), CatalogError> {
    DENY.set(deny).map_err(|_| CatalogError::DenyListAlreadySet)
}

fn deny_list() -> &'static DenyList {
    DENY.get_or_init(DenyList::default)
}

/// The visible entries of a `vis._native.Manifest` object (what the worker sends the host).
pub fn manifest_entries_of(obj: &Bound<'_, PyAny>) -> PyResult<Vec<ManifestEntry>> {
    let manifest = obj.cast::<PyManifest>().map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a vis._native.Manifest, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    Ok(manifest.get().inner.entries().to_vec())
}

/// A manifest entry as the prelude registers it: a dict with `name` and `kind`, and optionally
/// `signature`, `summary`, `doc`, `namespace`, `pinned` and `origin` (`"core"`,
/// `{"extension": name}` or `{"mcp": server}`).
impl<'py> FromPyObject<'_, 'py> for ManifestEntry {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let dict = obj
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err("a manifest entry is a dict"))?;
        let name: String = dict
            .get_item("name")?
            .ok_or_else(|| PyKeyError::new_err("a manifest entry has no `name`"))?
            .extract()?;
        let kind: String = dict
            .get_item("kind")?
            .ok_or_else(|| PyKeyError::new_err(format!("manifest entry `{name}` has no `kind`")))?
            .extract()?;
        let kind = match kind.as_str() {
            "function" => EntryKind::Function,
            "namespace" => EntryKind::Namespace,
            "page" => EntryKind::Page,
            "skill" => EntryKind::Skill,
            other => {
                return Err(PyValueError::new_err(format!(
                    "manifest entry `{name}` has kind `{other}`: use function, namespace, page or skill"
                )))
            }
        };
        let text = |key: &str| -> PyResult<String> {
            match dict.get_item(key)? {
                Some(v) if !v.is_none() => v.extract(),
                _ => Ok(String::new()),
            }
        };
        let origin = match dict.get_item("origin")? {
            None => Origin::Core,
            Some(v) if v.is_none() => Origin::Core,
            Some(v) => extract_origin(&v).ok_or_else(|| {
                PyValueError::new_err(format!("manifest entry `{name}`: {ORIGIN_FORMS}"))
            })?,
        };
        let pinned = match dict.get_item("pinned")? {
            Some(v) if !v.is_none() => v.extract()?,
            _ => false,
        };
        Ok(ManifestEntry {
            signature: text("signature")?,
            summary: text("summary")?,
            doc: text("doc")?,
            namespace: text("namespace")?,
            pinned,
            origin,
            name,
            kind,
        })
    }
}

/// The forms an entry's origin takes (the error when it has none of them).
const ORIGIN_FORMS: &str = "origin is \"core\", {\"extension\": name} or {\"mcp\": server}";

/// An entry's origin, or `None` when it has none of the [`ORIGIN_FORMS`].
fn extract_origin(v: &Bound<'_, PyAny>) -> Option<Origin> {
    if let Ok(s) = v.cast::<PyString>() {
        return matches!(s.to_str(), Ok("core")).then_some(Origin::Core);
    }
    let dict = v.cast::<PyDict>().ok()?;
    if dict.len() != 1 {
        return None;
    }
    let name_of = |key: &str| -> Option<String> { dict.get_item(key).ok()??.extract().ok() };
    match (name_of("extension"), name_of("mcp")) {
        (Some(n), None) => Some(Origin::Extension(n)),
        (None, Some(n)) => Some(Origin::Mcp(n)),
        _ => None,
    }
}

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
    /// Builds the visible manifest of `entries` (the worker's deny list applied).
    #[new]
    fn new(py: Python<'_>, entries: Vec<ManifestEntry>) -> PyResult<Self> {
        let inner = py
            .detach(move || Manifest::build(entries, deny_list()))
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

/// True when the worker's deny list denies `name` (it, or a namespace containing it, is
/// listed): a denied extension is not even loaded.
#[pyfunction]
fn denied(name: &str) -> bool {
    deny_list().denies(name)
}

/// `LINE:HASH` for one line's content (line ending excluded), as `cat` prints it.
#[pyfunction]
fn line_address(line_no: usize, text: &str) -> String {
    format!("{line_no}:{}", crate::text::LineHash::of(text.as_bytes()))
}

/// The top-level scalar fields of a `SKILL.md`'s YAML front matter, in file order.
#[pyfunction]
fn front_matter<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let fields = super::front_matter::parse_front_matter(text).map_err(to_pyerr)?;
    let dict = pyo3::types::PyDict::new(py);
    for (key, value) in fields {
        dict.set_item(key, value)?;
    }
    Ok(dict)
}

/// Adds the catalog's classes and functions to `vis._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyManifest>()?;
    m.add_function(wrap_pyfunction!(validate_name, m)?)?;
    m.add_function(wrap_pyfunction!(denied, m)?)?;
    m.add_function(wrap_pyfunction!(line_address, m)?)?;
    m.add_function(wrap_pyfunction!(front_matter, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyo3::types::PyList;

    #[test]
    fn entries_cross_from_python_dicts_and_denied_ones_are_dropped_once() {
        // The only test in this binary that touches the process's deny list.
        let deny = DenyList::new(["git.blame", "secret"]).unwrap();
        set_deny_list(deny).unwrap();
        let again = set_deny_list(DenyList::default()).unwrap_err();
        assert!(again.to_string().contains("set once"), "{again}");
        Python::initialize();
        Python::attach(|py| {
            let entries = py
                .eval(
                    c"[{'name': 'git', 'kind': 'namespace', 'summary': 'Git', 'origin': {'extension': 'git'}},
                       {'name': 'git.diff', 'kind': 'function', 'signature': '()', 'doc': 'Diff.', 'origin': {'extension': 'git'}},
                       {'name': 'git.blame', 'kind': 'function', 'origin': {'extension': 'git'}},
                       {'name': 'secret', 'kind': 'function'},
                       {'name': 'cat', 'kind': 'function', 'pinned': True, 'origin': 'core', 'summary': None}]",
                    None,
                    None,
                )
                .unwrap();
            let manifest = PyManifest::new(py, entries.extract().unwrap()).unwrap();
            let object = Bound::new(py, manifest).unwrap().into_any();
            let visible = manifest_entries_of(&object).unwrap();
            let names: Vec<&str> = visible.iter().map(|e| e.name.as_str()).collect();
            assert!(
                names.contains(&"git.diff") && names.contains(&"cat"),
                "{names:?}"
            );
            assert!(!names.contains(&"git.blame") && !names.contains(&"secret"));
            let diff = visible.iter().find(|e| e.name == "git.diff").unwrap();
            assert_eq!(diff.origin, Origin::Extension("git".into()));
            assert_eq!(
                (diff.signature.as_str(), diff.doc.as_str()),
                ("()", "Diff.")
            );
            assert!(visible.iter().any(|e| e.name == "cat" && e.pinned));
            assert!(denied("git.blame") && denied("secret.x") && !denied("git"));

            // Bad input names the entry and what is wrong.
            let bad = |code: &std::ffi::CStr| {
                py.eval(code, None, None)
                    .unwrap()
                    .extract::<ManifestEntry>()
                    .unwrap_err()
                    .to_string()
            };
            assert!(bad(c"{'kind': 'function'}").contains("no `name`"));
            assert!(bad(c"{'name': 'f'}").contains("`f` has no `kind`"));
            assert!(bad(c"{'name': 'f', 'kind': 'macro'}").contains("use function, namespace"));
            assert!(
                bad(c"{'name': 'f', 'kind': 'page', 'origin': {'mcp': 'a', 'x': 1}}")
                    .contains("origin is")
            );
            assert!(bad(c"{'name': 'f', 'kind': 'page', 'origin': 'user'}").contains("origin is"));
            assert!(bad(c"['f']").contains("a manifest entry is a dict"));
            let e = manifest_entries_of(&PyList::empty(py).into_any()).unwrap_err();
            assert!(
                e.to_string().contains("expected a vis._native.Manifest"),
                "{e}"
            );
        });
    }
}
