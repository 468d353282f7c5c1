//! `vis mcp`: Vis as an MCP server on stdio, and the approval of a workspace's MCP servers.
//!
//! - `vis mcp [--session ID] [--workspace DIR] [limits]` serves `python_execution` for a
//!   session (a new one unless `--session`; its id goes to stderr and the instructions);
//! - `vis mcp approve [DIR]` approves the servers DIR/.vis/mcp.toml declares, as they are
//!   declared now (a later change needs approval again);
//! - `vis mcp list [DIR]` shows the servers a session in DIR would run and what is skipped.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand};
use tokio_util::sync::CancellationToken;

use super::settings::{
    chat_settings, limits, load_config, session_roots, spawn_settings, sub_session_provider,
    worker_options, workspace_or_current, LimitArgs, ProviderArgs, SessionTarget,
};
use super::term::{errln, escape_controls, outln};
use super::CliError;
use crate::mcp::{serve, ServeOptions};
use crate::runtime::{BlockLimits, BlockRunner, SubSessions, Supervisor, Unavailable};
use crate::store::Store;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    pub action: Option<McpAction>,
    #[command(flatten)]
    pub target: SessionTarget,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// The model sub-sessions (`spawn()`) run with; `vis mcp` itself needs none.
    #[command(flatten)]
    pub provider: ProviderArgs,
}

#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Approve the MCP servers DIR/.vis/mcp.toml declares (default: the current directory),
    /// exactly as they are declared now; a changed command line needs approval again.
    Approve {
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// List the MCP servers a session in DIR would run, and what is skipped and why.
    List {
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// The guard of one stdio MCP server (started by vis itself; see `mcp::guard`).
    #[command(hide = true)]
    Guard {
        /// The descriptor of the guard's channel to vis.
        #[arg(long)]
        channel: i32,
        /// The server's command and arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

pub fn run(args: McpArgs, db: &Path) -> Result<i32, CliError> {
    match args.action {
        Some(McpAction::Approve { dir }) => approve(dir, db),
        Some(McpAction::List { dir }) => list(dir, db),
        Some(McpAction::Guard { channel, command }) => {
            crate::mcp::run_guard(channel, &command).map_err(|e| CliError::usage(e.to_string()))
        }
        None => run_server(args, db),
    }
}

fn approve(dir: Option<PathBuf>, db: &Path) -> Result<i32, CliError> {
    let ws = workspace_or_current(dir.as_deref())?;
    let store = Store::open(db)?;
    let servers = crate::mcp::approve_workspace(&ws, &*store).map_err(|e| match e {
        crate::mcp::ApproveError::Invalid(m) => CliError::usage(format!("vis mcp approve: {m}")),
        crate::mcp::ApproveError::Store(e) => e.into(),
    })?;
    if servers.is_empty() {
        outln!(
            "{} declares no MCP servers (nothing to approve); declare them as [mcp.servers.NAME] tables there",
            escape_controls(&ws.join(".vis").join("mcp.toml").to_string_lossy())
        );
        return Ok(0);
    }
    for spec in &servers {
        outln!(
            "approved `{}` for {}: {}",
            escape_controls(&spec.name),
            escape_controls(&ws.to_string_lossy()),
            escape_controls(&spec.launch_line())
        );
        print_review(&crate::mcp::review_lines(spec));
    }
    Ok(0)
}

fn list(dir: Option<PathBuf>, db: &Path) -> Result<i32, CliError> {
    let ws = workspace_or_current(dir.as_deref())?;
    let config = load_config()?;
    let store = Store::open(db)?;
    let deny = crate::catalog::DenyList::new(config.deny.iter().cloned())
        .map_err(|e| CliError::usage(format!("vis: [permissions] deny: {e}")))?;
    let plan = crate::mcp::plan(&config.mcp, &deny, Some(&ws), &*store)?;
    if plan.servers.is_empty() && plan.skipped.is_empty() {
        outln!("no MCP servers are declared (config.toml [mcp.servers.NAME] or .vis/mcp.toml)");
        return Ok(0);
    }
    for spec in &plan.servers {
        outln!(
            "{}  runs  ({}, {}): {}",
            escape_controls(&spec.name),
            spec.source.as_str(),
            spec.transport_kind(),
            escape_controls(&spec.launch_line())
        );
        print_review(&crate::mcp::review_lines(spec));
    }
    for s in &plan.skipped {
        outln!(
            "{}  skipped: {}; {}",
            escape_controls(&s.name),
            escape_controls(&s.reason),
            escape_controls(&s.fix)
        );
        if let Some(launch) = &s.launch {
            outln!("  would run: {}", launch);
        }
        print_review(&s.review);
    }
    Ok(0)
}

/// A server's directory and environment (or headers), indented under its line.
fn print_review(lines: &[String]) {
    for line in lines {
        outln!("  {}", line);
    }
}

fn run_server(args: McpArgs, db: &Path) -> Result<i32, CliError> {
    // First of all: from here on only the MCP transport writes to the real stdout.
    let streams = crate::mcp::take_protocol_streams().map_err(|e| CliError {
        code: 1,
        message: format!("vis mcp: cannot set up stdio: {e}"),
    })?;
    let config = load_config()?;
    let limits = limits(&args.limits, &config)?;
    let (workspace, session_id, created) = args.target.resolve()?;
    let store = Store::open(db)?;
    let roots = session_roots(&*store, &session_id, workspace.as_deref())?;
    let root = PathBuf::from(&roots[0]);
    let defs = store.load_defs(&session_id)?;
    let mut opts = worker_options(&config, Some(&root))?;
    opts.memory_limit_mb = limits.memory_limit_mb;
    opts.sandbox = limits.sandbox.clone();
    let artifact_dir = crate::config::artifact_dir(db, &session_id);
    opts.add_session(crate::config::store_files(db), &artifact_dir, &roots);
    let supervisor = Supervisor::new(opts, defs);
    let hub = crate::mcp::hub_for(&config, &root, artifact_dir.clone(), &*store)?;
    let (subs, sub_notes) = sub_sessions(
        &args.provider,
        &config,
        &limits,
        &root,
        &*store,
        db,
        &session_id,
    )?;
    let verb = if created { "new session" } else { "session" };
    errln!(
        "vis mcp: {verb} {session_id} (workspace {}; continue it with --session {session_id})",
        escape_controls(&roots[0])
    );
    for note in hub.notices().into_iter().chain(sub_notes) {
        errln!("{}", escape_controls(&note));
    }
    let mut runner = BlockRunner::new(
        &session_id,
        store,
        supervisor,
        artifact_dir,
        roots.clone(),
        BlockLimits {
            output_limit: limits.output_limit,
            timeout: limits.timeout,
            artifact_quota: limits.sandbox.artifact_quota,
            images: limits.images,
        },
    );
    runner.set_checkpoint_settings(super::settings::checkpoint_settings(&config));
    // The client is an agent with its own editing tools: its changes are not the blocks'.
    runner.client_edits_between_blocks();
    runner.set_subs(subs);
    if !hub.is_empty() {
        runner.set_tools(Arc::new(hub));
    }
    let events = super::threaded_event_loop("vis mcp")?;
    let serve_opts = ServeOptions {
        session_id,
        roots,
        output_limit: limits.output_limit,
        catalog_budget: config
            .catalog_budget
            .unwrap_or(crate::catalog::DEFAULT_BUDGET_TOKENS),
        max_message_bytes: config.mcp.max_message_bytes(),
    };
    let served = events.block_on(async move {
        let (reader, writer) = streams.into_async()?;
        let stop = CancellationToken::new();
        let on_signal = stop.clone();
        let signals = tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async {
                    match term.as_mut() {
                        Some(t) => { t.recv().await; }
                        None => std::future::pending::<()>().await,
                    }
                } => {}
            }
            on_signal.cancel();
        });
        let result = serve(runner, serve_opts, reader, writer, stop).await;
        signals.abort();
        result.map_err(|e| std::io::Error::other(e.to_string()))
    });
    match served {
        Ok(()) => Ok(0),
        Err(e) => Err(CliError {
            code: 1,
            message: format!("vis mcp: {}", escape_controls(&e.to_string())),
        }),
    }
}

/// `spawn()` in `vis mcp`: children run with the provider and model the person configured
/// for them (see [`sub_session_provider`]); without one, every sub-session call is refused
/// with the setting to add. Also the lines about children a stopped `vis mcp` left running.
fn sub_sessions(
    provider: &ProviderArgs,
    config: &crate::config::Config,
    limits: &super::settings::Limits,
    root: &Path,
    store: &Store,
    db: &Path,
    session_id: &str,
) -> Result<(Arc<dyn SubSessions>, Vec<String>), CliError> {
    let Some(provider) = sub_session_provider(provider, config)? else {
        let why = format!(
            "sub-sessions need a model, and this vis mcp has none configured; name one in {} ([provider] name = \"openai\" or \"anthropic\" and model = \"…\", with its key in OPENAI_API_KEY or ANTHROPIC_API_KEY; or [spawn] model = \"…\"), or start vis mcp with --provider and --model; or do the work in this block",
            config.dir.join("config.toml").display()
        );
        return Ok((Arc::new(Unavailable { why }), Vec::new()));
    };
    let settings = chat_settings(provider, config, limits.clone(), Some(root))?;
    Ok(crate::gateway::sub_sessions_for(
        store,
        db,
        session_id,
        settings,
        spawn_settings(config),
    )?)
}
