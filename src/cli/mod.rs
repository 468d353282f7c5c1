//! The `vis` command line. Each subcommand lives in its own file; errors carry the exit code
//! (2 for usage and configuration problems, 3 when the session database cannot be used) and
//! one line naming the cause and the fix.
//!
//! The command line is the one place that prints (see `docs/architecture.md`), and it prints
//! only through [`term`]: everything is escaped for the terminal, clap's own messages too
//! ([`main`]), and a reader that goes away ends the process quietly.

mod catalog;
mod chat;
mod context;
mod diff;
mod exec;
mod mcp;
mod replay;
mod rewind;
mod sandbox;
mod serve;
mod sessions;
mod settings;
mod store;
mod term;
mod trust;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use catalog::CatalogArgs;
pub use chat::ChatArgs;
pub use context::ContextArgs;
pub use exec::ExecArgs;
pub use mcp::McpArgs;

#[derive(Debug, Parser)]
#[command(
    name = "vis",
    version,
    about = "A coding gateway whose model has one tool: python_execution",
    // Plain text: clap's messages echo arguments and environment values, and go through the
    // terminal escaper like everything else (`main`), which would show its colors as text.
    styles = clap::builder::Styles::plain()
)]
pub struct Cli {
    /// The session database: a SQLite file, or a PostgreSQL URL postgres://USER@HOST/DATABASE
    /// (default: $VIS_HOME/vis.db).
    #[arg(
        long,
        global = true,
        value_name = "PATH|URL",
        env = "VIS_DB",
        hide_env_values = true
    )]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one block in a session without a model and print what the model would get back.
    Exec(ExecArgs),
    /// Inspect stored sessions.
    Sessions(SessionsArgs),
    /// Print the prompt catalog (functions, pages, skills) of a workspace and its hash.
    Catalog(CatalogArgs),
    /// Chat with a model in this workspace (or run turns with -m and print the transcript).
    Chat(ChatArgs),
    /// Print the exact next model request of a session.
    Context(ContextArgs),
    /// What a session (or one turn t3, or iteration t3/i2) changed in its workspace, as a
    /// unified diff.
    Diff(diff::DiffArgs),
    /// Restore every file a session changed to its state before a turn (t3), and cut the
    /// conversation there unless --code-only.
    Rewind(rewind::RewindArgs),
    /// The worker's sandbox on this machine.
    Sandbox(sandbox::SandboxArgs),
    /// Trust a workspace, so its own code (.vis/extensions, .vis/mcp.toml, a .venv) may load
    /// and its instructions (AGENTS.md, skills) reach the model; prints what that enables.
    Trust(trust::TrustArgs),
    /// Serve the gateway over HTTP for many sessions (API, SSE, OpenAPI, metrics, web view).
    Serve(serve::ServeArgs),
    /// Serve a session as an MCP server on stdio (one tool: python_execution); `vis mcp
    /// approve [DIR]` approves a workspace's .vis/mcp.toml servers.
    Mcp(McpArgs),
    /// Re-run a session's recorded blocks against this build in a scratch copy of its
    /// workspace and report what differs (non-zero exit status if anything does).
    Replay(replay::ReplayArgs),
    /// Copy every session between databases: `vis store copy vis.db postgres://…` moves a
    /// SQLite database's history to PostgreSQL (or back).
    Store(store::StoreArgs),
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub action: Option<SessionsAction>,
}

#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// List sessions, most recently used first.
    List,
    /// Show a session's turns, iterations and definitions.
    Show { id: String },
    /// Print a session as JSON.
    Export { id: String },
    /// Make a new session with the conversation, folds and definitions of ID through turn
    /// KEY (`t5`: turns 1 to 5); both go on independently. With --workspace DIR, the fork
    /// works in a copy of the workspace as it was at the end of that turn.
    Fork {
        id: String,
        /// The last turn the fork keeps, such as t5.
        #[arg(long, value_name = "KEY")]
        at: String,
        /// Copy the workspace, as it was at the end of that turn, into DIR (new or empty)
        /// for the fork; without it the fork shares the original's workspace.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
}

/// A failure of a command: its exit code and the message for stderr.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: 2,
            message: message.into(),
        }
    }
}

/// A single-threaded event loop for one command (`vis exec`, `vis catalog`, `vis context`).
fn event_loop(command: &str) -> Result<tokio::runtime::Runtime, CliError> {
    built(
        command,
        tokio::runtime::Builder::new_current_thread().enable_all(),
    )
}

/// An event loop on two threads, for commands that stream a model's answer while a block
/// runs (`vis chat`, `vis mcp`).
fn threaded_event_loop(command: &str) -> Result<tokio::runtime::Runtime, CliError> {
    built(
        command,
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all(),
    )
}

fn built(
    command: &str,
    builder: &mut tokio::runtime::Builder,
) -> Result<tokio::runtime::Runtime, CliError> {
    builder.build().map_err(|e| CliError {
        code: 1,
        message: format!("{command}: cannot start the event loop: {e}"),
    })
}

/// Exit code when the session database cannot be used (damaged, foreign, from a newer vis,
/// not writable): not a usage error, and distinct from a block that failed (1).
pub const STORE_FAILURE: i32 = 3;

impl From<crate::store::StoreError> for CliError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            // A session id the user typed that is not there: the command line is wrong.
            crate::store::StoreError::UnknownSession(_) => CliError::usage(e.to_string()),
            _ => CliError {
                code: STORE_FAILURE,
                message: e.to_string(),
            },
        }
    }
}

impl From<crate::session::InvalidSessionId> for CliError {
    fn from(e: crate::session::InvalidSessionId) -> Self {
        CliError::usage(e.to_string())
    }
}

impl From<crate::mcp::HubError> for CliError {
    fn from(e: crate::mcp::HubError) -> Self {
        match e {
            crate::mcp::HubError::Store(e) => e.into(),
            e @ crate::mcp::HubError::Deny(_) => CliError::usage(e.to_string()),
        }
    }
}

impl CliError {
    /// A gateway error of `command` (`vis chat`, …): the database's own failures and a damaged
    /// stored conversation exit as store failures; the rest (a gone workspace, a bad
    /// setting) are the command line's to fix.
    pub fn gateway(command: &str, e: crate::gateway::GatewayError) -> Self {
        use crate::gateway::GatewayError;
        let code = match &e {
            GatewayError::Store(crate::store::StoreError::UnknownSession(_)) => 2,
            GatewayError::Store(_) | GatewayError::CorruptHistory { .. } => STORE_FAILURE,
            _ => 2,
        };
        CliError {
            code,
            message: format!("{command}: {e}"),
        }
    }
}

/// The whole program: parses the command line, runs it, reports a failure as one escaped line
/// on standard error; returns the exit code.
pub fn main() -> i32 {
    std::panic::set_hook(Box::new(report_panic));
    // Before the command line is parsed: `vis exec`'s worker starts while this process parses
    // it and reads the session.
    let early = exec::launch_early();
    let code = match Cli::try_parse() {
        Ok(cli) => match run(cli, early) {
            Ok(code) => code,
            Err(e) => {
                term::errln!("{e}");
                e.code
            }
        },
        // Usage errors, and --help and --version: clap's text, which may quote a crafted
        // argument or environment value, escaped like everything else.
        Err(e) => {
            let text = e.render().ansi().to_string();
            if e.use_stderr() {
                term::eprint_escaped(&text);
            } else {
                term::print_escaped(&text);
            }
            e.exit_code()
        }
    };
    // Our output ends when this process does, not when a child closing its slow descriptors
    // for it (`vis exec`) does.
    crate::release::wait_for_holders();
    term::exit_code(code)
}

/// What the default panic hook prints, escaped: a panic's message may quote the text it was
/// working on (a failed string slice quotes the string), and no path is known that panics on
/// untrusted text, so this is defence in depth.
fn report_panic(info: &std::panic::PanicHookInfo<'_>) {
    let thread = std::thread::current();
    let mut text = format!("thread '{}' {info}\n", thread.name().unwrap_or("<unnamed>"));
    let backtrace = std::backtrace::Backtrace::capture();
    if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
        text.push_str(&format!("{backtrace}\n"));
    }
    term::eprint_escaped(&text);
}

/// Runs a parsed command line (with `vis exec`'s worker, if it was started before the command
/// line was parsed); returns the process exit code.
pub fn run(cli: Cli, early: Option<exec::EarlyWorker>) -> Result<i32, CliError> {
    // Keys live in this process: no block (nor anything else of this user) may read its
    // memory or environment through /proc or ptrace.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    // The worker binary is pinned now, before anything could replace it (see
    // `settings::worker_program`).
    let _ = settings::worker_program();
    // Made absolute now, before anything changes directory (the worker runs in the
    // workspace; artifacts go beside the database).
    let db = crate::store::resolve_location(&crate::config::db_path(cli.db.as_deref()))
        .map_err(|e| CliError::usage(e.to_string()))?;
    match cli.command {
        Command::Exec(args) => exec::run(args, &db, early),
        Command::Sessions(args) => sessions::run(args.action.unwrap_or(SessionsAction::List), &db),
        Command::Catalog(args) => catalog::run(args, &db),
        Command::Chat(args) => chat::run(args, &db),
        Command::Context(args) => context::run(args, &db),
        Command::Diff(args) => diff::run(args, &db),
        Command::Rewind(args) => rewind::run(args, &db),
        Command::Serve(args) => serve::run(args, &db),
        Command::Trust(args) => trust::run(args),
        Command::Sandbox(args) => sandbox::run(args),
        Command::Mcp(args) => mcp::run(args, &db),
        Command::Replay(args) => replay::run(args, &db),
        Command::Store(args) => store::run(args),
    }
}

/// `2026-12-02 10:22:36Z` from unix milliseconds (UTC; no time-zone database needed).
pub fn format_time(millis: i64) -> String {
    match jiff::Timestamp::from_millisecond(millis) {
        Ok(t) => t.strftime("%Y-%m-%d %H:%M:%SZ").to_string(),
        // Outside jiff's range (years -9999..=9999): only a corrupt row gets here.
        Err(_) => format!("{millis} ms since 1970"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_in_utc() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00Z");
        assert_eq!(format_time(1_795_000_000_000), "2026-11-18 11:06:40Z");
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00:00Z");
    }
}
