//! Blocks: the one request ([`Block`]) and the one result ([`BlockResult`]) that every layer
//! speaks, how a block ended ([`Status`], [`ExitInfo`]), and the definitions that outlive the
//! worker ([`PersistedDef`], [`RestoreReport`], [`RestoreNotice`]).
//!
//! The same structs travel the whole way: a caller (gateway, `vis exec`, `vis mcp`, `vis
//! serve`) builds a [`Block`]; the supervisor sends it to the worker in the `exec` frame (serde,
//! JSON, because the pipe joins two processes); the worker hands it to Python's runner as a
//! dict (pyo3's `IntoPyObject`, no JSON text). Back, the runner returns a dict the worker reads
//! into a [`BlockResult`] (`FromPyObject`), adds the output to and sends in the `result` frame;
//! the supervisor decides the status and fills in what only the host knows, and the caller
//! records that same value.
//!
//! Everything the worker sends is untrusted: the wire form has no defaults (a missing field is
//! a protocol error, not an empty value), the fields only the host knows are never read from
//! the wire, and the host re-checks definitions against the block's own statements.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyString};
use pyo3::{Borrowed, IntoPyObject, IntoPyObjectRef};
use serde::{Deserialize, Serialize};

use super::{json_into_py, RestoreNotice, SessionInfo};
use crate::catalog::ManifestEntry;

/// A top-level definition persisted with the session and re-created on worker start. Crosses
/// into Python as a dict with these keys (restore) and back (a block's `defs_set`).
#[derive(
    Debug, Clone, PartialEq, Eq, Serialize, Deserialize, FromPyObject, IntoPyObject, IntoPyObjectRef,
)]
#[pyo3(from_item_all)]
pub struct PersistedDef {
    pub name: String,
    /// `function`, `class`, `import` or `constant`.
    pub kind: String,
    pub source: String,
    pub signature: String,
    pub doc: String,
}

/// How a block ended. The worker may only report `Ok`, `Error` or `Interrupted`
/// ([`Status::reportable_by_worker`]); `Timeout` and `Crashed` are the host's to decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Error,
    Timeout,
    Interrupted,
    Crashed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Interrupted => "interrupted",
            Status::Crashed => "crashed",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "ok" => Status::Ok,
            "error" => Status::Error,
            "timeout" => Status::Timeout,
            "interrupted" => Status::Interrupted,
            "crashed" => Status::Crashed,
            _ => return None,
        })
    }

    /// True for the statuses a worker can know of (the block ran to its end, raised, or was
    /// interrupted); a worker that reports another one breaks the protocol.
    pub fn reportable_by_worker(self) -> bool {
        matches!(self, Status::Ok | Status::Error | Status::Interrupted)
    }
}

/// Python's runner reports a status as its name.
impl<'py> FromPyObject<'_, 'py> for Status {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let name: Cow<'_, str> = obj.extract()?;
        Status::parse(&name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown block status {name:?}: the runner reports ok, error or interrupted"
            ))
        })
    }
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitInfo {
    Code(i32),
    Signal(i32),
    Unknown,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitInfo::Code(c) => write!(f, "exited with code {c}"),
            ExitInfo::Signal(s) => write!(f, "was killed by signal {s} ({})", signal_name(*s)),
            ExitInfo::Unknown => write!(f, "ended"),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    use rustix::process::Signal;
    [
        (Signal::SEGV, "SIGSEGV"),
        (Signal::KILL, "SIGKILL"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::ILL, "SIGILL"),
        (Signal::TERM, "SIGTERM"),
        (Signal::INT, "SIGINT"),
    ]
    .into_iter()
    .find(|(known, _)| known.as_raw() == sig)
    .map_or("signal", |(_, name)| name)
}

/// One block to run: what the caller asks for, exactly as the worker and Python's runner get
/// it (Python sees a dict with these keys; paths are strings, `timeout` is seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, IntoPyObjectRef)]
pub struct Block {
    pub code: String,
    /// e.g. `<t3/i1>`: tracebacks name it.
    pub filename: String,
    /// The `session` dict the model reads. The supervisor adds `restored` and `sandbox`; the
    /// runner adds `workspace_roots` (from the field below) and `extensions`.
    #[pyo3(into_py_with = session_into_py)]
    pub session: SessionInfo,
    /// The session's roots: the text tools are confined to them and the first one is the
    /// working directory. The one place they travel.
    #[pyo3(into_py_with = paths_into_py)]
    pub workspace_roots: Vec<PathBuf>,
    /// Output cap in characters.
    pub output_limit: usize,
    /// Where the full output goes when it is cut.
    #[pyo3(into_py_with = path_into_py)]
    pub artifact_path: PathBuf,
    /// Directory for other artifacts of this block (e.g. `sh` output); readable by the text
    /// tools.
    #[pyo3(into_py_with = path_into_py)]
    pub artifact_dir: PathBuf,
    /// The most bytes the session's artifact directory may hold.
    pub artifact_quota: u64,
    /// How long the block may run before it is interrupted.
    #[serde(with = "millis")]
    #[pyo3(into_py_with = seconds_into_py)]
    pub timeout: Duration,
}

impl Block {
    /// The paths that must be UTF-8 to cross the pipe, for a clear error before sending.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.workspace_roots
            .iter()
            .map(PathBuf::as_path)
            .chain([self.artifact_path.as_path(), self.artifact_dir.as_path()])
    }
}

/// How a block ended, and everything a caller needs to record it. Filled in stages, each by
/// the one party that knows:
///
/// - Python's runner: `status` (as the interpreter saw it: ok, error or interrupted),
///   `defs_set`, `defs_deleted` and `manifest` (a `vis._native.Manifest`, or `None`);
/// - the worker: `output` (capped), `cut_chars`, `total_chars`, `artifact`, `exec_micros`,
///   then the whole of it crosses the pipe;
/// - the supervisor (`runtime::supervisor`, `settle`): the final `status`, the notices in
///   `output`, and the fields that never cross the pipe (`restored`, `worker_lost`, `wall`,
///   `ran`). It also takes `manifest` for itself, so callers see `None` there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockResult {
    pub status: Status,
    /// Exactly what the model gets back.
    pub output: String,
    /// Characters cut by the cap (0 when nothing was cut).
    pub cut_chars: usize,
    pub total_chars: usize,
    /// Set when the output was cut and saved in full there.
    #[serde(deserialize_with = "Option::deserialize")]
    pub artifact: Option<PathBuf>,
    pub defs_set: Vec<PersistedDef>,
    pub defs_deleted: Vec<String>,
    /// Time spent running the block inside the worker.
    pub exec_micros: u64,
    /// The visible manifest, when the block changed it (e.g. `promote` loaded an extension).
    #[serde(deserialize_with = "Option::deserialize")]
    pub manifest: Option<Vec<ManifestEntry>>,
    /// Set on the first block after a worker start.
    #[serde(skip)]
    pub restored: Option<RestoreNotice>,
    /// The worker died or was killed during this block.
    #[serde(skip)]
    pub worker_lost: Option<ExitInfo>,
    /// Time from the call until the result, on the host.
    #[serde(skip)]
    pub wall: Duration,
    /// False when the block never reached the worker (stopped before it started).
    #[serde(skip)]
    pub ran: bool,
}

impl BlockResult {
    /// A result with `status` and nothing else yet.
    pub fn new(status: Status) -> BlockResult {
        BlockResult {
            status,
            output: String::new(),
            cut_chars: 0,
            total_chars: 0,
            artifact: None,
            defs_set: Vec::new(),
            defs_deleted: Vec::new(),
            exec_micros: 0,
            manifest: None,
            restored: None,
            worker_lost: None,
            wall: Duration::ZERO,
            ran: false,
        }
    }
}

/// What Python's runner returns: a dict with `status`, `defs_set`, `defs_deleted` and
/// `manifest`, every key required (the rest of the result is not the runner's to say).
impl<'py> FromPyObject<'_, 'py> for BlockResult {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let dict = obj.cast::<PyDict>().map_err(|_| {
            PyValueError::new_err(format!(
                "the runner returned {}, not a dict with status, defs_set, defs_deleted and manifest",
                obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })?;
        let item = |key: &str| {
            dict.get_item(key)?
                .ok_or_else(|| PyKeyError::new_err(format!("the runner's result has no `{key}`")))
        };
        let manifest = item("manifest")?;
        let manifest = if manifest.is_none() {
            None
        } else {
            Some(crate::catalog::manifest_entries_of(&manifest)?)
        };
        Ok(BlockResult {
            defs_set: item("defs_set")?.extract()?,
            defs_deleted: item("defs_deleted")?.extract()?,
            manifest,
            ..BlockResult::new(item("status")?.extract()?)
        })
    }
}

// The derive hands `into_py_with` a `Cow` of the field's own type.
#[allow(clippy::owned_cow)]
fn path_into_py<'py>(path: Cow<'_, PathBuf>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyString::new(py, &path.to_string_lossy()).into_any())
}

#[allow(clippy::owned_cow)]
fn session_into_py<'py>(
    session: Cow<'_, SessionInfo>,
    py: Python<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let value = serde_json::to_value(&*session)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    json_into_py(Cow::Owned(value), py)
}

#[allow(clippy::owned_cow)]
fn paths_into_py<'py>(
    paths: Cow<'_, Vec<PathBuf>>,
    py: Python<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let list = PyList::empty(py);
    for path in paths.iter() {
        list.append(path.to_string_lossy())?;
    }
    Ok(list.into_any())
}

fn seconds_into_py<'py>(d: Cow<'_, Duration>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyFloat::new(py, d.as_secs_f64()).into_any())
}

/// A duration as whole milliseconds on the wire.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statuses_round_trip_through_their_names() {
        for s in ["ok", "error", "timeout", "interrupted", "crashed"] {
            assert_eq!(Status::parse(s).unwrap().as_str(), s);
        }
        assert!(Status::parse("nope").is_none());
        let reportable: Vec<&str> = ["ok", "error", "timeout", "interrupted", "crashed"]
            .into_iter()
            .filter(|s| Status::parse(s).unwrap().reportable_by_worker())
            .collect();
        assert_eq!(reportable, ["ok", "error", "interrupted"]);
    }

    fn block() -> Block {
        Block {
            code: "print(1)".into(),
            filename: "<t1/i1>".into(),
            session: {
                let mut s = SessionInfo::new(
                    "s",
                    1,
                    1,
                    super::super::SessionCounts::default(),
                    super::super::Utilization::without_requests(),
                );
                s.mcp = json!({"big": 18446744073709551615u64, "f": 0.5, "l": [null, true]});
                s
            },
            workspace_roots: vec![PathBuf::from("/w"), PathBuf::from("/x")],
            output_limit: 100,
            artifact_path: PathBuf::from("/a/t1-i1.txt"),
            artifact_dir: PathBuf::from("/a"),
            artifact_quota: 7,
            timeout: Duration::from_millis(1500),
        }
    }

    #[test]
    fn a_block_crosses_the_pipe_unchanged() {
        let b = block();
        let wire = serde_json::to_value(&b).unwrap();
        assert_eq!(wire["timeout"], 1500);
        assert_eq!(serde_json::from_value::<Block>(wire).unwrap(), b);
    }

    #[test]
    fn a_result_from_the_wire_must_be_complete_and_cannot_set_host_fields() {
        let mut full = serde_json::to_value(BlockResult::new(Status::Ok)).unwrap();
        assert!(full.get("worker_lost").is_none() && full.get("ran").is_none());
        full["ran"] = json!(true);
        full["wall"] = json!(5);
        let back: BlockResult = serde_json::from_value(full.clone()).unwrap();
        assert!(!back.ran && back.wall == Duration::ZERO);
        for key in [
            "status",
            "output",
            "artifact",
            "manifest",
            "defs_set",
            "exec_micros",
        ] {
            let mut partial = full.clone();
            partial.as_object_mut().unwrap().remove(key);
            let e = serde_json::from_value::<BlockResult>(partial).unwrap_err();
            assert!(e.to_string().contains(key), "{key}: {e}");
        }
        let mut bad = full;
        bad["status"] = json!("fine");
        assert!(serde_json::from_value::<BlockResult>(bad).is_err());
    }

    #[test]
    fn python_gets_the_block_as_a_dict_and_returns_a_typed_result() {
        Python::initialize();
        Python::attach(|py| {
            let b = block();
            let dict = (&b).into_pyobject(py).unwrap();
            let get = |k: &str| dict.get_item(k).unwrap().unwrap();
            assert_eq!(get("code").extract::<String>().unwrap(), "print(1)");
            assert_eq!(
                get("workspace_roots").extract::<Vec<String>>().unwrap(),
                ["/w", "/x"]
            );
            assert_eq!(get("artifact_dir").extract::<String>().unwrap(), "/a");
            assert_eq!(get("timeout").extract::<f64>().unwrap(), 1.5);
            let session = get("session").get_item("mcp").unwrap();
            assert_eq!(
                session.get_item("big").unwrap().extract::<u64>().unwrap(),
                u64::MAX
            );
            assert_eq!(
                session.get_item("f").unwrap().extract::<f64>().unwrap(),
                0.5
            );
            assert!(session
                .get_item("l")
                .unwrap()
                .get_item(0)
                .unwrap()
                .is_none());

            let def = PersistedDef {
                name: "f".into(),
                kind: "function".into(),
                source: "def f():\n    pass\n".into(),
                signature: "()".into(),
                doc: String::new(),
            };
            let result = PyDict::new(py);
            result.set_item("status", "interrupted").unwrap();
            result
                .set_item("defs_set", vec![(&def).into_pyobject(py).unwrap()])
                .unwrap();
            result.set_item("defs_deleted", vec!["g"]).unwrap();
            result.set_item("manifest", py.None()).unwrap();
            let r: BlockResult = result.extract().unwrap();
            assert_eq!(r.status, Status::Interrupted);
            assert_eq!(r.defs_set, vec![def]);
            assert_eq!(r.defs_deleted, ["g"]);
            assert!(r.manifest.is_none() && r.output.is_empty());

            // Bad input: a missing key, an unknown status, a wrong shape.
            result.del_item("defs_deleted").unwrap();
            let e = result.extract::<BlockResult>().unwrap_err().to_string();
            assert!(e.contains("no `defs_deleted`"), "{e}");
            result.set_item("defs_deleted", PyList::empty(py)).unwrap();
            result.set_item("status", "timeout?").unwrap();
            let e = result.extract::<BlockResult>().unwrap_err().to_string();
            assert!(e.contains("unknown block status"), "{e}");
            let e = PyList::empty(py)
                .extract::<BlockResult>()
                .unwrap_err()
                .to_string();
            assert!(e.contains("not a dict"), "{e}");
        });
    }

    #[test]
    fn exit_info_names_the_signal() {
        assert_eq!(
            ExitInfo::Signal(rustix::process::Signal::SEGV.as_raw()).to_string(),
            "was killed by signal 11 (SIGSEGV)"
        );
        assert_eq!(ExitInfo::Code(3).to_string(), "exited with code 3");
    }
}
