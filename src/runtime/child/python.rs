//! `vis._native`: the Rust functions the prelude calls. Registered into the worker's
//! interpreter before the prelude is imported (see `python/vis/_native.pyi` for the stubs).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::runtime::output::cap_output;

/// Caps `raw` like block output; returns `(text, total_chars, cut_chars)`. When something was
/// cut, the marker names `artifact` (the caller saves the full text there).
#[pyfunction]
#[pyo3(signature = (raw, limit, artifact=None))]
fn cap_text(raw: &[u8], limit: usize, artifact: Option<String>) -> (String, usize, usize) {
    let capped = cap_output(raw, limit, artifact.as_deref().map(std::path::Path::new));
    (capped.text, capped.total_chars, capped.cut_chars)
}

/// Calls the host (the gateway that owns the session) with JSON-like `params` (dicts, lists,
/// str, numbers, bools, None) and waits for its answer, returned the same way.
#[pyfunction]
fn host_call<'py>(
    py: Python<'py>,
    method: &str,
    params: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let params = crate::protocol::json_from_py(params)?;
    let method = method.to_string();
    let answer = py.detach(move || super::channel::host_call(&method, params));
    match answer {
        Ok(value) => crate::protocol::json_into_py(std::borrow::Cow::Owned(value), py),
        Err(super::channel::HostCallError::Failed(e)) => Err(PyRuntimeError::new_err(e)),
        Err(super::channel::HostCallError::Interrupted) => {
            // The interrupt's SIGINT is pending: let Python's handler raise KeyboardInterrupt
            // (it does so only while a block runs); raise it here if it did not.
            py.check_signals()?;
            Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(
                "interrupted while waiting for the host",
            ))
        }
    }
}

/// The JSON value of cache file `path` (relative to Vis's cache directory, e.g.
/// `entry-points/0123abcd.json`) as Python values; `None` when there is no cache directory or
/// the file is not a known cache file, missing, too large or not JSON (see `runtime::cache`).
#[pyfunction]
fn read_cache<'py>(py: Python<'py>, path: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(dir) = crate::runtime::cache::worker_cache_dir() else {
        return Ok(None);
    };
    match crate::runtime::cache::read(dir, path) {
        Some(value) => crate::protocol::json_into_py(std::borrow::Cow::Owned(value), py).map(Some),
        None => Ok(None),
    }
}

/// A 128-bit digest (xxh3, 32 hex digits) of `data`, for cache keys.
#[pyfunction]
fn digest(data: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(data))
}

/// The compile flags `compile_expression` accepts: top-level `await`, and the `__future__`
/// features (CPython's `PyCF_MASK`).
const EXPRESSION_FLAGS: i32 = 0x2000 | 0x1fe_0000;

/// `compile(source, filename, "eval", flags, dont_inherit=True)`, through CPython's C API. The
/// builtin's first call in an interpreter first checks whether its argument is a syntax tree,
/// which makes every `ast` node type (about a millisecond); a block that is one expression
/// (most first blocks) needs none of them.
#[pyfunction]
fn compile_expression<'py>(
    py: Python<'py>,
    source: &str,
    filename: &Bound<'py, pyo3::types::PyString>,
    flags: i32,
) -> PyResult<Bound<'py, PyAny>> {
    if flags & !EXPRESSION_FLAGS != 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "compile_expression(): unrecognised flags {flags:#x}"
        )));
    }
    // The builtin's own message for the same input.
    let text = std::ffi::CString::new(source).map_err(|_| {
        pyo3::exceptions::PyValueError::new_err("source code string cannot contain null bytes")
    })?;
    let mut compiler_flags = pyo3::ffi::PyCompilerFlags {
        // PyCF_SOURCE_IS_UTF8: a `str` is UTF-8 here, as the builtin marks it.
        cf_flags: flags | 0x0100,
        cf_feature_version: i32::from(py.version_info().minor),
    };
    // SAFETY: NUL-terminated source, a live `str` for the file name, flags we own; the call
    // returns a new reference or NULL with an exception set.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::Py_CompileStringObject(
                text.as_ptr(),
                filename.as_ptr(),
                pyo3::ffi::Py_eval_input,
                &mut compiler_flags,
                -1,
            ),
        )
    }
}

/// Tells the host which persisted definition (its index in the restore) the worker is about to
/// compile or run, so one that kills or hangs the worker is skipped in the next one.
#[pyfunction]
fn restoring(index: usize) -> PyResult<()> {
    super::channel::report_restoring(index).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Tells the host about a background job: `{"event": "started", "id", "command",
/// "artifact"}`, `{"event": "finished", "id", "exit_code", "signal", "lines", "bytes",
/// "dropped_bytes", "timed_out", "killed"}` or `{"event": "observed", "id"}` (see
/// `runtime::host::jobs`). Works between blocks too (a job's thread reports its end).
#[pyfunction]
fn job_report(report: &Bound<'_, PyAny>) -> PyResult<()> {
    let value = crate::protocol::json_from_py(report)?;
    let report: crate::runtime::wire::JobReport = serde_json::from_value(value)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("bad job report: {e}")))?;
    super::channel::send(&crate::runtime::wire::WorkerMessage::Job { report })
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// True when the host asked to interrupt the block now running. The runner checks it right
/// after arming its SIGINT handler, so an interrupt that came just before is not lost.
#[pyfunction]
fn interrupt_pending() -> bool {
    super::channel::interrupt_pending()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cap_text, m)?)?;
    m.add_function(wrap_pyfunction!(interrupt_pending, m)?)?;
    m.add_function(wrap_pyfunction!(compile_expression, m)?)?;
    m.add_function(wrap_pyfunction!(host_call, m)?)?;
    m.add_function(wrap_pyfunction!(read_cache, m)?)?;
    m.add_function(wrap_pyfunction!(digest, m)?)?;
    m.add_function(wrap_pyfunction!(restoring, m)?)?;
    m.add_function(wrap_pyfunction!(job_report, m)?)?;
    // The limits on persisted definitions (the host enforces them too: `runtime::defs`).
    m.add(
        "MAX_DEFINITION_BYTES",
        crate::runtime::defs::MAX_DEFINITION_BYTES,
    )?;
    m.add(
        "MAX_SESSION_DEFINITION_BYTES",
        crate::runtime::defs::MAX_SESSION_DEFINITION_BYTES,
    )?;
    m.add(
        "MAX_CONSTANT_CHARS",
        crate::runtime::defs::MAX_CONSTANT_CHARS,
    )?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    crate::text::register_native(m)?;
    crate::catalog::register_native(m)?;
    Ok(())
}
