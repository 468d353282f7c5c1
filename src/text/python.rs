//! The native half of `vis.text`: functions and result classes added to `vis._native`.
//!
//! The model-facing functions (`cat`, `grep`, `patch` with docstrings) are thin wrappers in
//! `python/vis/text.py`. Every result class's `__repr__` is its plain text, because the runtime
//! prints the repr of a block's last expression the way a REPL does.
//!
//! The GIL is released for all file work. That matters for `patch`: it takes a directory lock,
//! and a thread waiting for that lock while holding the GIL would deadlock with the lock holder
//! wanting the GIL for the Python syntax check.

use std::path::PathBuf;
use std::sync::RwLock;

use pyo3::exceptions::{
    PyFileNotFoundError, PyIsADirectoryError, PyOSError, PyPermissionError, PyRuntimeError,
    PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyList, PyString, PyTuple};

use crate::text::cat::{cat, CatOptions, CatOutput, LineRef};
use crate::text::confine::Workspace;
use crate::text::grep::{grep, GrepMatch, GrepOptions, GrepOutput};
use crate::text::patch::{patch, Edit, PatchOptions, PatchOutput};
use crate::text::syntax::Verdict;
use crate::text::TextError;

pyo3::create_exception!(
    vis.text,
    PatchError,
    PyValueError,
    "A patch was rejected (stale or conflicting addresses, or a new syntax error); nothing was \
     changed."
);
pyo3::create_exception!(
    vis.text,
    AddressError,
    PatchError,
    "An address (a patch edit's, or cat's start/end) is malformed, past the end of the file, \
     stale, or conflicts with another edit."
);
pyo3::create_exception!(
    vis.text,
    FileChangedError,
    PatchError,
    "The file changed (another process wrote, replaced or swapped it) while patch was working on \
     it, or another process has it open for writing; nothing was written. Re-read it with cat \
     and send the batch again (once that writer is done)."
);

static WORKSPACE: RwLock<Workspace> = RwLock::new(Workspace {
    roots: Vec::new(),
    read_only_roots: Vec::new(),
});

/// Set the roots the text tools may touch; the worker calls this before each block. There is
/// deliberately no Python binding for it: confinement would be pointless if a block could widen
/// it.
pub fn set_workspace(workspace: Workspace) {
    let mut guard = WORKSPACE.write().unwrap_or_else(|e| e.into_inner());
    *guard = workspace;
}

/// The current workspace.
pub fn workspace() -> Workspace {
    WORKSPACE.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Map a text-tool error to the Python exception the model should see.
pub fn to_pyerr(err: TextError) -> PyErr {
    let message = err.to_string();
    match err {
        TextError::NotFound { .. } => PyFileNotFoundError::new_err(message),
        TextError::OutsideWorkspace { .. }
        | TextError::ReadOnly { .. }
        | TextError::NotWritable { .. } => PyPermissionError::new_err(message),
        TextError::IsDirectory { .. } => PyIsADirectoryError::new_err(message),
        TextError::Io { .. } => PyOSError::new_err(message),
        TextError::NoWorkspace => PyRuntimeError::new_err(message),
        TextError::Address { .. } => AddressError::new_err(message),
        TextError::Changed { .. } | TextError::OpenForWriting { .. } => {
            FileChangedError::new_err(message)
        }
        TextError::ModeNotKept { .. } => PyPermissionError::new_err(message),
        TextError::Syntax { .. } | TextError::Injected { .. } => PatchError::new_err(message),
        TextError::NotAFile { .. }
        | TextError::Binary { .. }
        | TextError::InvalidArgument(_)
        | TextError::Pattern(_) => PyValueError::new_err(message),
    }
}

/// A Python int shown in a message, shortened if it is absurdly long.
fn short_repr(value: &Bound<'_, PyAny>) -> String {
    let text = value
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into());
    if text.chars().count() > 40 {
        let head: String = text.chars().take(12).collect();
        format!("{head}… ({} digits)", text.len())
    } else {
        text
    }
}

/// cat's `start`/`end`: an int (any size: never an OverflowError), an address string, or None.
/// An `end` beyond any file is clamped like any end past the last line; a `start` that large
/// is past the end of every file.
fn line_ref(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<LineRef>> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a line number or an address like '42:kodu', got {}",
            short_repr(value)
        )));
    }
    if value.is_instance_of::<PyInt>() {
        if value.lt(1)? {
            return Err(PyValueError::new_err(format!(
                "{name}={}: line numbers start at 1; give a line number from 1 up (or an \
                 address like '42:kodu')",
                short_repr(value)
            )));
        }
        return match value.extract::<usize>() {
            Ok(n) => Ok(Some(LineRef::Number(n))),
            Err(_) if name == "end" => Ok(Some(LineRef::Number(usize::MAX))),
            Err(_) => Err(PyValueError::new_err(format!(
                "{name}={} is past the end of any file; give a line number within the file \
                 (the header of cat(path) says how many lines it has)",
                short_repr(value)
            ))),
        };
    }
    if let Ok(text) = value.cast::<PyString>() {
        let text = text.to_str()?;
        let trimmed = text.trim();
        if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
            // A bare number in a string: same rules as an int.
            let number = value.py().get_type::<PyInt>().call1((trimmed,))?;
            return line_ref(name, Some(&number));
        }
        return Ok(Some(LineRef::Address(text.to_string())));
    }
    Err(PyTypeError::new_err(format!(
        "{name} must be a line number or an address like '42:kodu', got {}",
        short_repr(value)
    )))
}

/// The `#[pymethods]` of a result that prints as its `text` (`__repr__`, `__str__` and the
/// `text` getter), plus the methods given: one definition for every printed result.
macro_rules! printed_result_methods {
    ($ty:ident { $($methods:tt)* }) => {
        #[pymethods]
        impl $ty {
            fn __repr__(&self) -> String {
                self.text.clone()
            }
            fn __str__(&self) -> String {
                self.text.clone()
            }
            /// The printed text.
            #[getter]
            fn text(&self) -> String {
                self.text.clone()
            }
            $($methods)*
        }
    };
}

/// `cat` result: prints as the addressed text.
#[pyclass(module = "vis.text", name = "CatResult", frozen)]
pub struct PyCatResult {
    output: CatOutput,
    text: String,
}

printed_result_methods! {PyCatResult {
    #[getter]
    fn path(&self) -> String {
        self.output.path.clone()
    }
    /// Total lines in the file.
    #[getter]
    fn total_lines(&self) -> usize {
        self.output.total_lines
    }
    #[getter]
    fn start(&self) -> usize {
        self.output.start
    }
    #[getter]
    fn end(&self) -> usize {
        self.output.end
    }
    /// The shown lines as (line, address, text) tuples.
    #[getter]
    fn lines(&self) -> Vec<(usize, String, String)> {
        self.output
            .lines()
            .into_iter()
            .map(|l| (l.address.line, l.address.to_string(), l.text))
            .collect()
    }
}}

/// One matched line of a grep result.
#[pyclass(module = "vis.text", name = "GrepMatch", frozen)]
pub struct PyGrepMatch {
    inner: GrepMatch,
}

#[pymethods]
impl PyGrepMatch {
    fn __repr__(&self) -> String {
        format!(
            "{}:{}|{}",
            self.inner.path, self.inner.address, self.inner.text
        )
    }
    #[getter]
    fn path(&self) -> String {
        self.inner.path.clone()
    }
    #[getter]
    fn line(&self) -> usize {
        self.inner.address.line
    }
    /// `LINE:HASH`, ready for patch.
    #[getter]
    fn address(&self) -> String {
        self.inner.address.to_string()
    }
    #[getter]
    fn text(&self) -> String {
        self.inner.text.clone()
    }
}

/// `grep` result: prints as grouped, addressed text; iterates over matches.
#[pyclass(module = "vis.text", name = "GrepResult", frozen)]
pub struct PyGrepResult {
    output: GrepOutput,
    text: String,
}

printed_result_methods! {PyGrepResult {
    /// Matched lines within the limit, as GrepMatch(path, line, address, text).
    #[getter]
    fn matches(&self) -> Vec<PyGrepMatch> {
        self.output
            .matches()
            .into_iter()
            .map(|inner| PyGrepMatch { inner })
            .collect()
    }
    /// Total matches found, including those past the limit.
    #[getter]
    fn count(&self) -> u64 {
        self.output.total_matches
    }
    /// Paths of all files with matches, sorted.
    #[getter]
    fn files(&self) -> Vec<String> {
        self.output.files.iter().map(|f| f.path.clone()).collect()
    }
    fn __len__(&self) -> usize {
        self.output.files.iter().map(|f| f.shown as usize).sum()
    }
    fn __bool__(&self) -> bool {
        self.output.total_matches > 0
    }
    fn __iter__<'py>(slf: PyRef<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let list = PyList::new(py, slf.matches())?;
        Ok(list.try_iter()?.into_any())
    }
}}

/// `patch` result: a summary and the changed region with fresh addresses.
#[pyclass(module = "vis.text", name = "PatchResult", frozen)]
pub struct PyPatchResult {
    output: PatchOutput,
    text: String,
}

printed_result_methods! {PyPatchResult {
    #[getter]
    fn path(&self) -> String {
        self.output.path.clone()
    }
    #[getter]
    fn removed(&self) -> usize {
        self.output.lines_removed
    }
    #[getter]
    fn added(&self) -> usize {
        self.output.lines_added
    }
    #[getter]
    fn lines_before(&self) -> usize {
        self.output.lines_before
    }
    #[getter]
    fn lines_after(&self) -> usize {
        self.output.lines_after
    }
    /// False when the edits left the file byte-identical.
    #[getter]
    fn changed(&self) -> bool {
        self.output.changed
    }
    /// The language checked ("python", "json", ...) or None when unchecked.
    #[getter]
    fn checked(&self) -> Option<&'static str> {
        match &self.output.syntax {
            Verdict::Clean(l) | Verdict::NoWorse { language: l, .. } => Some(l.name()),
            _ => None,
        }
    }
    /// Changed regions in the new file as (first, last) line numbers, with one line of context.
    #[getter]
    fn regions(&self) -> Vec<(usize, usize)> {
        self.output.regions.clone()
    }
}}

#[pyfunction]
#[pyo3(signature = (path, start=None, end=None))]
fn text_cat(
    py: Python<'_>,
    path: PathBuf,
    start: Option<Bound<'_, PyAny>>,
    end: Option<Bound<'_, PyAny>>,
) -> PyResult<PyCatResult> {
    let options = CatOptions {
        start: line_ref("start", start.as_ref())?,
        end: line_ref("end", end.as_ref())?,
        ..CatOptions::default()
    };
    let ws = workspace();
    let output = py.detach(|| cat(&ws, &path, &options)).map_err(to_pyerr)?;
    let text = output.render();
    Ok(PyCatResult { output, text })
}

#[pyfunction]
#[pyo3(signature = (
    pattern, paths, *, fixed=false, ignore_case=false, smart_case=false, word=false,
    globs=Vec::new(), types=Vec::new(), before=0, after=0, max_count=None, limit=Some(100),
    hidden=false, no_ignore=false
))]
#[allow(clippy::too_many_arguments)]
fn text_grep(
    py: Python<'_>,
    pattern: String,
    paths: Vec<PathBuf>,
    fixed: bool,
    ignore_case: bool,
    smart_case: bool,
    word: bool,
    globs: Vec<String>,
    types: Vec<String>,
    before: usize,
    after: usize,
    max_count: Option<u64>,
    limit: Option<usize>,
    hidden: bool,
    no_ignore: bool,
) -> PyResult<PyGrepResult> {
    let options = GrepOptions {
        fixed,
        ignore_case,
        smart_case,
        word,
        globs,
        types,
        before,
        after,
        max_count,
        limit,
        hidden,
        no_ignore,
        ..GrepOptions::default()
    };
    let ws = workspace();
    let output = py
        .detach(|| grep(&ws, &pattern, &paths, &options))
        .map_err(to_pyerr)?;
    let text = output.render();
    Ok(PyGrepResult { output, text })
}

/// A file's bytes, confined like `cat` (read-only roots included): what `show()` reads.
#[pyfunction]
fn text_read_bytes(py: Python<'_>, path: PathBuf, limit: u64) -> PyResult<Py<PyBytes>> {
    let ws = workspace();
    let bytes = py
        .detach(|| {
            crate::text::read_bytes(&ws, &path, limit, |path, size| {
                format!("{path} is {size} bytes; show() takes images up to {limit} bytes (save a smaller one, or crop it)")
            })
        })
        .map_err(to_pyerr)?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

/// Edits arrive canonical from `vis/text.py`: ("replace", first, last, text), ("before", at,
/// text), ("after", at, text), ("start", text) or ("end", text).
fn edit_from_tuple(item: &Bound<'_, PyAny>) -> PyResult<Edit> {
    let tuple = item.cast::<PyTuple>().map_err(|_| {
        PyValueError::new_err("internal: edits must be canonical tuples from vis.text.patch")
    })?;
    let kind: String = tuple.get_item(0)?.extract()?;
    let s = |i: usize| -> PyResult<String> { tuple.get_item(i)?.extract() };
    Ok(match (kind.as_str(), tuple.len()) {
        ("replace", 4) => Edit::replace_range(s(1)?, s(2)?, s(3)?),
        ("before", 3) => Edit::insert_before(s(1)?, s(2)?),
        ("after", 3) => Edit::insert_after(s(1)?, s(2)?),
        ("start", 2) => Edit::insert_at_start(s(1)?),
        ("end", 2) => Edit::insert_at_end(s(1)?),
        _ => {
            return Err(PyValueError::new_err(format!(
                "internal: unknown canonical edit {kind:?} of length {}",
                tuple.len()
            )))
        }
    })
}

#[pyfunction]
#[pyo3(signature = (path, edits, *, check_syntax=true, force=false))]
fn text_patch(
    py: Python<'_>,
    path: PathBuf,
    edits: Vec<Bound<'_, PyAny>>,
    check_syntax: bool,
    force: bool,
) -> PyResult<PyPatchResult> {
    let edits: Vec<Edit> = edits.iter().map(edit_from_tuple).collect::<PyResult<_>>()?;
    let options = PatchOptions {
        check_syntax,
        force,
        ..PatchOptions::default()
    };
    let ws = workspace();
    let output = py
        .detach(|| patch(&ws, &path, &edits, &options))
        .map_err(to_pyerr)?;
    let text = output.render();
    Ok(PyPatchResult { output, text })
}

/// Add the text tools to the native module (`vis._native`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(text_cat, m)?)?;
    m.add_function(wrap_pyfunction!(text_grep, m)?)?;
    m.add_function(wrap_pyfunction!(text_patch, m)?)?;
    m.add_function(wrap_pyfunction!(text_read_bytes, m)?)?;
    m.add_class::<PyCatResult>()?;
    m.add_class::<PyGrepResult>()?;
    m.add_class::<PyGrepMatch>()?;
    m.add_class::<PyPatchResult>()?;
    m.add("PatchError", py.get_type::<PatchError>())?;
    m.add("AddressError", py.get_type::<AddressError>())?;
    m.add("FileChangedError", py.get_type::<FileChangedError>())?;
    Ok(())
}
