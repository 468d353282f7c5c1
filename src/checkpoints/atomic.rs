//! All files or none: every new version is first written to a temp file beside its target
//! (a full disk fails here, before anything changed); then each target is moved aside and
//! its new version renamed into place; a failure there renames everything back. The moved
//! aside versions are removed only when all are in place.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use super::log::FileState;
use super::CheckpointError;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_beside(target: &Path, tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!(".vis-rewind-{}-{n}.{tag}", std::process::id());
    target.parent().unwrap_or(Path::new(".")).join(name)
}

enum Done {
    MovedAside { target: PathBuf, aside: PathBuf },
    Placed(PathBuf),
}

pub(crate) fn apply_all(moves: &[Move]) -> Result<(), CheckpointError> {
    let mut created_dirs: Vec<PathBuf> = Vec::new();
    let mut staged: Vec<Option<PathBuf>> = Vec::new();
    let staging = stage(moves, &mut created_dirs, &mut staged);
    if let Err(e) = staging {
        discard(&staged, &created_dirs);
        return Err(e);
    }
    let mut done: Vec<Done> = Vec::new();
    let committed = commit(moves, &staged, &mut done);
    if let Err(e) = committed {
        for step in done.iter().rev() {
            match step {
                Done::Placed(target) => {
                    let _ = std::fs::remove_file(target);
                }
                Done::MovedAside { target, aside } => {
                    let _ = std::fs::rename(aside, target);
                }
            }
        }
        discard(&staged, &created_dirs);
        return Err(e);
    }
    for step in &done {
        if let Done::MovedAside { aside, .. } = step {
            let removed = match aside.symlink_metadata() {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(aside),
                _ => std::fs::remove_file(aside),
            };
            let _ = removed;
        }
    }
    Ok(())
}

fn stage(
    moves: &[Move],
    created_dirs: &mut Vec<PathBuf>,
    staged: &mut Vec<Option<PathBuf>>,
) -> Result<(), CheckpointError> {
    for m in moves {
        let Some(state) = &m.state else {
            staged.push(None);
            continue;
        };
        if let Some(parent) = m.target.parent() {
            let mut missing = Vec::new();
            let mut dir = parent;
            while !dir.exists() {
                missing.push(dir.to_path_buf());
                match dir.parent() {
                    Some(p) => dir = p,
                    None => break,
                }
            }
            for dir in missing.into_iter().rev() {
                std::fs::create_dir(&dir).map_err(|e| CheckpointError::io("create", &dir, e))?;
                created_dirs.push(dir);
            }
        }
        let temp = unique_beside(&m.target, "new");
        staged.push(Some(temp.clone()));
        // The error names the file being restored, not the temp file.
        write_state(&temp, state, m.content.as_deref()).map_err(|e| match e {
            CheckpointError::Io { source, .. } => {
                CheckpointError::io("write the restored version of", &m.target, source)
            }
            other => other,
        })?;
    }
    Ok(())
}

fn commit(
    moves: &[Move],
    staged: &[Option<PathBuf>],
    done: &mut Vec<Done>,
) -> Result<(), CheckpointError> {
    for (m, temp) in moves.iter().zip(staged) {
        if m.target.symlink_metadata().is_ok() {
            let aside = unique_beside(&m.target, "old");
            std::fs::rename(&m.target, &aside)
                .map_err(|e| CheckpointError::io("move aside", &m.target, e))?;
            done.push(Done::MovedAside {
                target: m.target.clone(),
                aside,
            });
        }
        if let Some(temp) = temp {
            std::fs::rename(temp, &m.target)
                .map_err(|e| CheckpointError::io("put back", &m.target, e))?;
            done.push(Done::Placed(m.target.clone()));
        }
    }
    Ok(())
}

fn discard(staged: &[Option<PathBuf>], created_dirs: &[PathBuf]) {
    for temp in staged.iter().flatten() {
        let _ = std::fs::remove_file(temp);
    }
    for dir in created_dirs.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// One path to put back: its state (`None`: removed) and content.
pub(crate) struct Move {
    pub target: PathBuf,
    pub state: Option<FileState>,
    pub content: Option<Vec<u8>>,
}

/// Creates `target` (which must not exist) holding `state`.
pub(crate) fn write_state(
    target: &Path,
    state: &FileState,
    content: Option<&[u8]>,
) -> Result<(), CheckpointError> {
    match state {
        FileState::Symlink { target: link } => std::os::unix::fs::symlink(link, target)
            .map_err(|e| CheckpointError::io("create", target, e)),
        FileState::File { mode, .. } => {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(target)
                .map_err(|e| CheckpointError::io("create", target, e))?;
            file.write_all(content.unwrap_or_default())
                .and_then(|()| file.flush())
                .map_err(|e| CheckpointError::io("write", target, e))?;
            std::fs::set_permissions(target, std::fs::Permissions::from_mode(*mode))
                .map_err(|e| CheckpointError::io("set the mode of", target, e))
        }
    }
}
