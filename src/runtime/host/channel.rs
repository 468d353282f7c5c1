//! The host's end of a worker's pipes: one reader task, one writer task, host calls routed
//! by request id.
//!
//! Frames are length-delimited (4 bytes, little-endian) JSON messages from `wire`. The reader
//! task is the only thing that reads the worker's stdout. It turns every `request` into a
//! [`HostCall`] for whoever is answering host calls at the moment (the caller of
//! `Supervisor::exec`, while a block runs) and writes the reply back under the same id; a
//! request that arrives while nobody answers (a background thread between blocks) gets an
//! error reply at once, so it can never be mistaken for the next block's traffic. Everything
//! A `job` report goes to the session's job table (`jobs`) at once. Everything else goes to
//! [`HostChannel::recv`] in order.

use std::sync::{Arc, Mutex};

use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, FramedWrite};

use super::jobs::Jobs;
use crate::protocol::{CallAnswer, CallError, HostRequest};
use crate::runtime::wire::{codec, decode_message, HostMessage, WorkerMessage};

/// A call from a running block back to the host (`fold_session`, MCP tools, …), parsed.
/// Answer it with [`HostCall::reply`]; dropping it unanswered replies with an error.
#[derive(Debug)]
pub struct HostCall {
    pub request: HostRequest,
    reply: Option<oneshot::Sender<CallAnswer>>,
}

impl HostCall {
    pub fn new(request: HostRequest) -> (HostCall, oneshot::Receiver<CallAnswer>) {
        let (tx, rx) = oneshot::channel();
        (
            HostCall {
                request,
                reply: Some(tx),
            },
            rx,
        )
    }

    /// Sends the answer to the block (an `Err` becomes a Python exception there).
    pub fn reply(mut self, answer: CallAnswer) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(answer);
        }
    }
}

impl Drop for HostCall {
    fn drop(&mut self) {
        if let Some(tx) = self.reply.take() {
            let _ = tx.send(Err(ended(self.request.method())));
        }
    }
}

/// The refusal of a call whose block ended before it was answered (the same through every
/// host: see `tests/it/mcp/leftover.rs`).
pub(super) fn ended(method: &str) -> CallError {
    CallError(format!(
        "the host did not answer '{method}': the block it was made for has ended"
    ))
}

/// Where host calls go; `None` while no one answers them.
pub type HostCallSink = mpsc::UnboundedSender<HostCall>;

/// What the reader task hands on, in arrival order.
#[derive(Debug)]
pub enum Incoming {
    Message(WorkerMessage),
    /// The worker sent bytes that are not a valid message (it is then treated as broken).
    Invalid(String),
    /// The pipe closed: the worker exited or is exiting.
    Closed,
}

pub struct HostChannel {
    outgoing: mpsc::UnboundedSender<HostMessage>,
    incoming: mpsc::UnboundedReceiver<Incoming>,
    calls: Arc<Mutex<Option<HostCallSink>>>,
    jobs: Arc<Mutex<Option<Jobs>>>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl HostChannel {
    pub fn new(stdin: ChildStdin, stdout: ChildStdout) -> HostChannel {
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<HostMessage>();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let calls: Arc<Mutex<Option<HostCallSink>>> = Arc::new(Mutex::new(None));
        let writer = tokio::spawn(async move {
            let mut sink = FramedWrite::new(stdin, codec());
            while let Some(msg) = out_rx.recv().await {
                let Ok(payload) = serde_json::to_vec(&msg) else {
                    continue;
                };
                // A dead worker shows up as a closed pipe; the reader reports it.
                if sink.send(bytes::Bytes::from(payload)).await.is_err() {
                    break;
                }
            }
        });
        let jobs: Arc<Mutex<Option<Jobs>>> = Arc::new(Mutex::new(None));
        let reader = tokio::spawn(read_loop(
            stdout,
            in_tx,
            out_tx.clone(),
            calls.clone(),
            jobs.clone(),
        ));
        HostChannel {
            outgoing: out_tx,
            incoming: in_rx,
            calls,
            jobs,
            reader,
            writer,
        }
    }

    /// Queues a message for the worker (a closed pipe is reported by `recv`, not here).
    pub fn send(&self, msg: HostMessage) {
        let _ = self.outgoing.send(msg);
    }

    /// The next message from the worker; `Closed` once the pipe is gone.
    pub async fn recv(&mut self) -> Incoming {
        self.incoming.recv().await.unwrap_or(Incoming::Closed)
    }

    /// Routes host calls to `sink` until [`HostChannel::clear_calls`].
    pub fn route_calls(&self, sink: HostCallSink) {
        if let Ok(mut guard) = self.calls.lock() {
            *guard = Some(sink);
        }
    }

    /// Applies the worker's job reports to `jobs` from now on (they arrive between blocks
    /// too); reports before this are dropped (no block has run yet).
    pub fn route_jobs(&self, jobs: Jobs) {
        if let Ok(mut guard) = self.jobs.lock() {
            *guard = Some(jobs);
        }
    }

    pub fn clear_calls(&self) {
        if let Ok(mut guard) = self.calls.lock() {
            *guard = None;
        }
    }
}

impl Drop for HostChannel {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

async fn read_loop(
    stdout: ChildStdout,
    incoming: mpsc::UnboundedSender<Incoming>,
    outgoing: mpsc::UnboundedSender<HostMessage>,
    calls: Arc<Mutex<Option<HostCallSink>>>,
    jobs: Arc<Mutex<Option<Jobs>>>,
) {
    let mut frames = FramedRead::new(stdout, codec());
    while let Some(frame) = frames.next().await {
        let bytes = match frame {
            Ok(bytes) => bytes,
            Err(e) => {
                // After a bad length the stream cannot be re-synchronized.
                let _ = incoming.send(Incoming::Invalid(format!("unreadable frame: {e}")));
                break;
            }
        };
        let msg = match decode_message(&bytes) {
            Ok(msg) => msg,
            Err(bad) => {
                let _ = incoming.send(Incoming::Invalid(bad.to_string()));
                continue;
            }
        };
        match msg {
            WorkerMessage::Request { id, method, params } => {
                route_request(id, method, params, &calls, &outgoing);
            }
            WorkerMessage::Job { report } => {
                if let Some(jobs) = jobs.lock().ok().and_then(|g| g.clone()) {
                    jobs.apply(report);
                }
            }
            other => {
                if incoming.send(Incoming::Message(other)).is_err() {
                    break;
                }
            }
        }
    }
    let _ = incoming.send(Incoming::Closed);
}

fn route_request(
    id: u64,
    method: String,
    params: Value,
    calls: &Mutex<Option<HostCallSink>>,
    outgoing: &mpsc::UnboundedSender<HostMessage>,
) {
    let sink = calls.lock().ok().and_then(|g| g.clone());
    let respond = move |answer: CallAnswer| {
        let (result, error) = match answer {
            Ok(reply) => (Some(reply.into_json()), None),
            Err(e) => (None, Some(e.0)),
        };
        HostMessage::Response { id, result, error }
    };
    let Some(sink) = sink else {
        let _ = outgoing.send(respond(Err(CallError(format!(
            "'{}' is not available now: the host answers calls only while a block runs",
            crate::protocol::clip(&method, 60)
        )))));
        return;
    };
    // What the worker sent is untrusted: a call that does not parse is answered here.
    let request = match HostRequest::parse(&method, params) {
        Ok(request) => request,
        Err(e) => {
            let _ = outgoing.send(respond(Err(e)));
            return;
        }
    };
    let (call, answer) = HostCall::new(request);
    if let Err(mpsc::error::SendError(call)) = sink.send(call) {
        // The answering side is gone (the block just ended): say so rather than hang.
        call.reply(Err(
            "the host stopped answering calls (the block ended)".into()
        ));
    }
    let outgoing = outgoing.clone();
    tokio::spawn(async move {
        let answer = answer
            .await
            .unwrap_or_else(|_| Err("the host did not answer".into()));
        let _ = outgoing.send(respond(answer));
    });
}
