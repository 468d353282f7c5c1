//! The hub as the block runner sees it (`runtime::ToolHub`): the runtime does not depend on
//! MCP, it asks through this trait.

use serde_json::{Map, Value};

use super::McpHub;
use crate::protocol::{CallError, McpFunction, McpNamespace};
use crate::runtime::{ToolFuture, ToolHub};

impl ToolHub for McpHub {
    fn call(
        &self,
        server: String,
        tool: String,
        arguments: Map<String, Value>,
    ) -> ToolFuture<'static, Result<Value, CallError>> {
        let hub = self.clone();
        Box::pin(async move { McpHub::call(&hub, &server, &tool, arguments).await })
    }

    fn status(&self) -> Value {
        self.status_json()
    }

    fn connect(&self, all: bool) -> ToolFuture<'_, ()> {
        Box::pin(async move {
            if all {
                self.connect_all().await;
            } else {
                self.connect(&self.unlisted()).await;
            }
            // The tools the worker gets now are all there is: nothing has changed since.
            self.take_changed();
        })
    }

    fn refresh(&self) -> ToolFuture<'_, Option<(Vec<McpNamespace>, Vec<McpFunction>)>> {
        Box::pin(async move {
            // Servers a block started on its first call: their lists become current.
            self.list_started().await;
            self.refresh().await.then(|| self.functions())
        })
    }

    fn functions(&self) -> (Vec<McpNamespace>, Vec<McpFunction>) {
        McpHub::functions(self)
    }

    fn take_unsaved_tool_lists(&self) -> Vec<(String, String, String)> {
        McpHub::take_unsaved_tool_lists(self)
    }

    fn shutdown(&self) -> ToolFuture<'_, ()> {
        Box::pin(McpHub::shutdown(self))
    }
}
