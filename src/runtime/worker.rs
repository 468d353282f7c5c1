//! The worker process (`vis worker`): CPython embedded on a dedicated thread, driven by frames
//! from the host.
//!
//! Descriptor layout, set up before Python starts so nothing a block does can reach the
//! protocol pipes:
//! - the host's pipes (our original fd 0 and 1) are moved to close-on-exec descriptors that
//!   only this module knows;
//! - fd 0 becomes `/dev/null` (`input()` sees EOF);
//! - fd 1 and fd 2 both point at the capture file the host gave us (opened `O_APPEND`), so
//!   Python-level prints, C-level writes, subprocess output and a fatal-error dump all land
//!   there, in order.
//!
//! Interrupts: the host sends `SIGUSR2` to the worker. Every thread blocks it except a small
//! forwarder thread, which turns it into a `SIGINT` aimed at the interpreter thread with
//! `pthread_kill`. Only a signal delivered to that thread wakes `time.sleep` (EINTR), and only
//! a Python-level handler raises `KeyboardInterrupt` there; the handler (in `vis._runner`)
//! ignores interrupts that arrive while no block runs.

use std::ffi::CString;
use std::fs::File;

use std::os::fd::{FromRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::frame::{write_frame, FrameReader};
use super::output::{cap_file, cap_output};
use super::protocol::{ExecRequest, ExecResult, HostMessage, RestoreReport, Status, WorkerMessage};
use super::RuntimeError;

/// Settings the host passes on the worker's command line.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub capture: PathBuf,
    pub memory_limit_mb: u64,
    pub workspace: Option<PathBuf>,
    /// The user's config directory (`extensions/`, `skills/`), if any.
    pub config_dir: Option<PathBuf>,
    /// Denied names and namespaces (already validated by the host).
    pub deny: Vec<String>,
    /// Load only the bundled extensions (the host retries in this mode when a worker dies or
    /// hangs while loading the others).
    pub safe_mode: bool,
}

/// The protocol channel, shared by the main loop and `host_call` (a block calling back into
/// the host while it runs).
pub(crate) struct Channel {
    reader: FrameReader<File>,
    writer: File,
    next_request_id: u64,
}

pub(crate) static CHANNEL: Mutex<Option<Channel>> = Mutex::new(None);

/// `pthread_t` of the interpreter thread, for the interrupt forwarder.
static INTERPRETER_THREAD: AtomicU64 = AtomicU64::new(0);

static BOOTSTRAP: &str = include_str!("../../python/_bootstrap.py");
include!(concat!(env!("OUT_DIR"), "/prelude_sources.rs"));

/// Runs the worker until the host closes the pipe or says `shutdown`. Returns the exit code.
pub fn run_worker(args: WorkerArgs) -> i32 {
    if let Err(e) = prepare_process(&args) {
        // fd 2 is the capture file: the host shows this to the user.
        eprintln_raw(&format!("vis worker: {e}"));
        return 70;
    }
    let handle = std::thread::Builder::new()
        .name("vis-interpreter".into())
        .spawn(move || interpreter_thread(args));
    match handle {
        Ok(h) => h.join().unwrap_or(71),
        Err(e) => {
            eprintln_raw(&format!(
                "vis worker: cannot start the interpreter thread: {e}"
            ));
            71
        }
    }
}

fn eprintln_raw(msg: &str) {
    let line = format!("{msg}\n");
    // SAFETY: writing a valid buffer to fd 2; a failed write has nowhere better to go.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

fn last_os_error(what: &str) -> RuntimeError {
    RuntimeError::Worker(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Memory cap, descriptor layout and signal masks; all before any other thread exists.
fn prepare_process(args: &WorkerArgs) -> Result<(), RuntimeError> {
    if args.memory_limit_mb > 0 {
        let bytes = args.memory_limit_mb.saturating_mul(1024 * 1024);
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_AS, &mut lim) != 0 {
                return Err(last_os_error("getrlimit"));
            }
            // Only the soft limit: `sh` lifts it again for the commands it starts.
            lim.rlim_cur = if lim.rlim_max == libc::RLIM_INFINITY {
                bytes as libc::rlim_t
            } else {
                (bytes as libc::rlim_t).min(lim.rlim_max)
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(last_os_error("setrlimit(RLIMIT_AS)"));
            }
        }
    }
    let proto_in = dup_cloexec(0)?;
    let proto_out = dup_cloexec(1)?;
    // SAFETY: plain descriptor juggling on descriptors we own; checked return codes.
    unsafe {
        let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if devnull < 0 {
            return Err(last_os_error("open /dev/null"));
        }
        if libc::dup2(devnull, 0) < 0 || libc::dup2(2, 1) < 0 {
            return Err(last_os_error("dup2"));
        }
        libc::close(devnull);
    }
    // SAFETY: the descriptors were just created by dup and are owned by nothing else.
    let (reader, writer) = unsafe { (File::from_raw_fd(proto_in), File::from_raw_fd(proto_out)) };
    let channel = Channel {
        reader: FrameReader::new(reader),
        writer,
        next_request_id: 1,
    };
    *CHANNEL
        .lock()
        .map_err(|_| RuntimeError::Worker("channel lock poisoned".into()))? = Some(channel);

    block_signals(&[libc::SIGINT, libc::SIGUSR2])?;
    std::thread::Builder::new()
        .name("vis-interrupts".into())
        .spawn(forward_interrupts)
        .map_err(|e| RuntimeError::Worker(format!("cannot start the interrupt thread: {e}")))?;
    Ok(())
}

fn dup_cloexec(fd: RawFd) -> Result<RawFd, RuntimeError> {
    // SAFETY: F_DUPFD_CLOEXEC on an open descriptor returns a new descriptor or -1.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
    if new < 0 {
        return Err(last_os_error("dup"));
    }
    Ok(new)
}

fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialize the set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn block_signals(signals: &[libc::c_int]) -> Result<(), RuntimeError> {
    let set = sigset(signals);
    // SAFETY: valid set pointer; old mask not needed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(RuntimeError::Worker(format!(
            "pthread_sigmask failed: {rc}"
        )));
    }
    Ok(())
}

fn unblock_signals(signals: &[libc::c_int]) {
    let set = sigset(signals);
    // SAFETY: valid set pointer.
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Turns each SIGUSR2 sent to the process into a SIGINT for the interpreter thread.
fn forward_interrupts() {
    let set = sigset(&[libc::SIGUSR2]);
    loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: SIGUSR2 is blocked in this thread, as sigwait requires.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        if rc != 0 {
            continue;
        }
        let thread = INTERPRETER_THREAD.load(Ordering::SeqCst);
        if thread != 0 {
            // SAFETY: the interpreter thread lives as long as the process does.
            unsafe {
                libc::pthread_kill(thread as libc::pthread_t, libc::SIGINT);
            }
        }
    }
}

/// Runs `f` with the protocol channel locked.
fn with_channel<T>(
    f: impl FnOnce(&mut Channel) -> Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    let mut guard = CHANNEL
        .lock()
        .map_err(|_| RuntimeError::Worker("channel lock poisoned".into()))?;
    let channel = guard
        .as_mut()
        .ok_or_else(|| RuntimeError::Worker("no channel".into()))?;
    f(channel)
}

fn send(msg: &WorkerMessage) -> Result<(), RuntimeError> {
    let payload = serde_json::to_vec(msg).map_err(|e| RuntimeError::Protocol(e.to_string()))?;
    with_channel(|channel| write_frame(&mut channel.writer, &payload).map_err(RuntimeError::Io))
}

fn receive() -> Result<Option<HostMessage>, RuntimeError> {
    let frame = with_channel(|channel| channel.reader.read_frame().map_err(RuntimeError::Io))?;
    match frame {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| RuntimeError::Protocol(format!("bad message from host: {e}"))),
    }
}

/// A block calling the host (e.g. `fold_session`): send a request, wait for its response.
pub(crate) fn host_call(
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let mut guard = CHANNEL
        .lock()
        .map_err(|_| "channel lock poisoned".to_string())?;
    let channel = guard
        .as_mut()
        .ok_or_else(|| "not running inside a vis worker".to_string())?;
    let id = channel.next_request_id;
    channel.next_request_id += 1;
    let msg = WorkerMessage::Request {
        id,
        method: method.to_string(),
        params,
    };
    let payload = serde_json::to_vec(&msg).map_err(|e| e.to_string())?;
    write_frame(&mut channel.writer, &payload).map_err(|e| format!("host pipe: {e}"))?;
    // The host answers each request before sending anything else, so the next frame is it.
    let bytes = channel
        .reader
        .read_frame()
        .map_err(|e| format!("host pipe: {e}"))?
        .ok_or_else(|| "the host closed the connection".to_string())?;
    match serde_json::from_slice::<HostMessage>(&bytes) {
        Ok(HostMessage::Response {
            id: rid,
            result,
            error,
        }) if rid == id => match error {
            Some(e) => Err(e),
            None => Ok(result.unwrap_or(serde_json::Value::Null)),
        },
        Ok(other) => Err(format!(
            "unexpected message while waiting for a response: {other:?}"
        )),
        Err(e) => Err(format!("bad message from host: {e}")),
    }
}

fn interpreter_thread(args: WorkerArgs) -> i32 {
    // SAFETY: pthread_self is always safe.
    INTERPRETER_THREAD.store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
    unblock_signals(&[libc::SIGINT]);
    match serve(&args) {
        Ok(()) => 0,
        Err(e) => {
            let _ = send(&WorkerMessage::Fatal {
                message: e.to_string(),
            });
            eprintln_raw(&format!("vis worker: {e}"));
            72
        }
    }
}

fn py_err(e: PyErr) -> RuntimeError {
    Python::attach(|py| {
        let tb = e
            .traceback(py)
            .and_then(|tb| tb.format().ok())
            .unwrap_or_default();
        RuntimeError::Worker(format!("{tb}{e}"))
    })
}

fn serve(args: &WorkerArgs) -> Result<(), RuntimeError> {
    Python::initialize();
    let (runner, version) = Python::attach(|py| start_prelude(py, args)).map_err(py_err)?;
    let manifest = Python::attach(|py| -> PyResult<String> {
        py.import("vis._extensions")?
            .call_method0("manifest_json")?
            .extract()
    })
    .map_err(py_err)?;
    let manifest = serde_json::from_str(&manifest)
        .map_err(|e| RuntimeError::Protocol(format!("the prelude's manifest is malformed: {e}")))?;
    send(&WorkerMessage::Ready {
        pid: std::process::id(),
        python_version: version,
        manifest,
    })?;
    while let Some(msg) = receive()? {
        match msg {
            HostMessage::Shutdown => break,
            HostMessage::Restore { defs } => {
                let report = Python::attach(|py| -> PyResult<RestoreReport> {
                    let defs_json = serde_json::to_string(&defs).unwrap_or_else(|_| "[]".into());
                    let out = runner.bind(py).call_method1("restore", (defs_json,))?;
                    let text: String = out.extract()?;
                    Ok(serde_json::from_str(&text).unwrap_or_default())
                })
                .map_err(py_err)?;
                send(&WorkerMessage::Restored(report))?;
            }
            HostMessage::Exec(req) => {
                let result = run_block(&runner, &req, &args.capture);
                send(&WorkerMessage::Result(result))?;
            }
            HostMessage::Response { .. } => {
                return Err(RuntimeError::Protocol(
                    "response with no request pending".into(),
                ))
            }
        }
    }
    Ok(())
}

fn start_prelude(py: Python<'_>, args: &WorkerArgs) -> PyResult<(Py<PyAny>, String)> {
    let native = pyo3::types::PyModule::new(py, "vis._native")?;
    super::native::register(&native)?;
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
    let code = CString::new(BOOTSTRAP)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    py.run(&code, Some(&globals), None)?;
    // What the extension loader (run by the Runner) needs to know.
    let state = py.import("vis._state")?;
    state.setattr("workspace", workspace)?;
    state.setattr(
        "config_dir",
        args.config_dir
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
    )?;
    state.setattr("deny", PyList::new(py, &args.deny)?)?;
    state.setattr("safe_mode", args.safe_mode)?;
    let runner_cls = py.import("vis._runner")?.getattr("Runner")?;
    let runner = runner_cls.call1((args.capture.to_string_lossy().into_owned(),))?;
    let version: String = sys.getattr("version")?.extract()?;
    Ok((runner.unbind(), version))
}

fn run_block(runner: &Py<PyAny>, req: &ExecRequest, capture: &Path) -> ExecResult {
    // Start each block with an empty capture file (fd 1 and 2 are O_APPEND onto it).
    // SAFETY: ftruncate on our own fd 1.
    unsafe {
        libc::ftruncate(1, 0);
    }
    // The text tools are confined to the session's roots; saved outputs are readable too.
    crate::text::python::set_workspace(
        crate::text::Workspace::new(req.workspace_roots.iter().map(PathBuf::from))
            .with_read_only([PathBuf::from(&req.artifact_dir)]),
    );
    let started = Instant::now();
    let outcome = Python::attach(|py| -> PyResult<(String, String)> {
        // An interrupt that arrived between blocks is dropped here rather than hitting this
        // block; the Python handler ignores it because no block is armed.
        // SAFETY: called with the GIL held.
        if unsafe { pyo3::ffi::PyErr_CheckSignals() } != 0 {
            PyErr::fetch(py);
        }
        let session = serde_json::to_string(&req.session).unwrap_or_else(|_| "{}".into());
        let roots = PyList::new(py, &req.workspace_roots)?;
        let out = runner.bind(py).call_method1(
            "run",
            (
                &req.code,
                &req.filename,
                session,
                &req.artifact_dir,
                req.output_limit,
                roots,
            ),
        )?;
        out.extract()
    });
    let exec_micros = started.elapsed().as_micros() as u64;
    let (status, changes) = match outcome {
        Ok((status, changes)) => (Status::parse(&status).unwrap_or(Status::Error), changes),
        Err(e) => {
            // The runner itself failed (e.g. an interrupt landed in its bookkeeping).
            let message = e.to_string();
            let interrupted = message.starts_with("KeyboardInterrupt");
            eprintln_raw(&format!("[vis] the block's runner failed: {message}"));
            let status = if interrupted {
                Status::Interrupted
            } else {
                Status::Error
            };
            (status, "{}".to_string())
        }
    };
    let (capped, artifact, mut output) =
        match cap_file(capture, req.output_limit, Path::new(&req.artifact_path)) {
            Ok((capped, saved)) => {
                let text = capped.text.clone();
                (capped, saved.then(|| req.artifact_path.clone()), text)
            }
            Err(e) => {
                let capped = cap_output(b"", req.output_limit, None);
                let text = format!("[vis] could not read the block's output: {e}\n");
                (capped, None, text)
            }
        };
    if capped.cut_chars > 0 && artifact.is_none() {
        output.push_str("[vis] could not save the full output\n");
    }
    if capped.lossy {
        output
            .push_str("[vis] the output held bytes that are not UTF-8; they are shown as U+FFFD\n");
    }
    let changes: DefChanges = serde_json::from_str(&changes).unwrap_or_default();
    ExecResult {
        id: req.id,
        status,
        output,
        cut_chars: capped.cut_chars,
        total_chars: capped.total_chars,
        artifact,
        defs_set: changes.set,
        defs_deleted: changes.deleted,
        exec_micros,
        manifest: changes.manifest,
    }
}

#[derive(Default, serde::Deserialize)]
struct DefChanges {
    #[serde(default)]
    set: Vec<super::protocol::PersistedDef>,
    #[serde(default)]
    deleted: Vec<String>,
    /// Present when the block changed the visible manifest.
    #[serde(default)]
    manifest: Option<Vec<crate::catalog::ManifestEntry>>,
}
