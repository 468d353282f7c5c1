//! The embedded prelude (`python/`, compiled into the binary by `build.rs`) and its start in
//! the worker's interpreter.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::settings::PreludeSettings;
use crate::runtime::wire::WorkerArgs;

static BOOTSTRAP: &str = include_str!("../../../python/_bootstrap.py");
include!(concat!(env!("OUT_DIR"), "/prelude_sources.rs"));

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A digest of every embedded prelude and bundled-extension file: what the signatures of their
/// functions are cached under (see `runtime::cache`).
fn prelude_digest() -> String {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for (path, text) in PRELUDE_SOURCES.iter().chain(BUNDLED_EXTENSION_SOURCES) {
        hasher.update(path.as_bytes());
        hasher.update(&[0]);
        hasher.update(text.as_bytes());
        hasher.update(&[0]);
    }
    format!("{:032x}", hasher.digest128())
}

/// Where the bundled extensions are importable from (`_vis_bundled.git`), and the package's
/// own (empty) `__init__.py`.
const BUNDLED_PREFIX: &str = "_vis_bundled/";
const BUNDLED_PACKAGE: &str = "_vis_bundled/__init__.py";

/// Whether this interpreter reads the build's bytecode (the same magic number); set once at
/// start, before the prelude is imported.
static USE_BYTECODE: AtomicBool = AtomicBool::new(false);

/// Every embedded file's path: the prelude's (`vis/x.py`, `vis/docs/x.md`), then the bundled
/// package and its extensions (`_vis_bundled/git.py`).
#[pyfunction]
fn embedded_paths() -> Vec<String> {
    PRELUDE_SOURCES
        .iter()
        .map(|(path, _)| path.to_string())
        .chain(std::iter::once(BUNDLED_PACKAGE.to_string()))
        .chain(
            BUNDLED_EXTENSION_SOURCES
                .iter()
                .map(|(path, _)| format!("{BUNDLED_PREFIX}{path}")),
        )
        .collect()
}

/// The text of embedded file `path` (as `embedded_paths` names it); KeyError for another.
#[pyfunction]
fn embedded_source(path: &str) -> PyResult<&'static str> {
    if path == BUNDLED_PACKAGE {
        return Ok("");
    }
    let found = match path.strip_prefix(BUNDLED_PREFIX) {
        Some(rel) => BUNDLED_EXTENSION_SOURCES.iter().find(|(p, _)| *p == rel),
        None => PRELUDE_SOURCES.iter().find(|(p, _)| *p == path),
    };
    found
        .map(|(_, text)| *text)
        .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(path.to_string()))
}

/// The build's bytecode of embedded module `path` as a read-only view of the binary's own
/// bytes (nothing is copied), or None when there is none for this Python (then the importer
/// compiles the source).
#[pyfunction]
fn embedded_bytecode<'py>(py: Python<'py>, path: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    if !USE_BYTECODE.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let Some((_, code)) = PRELUDE_BYTECODE.iter().find(|(p, _)| *p == path) else {
        return Ok(None);
    };
    let len = pyo3::ffi::Py_ssize_t::try_from(code.len())
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    // SAFETY: `code` is static data of the binary, alive as long as the process; the view is
    // read-only (PyBUF_READ), so Python never writes through the cast pointer.
    let view = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyMemoryView_FromMemory(
                code.as_ptr().cast_mut().cast(),
                len,
                pyo3::ffi::PyBUF_READ,
            ),
        )?
    };
    Ok(Some(view))
}

/// Starts the prelude in the interpreter: `vis._native` registered, the embedded files made
/// importable (`_bootstrap.py`), the settings given (`vis._state.configure`), the workspace
/// put on `sys.path` and the runner made (it loads the extensions). Returns the runner and
/// Python's version.
///
/// The cyclic garbage collector is paused meanwhile: the prelude's start creates thousands of
/// objects and no garbage worth a collection, and each collection walks them all again. They
/// are then frozen (`gc.freeze()`: the interpreter's and the prelude's modules, classes and
/// functions live as long as the worker): the collector never walks them again, not even in
/// the first collection after it is turned back on, which would otherwise find every one of
/// them still in its youngest generation.
pub(crate) fn start(py: Python<'_>, args: &WorkerArgs) -> PyResult<(Py<PyAny>, String)> {
    let gc = py.import("gc")?;
    gc.call_method0("disable")?;
    let native = pyo3::types::PyModule::new(py, "vis._native")?;
    super::python::register(&native)?;
    native.add_function(wrap_pyfunction!(embedded_paths, &native)?)?;
    native.add_function(wrap_pyfunction!(embedded_source, &native)?)?;
    native.add_function(wrap_pyfunction!(embedded_bytecode, &native)?)?;
    let sys = py.import("sys")?;
    sys.getattr("modules")?.set_item("vis._native", &native)?;
    // The build's bytecode is used only by a Python that reads the same format.
    let magic: Vec<u8> = py
        .import("_frozen_importlib_external")?
        .getattr("MAGIC_NUMBER")?
        .extract()?;
    let same_magic = !PRELUDE_MAGIC.is_empty() && hex(&magic) == PRELUDE_MAGIC;
    USE_BYTECODE.store(same_magic, Ordering::Relaxed);
    let globals = PyDict::new(py);
    if same_magic && !BOOTSTRAP_BYTECODE.is_empty() {
        let code = py.import("marshal")?.call_method1(
            "loads",
            (pyo3::types::PyBytes::new(py, BOOTSTRAP_BYTECODE),),
        )?;
        py.import("builtins")?
            .call_method1("exec", (code, &globals))?;
    } else {
        let code = CString::new(BOOTSTRAP)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        py.run(&code, Some(&globals), None)?;
    }
    crate::catalog::DenyList::new(args.deny.iter().cloned())
        .and_then(crate::catalog::set_deny_list)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("[permissions] deny: {e}")))?;
    if let Some(dir) = &args.cache_dir {
        crate::runtime::cache::set_worker_cache_dir(dir.clone());
    }
    let path_text = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
    let workspace = path_text(&args.workspace);
    // What the extension loader (run by the Runner) needs to know, in one object.
    let settings = PreludeSettings {
        workspace: workspace.clone(),
        config_dir: path_text(&args.config_dir),
        cache_dir: path_text(&args.cache_dir),
        prelude_digest: prelude_digest(),
        safe_mode: args.safe_mode,
        trusted: args.trusted,
    };
    py.import("vis._state")?
        .call_method1("configure", (settings,))?;
    // The prelude imports the standard modules it needs first; only then does the workspace
    // become importable, after the standard library.
    let runner_cls = py.import("vis._runner")?.getattr("Runner")?;
    py.import("_vis_embedded")?
        .getattr("extend_path")?
        .call1((&workspace, args.trusted))?;
    let runner = runner_cls.call0()?;
    gc.call_method0("freeze")?;
    gc.call_method0("enable")?;
    let version: String = sys.getattr("version")?.extract()?;
    Ok((runner.unbind(), version))
}
