//! `vis chat`: a session with a model in the terminal.
//!
//! With `-m TEXT` (repeatable) the messages run as turns without prompting and the plain
//! transcript goes to standard output (for scripts; exit 1 when a provider error ended a
//! turn). Otherwise the interactive program runs. Both are in `ui`.

use std::path::{Path, PathBuf};

mod ui;

use clap::Args;

use crate::cli::settings::{
    chat_settings, current_dir, limits, provider_settings, resolve_workspace, LimitArgs,
    ProviderArgs,
};
use crate::cli::CliError;
use crate::config::Config;
use crate::gateway::{ChatSession, GatewayError};
use crate::session::{new_session_id, validate_session_id};
use crate::store::Store;

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Continue a session: its id, or nothing for the latest session of this workspace.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,
    /// Workspace directory (default: the session's, or the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Run this message as a turn without prompting (repeatable), print the transcript, exit.
    #[arg(short = 'm', long = "message", value_name = "TEXT")]
    pub messages: Vec<String>,
    /// Let `read_session` return the originals of folded ranges (config [folding]
    /// introspection).
    #[arg(long)]
    pub introspection: bool,
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Opens the session the flags name (a new one unless `--resume`); returns it and what the
/// person should be told first.
pub fn open_session(
    args: &ChatArgs,
    config: &Config,
    db: &Path,
) -> Result<(ChatSession, Vec<String>), CliError> {
    let limits = limits(&args.limits, config)?;
    let workspace = resolve_workspace(args.workspace.as_deref())?;
    let root = match &workspace {
        Some(w) => w.clone(),
        None => current_dir()?,
    };
    let root_string = root.to_string_lossy().into_owned();
    let store = Store::open(db)?;
    let gateway = |e: GatewayError| CliError::gateway("vis chat", e);
    match &args.resume {
        None => {
            let provider = provider_settings(&args.provider, config, None)?;
            let mut settings = chat_settings(provider, config, limits, Some(&root))?;
            settings.folding.introspection |= args.introspection;
            let id = new_session_id();
            let hub = mcp_hub(config, &root, db, &id, &*store)?;
            let mut session = ChatSession::create(store, db, &id, vec![root_string], settings)
                .map_err(gateway)?;
            session.set_spawn(super::settings::spawn_settings(config));
            let mut notes = vec![format!(
                "vis: new session {id} (resume it with vis chat --resume {id})"
            )];
            if let Some(hub) = hub {
                notes.extend(hub.notices());
                session.set_mcp(hub);
            }
            Ok((session, notes))
        }
        Some(id) => {
            let id = if id.is_empty() {
                store.latest_chat_session(&root_string)?.ok_or_else(|| {
                    CliError::usage(format!(
                        "vis chat: no chat session for the workspace {root_string} yet; start one with `vis chat`, or name one with --resume ID (`vis sessions list` shows them)"
                    ))
                })?
            } else {
                validate_session_id(id)?;
                id.clone()
            };
            let row = store.require_session(&id)?;
            if workspace.is_some() && row.workspace_roots != [root_string.clone()] {
                store.set_workspace_roots(&id, &[root_string])?;
            }
            let stored = store.session_model(&id)?;
            let provider = provider_settings(&args.provider, config, stored.as_ref())?;
            let mut settings = chat_settings(provider, config, limits, Some(&root))?;
            settings.folding.introspection |= args.introspection;
            let ws = match (&workspace, row.workspace_roots.first()) {
                (None, Some(stored)) => PathBuf::from(stored),
                _ => root,
            };
            let hub = mcp_hub(config, &ws, db, &id, &*store)?;
            let (mut session, mut notes) =
                ChatSession::open(store, db, &id, settings).map_err(gateway)?;
            session.set_spawn(super::settings::spawn_settings(config));
            notes.insert(0, format!("vis: resuming session {id}"));
            if let Some(hub) = hub {
                notes.extend(hub.notices());
                session.set_mcp(hub);
            }
            Ok((session, notes))
        }
    }
}

/// The session's MCP servers as namespaces (`None` when none are declared).
fn mcp_hub(
    config: &Config,
    workspace: &Path,
    db: &Path,
    id: &str,
    store: &Store,
) -> Result<Option<crate::mcp::McpHub>, CliError> {
    let hub = crate::mcp::hub_for(
        config,
        workspace,
        crate::config::artifact_dir(db, id),
        store,
    )?;
    Ok((!hub.is_empty()).then_some(hub))
}

pub fn run(args: ChatArgs, db: &Path) -> Result<i32, CliError> {
    // A reader that goes away (`vis chat -m … | head`) interrupts the turn; the worker stops
    // and the turn is recorded before the process ends (as SIGPIPE would end it).
    super::term::keep_running_when_stdout_closes();
    let events = super::threaded_event_loop("vis chat")?;
    if args.messages.is_empty() {
        return events.block_on(ui::run(args, db.to_path_buf()));
    }
    events.block_on(ui::messages(args, db.to_path_buf()))
}

/// `0.4 s`, `12 s`, `3 min 5 s`.
pub fn seconds(millis: u64) -> String {
    if millis < 10_000 {
        format!("{:.1} s", millis as f64 / 1000.0)
    } else if millis < 60_000 {
        format!("{} s", millis / 1000)
    } else {
        format!("{} min {} s", millis / 60_000, millis % 60_000 / 1000)
    }
}
