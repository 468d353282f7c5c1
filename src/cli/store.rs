//! `vis store copy FROM TO`: moves every session of one database to another, in either
//! direction between SQLite and PostgreSQL (or between two of one kind).
//!
//! Each session is copied whole in one transaction of the target: its row and every record of
//! it, with every column (timestamps, owners, folds, request health, the log of definition
//! changes). The shared records (catalog snapshots, MCP approvals and tool lists) are merged:
//! a row the target has is kept. A session the target already has is never overwritten: with
//! the same counts it was copied before and is skipped (running the command again is safe);
//! otherwise it is reported as a conflict and the command ends with status 1. The files Vis
//! keeps beside a database for a session (checkpoints, artifacts) are copied to the target's
//! place (`config::store_dir`).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::term::outln;
use super::CliError;
use crate::store::{shown_location, Store, TableRows};

#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub action: StoreAction,
}

#[derive(Debug, Subcommand)]
pub enum StoreAction {
    /// Copy every session of database FROM into database TO (each a SQLite file or a
    /// postgres:// URL); sessions TO already has are left as they are.
    Copy {
        #[arg(value_name = "FROM")]
        from: PathBuf,
        #[arg(value_name = "TO")]
        to: PathBuf,
    },
}

#[derive(Default)]
struct Copied {
    sessions: usize,
    turns: usize,
    iterations: usize,
    history: usize,
    requests: usize,
    skipped: usize,
    conflicts: Vec<String>,
}

fn rows_of(tables: &[TableRows], table: &str) -> usize {
    tables
        .iter()
        .find(|t| t.table == table)
        .map(|t| t.rows.len())
        .unwrap_or(0)
}

pub fn run(args: StoreArgs) -> Result<i32, CliError> {
    let StoreAction::Copy { from, to } = args.action;
    let from = crate::store::resolve_location(&from).map_err(|e| CliError::usage(e.to_string()))?;
    let to = crate::store::resolve_location(&to).map_err(|e| CliError::usage(e.to_string()))?;
    if !crate::store::location_exists(&from) {
        return Err(CliError::usage(format!(
            "nothing to copy: the database {} does not exist",
            shown_location(&from)
        )));
    }
    if from == to {
        return Err(CliError::usage(format!(
            "FROM and TO are the same database ({}); give another TO",
            shown_location(&to)
        )));
    }
    let source = Store::open(&from)?;
    let mut target = Store::open(&to)?;
    let shared = source.export_rows(None)?;
    target.import_rows(&shared)?;
    let mut copied = Copied::default();
    let mut sessions = source.list_sessions()?;
    sessions.reverse(); // oldest first: the target lists them in the same order
    for summary in sessions {
        let id = summary.id;
        if let Some(turn) = source.turn_in_progress(&id)? {
            copied.conflicts.push(format!(
                "session {id} is running turn {turn} now; not copied — run the command again when it is idle"
            ));
            continue;
        }
        if target.session(&id)?.is_some() {
            let (a, b) = (source.counts(&id)?, target.counts(&id)?);
            let same = (a.turns, a.iterations) == (b.turns, b.iterations)
                && source.history(&id)?.len() == target.history(&id)?.len();
            if same {
                copied.skipped += 1;
            } else {
                copied.conflicts.push(format!(
                    "session {id} is in {} already, with other records ({} turns there, {} here); not copied — delete it there or copy into another database",
                    shown_location(&to),
                    b.turns,
                    a.turns
                ));
            }
            continue;
        }
        let rows = source.export_rows(Some(&id))?;
        target.import_rows(&rows)?;
        copy_session_files(&from, &to, &id)?;
        copied.sessions += 1;
        copied.turns += rows_of(&rows, "turns");
        copied.iterations += rows_of(&rows, "iterations");
        copied.history += rows_of(&rows, "history");
        copied.requests += rows_of(&rows, "requests");
    }
    outln!(
        "copied {} session(s) from {} to {}: {} turns, {} iterations, {} conversation items, {} model requests; {} catalog snapshot(s), {} MCP approval(s)",
        copied.sessions,
        shown_location(&from),
        shown_location(&to),
        copied.turns,
        copied.iterations,
        copied.history,
        copied.requests,
        rows_of(&shared, "catalog_snapshots"),
        rows_of(&shared, "mcp_approvals"),
    );
    if copied.skipped > 0 {
        outln!(
            "{} session(s) were there already with the same records; left as they are",
            copied.skipped
        );
    }
    for conflict in &copied.conflicts {
        outln!("{conflict}");
    }
    Ok(if copied.conflicts.is_empty() { 0 } else { 1 })
}

/// Copies the session's checkpoints and artifacts to the target database's place, when the
/// source has them and the target does not.
fn copy_session_files(from: &Path, to: &Path, id: &str) -> Result<(), CliError> {
    let (from_dir, to_dir) = (crate::config::store_dir(from), crate::config::store_dir(to));
    if from_dir == to_dir {
        return Ok(());
    }
    for kind in ["checkpoints", "artifacts"] {
        let source = from_dir.join(kind).join(id);
        let target = to_dir.join(kind).join(id);
        if source.is_dir() && !target.exists() {
            copy_dir(&source, &target).map_err(|e| CliError {
                code: super::STORE_FAILURE,
                message: format!(
                    "session {id} was copied, but not its {kind} ({} to {}): {e}",
                    source.display(),
                    target.display()
                ),
            })?;
        }
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
