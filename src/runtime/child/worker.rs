//! The worker process (`vis worker`): CPython embedded on a dedicated thread, driven by frames
//! from the host.
//!
//! Start-up order matters and is fixed here:
//! 0. the host's first message, `start` ([`WorkerArgs`]), is read from the pipe exactly (no
//!    byte of the next message with it), and the worker enters its workspace: the host may
//!    start the process before it knows them, and sends them once it does;
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
//! 5. the main thread becomes the interpreter thread: it starts Python and the prelude, and
//!    only then unblocks SIGINT: before `vis._runner` installs its handler, SIGINT's default
//!    action would kill the worker.
//!
//! Interrupts: the host sends `interrupt {id}`. The reader thread records the id and sends
//! SIGINT to the interpreter thread with `pthread_kill` (only a signal delivered to that thread
//! wakes `time.sleep`, and only a Python-level handler raises `KeyboardInterrupt` there). The
//! runner arms the handler before a block's first statement and then checks the recorded id,
//! so an interrupt that lands just before the block starts is not lost.

use std::fs::File;
use std::os::fd::{FromRawFd, RawFd};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::channel::{self, eprintln_raw, send};
use crate::catalog::manifest_entries_of;
use crate::protocol::{Block, BlockResult, RestoreReport, Status};
use crate::runtime::output::{cap_file, cap_output};
use crate::runtime::wire::{HostMessage, Isolation, WorkerArgs, WorkerMessage};
use crate::runtime::RuntimeError;

/// This worker's own descriptor of the capture file (fd 1 and 2 may be replaced by a block).
static CAPTURE: OnceLock<File> = OnceLock::new();

/// Runs the worker until the host closes the pipe or says `shutdown`. Returns the exit code.
pub fn run_worker() -> i32 {
    let args = match read_start() {
        Ok(args) => args,
        Err(e) => {
            // fd 2 is the capture file: the host shows this to the user.
            eprintln_raw(&format!("vis worker: {e}"));
            return 70;
        }
    };
    if let Some(workspace) = &args.workspace {
        if let Err(e) = std::env::set_current_dir(workspace) {
            eprintln_raw(&format!(
                "vis worker: cannot enter the workspace {}: {e}",
                workspace.display()
            ));
            return 70;
        }
    }
    let mut isolation = super::launcher::isolate(&args.sandbox);
    channel::set_in_pid_namespace(isolation.pid_namespace);
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
    // The interpreter runs on the main thread: its allocations go to malloc's main arena,
    // which grows with a margin (a thread's own arena grows page by page, one `mprotect`
    // each: hundreds while Python and the prelude start), and it gets the main thread's
    // larger stack.
    interpreter_thread(args, isolation, queue)
}

/// The largest `start` message read (a policy lists a few dozen paths).
const MAX_START_BYTES: usize = 1024 * 1024;

/// Reads the host's first message, `start`, from fd 0: its length, then exactly that many
/// bytes, so whatever the host sent after it stays in the pipe for the channel's reader.
fn read_start() -> Result<WorkerArgs, String> {
    use std::io::Read;
    use std::mem::ManuallyDrop;
    // SAFETY: fd 0 is the host's pipe, open for the whole process; ManuallyDrop keeps this
    // File from closing it.
    let mut pipe = ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    let unreadable = |e: std::io::Error| format!("cannot read the start message: {e}");
    let mut len = [0u8; 4];
    pipe.read_exact(&mut len).map_err(unreadable)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_START_BYTES {
        return Err(format!(
            "the start message would be {len} bytes, over the {MAX_START_BYTES} a worker reads"
        ));
    }
    let mut body = vec![0u8; len];
    pipe.read_exact(&mut body).map_err(unreadable)?;
    match serde_json::from_slice::<HostMessage>(&body) {
        Ok(HostMessage::Start { args }) => Ok(*args),
        Ok(_) => Err("the host's first message was not `start`".into()),
        Err(e) => Err(format!("the start message is not valid: {e}")),
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
    channel::open(reader, writer)
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
    super::interpreter::initialize(&super::interpreter::placement())?;
    let (runner, version) = Python::attach(|py| super::prelude::start(py, args)).map_err(py_err)?;
    // The runner's SIGINT handler is in place: from now on SIGINT means KeyboardInterrupt.
    channel::set_interpreter_thread();
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
                cached,
                progress,
            } => {
                // Everything is checked and compiled first, and the code goes to the host
                // before any definition runs: nothing a restored definition does can change
                // what the host caches (see `runtime::restore`).
                let (prepared, magic, code) = Python::attach(|py| -> PyResult<_> {
                    // Code that is not base64 is no code: the definitions are compiled.
                    let cached = cached.and_then(|c| {
                        let code: Vec<Bound<'_, PyBytes>> =
                            c.decode()?.iter().map(|b| PyBytes::new(py, b)).collect();
                        Some((c.magic, code))
                    });
                    let prepared = runner
                        .bind(py)
                        .call_method1("prepare_restore", (defs, cached, progress))?;
                    let magic: String = prepared.getattr("magic")?.extract()?;
                    let fresh: Option<Vec<Bound<'_, PyBytes>>> =
                        prepared.getattr("fresh")?.extract()?;
                    let code = fresh.map(|fresh| {
                        use base64::Engine;
                        fresh
                            .iter()
                            .map(|b| base64::engine::general_purpose::STANDARD.encode(b.as_bytes()))
                            .collect::<Vec<String>>()
                    });
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
                channel::set_current_exec(id);
                let result = run_block(&runner, &block);
                channel::set_current_exec(0);
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
            // Read before anything else (`read_start`); the host sends it once.
            HostMessage::Start { .. } => {}
        }
    }
    Ok(())
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
