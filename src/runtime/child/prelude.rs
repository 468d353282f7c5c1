//! The embedded prelude (`python/`, compiled into the binary by `build.rs`) and its start in
//! the worker's interpreter.

use std::ffi::CString;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::settings::{PreludeSettings, WorkerArgs};

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

/// Starts the prelude in the interpreter: `vis._native` registered, the embedded files made
/// importable (`_bootstrap.py`), the settings given (`vis._state.configure`), the workspace
/// put on `sys.path` and the runner made (it loads the extensions). Returns the runner and
/// Python's version.
pub(crate) fn start(py: Python<'_>, args: &WorkerArgs) -> PyResult<(Py<PyAny>, String)> {
    let native = pyo3::types::PyModule::new(py, "vis._native")?;
    super::python::register(&native)?;
    let sys = py.import("sys")?;
    sys.getattr("modules")?.set_item("vis._native", &native)?;
    let sources = PyDict::new(py);
    for (path, text) in PRELUDE_SOURCES {
        sources.set_item(*path, *text)?;
    }
    let globals = PyDict::new(py);
    globals.set_item("SOURCES", sources)?;
    let workspace = args
        .workspace
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    globals.set_item("WORKSPACE", &workspace)?;
    let bundled = PyDict::new(py);
    for (path, text) in BUNDLED_EXTENSION_SOURCES {
        bundled.set_item(*path, *text)?;
    }
    globals.set_item("BUNDLED", bundled)?;
    // The build's bytecode is used only by a Python that reads the same format.
    let magic: Vec<u8> = py
        .import("_frozen_importlib_external")?
        .getattr("MAGIC_NUMBER")?
        .extract()?;
    let same_magic = !PRELUDE_MAGIC.is_empty() && hex(&magic) == PRELUDE_MAGIC;
    let bytecode = PyDict::new(py);
    if same_magic {
        for (path, code) in PRELUDE_BYTECODE {
            bytecode.set_item(*path, pyo3::types::PyBytes::new(py, code))?;
        }
    }
    globals.set_item("BYTECODE", bytecode)?;
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
    let version: String = sys.getattr("version")?.extract()?;
    Ok((runner.unbind(), version))
}
