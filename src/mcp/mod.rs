//! MCP both ways.
//!
//! - **Vis as an MCP server** (`vis mcp`, [`server`]): one tool, `python_execution`, running
//!   blocks in a persisted session exactly as `vis exec` does; the catalog as the server's
//!   instructions; `defs()`, the catalog and the documentation pages as resources; a prompt
//!   that explains `LINE:HASH` addresses. Its stdout carries nothing but the protocol
//!   ([`stdio`]).
//! - **MCP servers as namespaces** (the CodeMode idea, [`client`]): each server declared in
//!   `[mcp.servers.NAME]` (config) or a workspace's approved `.vis/mcp.toml` becomes the
//!   Python namespace `NAME`; its tools become functions with signatures from their input
//!   schemas ([`schema`]); a call is a host call (`mcp.call`) to the host's [`McpHub`], whose
//!   results come back as Python values ([`results`]).
//!
//! Data flow of a call from a block:
//!
//! ```text
//! block: github.search_issues("x", limit=5)
//!   └─ vis/_mcp.py binds the arguments ─► host_call("mcp.call", {server, tool, arguments})
//!        └─ host: McpHub::call ─► (start the server if needed) ─► tools/call (timeout)
//!             └─ CallToolResult ─► results::convert ─► {"kind": "value" | "content" | …}
//!   ◄─ the worker builds the Python value (or raises McpToolError / McpServerError)
//! ```
//!
//! Which servers run is decided by [`plan`]: the user's config is trusted; a workspace's
//! servers run only when the user approved that exact declaration for that workspace
//! (`vis mcp approve DIR`, stored per workspace and fingerprint, after [`review_lines`] showed
//! the command, directory and environment with secrets masked); everything skipped is
//! reported in `session["mcp"]` with the fix.
//!
//! Both directions treat the peer as untrusted: `framing` bounds every stdio message and
//! answers every bad line (`vis mcp`'s client, a stdio server), `schema` bounds the walk over
//! a server's schemas, and [`guard`](run_guard) ties each stdio server's process tree to the
//! life of the Vis process that started it.

mod client;
mod framing;
mod guard;
mod results;
mod review;
mod schema;
mod server;
mod stdio;

use std::path::{Path, PathBuf};

pub use client::{HubSettings, McpHub};
pub use guard::{run_guard, GuardError};
pub use review::review_lines;
pub use server::{serve, ServeOptions};
pub use stdio::take_protocol_streams;

use crate::config::{McpConfig, McpConfigError, ServerSpec};
use crate::store::Store;

/// A declared server that does not run, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub name: String,
    pub file: PathBuf,
    /// The command line or URL (no secrets), when the declaration could be read.
    pub launch: Option<String>,
    /// Its directory and environment (or headers), secrets masked ([`review_lines`]).
    pub review: Vec<String>,
    pub reason: String,
    pub fix: String,
}

/// Which servers run for a workspace, and which are skipped.
#[derive(Debug, Clone, Default)]
pub struct McpPlan {
    pub servers: Vec<ServerSpec>,
    pub skipped: Vec<Skipped>,
}

/// The command that approves a workspace's servers.
pub fn approve_command(workspace: &Path) -> String {
    let shown = workspace.to_string_lossy();
    if shown
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,@".contains(c))
    {
        format!("vis mcp approve {shown}")
    } else {
        format!("vis mcp approve '{}'", shown.replace('\'', "'\\''"))
    }
}

/// Decides which servers run: the config's (minus denied ones), then the workspace's that
/// the user approved as they are declared now (a workspace server of the same name as a
/// config server is shadowed). A broken `.vis/mcp.toml` is reported, not fatal: a cloned
/// repository must not stop vis from working.
pub fn plan(
    config: &McpConfig,
    deny: &crate::catalog::DenyList,
    workspace: Option<&Path>,
    store: &Store,
) -> Result<McpPlan, crate::store::StoreError> {
    let mut out = McpPlan::default();
    for spec in &config.servers {
        if !deny.denies(&spec.name) {
            out.servers.push(spec.clone());
        }
    }
    let Some(ws) = workspace else {
        return Ok(out);
    };
    let ws_key = ws.to_string_lossy().into_owned();
    let declared = match crate::config::load_workspace_servers(ws) {
        Ok(servers) => servers,
        Err(e) => {
            out.skipped.push(Skipped {
                name: "*".into(),
                file: ws.join(".vis").join("mcp.toml"),
                launch: None,
                review: Vec::new(),
                reason: e.to_string(),
                fix: "fix the file; its servers are skipped until then".into(),
            });
            return Ok(out);
        }
    };
    for spec in declared {
        if deny.denies(&spec.name) {
            continue;
        }
        if config.servers.iter().any(|c| c.name == spec.name) {
            out.skipped.push(Skipped {
                name: spec.name.clone(),
                launch: Some(spec.launch_line()),
                review: review_lines(&spec),
                file: spec.file.clone(),
                reason: "the user's config.toml declares a server of the same name, which is used instead".into(),
                fix: "rename one of them to use both".into(),
            });
            continue;
        }
        if store.mcp_server_approved(&ws_key, &spec.name, &spec.fingerprint())? {
            out.servers.push(spec);
            continue;
        }
        out.skipped.push(Skipped {
            name: spec.name.clone(),
            launch: Some(spec.launch_line()),
            review: review_lines(&spec),
            file: spec.file.clone(),
            reason: "it is declared by the workspace and not approved to run (an approval covers one workspace and one exact declaration; a changed command line needs approval again)".into(),
            fix: format!("review it, then run `{}`", approve_command(ws)),
        });
    }
    out.servers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The workspace's declared servers, approved as they are now; returns them for listing.
pub fn approve_workspace(workspace: &Path, store: &Store) -> Result<Vec<ServerSpec>, ApproveError> {
    let servers = crate::config::load_workspace_servers(workspace)?;
    let key = workspace.to_string_lossy().into_owned();
    for spec in &servers {
        store.approve_mcp_server(&key, &spec.name, &spec.fingerprint(), &spec.launch_line())?;
    }
    Ok(servers)
}

/// Why approving failed.
#[derive(Debug, thiserror::Error)]
pub enum ApproveError {
    #[error(transparent)]
    Invalid(#[from] McpConfigError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Why a session's MCP hub could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The config's deny list is invalid (a usage error: the user fixes config.toml).
    #[error("vis: [permissions] deny: {0}")]
    Deny(crate::catalog::CatalogError),
    /// The approvals could not be read from the database.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// A hub for `workspace`'s servers with the config's settings and deny list; `artifact_dir`
/// is the session's. Stdio servers run under guards started from this process's own binary
/// (the `vis` executable; see [`hub_for_binary`] for a host that is not).
pub fn hub_for(
    config: &crate::config::Config,
    workspace: &Path,
    artifact_dir: PathBuf,
    store: &Store,
) -> Result<McpHub, HubError> {
    // `/proc/self/exe` runs this very binary even if its file was replaced since.
    let program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    hub_for_binary(config, workspace, artifact_dir, store, program)
}

/// [`hub_for`] with the `vis` binary that runs the servers' guards (`vis mcp guard`) named
/// explicitly: for hosts that are not the `vis` executable themselves (tests, embedders).
pub fn hub_for_binary(
    config: &crate::config::Config,
    workspace: &Path,
    artifact_dir: PathBuf,
    store: &Store,
    vis_binary: PathBuf,
) -> Result<McpHub, HubError> {
    let deny =
        crate::catalog::DenyList::new(config.deny.iter().cloned()).map_err(HubError::Deny)?;
    let plan = plan(&config.mcp, &deny, Some(workspace), store)?;
    Ok(McpHub::new(
        plan,
        HubSettings {
            call_timeout: config.mcp.call_timeout(),
            startup_timeout: config.mcp.startup_timeout(),
            workspace: workspace.to_path_buf(),
            artifact_dir,
            deny,
            max_message_bytes: config.mcp.max_message_bytes(),
            program: vis_binary,
        },
    ))
}
