//! What a replayed block may ask of its host: the conversation's calls (`fold_session`,
//! `read_session`) and MCP tools are not replayed. A replay has no conversation and starts no
//! MCP server (a server's answers are not recorded, and calling it again could change things
//! outside the scratch workspace), so each such call is refused with an error that says why,
//! and the iteration is reported as "not replayable" instead of compared.
//!
//! The MCP servers the session's workspace declares still appear as namespaces (from the tool
//! lists the store keeps), so a block calling one fails the same way whether or not its server
//! could be started, and the refusal names the call.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

use crate::mcp::McpHub;
use crate::protocol::{CallError, HostRequest, IterationStatus, McpFunction, McpNamespace};
use crate::runtime::{Answered, HostCalls, ToolFuture, ToolHub};
use crate::store::{Store, ToolAnswer};

/// The calls the current block made that a replay does not make, shared by [`ReplayCalls`]
/// and [`ReplayTools`].
#[derive(Clone, Default)]
pub struct Unreplayable(Arc<Mutex<Vec<String>>>);

impl Unreplayable {
    fn push(&self, call: String) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
    }

    /// The calls made since the last `take`, each once, in order.
    pub fn take(&self) -> Vec<String> {
        let mut calls = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        let mut seen = std::collections::HashSet::new();
        calls.retain(|c| seen.insert(c.clone()));
        calls
    }
}

fn refusal(what: &str) -> CallError {
    CallError(format!(
        "{what} is not replayable: `vis replay` re-runs recorded blocks without a conversation or MCP servers"
    ))
}

/// The conversation's calls during a replay: refused and noted.
pub struct ReplayCalls {
    pub noted: Unreplayable,
    /// The block replays a chat turn's: its empty output reads `(no output)`, as the
    /// conversation recorded it.
    pub chat: bool,
}

impl HostCalls for ReplayCalls {
    fn answer(&mut self, _store: &mut Store, request: HostRequest) -> Answered {
        let method = request.method();
        self.noted.push(format!("{method}()"));
        Answered::from(Err(refusal(&format!("{method}()"))))
    }

    fn finish(
        &mut self,
        output: &mut String,
        _status: IterationStatus,
        _images: &[crate::protocol::ShownImage],
    ) -> Option<ToolAnswer> {
        if self.chat && output.is_empty() {
            output.push_str("(no output)");
        }
        None
    }
}

/// The session's MCP servers during a replay: their tools as namespaces, every call refused
/// and noted, no server started.
pub struct ReplayTools {
    pub servers: McpHub,
    pub noted: Unreplayable,
}

impl ToolHub for ReplayTools {
    fn call(
        &self,
        server: String,
        tool: String,
        _arguments: Map<String, Value>,
    ) -> ToolFuture<'static, Result<Value, CallError>> {
        let what = format!("MCP call {server}.{tool}()");
        self.noted.push(what.clone());
        Box::pin(async move { Err(refusal(&what)) })
    }

    fn status(&self) -> Value {
        self.servers.status()
    }

    fn connect(&self, _all: bool) -> ToolFuture<'_, ()> {
        Box::pin(async {})
    }

    fn refresh(&self) -> ToolFuture<'_, Option<(Vec<McpNamespace>, Vec<McpFunction>)>> {
        Box::pin(async { None })
    }

    fn functions(&self) -> (Vec<McpNamespace>, Vec<McpFunction>) {
        self.servers.functions()
    }

    fn take_unsaved_tool_lists(&self) -> Vec<(String, String, String)> {
        Vec::new()
    }

    fn shutdown(&self) -> ToolFuture<'_, ()> {
        Box::pin(self.servers.shutdown())
    }
}
