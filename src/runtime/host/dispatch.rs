//! What a block can ask of its host, and who answers: [`dispatch`] is the one `match` over
//! [`HostRequest`]. MCP calls go to the session's [`ToolHub`] (each a task of its own, so a
//! slow tool does not hold up the block's deadlines or other calls), `promote()` writes here
//! (`promote`), `show()` goes to the block's image shelf (`show`), sub-sessions to
//! [`SubSessions`], and the conversation's calls (`fold_session`, `read_session`) to the
//! caller's [`HostCalls`]. Apart from the runner because the runner's job is the order of a
//! block's steps; this file is what each call means.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::channel::HostCall;
use super::show::ImageShelf;
use super::subs::{CallOrigin, SubSessions};
use crate::protocol::{
    CallAnswer, CallError, Event, HostReply, HostRequest, IterationStatus, McpFunction,
    McpNamespace, ShownImage,
};
use crate::store::{Store, ToolAnswer};

/// A future a [`ToolHub`] returns.
pub type ToolFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A session's MCP servers as the runner uses them (implemented by `mcp::McpHub`).
pub trait ToolHub: Send + Sync {
    /// Calls `tool` of `server` (the block waits for the answer).
    fn call(
        &self,
        server: String,
        tool: String,
        arguments: Map<String, Value>,
    ) -> ToolFuture<'static, Result<Value, CallError>>;
    /// `session["mcp"]`: each server's state and tools.
    fn status(&self) -> Value;
    /// Starts the servers: all of them when `all`, else those whose tools are not known yet.
    fn connect(&self, all: bool) -> ToolFuture<'_, ()>;
    /// Picks up tool-list changes; the tools as namespaces and functions when they changed.
    fn refresh(&self) -> ToolFuture<'_, Option<(Vec<McpNamespace>, Vec<McpFunction>)>>;
    /// The tools as namespaces and functions, as they are now.
    fn functions(&self) -> (Vec<McpNamespace>, Vec<McpFunction>);
    /// Tool lists learnt since the last call, to keep in the store: `(server, fingerprint,
    /// tools JSON)`.
    fn take_unsaved_tool_lists(&self) -> Vec<(String, String, String)>;
    /// Stops every server.
    fn shutdown(&self) -> ToolFuture<'_, ()>;
}

/// The calls only the session's owner can answer (the conversation: `fold_session`,
/// `read_session`), and what it adds when a block ends. `vis exec` and `vis mcp` have no
/// conversation and refuse them ([`NoConversation`]).
pub trait HostCalls: Send {
    /// Answers `request`; `stop_block` interrupts the running block (a budget was spent).
    fn answer(&mut self, store: &mut Store, request: HostRequest) -> Answered;
    /// The block ended: what the owner appends to its output (hints, a spent budget), and the
    /// model call it answers, recorded in the same transaction as the iteration.
    /// `images` are the ones the block showed (already stored).
    fn finish(
        &mut self,
        _output: &mut String,
        _status: IterationStatus,
        _images: &[ShownImage],
    ) -> Option<ToolAnswer> {
        None
    }
}

/// One answer of [`HostCalls::answer`].
pub struct Answered {
    pub reply: CallAnswer,
    /// Interrupt the block now (it still gets `reply`).
    pub stop_block: bool,
}

impl From<CallAnswer> for Answered {
    fn from(reply: CallAnswer) -> Self {
        Answered {
            reply,
            stop_block: false,
        }
    }
}

/// For hosts without a conversation: `what` names them in the refusal.
pub struct NoConversation {
    pub what: &'static str,
}

impl HostCalls for NoConversation {
    fn answer(&mut self, _store: &mut Store, request: HostRequest) -> Answered {
        let method = request.method();
        if request.is_sub_session() {
            return Answered::from(Err(CallError(format!(
                "{method}: sub-sessions need a model, and {} has none; run the work from `vis chat` or `vis serve` (with a provider configured), or do it in this block",
                self.what
            ))));
        }
        Answered::from(Err(CallError(format!(
            "{method}() is not available in {}, which has no conversation to fold (it is kept by `vis chat` and `vis serve`)",
            self.what
        ))))
    }
}

/// The block a host call comes from, for the calls that need it (sub-sessions).
pub(super) struct Origin<'a> {
    pub(super) turn: i64,
    pub(super) iteration: i64,
    pub(super) subs: Option<&'a Arc<dyn SubSessions>>,
    pub(super) live: Option<&'a mpsc::UnboundedSender<Event>>,
    /// The block's own stop: cancels what the block started.
    pub(super) stop: &'a CancellationToken,
}

/// Answers one host call, in one `match` over what blocks can ask. An MCP call or a
/// sub-session call becomes a task of its own (returned, so it can be cancelled when the
/// block ends).
pub(super) fn dispatch(
    call: HostCall,
    origin: Origin<'_>,
    tools: Option<&Arc<dyn ToolHub>>,
    workspace: Option<&Path>,
    store: &mut Store,
    host_calls: &mut dyn HostCalls,
    shelf: &mut ImageShelf,
) -> Option<JoinHandle<()>> {
    match call.request.clone() {
        HostRequest::McpCall {
            server,
            tool,
            arguments,
        } => {
            let Some(tools) = tools else {
                call.reply(Err(CallError(
                    "no MCP servers are configured: declare them in config.toml as [mcp.servers.NAME] (see docs/mcp.md)".into(),
                )));
                return None;
            };
            let answer = tools.call(server, tool, arguments);
            Some(tokio::spawn(async move {
                call.reply(answer.await.map(HostReply::Mcp));
            }))
        }
        HostRequest::McpStatus {} => {
            let status = tools.map_or_else(
                || serde_json::json!({"servers": {}, "skipped": []}),
                |t| t.status(),
            );
            call.reply(Ok(HostReply::Mcp(status)));
            None
        }
        HostRequest::WriteExtension { extension, text } => {
            call.reply(super::promote::write_extension(
                workspace, &extension, &text,
            ));
            None
        }
        request @ (HostRequest::Spawn(_)
        | HostRequest::SubWait { .. }
        | HostRequest::SubStatus { .. }
        | HostRequest::SubCancel { .. }
        | HostRequest::SubList {}) => {
            let Some(subs) = origin.subs else {
                let answered = host_calls.answer(store, request);
                call.reply(answered.reply);
                return None;
            };
            let answer = subs.answer(
                CallOrigin {
                    turn: origin.turn,
                    iteration: origin.iteration,
                    live: origin.live.cloned(),
                    fence: store.lease_fence(),
                },
                request,
            );
            Some(tokio::spawn(async move {
                call.reply(answer.await);
            }))
        }
        HostRequest::ShowImage { data, caption } => {
            call.reply(shelf.show(store, &data, caption));
            None
        }
        request @ (HostRequest::FoldSession { .. } | HostRequest::ReadSession { .. }) => {
            let answered = host_calls.answer(store, request);
            call.reply(answered.reply);
            if answered.stop_block {
                origin.stop.cancel();
            }
            None
        }
    }
}
