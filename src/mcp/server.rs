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

use std::path::PathBuf;
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

use super::McpHub;
use crate::catalog::{render_catalog, EntryKind};
use crate::gateway::code_of;
use crate::protocol::{Block, PersistedDef, Status, ToolCall, TurnKind};
use crate::runtime::{RuntimeError, Supervisor};
use crate::store::{now_millis, IterationRecord, Store, StoreError};

/// How often a running block reports progress (when the client asked for progress).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// The tool's description: short and byte-stable.
pub const TOOL_DESCRIPTION: &str = "Run a Python block in a persistent Vis session and get back what it printed (stdout and stderr, capped) and the repr of a final expression. Variables live on between calls; top-level def/class statements survive restarts (defs()). Pre-imported: cat and grep (lines carry LINE:HASH addresses), patch (edits by address), sh, defs, session, Path, plus extension and MCP-server namespaces: apropos(pattern) finds every function and doc(name) explains it.";

/// What `vis mcp` needs to serve a session.
pub struct ServeOptions {
    pub session_id: String,
    pub roots: Vec<String>,
    pub artifact_dir: PathBuf,
    pub timeout: Duration,
    pub output_limit: usize,
    /// The most bytes the session's artifacts may take.
    pub artifact_quota: u64,
    pub catalog_budget: usize,
    pub hub: Option<McpHub>,
}

/// Errors that end `vis mcp` (everything a block does is a tool result instead).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the worker could not start: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("the catalog: {0}")]
    Catalog(#[from] crate::catalog::CatalogError),
    #[error("the MCP connection: {0}")]
    Transport(String),
}

/// Runs the server on `transport` until the client disconnects (or `stop` is cancelled).
pub async fn serve<T, E, A>(
    store: Box<Store>,
    mut supervisor: Supervisor,
    opts: ServeOptions,
    transport: T,
    stop: CancellationToken,
) -> Result<(), ServeError>
where
    T: rmcp::transport::IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    // The worker and the MCP servers start together; the catalog needs both.
    let start = async {
        if let Some(hub) = &opts.hub {
            hub.connect_all().await;
        }
    };
    let (started, ()) = tokio::join!(supervisor.start(), start);
    started?;
    if let Some(hub) = &opts.hub {
        let (namespaces, functions) = hub.functions();
        supervisor.set_mcp_tools(namespaces, functions).await?;
        hub.take_changed();
    }
    let snapshot = Snapshot::of(&supervisor, opts.catalog_budget)?;
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
    let hub = opts.hub.clone();
    let handler = VisServer {
        shared: Arc::new(Shared {
            info,
            snapshot: Mutex::new(snapshot),
            session: tokio::sync::Mutex::new(Session {
                store,
                seen_manifest: supervisor.manifest_version(),
                supervisor,
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
    session.supervisor.shutdown().await;
    if let Some(hub) = hub {
        hub.shutdown().await;
    }
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

/// What resources read without waiting for a running block.
struct Snapshot {
    catalog: String,
    defs: String,
    /// (name, kind, summary, markdown) of every page and skill.
    pages: Vec<(String, EntryKind, String, String)>,
}

impl Snapshot {
    fn of(supervisor: &Supervisor, budget: usize) -> Result<Snapshot, ServeError> {
        let manifest = supervisor.manifest()?;
        let rendered = render_catalog(&manifest, budget)?;
        // Counted so the text says `mode: full, N o200k tokens` as `vis catalog` prints it.
        let _ = rendered.tokens();
        let pages = supervisor
            .manifest_entries()
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Page | EntryKind::Skill))
            .map(|e| {
                let summary = manifest
                    .entry(&e.name)
                    .map(|m| m.summary.clone())
                    .unwrap_or_default();
                (e.name.clone(), e.kind, summary, e.doc.clone())
            })
            .collect();
        Ok(Snapshot {
            catalog: rendered.text(),
            defs: defs_text(supervisor.defs()),
            pages,
        })
    }
}

/// `defs()` as the prelude prints it, from the host's copy of the definitions.
pub fn defs_text(defs: &[PersistedDef]) -> String {
    let funcs: Vec<&PersistedDef> = defs
        .iter()
        .filter(|d| d.kind == "function" || d.kind == "class")
        .collect();
    let names_of = |kind: &str| -> Vec<&str> {
        defs.iter()
            .filter(|d| d.kind == kind)
            .map(|d| d.name.as_str())
            .collect()
    };
    let (imports, constants) = (names_of("import"), names_of("constant"));
    if funcs.is_empty() && imports.is_empty() && constants.is_empty() {
        return "no definitions yet: top-level def/class statements in blocks are kept here\n"
            .into();
    }
    let noun = if funcs.len() == 1 {
        "definition"
    } else {
        "definitions"
    };
    let mut out = format!("{} {noun} (kept across restarts):\n", funcs.len());
    for d in funcs {
        out.push_str("  ");
        out.push_str(&d.signature);
        if !d.doc.is_empty() {
            out.push_str("  — ");
            out.push_str(&d.doc);
        }
        out.push('\n');
    }
    if !imports.is_empty() {
        out.push_str(&format!("imports: {}\n", imports.join(", ")));
    }
    if !constants.is_empty() {
        out.push_str(&format!("constants: {}\n", constants.join(", ")));
    }
    out
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

struct Session {
    store: Box<Store>,
    supervisor: Supervisor,
    opts: ServeOptions,
    /// This connection's turn, begun at its first call.
    turn: Option<i64>,
    seen_manifest: u64,
}

/// How one call ended, as the client gets it.
struct CallOutcome {
    text: String,
    failed: bool,
}

impl Session {
    fn close(&mut self) -> Result<(), StoreError> {
        if let Some(turn) = self.turn.take() {
            self.store.finish_turn(&self.opts.session_id, turn)?;
        }
        Ok(())
    }

    /// Picks up MCP tool-list changes before a block.
    async fn sync_mcp(&mut self) -> Result<(), RuntimeError> {
        let Some(hub) = self.opts.hub.clone() else {
            return Ok(());
        };
        if hub.refresh().await {
            let (namespaces, functions) = hub.functions();
            self.supervisor.set_mcp_tools(namespaces, functions).await?;
        }
        Ok(())
    }

    async fn run(
        &mut self,
        code: String,
        stop: CancellationToken,
    ) -> Result<CallOutcome, ServeError> {
        if let Err(e) = crate::runtime::validate_code(&code) {
            return Ok(CallOutcome {
                text: format!("[vis] {e}\n[vis] status: rejected"),
                failed: true,
            });
        }
        let id = self.opts.session_id.clone();
        // A failure here leaves the previous tools in place; the block still runs and is told.
        let mcp_problem = self.sync_mcp().await.err().map(|e| {
            format!(
                "[vis] the MCP servers' tools could not be updated ({e}); the previous ones stay\n"
            )
        });
        let turn = match self.turn {
            Some(t) => t,
            None => {
                let t = self.store.begin_turn(&id, TurnKind::Mcp, None)?;
                self.turn = Some(t);
                t
            }
        };
        let iteration = self.store.next_iteration(&id, turn)?;
        let counts = self.store.counts(&id)?;
        let mut session = crate::session::session_dict(
            &id,
            turn,
            iteration,
            counts,
            crate::session::utilization_without_requests(),
        );
        if let Some(hub) = &self.opts.hub {
            session["mcp"] = hub.status_json();
        }
        let request = Block {
            code: code.clone(),
            filename: format!("<t{turn}/i{iteration}>"),
            session,
            output_limit: self.opts.output_limit,
            artifact_path: self
                .opts
                .artifact_dir
                .join(format!("t{turn}-i{iteration}.txt")),
            artifact_dir: self.opts.artifact_dir.clone(),
            workspace_roots: self.opts.roots.iter().map(PathBuf::from).collect(),
            timeout: self.opts.timeout,
            artifact_quota: self.opts.artifact_quota,
        };
        let started_at = now_millis();
        // The code is stored before the worker sees it.
        self.store
            .begin_iteration(&id, turn, iteration, &code, started_at)?;
        let hub = self.opts.hub.clone();
        let (calls_tx, mut calls) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        let outcome = {
            let run = self.supervisor.exec(request, calls_tx, stop);
            tokio::pin!(run);
            loop {
                tokio::select! {
                    outcome = &mut run => break outcome,
                    Some(call) = calls.recv() => match super::spawn_host_call(hub.as_ref(), call) {
                        Ok(task) => tasks.push(task),
                        Err(call) => {
                            let answer = answer_other(&call.method);
                            call.reply(answer);
                        }
                    },
                }
            }
        };
        while let Ok(call) = calls.try_recv() {
            if let Err(call) = super::spawn_host_call(hub.as_ref(), call) {
                let answer = answer_other(&call.method);
                call.reply(answer);
            }
        }
        // Calls still in flight belong to a block that ended: cancel them at their servers.
        for task in tasks {
            task.abort();
        }
        let outcome = match outcome {
            Ok(o) => o,
            Err(RuntimeError::InvalidBlock(m)) => {
                return Ok(CallOutcome {
                    text: format!("[vis] {m}\n[vis] status: rejected"),
                    failed: true,
                })
            }
            Err(e) => {
                let text = format!("[vis] the block could not run: {e}");
                self.store.finish_iteration(&IterationRecord {
                    session_id: &id,
                    turn,
                    iteration,
                    code: &code,
                    output: &text,
                    status: Status::Crashed.into(),
                    started_at,
                    duration_ms: 0,
                    exec_us: 0,
                    artifact: None,
                    worker_exit: None,
                    defs_set: &[],
                    defs_deleted: &[],
                })?;
                return Ok(CallOutcome {
                    text: format!("{text}\n[vis] status: crashed"),
                    failed: true,
                });
            }
        };
        let worker_exit = outcome.worker_lost.map(|e| e.to_string());
        self.store.finish_iteration(&IterationRecord {
            session_id: &id,
            turn,
            iteration,
            code: &code,
            output: &outcome.output,
            status: outcome.status.into(),
            started_at,
            duration_ms: outcome.wall.as_millis() as i64,
            exec_us: outcome.exec_micros as i64,
            artifact: outcome
                .artifact
                .as_deref()
                .and_then(std::path::Path::to_str),
            worker_exit: worker_exit.as_deref(),
            defs_set: &outcome.defs_set,
            defs_deleted: &outcome.defs_deleted,
        })?;
        if let Some(exit) = &worker_exit {
            self.store
                .record_worker_event(&id, outcome.status.as_str(), exit)?;
        }
        if let Some(hub) = &self.opts.hub {
            for (server, fingerprint, tools) in hub.take_unsaved_tool_lists() {
                self.store.cache_mcp_tools(&server, &fingerprint, &tools)?;
            }
        }
        let mut text = mcp_problem.unwrap_or_default();
        if outcome.output.is_empty() {
            text.push_str("(no output)\n");
        } else {
            text.push_str(&outcome.output);
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[vis] status: {} (t{turn}/i{iteration}, {})",
            outcome.status.as_str(),
            millis(outcome.wall)
        ));
        Ok(CallOutcome {
            text,
            failed: outcome.status != Status::Ok,
        })
    }
}

fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

/// Host calls other than MCP's: folding needs the conversation, which the MCP client keeps.
fn answer_other(method: &str) -> crate::runtime::CallAnswer {
    match method {
        "fold_session" | "read_session" => Err(crate::runtime::CallError(format!(
            "{method}() is not available through `vis mcp`: the MCP client keeps the conversation, so Vis cannot fold it"
        ))),
        _ => Err(crate::runtime::CallError(format!(
            "'{method}' is not available in `vis mcp`; see doc('vis') for what blocks can call"
        ))),
    }
}

fn text_result(text: String, failed: bool) -> CallToolResult {
    if failed {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

impl VisServer {
    fn resources(&self) -> Vec<Value> {
        let snap = self
            .shared
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = vec![
            json!({"uri": "vis://session/defs", "name": "defs", "title": "defs(): the session's persisted helpers", "mimeType": "text/plain"}),
            json!({"uri": "vis://catalog", "name": "catalog", "title": "The function catalog (as vis catalog renders it)", "mimeType": "text/plain"}),
        ];
        for (name, kind, summary, _) in &snap.pages {
            out.push(json!({
                "uri": format!("vis://doc/{name}"),
                "name": name,
                "description": format!("{} {}", if *kind == EntryKind::Skill { "skill:" } else { "page:" }, summary),
                "mimeType": "text/markdown",
            }));
        }
        out
    }

    fn read(&self, uri: &str) -> Option<(String, &'static str)> {
        let snap = self
            .shared
            .snapshot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match uri {
            "vis://session/defs" => Some((snap.defs.clone(), "text/plain")),
            "vis://catalog" => Some((snap.catalog.clone(), "text/plain")),
            _ => {
                let name = uri.strip_prefix("vis://doc/")?;
                snap.pages
                    .iter()
                    .find(|(n, ..)| n == name)
                    .map(|(_, _, _, md)| (md.clone(), "text/markdown"))
            }
        }
    }
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
            "name": crate::gateway::TOOL_NAME,
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
        if call.name != crate::gateway::TOOL_NAME {
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
            let fresh = if session.supervisor.manifest_version() != session.seen_manifest {
                session.seen_manifest = session.supervisor.manifest_version();
                Snapshot::of(&session.supervisor, session.opts.catalog_budget).ok()
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
                None => snap.defs = defs_text(session.supervisor.defs()),
            }
            drop(snap);
            result
        };
        if let Some(task) = progress {
            task.abort();
        }
        match result {
            Ok(outcome) => Ok(text_result(outcome.text, outcome.failed).into()),
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
        from_json(json!({"resources": self.resources()}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.to_string();
        let Some((text, mime)) = self.read(&uri) else {
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
