//! Answering a block's `mcp.call`: the tool must be one the worker was given; its result
//! comes back converted, its failures as tool or server errors.

use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::ServiceError;
use serde_json::Value;

use super::{lock, seconds, McpHub, Slot};
use std::sync::atomic::Ordering;

use crate::mcp::framing::{over_limit_answer, size_text};
use crate::mcp::results;
use crate::protocol::CallError;

impl McpHub {
    /// `server.tool(**arguments)` from a block: calls the tool and converts the result. The
    /// tool must be one the worker was given.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<Value, CallError> {
        let Some(slot) = self.slot(server).cloned() else {
            let known = self.server_names();
            return Err(CallError(if known.is_empty() {
                format!(
                    "there is no MCP server `{server}`: none is configured (see session[\"mcp\"])"
                )
            } else {
                format!(
                    "there is no MCP server `{server}`; the servers are {} (see session[\"mcp\"])",
                    known.join(", ")
                )
            }));
        };
        // The tool must be one the worker was given: known, with its Python name not denied.
        let Some(output_schema) = self.callable(&slot, tool) else {
            return Err(CallError(format!(
                "MCP server `{server}` has no tool `{tool}`; doc('{server}') lists its tools"
            )));
        };
        // Sent whole, a message over the limit could only be refused by the server.
        let limit = self.inner.settings.max_message_bytes;
        let size = serde_json::to_vec(&arguments).map_or(0, |v| v.len());
        if size > limit {
            return Ok(results::tool_error(format!(
                "the arguments of `{tool}` are {}, over the limit of {} for one MCP message; pass less (e.g. a file's path instead of its content), or raise [mcp] max_message_mb in config.toml",
                size_text(size),
                size_text(limit)
            )));
        }
        let (peer, generation) = match self.peer(&slot).await {
            Ok(p) => p,
            Err(e) => return Ok(results::server_error(e.to_string())),
        };
        let timeout = slot
            .spec
            .timeout
            .unwrap_or(self.inner.settings.call_timeout);
        let request = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let answer = tokio::time::timeout(timeout, peer.call_tool(request)).await;
        match answer {
            Ok(Ok(result)) => {
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                Ok(results::convert(
                    &value,
                    output_schema.as_ref(),
                    server,
                    tool,
                    &self.inner.settings.artifact_dir,
                ))
            }
            Ok(Err(ServiceError::McpError(e))) => Ok(results::tool_error(e.message.to_string())),
            Ok(Err(e)) => {
                let how = self.lost(&slot, generation, None).await;
                if slot.http_over_limit.swap(false, Ordering::SeqCst) {
                    // The server is fine; its answer was too big (the SDK closed the session).
                    return Ok(results::tool_error(over_limit_answer(server, None, limit)));
                }
                let message = format!(
                    "MCP server `{server}` {how} during the call to `{tool}` ({e}); it starts again on the next call"
                );
                self.record_error(&slot, &message);
                Ok(results::server_error(message))
            }
            Err(_) => {
                let secs = seconds(timeout);
                self.lost(&slot, generation, Some("was stopped")).await;
                let message = format!(
                    "MCP server `{server}` did not answer the call to `{tool}` within {secs}, so it was stopped; it starts again on the next call (a slow tool needs a longer `timeout` in [mcp.servers.{server}])"
                );
                self.record_error(&slot, &message);
                Ok(results::server_error(message))
            }
        }
    }

    /// `Some(output schema)` when `tool` is one the worker was given (listed, mapped to a
    /// function, not denied).
    pub(super) fn callable(&self, slot: &Slot, tool: &str) -> Option<Option<Value>> {
        let info = lock(&slot.info);
        let tools = info.tools.as_ref()?;
        if !info.visible.iter().any(|f| f.tool == tool) {
            return None;
        }
        let spec = tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(tool));
        Some(spec.and_then(|t| t.get("outputSchema")).cloned())
    }

    pub(super) fn record_error(&self, slot: &Slot, message: &str) {
        lock(&slot.info).error = Some(message.to_string());
    }
}
