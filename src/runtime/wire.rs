//! The messages exchanged between the host and a `vis worker` process.
//!
//! Every message is one JSON object in one frame (a 4-byte little-endian length, then the
//! bytes), tagged by `type`. The channel is bidirectional and each side has exactly one reader:
//! while a block runs (or between blocks, from a background thread) the worker may send
//! `request`s, and the host's `response`s are matched to them by id, never by arrival order.

use serde::{Deserialize, Serialize};

pub use crate::protocol::{PersistedDef, RestoreReport, Status};

/// What the host asks of a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostMessage {
    /// Re-create persisted definitions in a fresh namespace.
    Restore {
        defs: Vec<PersistedDef>,
    },
    /// Run one block.
    Exec(ExecRequest),
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecRequest {
    pub id: u64,
    pub code: String,
    /// Filename the block's code object gets, e.g. `<t3/i1>`; tracebacks show it.
    pub filename: String,
    /// The `session` dict, rebuilt by the host before every block.
    pub session: serde_json::Value,
    /// Output cap in characters.
    pub output_limit: usize,
    /// Where the full output goes when it is cut.
    pub artifact_path: String,
    /// Directory for other artifacts of this block (e.g. `sh` output).
    pub artifact_dir: String,
    pub workspace_roots: Vec<String>,
    /// The most bytes the session's artifact directory may hold.
    #[serde(default = "default_quota")]
    pub artifact_quota: u64,
}

fn default_quota() -> u64 {
    super::output::DEFAULT_ARTIFACT_QUOTA
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
        #[serde(default)]
        manifest: Vec<crate::catalog::ManifestEntry>,
        /// Which process isolation the worker runs under (see `runtime::launcher`).
        #[serde(default)]
        isolation: Isolation,
    },
    Restored(RestoreReport),
    Result(ExecResult),
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
    Fatal {
        message: String,
    },
}

impl WorkerMessage {
    /// The message's `type`, for error messages (never its contents: they may be huge).
    pub fn kind(&self) -> &'static str {
        match self {
            WorkerMessage::Ready { .. } => "ready",
            WorkerMessage::Restored(_) => "restored",
            WorkerMessage::Result(_) => "result",
            WorkerMessage::Request { .. } => "request",
            WorkerMessage::Manifest { .. } => "manifest",
            WorkerMessage::Fatal { .. } => "fatal",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecResult {
    pub id: u64,
    pub status: Status,
    /// Output as the model sees it (already capped).
    pub output: String,
    /// Characters cut by the cap (0 when nothing was cut).
    #[serde(default)]
    pub cut_chars: usize,
    #[serde(default)]
    pub total_chars: usize,
    /// Set when the output was cut and saved in full.
    #[serde(default)]
    pub artifact: Option<String>,
    #[serde(default)]
    pub defs_set: Vec<PersistedDef>,
    #[serde(default)]
    pub defs_deleted: Vec<String>,
    /// Time spent running the block inside the worker.
    #[serde(default)]
    pub exec_micros: u64,
    /// The visible manifest, when the block changed it (e.g. `promote` loaded an extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Vec<crate::catalog::ManifestEntry>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_tagged_json() {
        let msg = HostMessage::Restore { defs: vec![] };
        let json = serde_json::to_string(&msg).unwrap();
        assert_eq!(json, r#"{"type":"restore","defs":[]}"#);
        let back: WorkerMessage =
            serde_json::from_str(r#"{"type":"ready","pid":7,"python_version":"3.11"}"#).unwrap();
        assert!(matches!(back, WorkerMessage::Ready { pid: 7, .. }));
    }
}
