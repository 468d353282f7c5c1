//! `vis rewind ID t3 [--code-only] [--force]`: every file the session changed goes back to
//! its state before turn 3 (all or none), and the conversation is cut there unless
//! `--code-only` (see `crate::checkpoints::rewind_session`).

use std::path::Path;

use clap::Args;

use super::diff::open_existing;
use super::settings::{checkpoint_settings, load_config};
use super::term::{errln, outln};
use super::CliError;
use crate::checkpoints::{
    parse_point, rewind_session, Point, Recorder, RewindOptions, RewindOutcome,
};
use crate::session::validate_session_id;

#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The session.
    pub id: String,
    /// The turn to go back to before (t3).
    pub key: String,
    /// Keep the conversation; the model is told at its next request what was rewound.
    #[arg(long)]
    pub code_only: bool,
    /// Overwrite files changed outside Vis since the session wrote them.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: RewindArgs, db: &Path) -> Result<i32, CliError> {
    validate_session_id(&args.id)?;
    let Point::BeforeTurn(turn) = parse_point(&args.key)? else {
        return Err(CliError::usage("vis: a rewind point is a turn, such as t3"));
    };
    let config = load_config()?;
    let mut store = open_existing(db, &args.id)?;
    let row = store.require_session(&args.id)?;
    let mut recorder = Recorder::new(
        db,
        &args.id,
        &row.workspace_roots,
        checkpoint_settings(&config),
    );
    let outcome = rewind_session(
        &mut *store,
        &mut recorder,
        &args.id,
        turn,
        RewindOptions {
            code_only: args.code_only,
            force: args.force,
        },
    )?;
    report(&args.id, &outcome);
    Ok(0)
}

/// What a rewind did, for a person (also `/rewind` in `vis chat`).
pub(super) fn summary(id: &str, outcome: &RewindOutcome) -> Vec<String> {
    let mut lines = Vec::new();
    let files = &outcome.files;
    lines.push(format!(
        "rewound session {id} to before turn {}: {} file(s) restored, {} removed",
        outcome.turn,
        files.restored.len(),
        files.removed.len()
    ));
    for path in &files.restored {
        lines.push(format!("  restored {path}"));
    }
    for path in &files.removed {
        lines.push(format!("  removed  {path}"));
    }
    for path in &outcome.overwritten {
        lines.push(format!(
            "  overwrote the outside change to {path} (--force)"
        ));
    }
    for path in &files.kept {
        lines.push(format!(
            "  kept     {path} (the session created it, but it was changed outside Vis since: not Vis's to delete)"
        ));
    }
    for (path, why) in &files.not_restored {
        lines.push(format!("  not restored {path}: {why}"));
    }
    lines.push(if outcome.truncated {
        format!(
            "the conversation now ends before turn {} (`vis context {id}` shows the next request)",
            outcome.turn
        )
    } else {
        "the conversation is kept; the model is told at its next request what was rewound"
            .to_string()
    });
    lines
}

fn report(id: &str, outcome: &RewindOutcome) {
    let lines = summary(id, outcome);
    for line in &lines[..lines.len() - 1] {
        outln!("{line}");
    }
    if let Some(last) = lines.last() {
        errln!("{last}");
    }
}
