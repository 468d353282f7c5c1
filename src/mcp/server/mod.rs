//! `vis mcp`: Vis as an MCP server over stdio.
//!
//! One tool, `python_execution {code}`, runs a block in a persisted session exactly as
//! `vis exec` does (same store, definitions, limits, crash recovery and `session` dict), with
//! one worker kept alive for the whole connection. Every call is one iteration; a connection
//! is one turn of kind `mcp`, begun at its first call and closed when the client disconnects
//! (so `t3/i5` is the 5th call of the 3rd connection, as in fold keys and `vis sessions show`).
//!
//! - Results: the block's output as text, ending with a status line; a block that raised,
//!   timed out, was interrupted or crashed sets `isError`.
//! - Cancellation: the client's `notifications/cancelled` cancels the request's token, which
//!   interrupts the running block (the supervisor's usual interrupt, then kill after the
//!   grace period).
//! - Progress: with a progress token, a notification every [`PROGRESS_EVERY`] while the block
//!   runs.
//! - The server's instructions are the session id plus the catalog (as `vis catalog` renders
//!   it); resources: `vis://session/defs`, `vis://catalog` and `vis://doc/NAME` for every
//!   documentation page and skill; one prompt, `addresses`, explains `LINE:HASH` addresses.
//! - Configured MCP servers are namespaces here too: the same [`McpHub`] as in `vis chat`.
//! - Calls run one at a time (a session has one interpreter); a second call waits.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, ListPromptsResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

mod session;
mod snapshot;

use super::framing::{LineTransport, Side};
use crate::protocol::{code_of, ToolCall};
use crate::runtime::{BlockRunner, RuntimeError};
use crate::store::StoreError;
use session::Session;
pub use snapshot::defs_text;
use snapshot::Snapshot;

/// How often a running block reports progress (when the client asked for progress).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// The tool's description: short and byte-stable.
pub const TOOL_DESCRIPTION: &str = "Run a Python block in a persistent Vis session and get back what it printed (stdout and stderr, capped) and the repr of a final expression. Variables live on between calls; top-level def/class statements survive restarts (defs()). Pre-imported: cat and grep (lines carry LINE:HASH addresses), patch (edits by address), sh, defs, session, Path, plus extension and MCP-server namespaces: apropos(pattern) finds every function and doc(name) explains it.";

/// What `vis mcp` needs to serve a session.
pub struct ServeOptions {
    pub session_id: String,
    pub roots: Vec<String>,
    pub output_limit: usize,
    pub catalog_budget: usize,
    /// The largest message in either direction (`[mcp] max_message_mb`).
    pub max_message_bytes: usize,
}

/// Errors that end `vis mcp` (everything a block does is a tool result instead).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the worker could not start: {0}")]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Run(#[from] crate::runtime::RunError),
    #[error("the catalog: {0}")]
    Catalog(#[from] crate::catalog::CatalogError),
    #[error("the MCP connection: {0}")]
    Transport(String),
}

/// Runs the server on the client's stream (`reader`, `writer`: one JSON-RPC message per line,
/// bounded and answered as `framing` describes) until the client disconnects (or `stop` is
/// cancelled).
pub async fn serve<R, W>(
    mut runner: BlockRunner,
    opts: ServeOptions,
    reader: R,
    writer: W,
    stop: CancellationToken,
) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let transport = LineTransport::<RoleServer, _, _>::new(
        reader,
        writer,
        Side::Server,
        opts.max_message_bytes,
        format!(
            "a block's output is capped at --output-limit characters (now {}): lower it",
            opts.output_limit
        ),
    );
    // The worker and the MCP servers start together; the catalog needs both.
    runner.start(true).await?;
    let supervisor = runner.supervisor();
    let snapshot = Snapshot::of(supervisor, opts.catalog_budget)?;
    let instructions = instructions(&opts, &snapshot.catalog);
    let info = ServerConfig::new(
        ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .build(),
    )
    .with_server_info(rmcp::model::Implementation::new(
        "vis",
        env!("CARGO_PKG_VERSION"),
    ))
    .with_instructions(instructions);
    let handler = VisServer {
        shared: Arc::new(Shared {
            info,
            snapshot: Mutex::new(snapshot),
            session: tokio::sync::Mutex::new(Session {
                seen_manifest: supervisor.manifest_version(),
                runner,
                opts,
                turn: None,
            }),
        }),
    };
    let shared = handler.shared.clone();
    let running = handler
        .serve(transport)
        .await
        .map_err(|e| ServeError::Transport(e.to_string()))?;
    let cancel = running.cancellation_token();
    let on_stop = tokio::spawn(async move {
        stop.cancelled().await;
        cancel.cancel();
    });
    let _ = running.waiting().await;
    on_stop.abort();
    let mut session = shared.session.lock().await;
    session.close()?;
    session.runner.shutdown().await;
    Ok(())
}

fn instructions(opts: &ServeOptions, catalog: &str) -> String {
    format!(
        "Vis session {id} (workspace {ws}). Call python_execution with Python code: every call runs a block in this persistent session, and only what it prints (and the repr of a final expression) comes back. cat/grep show lines as LINE:HASH|text and patch(path, edits) takes those addresses back; sh(cmd) runs shell commands; session[\"mcp\"] shows the MCP servers available as namespaces. Resources: vis://session/defs (the session's helpers), vis://catalog, vis://doc/NAME; the prompt `addresses` explains addressed editing.\n\n{catalog}",
        id = opts.session_id,
        ws = opts.roots.first().map(String::as_str).unwrap_or("?"),
        catalog = catalog.trim_end(),
    )
}

const ADDRESSES_PROMPT: &str = "How to read and edit files in this Vis session (python_execution):\n\n- cat(path, start=None, end=None) and grep(pattern, path='.') print every line as `LINE:HASH|content`, e.g. `42:kodu|    return x`. LINE is the line number; HASH is a short hash of that line's content (indentation included). grep groups matches under a header naming each file.\n- patch(path, edits) takes those addresses back, all edits for one file in one call, every address referring to the file as it was before the batch: (addr, text) replaces one line, (first, last, text) replaces an inclusive range, empty text deletes, patch.insert_after(addr, text) / patch.insert_before(addr, text) insert.\n- A stale address (the line changed since you read it), an overlap or a new syntax error rejects the whole batch and changes nothing; the error shows the current lines with fresh addresses. Read again (cat) and retry with those.\n- On success patch shows the changed region with fresh addresses, so you can keep editing without reading the file again.\n\nExample:\n    cat('src/calc.py', 1, 20)\n    patch('src/calc.py', [('2:kehi', '    return a + b'), patch.insert_after('12:miro', '    log(x)')])\n\ndoc('vis.addresses') and doc('vis.editing') have the details.";

#[derive(Clone)]
struct VisServer {
    shared: Arc<Shared>,
}

struct Shared {
    info: ServerConfig,
    snapshot: Mutex<Snapshot>,
    session: tokio::sync::Mutex<Session>,
}

fn text_result(text: String, failed: bool) -> CallToolResult {
    content_result(vec![ContentBlock::text(text)], failed)
}

fn content_result(content: Vec<ContentBlock>, failed: bool) -> CallToolResult {
    if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// A block's result: its text, then each image it showed as MCP `image` content (base64).
fn block_result(outcome: session::CallOutcome) -> CallToolResult {
    use base64::Engine;
    let mut content = vec![ContentBlock::text(outcome.text)];
    content.extend(outcome.images.iter().map(|image| {
        ContentBlock::image(
            base64::engine::general_purpose::STANDARD.encode(&image.data),
            image.meta.format.media_type(),
        )
    }));
    content_result(content, outcome.failed)
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

impl ServerHandler for VisServer {
    fn get_info(&self) -> ServerConfig {
        self.shared.info.clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        from_json(json!({"tools": [{
            "name": crate::protocol::TOOL_NAME,
            "description": TOOL_DESCRIPTION,
            "inputSchema": {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "Python source to run."}},
                "required": ["code"],
            },
        }]}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call = ToolCall {
            id: String::new(),
            name: request.name.to_string(),
            arguments: Value::Object(request.arguments.clone().unwrap_or_default()).to_string(),
        };
        if call.name != crate::protocol::TOOL_NAME {
            return Err(ErrorData::invalid_params(
                format!(
                    "there is no tool '{}': the only tool is python_execution (arguments: {{\"code\": \"<Python source>\"}})",
                    crate::protocol::clip(&call.name, 60)
                ),
                None,
            ));
        }
        let code = match code_of(&call) {
            Ok(code) => code,
            Err(correction) => return Ok(text_result(correction.to_string(), true).into()),
        };
        let started = Instant::now();
        let progress = context.meta.get_progress_token().map(|token| {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let mut n = 0u32;
                loop {
                    tokio::time::sleep(PROGRESS_EVERY).await;
                    n += 1;
                    let secs = started.elapsed().as_secs();
                    let param = ProgressNotificationParam::new(token.clone(), f64::from(n))
                        .with_message(format!("the block is running ({secs} s)"));
                    if peer.notify_progress(param).await.is_err() {
                        break;
                    }
                }
            })
        });
        let result = {
            let mut session = self.shared.session.lock().await;
            let result = session.run(code, context.ct.clone()).await;
            // The block may have changed the definitions; the catalog and pages change only
            // with the manifest (rendering it costs the tokenizer's time).
            let supervisor = session.runner.supervisor();
            let fresh = if supervisor.manifest_version() != session.seen_manifest {
                let version = supervisor.manifest_version();
                let fresh = Snapshot::of(supervisor, session.opts.catalog_budget).ok();
                session.seen_manifest = version;
                fresh
            } else {
                None
            };
            let mut snap = self
                .shared
                .snapshot
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match fresh {
                Some(fresh) => *snap = fresh,
                None => snap.defs = defs_text(session.runner.supervisor().defs()),
            }
            drop(snap);
            result
        };
        if let Some(task) = progress {
            task.abort();
        }
        match result {
            Ok(outcome) => Ok(block_result(outcome).into()),
            Err(e) => Ok(text_result(
                format!("[vis] the session could not record this call: {e}\n[vis] status: crashed"),
                true,
            )
            .into()),
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self
            .shared
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .resources();
        from_json(json!({"resources": resources}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.to_string();
        let read = self
            .shared
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .read(&uri);
        let Some((text, mime)) = read else {
            return Err(ErrorData::resource_not_found(
                format!("no resource {uri}; resources/list shows vis://session/defs, vis://catalog and vis://doc/NAME"),
                None,
            ));
        };
        let result: rmcp::model::ReadResourceResult = from_json(json!({
            "contents": [{"uri": uri, "mimeType": mime, "text": text}],
        }))?;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        from_json(json!({"prompts": [{
            "name": "addresses",
            "title": "LINE:HASH addresses",
            "description": "How cat/grep addresses and patch work in this Vis session",
        }]}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "addresses" {
            return Err(ErrorData::invalid_params(
                format!("no prompt '{}'; the prompt is `addresses`", request.name),
                None,
            ));
        }
        let result: rmcp::model::GetPromptResult = from_json(json!({
            "description": "How cat/grep addresses and patch work in this Vis session",
            "messages": [{"role": "user", "content": {"type": "text", "text": ADDRESSES_PROMPT}}],
        }))?;
        Ok(result.into())
    }
}
