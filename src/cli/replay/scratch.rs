//! A copy of a session's workspace as it was at a point of the session (its start for a
//! replay, before turn N+1 for a fork at turn N), in a directory of its own: the workspace is
//! copied (`checkpoints::copy_workspace`), then the recorded changes since the point are
//! undone in the copy (`checkpoints::restore_into`). The original workspace is only read.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::super::CliError;
use crate::checkpoints::{copy_workspace, restore_into, CheckpointError, Point};

/// Where a copy goes: a directory the person named (kept afterwards) or one inside a
/// temporary directory (removed when the command ends).
pub enum ScratchDir {
    Kept(PathBuf),
    Temporary(tempfile::TempDir),
}

impl ScratchDir {
    /// The copy's root (it does not exist until [`workspace_at`] makes it).
    pub fn path(&self) -> PathBuf {
        match self {
            ScratchDir::Kept(p) => p.clone(),
            ScratchDir::Temporary(t) => t.path().join("workspace"),
        }
    }

    /// `--workspace DIR`: a directory that does not exist yet or is empty, outside the
    /// session's workspace (a copy into itself would never end). Checked before anything is
    /// made; an empty DIR is replaced by the copy.
    pub fn chosen(dir: &Path, original: &Path) -> Result<ScratchDir, CliError> {
        let usage = |why: String| {
            CliError::usage(format!(
                "--workspace {}: {why}; pass a new or empty directory outside the session's workspace",
                dir.display()
            ))
        };
        let absolute =
            std::path::absolute(dir).map_err(|e| usage(format!("cannot resolve it ({e})")))?;
        let parent_real = absolute
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .ok_or_else(|| usage("its parent directory does not exist".into()))?;
        let original_real = original
            .canonicalize()
            .unwrap_or_else(|_| original.to_path_buf());
        if parent_real.starts_with(&original_real) {
            return Err(usage(format!(
                "it is inside the session's workspace {}",
                original.display()
            )));
        }
        match std::fs::read_dir(&absolute) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(usage("it exists and is not empty".into()));
                }
                std::fs::remove_dir(&absolute)
                    .map_err(|e| usage(format!("it cannot be used ({e})")))?;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(usage(format!("it cannot be used ({e})"))),
        }
        let name = absolute
            .file_name()
            .ok_or_else(|| usage("it names no directory".into()))?;
        Ok(ScratchDir::Kept(parent_real.join(name)))
    }

    /// A new temporary directory.
    pub fn temporary(command: &str) -> Result<ScratchDir, CliError> {
        tempfile::Builder::new()
            .prefix("vis-replay-")
            .tempdir()
            .map(ScratchDir::Temporary)
            .map_err(|e| CliError {
                code: 1,
                message: format!(
                    "{command}: cannot make a temporary directory ({e}); set TMPDIR or pass --workspace DIR"
                ),
            })
    }
}

/// Makes `dest` (which must not exist yet) the first workspace root `original` of `session`
/// as it was at `point`. Returns what the person should know about the copy: files whose
/// content was not kept, or that there are no checkpoints to restore from (a session recorded
/// before them, or with them turned off), in which case the copy is the workspace as it is
/// now. On failure, what was made of `dest` is removed.
pub fn workspace_at(
    db: &Path,
    session: &str,
    original: &Path,
    point: Point,
    dest: &Path,
) -> Result<Vec<String>, CliError> {
    let failed = |e: CheckpointError| CliError {
        code: 1,
        message: format!(
            "cannot make the copy of {} in {}: {e}",
            original.display(),
            dest.display()
        ),
    };
    // A `dest` that exists is refused before anything is copied: it is not ours to remove.
    let existed = dest.exists();
    copy_workspace(original, dest).map_err(|e| {
        if !existed {
            let _ = std::fs::remove_dir_all(dest);
        }
        failed(e)
    })?;
    match restore_into(db, session, point, dest) {
        Ok(report) => Ok(report
            .not_restored
            .iter()
            .map(|(path, why)| format!("{path} is as it is now, not as it was: {why}"))
            .chain(report.other_roots.iter().map(|path| {
                format!("{path} is beneath another workspace root of the session, which is not copied")
            }))
            .collect()),
        Err(CheckpointError::NoCheckpoints(_)) => Ok(vec![format!(
            "session {session} has no checkpoints (recorded before they existed, or with them turned off): the copy is the workspace as it is now"
        )]),
        Err(e) => {
            let _ = std::fs::remove_dir_all(dest);
            Err(failed(e))
        }
    }
}
