//! `vis diff ID [t3 | t3/i2]`: what a session, one turn or one iteration changed in its
//! workspace, as a unified diff (file contents are untrusted: escaped for the terminal).

use std::path::Path;

use clap::Args;

use super::term::out;
use super::CliError;
use crate::checkpoints::{parse_span, render_diff, CheckpointError, DiffOptions, Span};
use crate::session::validate_session_id;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The session.
    pub id: String,
    /// A turn (t3) or an iteration (t3/i2); the whole session when absent.
    pub key: Option<String>,
}

pub fn run(args: DiffArgs, db: &Path) -> Result<i32, CliError> {
    validate_session_id(&args.id)?;
    let span = match &args.key {
        Some(key) => parse_span(key)?,
        None => Span::Session,
    };
    let store = open_existing(db, &args.id)?;
    store.require_session(&args.id)?;
    let turns = store.counts(&args.id)?.turns;
    if let Span::Turn(turn) | Span::Iteration(turn, _) = span {
        if turn > turns {
            return Err(CheckpointError::NoSuchTurn {
                session: args.id,
                turn,
                turns,
            }
            .into());
        }
    }
    let diff = render_diff(db, &args.id, span, DiffOptions { context: 3 })?;
    out!("{diff}");
    Ok(0)
}

/// The store at `db`, which must exist (these commands never create one).
pub(super) fn open_existing(db: &Path, id: &str) -> Result<Box<Store>, CliError> {
    require_database(db, id)?;
    Ok(Store::open(db)?)
}

/// A usage error naming session `id` when the database at `db` does not exist: a command
/// that reads a session never creates one.
pub(super) fn require_database(db: &Path, id: &str) -> Result<(), CliError> {
    if !crate::store::location_exists(db) {
        return Err(CliError::usage(format!(
            "no session '{id}': the database {} does not exist yet",
            crate::store::shown_location(db)
        )));
    }
    Ok(())
}

impl From<CheckpointError> for CliError {
    fn from(e: CheckpointError) -> Self {
        let code = match &e {
            CheckpointError::BadKey { .. }
            | CheckpointError::NoSuchTurn { .. }
            | CheckpointError::NoCheckpoints(_) => 2,
            _ => 1,
        };
        CliError {
            code,
            message: format!("vis: {e}"),
        }
    }
}
