//! Forwarding the MCP servers' tools to the worker: kept by the supervisor, sent to every
//! new worker and to a running one between blocks, answered with the new manifest.

use super::channel::Incoming;
use super::supervisor::Supervisor;
use crate::protocol::{McpFunction, McpNamespace};
use crate::runtime::wire::{HostMessage, WorkerMessage};
use crate::runtime::RuntimeError;

impl Supervisor {
    /// Sets the MCP servers' tools (namespaces and functions) the model's namespace has. A
    /// running worker gets them now (between blocks), a new worker when it starts; either way
    /// the manifest changes (and so `manifest_version`).
    pub async fn set_mcp_tools(
        &mut self,
        namespaces: Vec<McpNamespace>,
        functions: Vec<McpFunction>,
    ) -> Result<(), RuntimeError> {
        let same = self
            .mcp
            .as_ref()
            .is_some_and(|(n, f)| *n == namespaces && *f == functions);
        if same {
            return Ok(());
        }
        self.mcp = Some((namespaces, functions));
        if self.worker.is_some() {
            self.send_mcp().await?;
        }
        Ok(())
    }

    /// Sends the MCP tools to the running worker and takes the manifest it answers with.
    pub(super) async fn send_mcp(&mut self) -> Result<(), RuntimeError> {
        let (Some((namespaces, functions)), Some(worker)) = (&self.mcp, self.worker.as_mut())
        else {
            return Ok(());
        };
        worker.channel.send(HostMessage::McpTools {
            namespaces: namespaces.clone(),
            functions: functions.clone(),
        });
        let answer = tokio::time::timeout(self.opts.startup_timeout, async {
            loop {
                match worker.channel.recv().await {
                    Incoming::Message(WorkerMessage::Manifest { entries }) => break Ok(entries),
                    Incoming::Message(WorkerMessage::Fatal { message }) => {
                        break Err(RuntimeError::Worker(message))
                    }
                    // Nothing else is in flight between blocks.
                    Incoming::Message(_) => {}
                    Incoming::Invalid(detail) => break Err(RuntimeError::Protocol(detail)),
                    Incoming::Closed => {
                        break Err(RuntimeError::Worker(
                            "the worker exited while loading the MCP tools".into(),
                        ))
                    }
                }
            }
        })
        .await;
        match answer {
            Ok(Ok(entries)) => {
                self.manifest = entries;
                self.manifest_version += 1;
                Ok(())
            }
            Ok(Err(e)) => {
                self.kill_worker("after loading the MCP tools failed").await;
                Err(e)
            }
            Err(_) => {
                self.kill_worker("after loading the MCP tools hung").await;
                Err(RuntimeError::Worker(
                    "the worker did not load the MCP tools in time".into(),
                ))
            }
        }
    }
}
