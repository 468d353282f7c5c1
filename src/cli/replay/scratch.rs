//! The replay's scratch workspace: a copy of the session's workspace as it was when the
//! session started, in a directory of its own. The original workspace is only read.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::super::CliError;

/// Where the scratch copy goes: `--workspace DIR` (kept afterwards) or a temporary directory
/// (removed when the replay ends).
pub enum ScratchDir {
    Kept(PathBuf),
    Temporary(tempfile::TempDir),
}

impl ScratchDir {
    pub fn path(&self) -> &Path {
        match self {
            ScratchDir::Kept(p) => p,
            ScratchDir::Temporary(t) => t.path(),
        }
    }

    /// `--workspace DIR`: a directory that does not exist yet (it is created) or is empty,
    /// outside the session's workspace (a copy into itself would never end). Checked before
    /// anything is made.
    pub fn chosen(dir: &Path, original: &Path) -> Result<ScratchDir, CliError> {
        let usage = |why: String| {
            CliError::usage(format!(
                "--workspace {}: {why}; pass a new or empty directory outside the session's workspace",
                dir.display()
            ))
        };
        let absolute =
            std::path::absolute(dir).map_err(|e| usage(format!("cannot resolve it ({e})")))?;
        match std::fs::read_dir(&absolute) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(usage("it exists and is not empty".into()));
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(usage(format!("it cannot be used ({e})"))),
        }
        let parent_real = absolute
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .ok_or_else(|| usage("its parent directory does not exist".into()))?;
        let original_real = original.canonicalize().unwrap_or(original.to_path_buf());
        if parent_real.starts_with(&original_real) {
            return Err(usage(format!(
                "it is inside the session's workspace {}",
                original.display()
            )));
        }
        std::fs::create_dir_all(&absolute)
            .map_err(|e| usage(format!("it cannot be created ({e})")))?;
        let real = absolute.canonicalize().unwrap_or(absolute);
        Ok(ScratchDir::Kept(real))
    }

    /// A new temporary directory.
    pub fn temporary() -> Result<ScratchDir, CliError> {
        tempfile::Builder::new()
            .prefix("vis-replay-")
            .tempdir()
            .map(ScratchDir::Temporary)
            .map_err(|e| CliError {
                code: 1,
                message: format!(
                    "vis replay: cannot make a temporary directory ({e}); set TMPDIR or pass --workspace DIR"
                ),
            })
    }
}

/// Makes `dest` the workspace `original` as it was when session `_session` started.
///
/// For now this is a copy of the workspace as it is: the checkpoints that record its state
/// at the session's start come with `checkpoints::restore_into` (issue 25 §1), which takes
/// this function's place.
pub fn restore_session_start(
    _db: &Path,
    _session: &str,
    original: &Path,
    dest: &Path,
) -> Result<(), CliError> {
    copy_tree(original, dest)
}

/// Copies the tree `src` into the existing directory `dest`: directories, files (with their
/// permissions) and symbolic links (as links, never followed); other kinds (sockets, fifos,
/// devices) are left out.
fn copy_tree(src: &Path, dest: &Path) -> Result<(), CliError> {
    let failed = |path: &Path, e: std::io::Error| CliError {
        code: 1,
        message: format!(
            "vis replay: cannot copy {} into the scratch workspace: {e}",
            path.display()
        ),
    };
    let entries = std::fs::read_dir(src).map_err(|e| failed(src, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| failed(src, e))?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| failed(&from, e))?;
        if kind.is_symlink() {
            let target = std::fs::read_link(&from).map_err(|e| failed(&from, e))?;
            std::os::unix::fs::symlink(target, &to).map_err(|e| failed(&from, e))?;
        } else if kind.is_dir() {
            std::fs::create_dir(&to).map_err(|e| failed(&from, e))?;
            copy_tree(&from, &to)?;
        } else if kind.is_file() {
            std::fs::copy(&from, &to).map_err(|e| failed(&from, e))?;
        }
    }
    Ok(())
}
