//! The worker's end of the channel to the host: one reader thread (the only reader of the
//! host's pipe), frames written whole under one lock, host calls waiting for their answer by
//! id, and the interrupt state the reader thread and the interpreter thread share.
//!
//! The reader thread routes what the host sends: a response goes to the call waiting on that
//! id; an interrupt is handled on the spot (SIGINT to the interpreter thread, and its waiting
//! host call woken); the rest is queued for the interpreter thread. When the pipe closes (the
//! host is gone, even after `kill -9`), the worker exits at once.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use super::frames::{write_frame, FrameReader};
use crate::runtime::wire::{HostMessage, WorkerMessage};
use crate::runtime::RuntimeError;

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

/// `pthread_t` of the interpreter thread once its SIGINT handler is installed (0 before).
static INTERPRETER_THREAD: AtomicU64 = AtomicU64::new(0);
/// Whether the launcher gave us a PID namespace (then init kills what is left).
static IN_PID_NAMESPACE: AtomicBool = AtomicBool::new(false);
/// The id of the block now running (0 between blocks).
static CURRENT_EXEC: AtomicU64 = AtomicU64::new(0);
/// The id of the last block the host asked to interrupt.
static INTERRUPT_FOR: AtomicU64 = AtomicU64::new(0);

/// Opens the channel on the host's pipes (`reader` from the host, `writer` to it) and starts
/// the reader thread. Returns the queue of host messages for the interpreter thread.
pub(crate) fn open(
    reader: File,
    writer: File,
) -> Result<mpsc::Receiver<HostMessage>, RuntimeError> {
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

/// Records whether the worker runs in its own PID namespace (see [`exit_now`]).
pub(crate) fn set_in_pid_namespace(yes: bool) {
    IN_PID_NAMESPACE.store(yes, Ordering::SeqCst);
}

/// Called on the interpreter thread once Python's SIGINT handler is in place: from then on an
/// interrupt is delivered to this thread.
pub(crate) fn set_interpreter_thread() {
    // SAFETY: pthread_self is always safe.
    INTERPRETER_THREAD.store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
}

/// Marks block `id` as running (0: none), so an interrupt for it reaches it.
pub(crate) fn set_current_exec(id: u64) {
    CURRENT_EXEC.store(id, Ordering::SeqCst);
}

/// Writes `msg` and a newline to fd 2 (the capture file: the host shows it to the user).
pub(crate) fn eprintln_raw(msg: &str) {
    let line = format!("{msg}\n");
    // SAFETY: writing a valid buffer to fd 2; a failed write has nowhere better to go.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
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
pub(crate) fn exit_now(code: i32) -> ! {
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

/// Sends one message to the host (a whole frame, under the writer's lock).
pub(crate) fn send(msg: &WorkerMessage) -> Result<(), RuntimeError> {
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
