//! The worker process (`vis worker`): CPython embedded on a dedicated thread, driven by frames
//! from the host.
//!
//! Start-up order matters and is fixed here:
//! 1. [`launcher::isolate`](super::launcher::isolate) puts the worker in its own PID namespace
//!    (it must run while the process has one thread);
//! 2. the memory cap is set, and SIGINT is blocked (every thread started later inherits that);
//! 3. the host's pipes (our original fd 0 and 1) move to close-on-exec descriptors only this
//!    module knows; fd 0 becomes `/dev/null` (`input()` sees EOF); fd 1 and fd 2 both point at
//!    the capture file the host gave us as fd 2 (unnamed, `O_APPEND`), so Python prints,
//!    C-level writes, subprocess output and a fatal-error dump all land there, in order; a
//!    private copy of that descriptor is what the worker empties and reads between blocks;
//! 4. the channel's reader thread starts: it is the only reader of the host's pipe. Replies to
//!    host calls go to the caller waiting on that id; interrupts are handled on the spot; the
//!    rest is queued for the interpreter thread. When the pipe closes (the host is gone, even
//!    after `kill -9`), the worker exits at once;
//! 5. the interpreter thread starts Python and the prelude, and only then unblocks SIGINT:
//!    before `vis._runner` installs its handler, SIGINT's default action would kill the worker.
//!
//! Interrupts: the host sends `interrupt {id}`. The reader thread records the id and sends
//! SIGINT to the interpreter thread with `pthread_kill` (only a signal delivered to that thread
//! wakes `time.sleep`, and only a Python-level handler raises `KeyboardInterrupt` there). The
//! runner arms the handler before a block's first statement and then checks the recorded id,
//! so an interrupt that lands just before the block starts is not lost.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::File;

use std::os::fd::{FromRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::frames::{write_frame, FrameReader};
use crate::catalog::manifest_entries_of;
use crate::protocol::{Block, BlockResult, RestoreReport, Status};
use crate::runtime::output::{cap_file, cap_output};
use crate::runtime::wire::{HostMessage, Isolation, WorkerMessage};
use crate::runtime::RuntimeError;

/// Settings the host passes on the worker's command line.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub memory_limit_mb: u64,
    pub workspace: Option<PathBuf>,
    /// The user's config directory (`extensions/`, `skills/`), if any.
    pub config_dir: Option<PathBuf>,
    /// Denied names and namespaces (already validated by the host).
    pub deny: Vec<String>,
    /// Load only the bundled extensions (the host retries in this mode when a worker dies or
    /// hangs while loading the others).
    pub safe_mode: bool,
    /// The user trusts the workspace: its own code may load (`.vis/extensions`, a workspace
    /// venv's `.pth` files).
    pub trusted: bool,
    /// The sandbox to enter, with every path it may write.
    pub sandbox: crate::sandbox::Policy,
    /// Vis's cache directory: read here, written by the host (see `runtime::cache`).
    pub cache_dir: Option<PathBuf>,
}

/// The worker's end of the protocol channel. Writes are whole frames under one lock; reads
/// happen only in the reader thread.
struct Channel {
    writer: Mutex<File>,
    /// Host calls waiting for their response, by request id; the flag marks calls made by
    /// the interpreter thread, which an interrupt of the running block wakes (a block waiting
    /// for a slow MCP tool must still stop when interrupted).
    pending: Mutex<HashMap<u64, (mpsc::Sender<HostMessage>, bool)>>,
    next_request_id: AtomicU64,
}

static CHANNEL: OnceLock<Channel> = OnceLock::new();

/// This worker's own descriptor of the capture file (fd 1 and 2 may be replaced by a block).
static CAPTURE: OnceLock<File> = OnceLock::new();

/// `pthread_t` of the interpreter thread once its SIGINT handler is installed (0 before).
static INTERPRETER_THREAD: AtomicU64 = AtomicU64::new(0);
/// Whether [`super::launcher::isolate`] gave us a PID namespace (then init kills what is left).
static IN_PID_NAMESPACE: AtomicBool = AtomicBool::new(false);
/// The id of the block now running (0 between blocks).
static CURRENT_EXEC: AtomicU64 = AtomicU64::new(0);
/// The id of the last block the host asked to interrupt.
static INTERRUPT_FOR: AtomicU64 = AtomicU64::new(0);

static BOOTSTRAP: &str = include_str!("../../../python/_bootstrap.py");
include!(concat!(env!("OUT_DIR"), "/prelude_sources.rs"));

/// Runs the worker until the host closes the pipe or says `shutdown`. Returns the exit code.
pub fn run_worker(args: WorkerArgs) -> i32 {
    let mut isolation = super::launcher::isolate(&args.sandbox);
    IN_PID_NAMESPACE.store(isolation.pid_namespace, Ordering::SeqCst);
    if isolation.private_tmp {
        // The host's temp dir is not in this view; `/tmp` is the worker's own.
        std::env::set_var("TMPDIR", "/tmp");
    }
    confine(&args.sandbox, &mut isolation);
    if args.sandbox.require && !isolation.missing.is_empty() {
        eprintln_raw(&format!(
            "vis worker: the sandbox is incomplete and [sandbox] require = true: {}; run `vis sandbox status` for details",
            isolation.missing.join("; ")
        ));
        return 73;
    }
    let queue = match prepare_process(&args) {
        Ok(queue) => queue,
        Err(e) => {
            // fd 2 is the capture file: the host shows this to the user.
            eprintln_raw(&format!("vis worker: {e}"));
            return 70;
        }
    };
    let handle = std::thread::Builder::new()
        .name("vis-interpreter".into())
        .spawn(move || interpreter_thread(args, isolation, queue));
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

/// The layers that restrict the process itself: resource limits, Landlock, seccomp. Applied
/// before any thread exists, so every thread and every process started later inherits them.
fn confine(policy: &crate::sandbox::Policy, layers: &mut Isolation) {
    use crate::sandbox::Mode;
    let limits = [
        (libc::RLIMIT_FSIZE, policy.max_file_bytes),
        (libc::RLIMIT_NPROC, policy.max_processes),
        (libc::RLIMIT_CORE, 0),
    ];
    let mut rlimits_ok = true;
    for (resource, value) in limits {
        if value == 0 && resource != libc::RLIMIT_CORE {
            continue;
        }
        let lim = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: setrlimit with a valid struct; lowering limits needs no privilege.
        if unsafe { libc::setrlimit(resource, &lim) } != 0 {
            rlimits_ok = false;
            layers.note("resource limits", std::io::Error::last_os_error());
        }
    }
    layers.rlimits = rlimits_ok;
    if policy.mode == Mode::Off {
        return;
    }
    match crate::sandbox::drop_capabilities() {
        Ok(()) => layers.no_capabilities = crate::sandbox::no_capabilities_held(),
        Err(e) => layers.note("capabilities", e),
    }
    if policy.mode == Mode::FullAccess {
        return;
    }
    let writable: Vec<PathBuf> = match (&policy.view, layers.read_only_root) {
        // The view already made everything else read-only; Landlock is the second wall.
        (Some(view), true) => view
            .writable
            .iter()
            .cloned()
            .chain(["/tmp", "/var/tmp", "/dev/shm"].map(PathBuf::from))
            .collect(),
        _ => policy.writable.clone(),
    };
    match crate::sandbox::restrict_writes(&writable) {
        Ok(level) => {
            layers.landlock = Some(level.as_str().to_string());
            if level == crate::sandbox::Enforcement::Partial {
                layers.note(
                    "landlock",
                    "the kernel enforces only part of the write rules",
                );
            }
        }
        Err(e) => layers.note("landlock", e),
    }
    match crate::sandbox::install_seccomp(policy.unix_sockets) {
        Ok(()) => {
            layers.seccomp = true;
            layers.unix_sockets_off = !policy.unix_sockets;
        }
        Err(e) => layers.note("seccomp", e),
    }
}

/// Memory cap, signal mask, descriptor layout and the channel; all before any other thread
/// exists. Returns the queue of host messages for the interpreter thread.
fn prepare_process(args: &WorkerArgs) -> Result<mpsc::Receiver<HostMessage>, RuntimeError> {
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
    // Blocked in every thread from now on; the interpreter thread unblocks it once Python's
    // handler is in place.
    block_signals(&[libc::SIGINT])?;
    let proto_in = dup_cloexec(0)?;
    let proto_out = dup_cloexec(1)?;
    // SAFETY: the descriptor was just created by dup and is owned by nothing else.
    let capture = unsafe { File::from_raw_fd(dup_cloexec(2)?) };
    if CAPTURE.set(capture).is_err() {
        return Err(RuntimeError::Worker("the capture was set up twice".into()));
    }
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
        writer: Mutex::new(writer),
        pending: Mutex::new(HashMap::new()),
        next_request_id: AtomicU64::new(1),
    };
    if CHANNEL.set(channel).is_err() {
        return Err(RuntimeError::Worker("the channel was set up twice".into()));
    }
    let (queue_tx, queue_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("vis-channel".into())
        .spawn(move || read_host(FrameReader::new(reader), queue_tx))
        .map_err(|e| RuntimeError::Worker(format!("cannot start the channel thread: {e}")))?;
    Ok(queue_rx)
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

/// The channel's only reader. Runs until the host's pipe closes, then ends the worker.
fn read_host(mut reader: FrameReader<File>, queue: mpsc::Sender<HostMessage>) {
    loop {
        let frame = match reader.read_frame() {
            Ok(Some(frame)) => frame,
            // The host is gone (or sent something unreadable): nothing can be answered any
            // more, so the worker ends now, with everything it started.
            Ok(None) | Err(_) => exit_now(0),
        };
        let msg = match serde_json::from_slice::<HostMessage>(&frame) {
            Ok(msg) => msg,
            Err(e) => {
                eprintln_raw(&format!("vis worker: bad message from the host: {e}"));
                exit_now(72);
            }
        };
        match msg {
            HostMessage::Response { id, .. } => {
                let waiter = CHANNEL
                    .get()
                    .and_then(|c| c.pending.lock().ok()?.remove(&id));
                // A response nobody waits for (its caller gave up) is dropped.
                if let Some((waiter, _)) = waiter {
                    let _ = waiter.send(msg);
                }
            }
            HostMessage::Interrupt { id } => {
                INTERRUPT_FOR.store(id, Ordering::SeqCst);
                let thread = INTERPRETER_THREAD.load(Ordering::SeqCst);
                if thread != 0 && CURRENT_EXEC.load(Ordering::SeqCst) == id {
                    // SAFETY: the interpreter thread lives as long as the process does.
                    unsafe {
                        libc::pthread_kill(thread as libc::pthread_t, libc::SIGINT);
                    }
                    // A signal does not end a wait for the host's answer: wake the
                    // interpreter thread's waiting call, which then raises KeyboardInterrupt.
                    if let Some(channel) = CHANNEL.get() {
                        if let Ok(pending) = channel.pending.lock() {
                            for (waiter, interpreter) in pending.values() {
                                if *interpreter {
                                    let _ = waiter.send(HostMessage::Interrupt { id });
                                }
                            }
                        }
                    }
                }
            }
            other => {
                if queue.send(other).is_err() {
                    exit_now(0);
                }
            }
        }
    }
}

/// Ends the worker immediately. Without a PID namespace, the processes blocks started are
/// killed first (the worker is their subreaper, so orphans are still its descendants).
fn exit_now(code: i32) -> ! {
    if !IN_PID_NAMESPACE.load(Ordering::SeqCst) {
        // SAFETY: getpid cannot fail.
        crate::runtime::process::kill_tree(unsafe { libc::getpid() }, false);
    }
    // SAFETY: _exit skips destructors on purpose: other threads may hold the GIL.
    unsafe { libc::_exit(code) }
}

/// True when the host asked to interrupt the block now running (checked by the runner right
/// after it arms its handler).
pub(crate) fn interrupt_pending() -> bool {
    let current = CURRENT_EXEC.load(Ordering::SeqCst);
    current != 0 && INTERRUPT_FOR.load(Ordering::SeqCst) == current
}

fn send(msg: &WorkerMessage) -> Result<(), RuntimeError> {
    let payload = serde_json::to_vec(msg).map_err(|e| RuntimeError::Protocol(e.to_string()))?;
    let channel = CHANNEL
        .get()
        .ok_or_else(|| RuntimeError::Worker("no channel".into()))?;
    let mut writer = channel
        .writer
        .lock()
        .map_err(|_| RuntimeError::Worker("channel lock poisoned".into()))?;
    write_frame(&mut *writer, &payload).map_err(RuntimeError::Io)
}

/// Tells the host which persisted definition the restore is about to compile or run (see
/// `runtime::restore`).
pub(crate) fn report_restoring(index: usize) -> Result<(), RuntimeError> {
    send(&WorkerMessage::Restoring { index })
}

/// Why a host call returned no answer.
#[derive(Debug)]
pub(crate) enum HostCallError {
    /// The host answered with an error (or could not be reached).
    Failed(String),
    /// The running block was interrupted while the interpreter thread waited.
    Interrupted,
}

/// A call from the block (or any thread of it) to the host: send a request, wait for the
/// response with the same id. Several calls may be in flight at once. A call made by the
/// interpreter thread ends early when the running block is interrupted.
pub(crate) fn host_call(
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, HostCallError> {
    let channel = CHANNEL
        .get()
        .ok_or_else(|| HostCallError::Failed("not running inside a vis worker".to_string()))?;
    let id = channel.next_request_id.fetch_add(1, Ordering::SeqCst);
    let (tx, rx) = mpsc::channel();
    let thread = INTERPRETER_THREAD.load(Ordering::SeqCst);
    // SAFETY: pthread_self is always safe.
    let interpreter = thread != 0 && thread == unsafe { libc::pthread_self() } as u64;
    channel
        .pending
        .lock()
        .map_err(|_| HostCallError::Failed("channel lock poisoned".to_string()))?
        .insert(id, (tx, interpreter));
    // The reader records an interrupt before it wakes the waiters, so one that came just
    // before this call was registered is seen here.
    if interpreter && interrupt_pending() {
        if let Ok(mut pending) = channel.pending.lock() {
            pending.remove(&id);
        }
        return Err(HostCallError::Interrupted);
    }
    let msg = WorkerMessage::Request {
        id,
        method: method.to_string(),
        params,
    };
    if let Err(e) = send(&msg) {
        if let Ok(mut pending) = channel.pending.lock() {
            pending.remove(&id);
        }
        return Err(HostCallError::Failed(format!("host pipe: {e}")));
    }
    let answer = rx.recv();
    if let Ok(mut pending) = channel.pending.lock() {
        pending.remove(&id);
    }
    match answer {
        Ok(HostMessage::Response { result, error, .. }) => match error {
            Some(e) => Err(HostCallError::Failed(e)),
            None => Ok(result.unwrap_or(serde_json::Value::Null)),
        },
        Ok(HostMessage::Interrupt { .. }) => Err(HostCallError::Interrupted),
        Ok(_) => Err(HostCallError::Failed(
            "unexpected message in place of a response".into(),
        )),
        Err(_) => Err(HostCallError::Failed(
            "the host closed the connection".into(),
        )),
    }
}

fn interpreter_thread(
    args: WorkerArgs,
    isolation: Isolation,
    queue: mpsc::Receiver<HostMessage>,
) -> i32 {
    match serve(&args, isolation, queue) {
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

fn serve(
    args: &WorkerArgs,
    isolation: Isolation,
    queue: mpsc::Receiver<HostMessage>,
) -> Result<(), RuntimeError> {
    Python::initialize();
    let (runner, version) = Python::attach(|py| start_prelude(py, args)).map_err(py_err)?;
    // The runner's SIGINT handler is in place: from now on SIGINT means KeyboardInterrupt.
    // SAFETY: pthread_self is always safe.
    INTERPRETER_THREAD.store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
    unblock_signals(&[libc::SIGINT]);
    let (manifest, cache_writes) = Python::attach(|py| -> PyResult<_> {
        let extensions = py.import("vis._extensions")?;
        let manifest = manifest_entries_of(&extensions.call_method0("manifest")?)?;
        let cache_writes: Vec<crate::runtime::cache::CacheWrite> =
            extensions.call_method0("take_cache_writes")?.extract()?;
        Ok((manifest, cache_writes))
    })
    .map_err(py_err)?;
    send(&WorkerMessage::Ready {
        pid: std::process::id(),
        python_version: version,
        manifest,
        isolation,
        cache_writes,
    })?;
    while let Ok(msg) = queue.recv() {
        match msg {
            HostMessage::Shutdown => break,
            HostMessage::Restore {
                defs,
                skipped,
                cache,
                progress,
            } => {
                // Everything is checked and compiled first, and the code goes to the host
                // before any definition runs: nothing a restored definition does can change
                // what the host caches (see `runtime::restore`).
                let (prepared, magic, code) = Python::attach(|py| -> PyResult<_> {
                    let prepared = runner
                        .bind(py)
                        .call_method1("prepare_restore", (defs, cache, progress))?;
                    let magic: String = prepared.getattr("magic")?.extract()?;
                    let code: Option<Vec<String>> = prepared.getattr("fresh")?.extract()?;
                    Ok((prepared.unbind(), magic, code))
                })
                .map_err(py_err)?;
                send(&WorkerMessage::Compiled { magic, code })?;
                let report = Python::attach(|py| -> PyResult<RestoreReport> {
                    runner
                        .bind(py)
                        .call_method1("restore", (prepared.bind(py), skipped))?
                        .extract()
                })
                .map_err(py_err)?;
                send(&WorkerMessage::Restored { report })?;
            }
            HostMessage::Exec { id, block } => {
                CURRENT_EXEC.store(id, Ordering::SeqCst);
                let result = run_block(&runner, &block);
                CURRENT_EXEC.store(0, Ordering::SeqCst);
                send(&WorkerMessage::Result {
                    id,
                    result: Box::new(result),
                })?;
            }
            HostMessage::McpTools {
                namespaces,
                functions,
            } => {
                let entries = Python::attach(|py| {
                    manifest_entries_of(
                        &py.import("vis._mcp")?
                            .call_method1("install", (&namespaces, &functions))?,
                    )
                })
                .map_err(py_err)?;
                send(&WorkerMessage::Manifest { entries })?;
            }
            // Handled by the reader thread; never queued.
            HostMessage::Response { .. } | HostMessage::Interrupt { .. } => {}
        }
    }
    Ok(())
}

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

fn start_prelude(py: Python<'_>, args: &WorkerArgs) -> PyResult<(Py<PyAny>, String)> {
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
    // What the extension loader (run by the Runner) needs to know.
    let state = py.import("vis._state")?;
    state.setattr("workspace", &workspace)?;
    state.setattr(
        "config_dir",
        args.config_dir
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
    )?;
    crate::catalog::DenyList::new(args.deny.iter().cloned())
        .and_then(crate::catalog::set_deny_list)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("[permissions] deny: {e}")))?;
    state.setattr("safe_mode", args.safe_mode)?;
    state.setattr("trusted", args.trusted)?;
    state.setattr("in_worker", true)?;
    state.setattr("prelude_digest", prelude_digest())?;
    if let Some(dir) = &args.cache_dir {
        crate::runtime::cache::set_worker_cache_dir(dir.clone());
    }
    state.setattr(
        "cache_dir",
        args.cache_dir
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
    )?;
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

/// Runs one block: Python's runner reports what the interpreter saw and what the block
/// defined; this adds the capped output and the time it took. The status is settled by the
/// host (`runtime::supervisor`).
fn run_block(runner: &Py<PyAny>, block: &Block) -> BlockResult {
    let Some(capture) = CAPTURE.get() else {
        let mut result = BlockResult::new(Status::Error);
        result.output = "[vis] the worker has no capture file; this is a bug in vis\n".into();
        return result;
    };
    // Start each block with an empty capture file (fd 1 and 2 are O_APPEND onto it).
    let _ = capture.set_len(0);
    // The text tools are confined to the session's roots; saved outputs are readable too.
    crate::text::set_workspace(
        crate::text::Workspace::new(block.workspace_roots.iter().cloned())
            .with_read_only([block.artifact_dir.clone()]),
    );
    let started = Instant::now();
    let reported = Python::attach(|py| -> PyResult<BlockResult> {
        // An interrupt that arrived between blocks is dropped here rather than hitting this
        // block; the Python handler ignores it because no block is armed.
        // SAFETY: called with the GIL held.
        if unsafe { pyo3::ffi::PyErr_CheckSignals() } != 0 {
            PyErr::fetch(py);
        }
        runner.bind(py).call_method1("run", (block,))?.extract()
    });
    let exec_micros = started.elapsed().as_micros() as u64;
    let mut result = reported.unwrap_or_else(|e| {
        // The runner catches everything a block raises: this is a fault of the runner itself,
        // reported as the block's error (its output says so).
        eprintln_raw(&format!(
            "[vis] the block's runner failed: {e}; this is a bug in vis, please report it"
        ));
        BlockResult::new(Status::Error)
    });
    result.exec_micros = exec_micros;
    let (capped, saved) = match cap_file(
        capture,
        block.output_limit,
        &block.artifact_path,
        block.artifact_quota,
    ) {
        Ok((capped, saved)) => (capped, Some(saved)),
        Err(e) => {
            result.output = format!("[vis] could not read the block's output: {e}\n");
            (cap_output(b"", block.output_limit, None), None)
        }
    };
    if let Some(saved) = saved {
        result.output = capped.text.clone();
        if matches!(saved, Ok(true)) {
            result.artifact = Some(block.artifact_path.clone());
        } else if capped.cut_chars > 0 {
            result.output.push_str(&format!(
                "[vis] the full output was not saved (the file named above does not exist): {}\n",
                saved
                    .err()
                    .map_or_else(|| "unknown reason".to_string(), |e| e.to_string())
            ));
        }
    }
    if capped.lossy {
        result
            .output
            .push_str("[vis] the output held bytes that are not UTF-8; they are shown as U+FFFD\n");
    }
    result.cut_chars = capped.cut_chars;
    result.total_chars = capped.total_chars;
    result
}
