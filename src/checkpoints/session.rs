//! A session's rewind, as `vis rewind`, `/rewind` in `vis chat` and `vis serve`'s route run
//! it: the checks, the files (all or none), then the conversation (cut before the turn, or
//! kept with a notice the model reads at its next request).

use std::fmt::Write;

use super::blobs::Blobs;
use super::log::FileState;
use super::restore::{plan_rewind, rewind_files, Conflict, RewindReport};
use super::{CheckpointError, Point, Recorder};
use crate::store::{HistoryKind, NewHistoryItem, Store};

/// How to rewind.
#[derive(Debug, Clone, Copy, Default)]
pub struct RewindOptions {
    /// Keep the conversation (the model is told what was rewound).
    pub code_only: bool,
    /// Overwrite files changed outside Vis, and restore what can be when some cannot.
    pub force: bool,
}

/// What a rewind did.
#[derive(Debug)]
pub struct RewindOutcome {
    pub turn: i64,
    pub files: RewindReport,
    /// Files changed outside Vis that `force` overwrote.
    pub overwritten: Vec<String>,
    /// The conversation was cut before `turn`.
    pub truncated: bool,
}

/// Rewinds session `session_id` to before turn `turn`. Refused, changing nothing, while a
/// turn of the session runs, for a turn that does not exist, and (without `force`) when
/// files were changed outside Vis: the error shows their three versions.
pub fn rewind_session(
    store: &mut Store,
    recorder: &mut Recorder,
    session_id: &str,
    turn: i64,
    options: RewindOptions,
) -> Result<RewindOutcome, CheckpointError> {
    let turns = store
        .counts(session_id)
        .map_err(|e| CheckpointError::Refused(e.to_string()))?
        .turns;
    if turn > turns {
        return Err(CheckpointError::NoSuchTurn {
            session: session_id.to_string(),
            turn,
            turns,
        });
    }
    if let Some(running) = store
        .turn_in_progress(session_id)
        .map_err(|e| CheckpointError::Refused(e.to_string()))?
    {
        return Err(CheckpointError::Refused(format!(
            "turn {running} of session {session_id} is running; nothing was changed — rewind when it has ended (stop it first to rewind now)"
        )));
    }
    let plan = plan_rewind(recorder, Point::BeforeTurn(turn), turns + 1)?;
    if !options.force && !plan.conflicts.is_empty() {
        let blobs = Blobs::new(recorder.dir());
        return Err(CheckpointError::Refused(render_conflicts(
            &blobs,
            turn,
            &plan.conflicts,
        )));
    }
    let (record_turn, cut) = if options.code_only {
        (turns + 1, None)
    } else {
        (turn, Some(turn))
    };
    let mut files = rewind_files(recorder, &plan, options.force, record_turn, cut)?;
    let mut overwritten: Vec<String> = plan.conflicts.iter().map(|c| c.path.clone()).collect();
    // Paths as the person sees them: relative to the workspace, when there is one root.
    let roots = recorder.roots();
    let relative = |path: &mut String| *path = super::diff::display_path(path, roots);
    files.restored.iter_mut().for_each(relative);
    files.removed.iter_mut().for_each(relative);
    files.kept.iter_mut().for_each(relative);
    files.not_restored.iter_mut().for_each(|(p, _)| relative(p));
    overwritten.iter_mut().for_each(relative);
    if options.code_only {
        let text = notice_text(turn, &files);
        let tokens = crate::catalog::count_tokens(&text).unwrap_or(text.len() / 4) as i64 + 4;
        store
            .append_history(
                session_id,
                &NewHistoryItem {
                    turn: turns,
                    kind: HistoryKind::Notice,
                    body: &text,
                    tokens,
                    meta: None,
                },
            )
            .map_err(|e| {
                CheckpointError::Refused(format!(
                    "the files were rewound, but the note to the model could not be recorded: {e}"
                ))
            })?;
    } else {
        store
            .truncate_from_turn(session_id, turn)
            .map_err(|e| CheckpointError::Refused(format!("the files were rewound, but the conversation could not be cut before turn {turn}: {e}")))?;
    }
    Ok(RewindOutcome {
        turn,
        files,
        overwritten,
        truncated: !options.code_only,
    })
}

/// What the model reads after a `--code-only` rewind (after the history, so the cached
/// prefix of its requests stays as it was).
fn notice_text(turn: i64, files: &RewindReport) -> String {
    let mut text = format!(
        "[vis] The person rewound the workspace files to their state before turn {turn}; the conversation is kept, so files you read or changed since then may no longer be as you saw them."
    );
    if !files.restored.is_empty() {
        let _ = write!(text, " Restored: {}.", files.restored.join(", "));
    }
    if !files.removed.is_empty() {
        let _ = write!(text, " Removed: {}.", files.removed.join(", "));
    }
    text
}

/// The refusal when files were changed outside Vis: for each, the version before the turn,
/// what Vis last wrote, what is there now, and the diff from Vis's version to the current one.
pub fn render_conflicts(blobs: &Blobs, turn: i64, conflicts: &[Conflict]) -> String {
    let mut out = format!(
        "nothing was changed: {} file(s) changed outside Vis since the session last wrote them; run again with --force to overwrite them\n",
        conflicts.len()
    );
    for c in conflicts {
        let _ = writeln!(out, "\n{}", c.path);
        let _ = writeln!(out, "  before turn {turn}: {}", describe(&c.at_point));
        let _ = writeln!(out, "  Vis last wrote:  {}", describe(&c.vis_wrote));
        let _ = writeln!(out, "  there now:       {}", describe(&c.now));
        let text = |s: &Option<FileState>| match s {
            Some(FileState::File {
                hash: Some(hash), ..
            }) => blobs
                .read(hash)
                .ok()
                .filter(|b| !b.contains(&0))
                .and_then(|b| String::from_utf8(b).ok()),
            None => Some(String::new()),
            _ => None,
        };
        for (label, state) in [("before", &c.at_point), ("Vis wrote", &c.vis_wrote)] {
            if let (Some(a), Some(b)) = (text(state), text(&c.now)) {
                if a != b {
                    let diff = similar::TextDiff::from_lines(&a, &b)
                        .unified_diff()
                        .context_radius(2)
                        .header(label, "now")
                        .to_string();
                    for line in diff.lines() {
                        let _ = writeln!(out, "    {line}");
                    }
                }
            }
        }
    }
    out
}

fn describe(state: &Option<FileState>) -> String {
    match state {
        None => "absent".into(),
        Some(FileState::Symlink { target }) => format!("symlink to {target}"),
        Some(FileState::File {
            hash: Some(hash),
            size,
            mode,
        }) => format!(
            "{size} bytes, mode {mode:o}, blake3 {}",
            &hash[..12.min(hash.len())]
        ),
        Some(FileState::File { size, mode, .. }) => {
            format!("{size} bytes, mode {mode:o}, content not kept")
        }
    }
}
