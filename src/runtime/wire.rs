//! The messages exchanged between the host and a `vis worker` process.
//!
//! Every message is one JSON object in one frame (a 4-byte little-endian length, then the
//! bytes), tagged by `type`. The channel is bidirectional and each side has exactly one reader:
//! while a block runs (or between blocks, from a background thread) the worker may send
//! `request`s, and the host's `response`s are matched to them by id, never by arrival order.
//!
//! A block travels as the shared [`Block`] and comes back as the shared [`BlockResult`]
//! (`crate::protocol`), each tagged with the exec id. What the worker sends is untrusted:
//! no field of a worker message has a default, so a missing one is a protocol error.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio_util::codec::LengthDelimitedCodec;

use crate::protocol::{Block, BlockResult, PersistedDef, RestoreReport};

/// What a worker is started with: the first message it reads, before anything else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerArgs {
    pub memory_limit_mb: u64,
    /// The directory the worker runs in, which also gives it its `.venv` and `.vis`.
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
    /// The workers' cache directory: read by the worker, written by the host (see
    /// `runtime::cache`).
    pub cache_dir: Option<PathBuf>,
}

/// What the host asks of a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostMessage {
    /// Start as `args` say: always the first message, and only that one (the process may be
    /// started before they are known, see `runtime::spawn`).
    Start {
        args: Box<WorkerArgs>,
    },
    /// Re-create persisted definitions in a fresh namespace (see `runtime::restore`).
    Restore {
        /// The definitions to restore, in order.
        defs: Vec<PersistedDef>,
        /// Definitions the host does not restore (over a size limit, or they stopped an
        /// earlier worker), without their source: listed by `defs()` as not restored.
        skipped: Vec<PersistedDef>,
        /// Their compiled code, which the host read from its cache file for exactly `defs`;
        /// `None` to compile them.
        cached: Option<CachedCode>,
        /// Say `restoring {index}` before compiling and before running each definition.
        progress: bool,
    },
    /// Run one block; its result comes back with the same id.
    Exec {
        id: u64,
        block: Box<Block>,
    },
    /// Interrupt block `id` (a `KeyboardInterrupt` in the interpreter thread). Carrying the
    /// id makes an interrupt that arrives just before the block starts apply to that block
    /// rather than being lost.
    Interrupt {
        id: u64,
    },
    /// The answer to a worker `request`.
    Response {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The MCP servers' tools, as namespaces and functions (replacing any earlier list); the
    /// worker answers with `manifest`.
    McpTools {
        namespaces: Vec<crate::protocol::McpNamespace>,
        functions: Vec<crate::protocol::McpFunction>,
    },
    Shutdown,
}

/// The compiled code of a restore's definitions, as the host's cache file holds it (see
/// `runtime::restore`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedCode {
    /// The bytecode magic number of the Python that compiled it (hex): a worker whose Python
    /// has another compiles the definitions instead.
    pub magic: String,
    /// One marshalled code object per definition, in order, in base64 as the cache file holds
    /// it (the worker decodes it).
    pub code: Vec<String>,
}

impl CachedCode {
    /// The code objects' bytes; `None` when one is not base64.
    pub fn decode(&self) -> Option<Vec<Vec<u8>>> {
        use base64::Engine;
        self.code
            .iter()
            .map(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
            .collect()
    }
}

/// The sandbox layers a worker got at start (what it reports in `ready`).
pub type Isolation = crate::sandbox::Layers;

/// What a worker tells its host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerMessage {
    Ready {
        pid: u32,
        python_version: String,
        /// The visible manifest (prelude, extensions, pages, skills; deny list applied).
        manifest: Vec<crate::catalog::ManifestEntry>,
        /// Which process isolation the worker runs under (see `runtime::launcher`).
        isolation: Isolation,
        /// Cache files the worker rebuilt while starting, for the host to write into the
        /// worker's own workspace's cache directory (the worker cannot write it; see
        /// `runtime::cache`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cache_writes: Vec<super::cache::CacheWrite>,
    },
    /// Which persisted definition (its index in `restore`'s `defs`) the worker is about to
    /// compile or run, so the one that kills or hangs it can be skipped (only when the
    /// `restore` asked for progress).
    Restoring { index: usize },
    /// Every definition of a `restore` is compiled; sent before any of them runs.
    Compiled {
        /// The bytecode magic number of the worker's Python (hex).
        magic: String,
        /// Their code (marshalled, base64), one per definition, when it was compiled now and
        /// all of it compiled; `null` when it came from the cache (or something failed).
        #[serde(deserialize_with = "Option::deserialize")]
        code: Option<Vec<String>>,
    },
    Restored {
        #[serde(flatten)]
        report: RestoreReport,
    },
    /// The result of block `id` (boxed: it is by far the largest message).
    Result { id: u64, result: Box<BlockResult> },
    /// A call from the block back to the host (answered with `HostMessage::Response`).
    Request {
        id: u64,
        method: String,
        params: serde_json::Value,
    },
    /// The visible manifest after `mcp_tools` changed it.
    Manifest {
        entries: Vec<crate::catalog::ManifestEntry>,
    },
    /// The worker could not do what was asked and is about to exit.
    Fatal { message: String },
    /// A background job started, ended or was seen to end (any time, not only in a block).
    Job { report: JobReport },
}

impl WorkerMessage {
    /// The message's `type`, for error messages (never its contents: they may be huge).
    pub fn kind(&self) -> &'static str {
        match self {
            WorkerMessage::Ready { .. } => "ready",
            WorkerMessage::Restoring { .. } => "restoring",
            WorkerMessage::Compiled { .. } => "compiled",
            WorkerMessage::Restored { .. } => "restored",
            WorkerMessage::Result { .. } => "result",
            WorkerMessage::Request { .. } => "request",
            WorkerMessage::Manifest { .. } => "manifest",
            WorkerMessage::Fatal { .. } => "fatal",
            WorkerMessage::Job { .. } => "job",
        }
    }
}

/// Frames larger than this are a protocol violation, not data (block output is capped long
/// before it gets here).
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// The frame codec of both ends: 4-byte little-endian lengths, at most [`MAX_FRAME_BYTES`].
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .little_endian()
        .length_field_length(4)
        .max_frame_length(MAX_FRAME_BYTES)
        .new_codec()
}

/// A frame from the worker that is not a message: the worker broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a frame of {len} bytes is not a worker message: {detail}")]
pub struct BadFrame {
    pub len: usize,
    /// The parser's complaint, clipped, control characters blanked.
    pub detail: String,
}

/// One frame from the worker as a message. The frame is untrusted input: the error names what
/// is wrong without quoting it (its bytes would reach the user's terminal).
pub fn decode_message(frame: &[u8]) -> Result<WorkerMessage, BadFrame> {
    serde_json::from_slice::<WorkerMessage>(frame).map_err(|e| {
        let detail = crate::protocol::clip(&e.to_string(), 120);
        BadFrame {
            len: frame.len(),
            detail: detail
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect(),
        }
    })
}

/// What a worker reports about a job (`{"type": "job", "report": {...}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum JobReport {
    /// The job's process started; its output goes to `artifact`.
    Started {
        id: u32,
        command: String,
        artifact: String,
    },
    /// The job's process ended.
    Finished {
        id: u32,
        /// `None` when a signal ended it.
        exit_code: Option<i32>,
        signal: Option<i32>,
        /// Lines and bytes of output (all of it, kept or not).
        lines: u64,
        bytes: u64,
        /// Bytes over the output cap that were not written to the artifact.
        dropped_bytes: u64,
        /// Killed when its own timeout expired.
        timed_out: bool,
        /// Killed by `Job.kill()`.
        killed: bool,
    },
    /// A block saw the job end (`wait`, `running`, `exit_code`): no announcement is needed.
    Observed { id: u32 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_tagged_json() {
        let msg = HostMessage::Restore {
            defs: vec![],
            skipped: vec![],
            cached: Some(CachedCode {
                magic: "a70d0d0a".into(),
                code: vec!["42NvZGU=".into()],
            }),
            progress: false,
        };
        let json = serde_json::to_string(&msg).unwrap();
        assert_eq!(
            json,
            r#"{"type":"restore","defs":[],"skipped":[],"cached":{"magic":"a70d0d0a","code":["42NvZGU="]},"progress":false}"#
        );
        let back: HostMessage = serde_json::from_str(&json).unwrap();
        let HostMessage::Restore {
            cached: Some(c), ..
        } = back
        else {
            panic!("{back:?}");
        };
        assert_eq!(c.decode(), Some(vec![b"\xe3code".to_vec()]));
        let bad = CachedCode {
            magic: "a70d0d0a".into(),
            code: vec!["42NvZGU=".into(), "%%%".into()],
        };
        assert_eq!(bad.decode(), None);
        let ready = serde_json::json!({
            "type": "ready", "pid": 7, "python_version": "3.11", "manifest": [],
            "isolation": Isolation::default(),
        });
        let back: WorkerMessage = serde_json::from_value(ready.clone()).unwrap();
        assert!(matches!(back, WorkerMessage::Ready { pid: 7, .. }));
        // Nothing the worker sends has a default: a missing field is a protocol error.
        let mut partial = ready;
        partial.as_object_mut().unwrap().remove("manifest");
        let e = serde_json::from_value::<WorkerMessage>(partial).unwrap_err();
        assert!(e.to_string().contains("manifest"), "{e}");
    }

    #[test]
    fn a_result_is_the_shared_type_tagged_with_its_id() {
        let msg = WorkerMessage::Result {
            id: 3,
            result: Box::new(BlockResult::new(crate::protocol::Status::Error)),
        };
        let json = serde_json::to_value(&msg).unwrap();
        assert_eq!(json["type"], "result");
        assert_eq!(json["result"]["status"], "error");
        let back: WorkerMessage = serde_json::from_value(json).unwrap();
        assert!(matches!(back, WorkerMessage::Result { id: 3, .. }));
    }
}
