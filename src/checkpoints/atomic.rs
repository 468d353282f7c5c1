//! All files or none: every new version is first written to a temp file beside its target
//! (a full disk fails here, before anything changed); then each target is moved aside and
//! its new version renamed into place; a failure there renames everything back. The moved
//! aside versions are removed only when all are in place.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use std::io::Write;

use rustix::fs::{Mode, OFlags};

use super::beneath::{place, remove_at, Missing, Place};
use super::log::FileState;
use super::CheckpointError;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_name(tag: &str) -> OsString {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    OsString::from(format!(".vis-rewind-{}-{n}.{tag}", std::process::id()))
}

enum Done {
    MovedAside { at: usize, aside: OsString },
    Placed(usize),
}

/// Puts every move in place beneath its root among `roots`, or none (see the module doc).
/// Every directory is opened beneath the root without following links, and every write,
/// rename and removal is relative to it.
pub(crate) fn apply_all(roots: &[String], moves: &[Move]) -> Result<(), CheckpointError> {
    let mut created_dirs: Vec<Place> = Vec::new();
    let mut places: Vec<Place> = Vec::new();
    let mut staged: Vec<Option<OsString>> = Vec::new();
    let staging = stage(roots, moves, &mut created_dirs, &mut places, &mut staged);
    if let Err(e) = staging {
        discard(&places, &staged, &created_dirs);
        return Err(e);
    }
    let mut done: Vec<Done> = Vec::new();
    let committed = commit(&places, &staged, &mut done);
    if let Err(e) = committed {
        for step in done.iter().rev() {
            match step {
                Done::Placed(at) => {
                    let p = &places[*at];
                    let _ = rustix::fs::unlinkat(&p.dir.fd, &p.name, rustix::fs::AtFlags::empty());
                }
                Done::MovedAside { at, aside } => {
                    let p = &places[*at];
                    let _ = rustix::fs::renameat(&p.dir.fd, aside, &p.dir.fd, &p.name);
                }
            }
        }
        discard(&places, &staged, &created_dirs);
        return Err(e);
    }
    for step in &done {
        if let Done::MovedAside { at, aside } = step {
            let _ = remove_at(&places[*at].dir.fd, aside);
        }
    }
    Ok(())
}

fn stage(
    roots: &[String],
    moves: &[Move],
    created_dirs: &mut Vec<Place>,
    places: &mut Vec<Place>,
    staged: &mut Vec<Option<OsString>>,
) -> Result<(), CheckpointError> {
    // Every target's directory first: a refused one changes nothing. One descriptor per
    // directory, shared by its files (a rewind of thousands of files in a few directories
    // must not run out of descriptors).
    let mut dirs: std::collections::HashMap<PathBuf, std::sync::Arc<super::beneath::Dir>> =
        std::collections::HashMap::new();
    let mut placed_moves = Vec::new();
    for m in moves {
        let parent = m.target.parent().map(Path::to_path_buf);
        let known = parent.as_ref().and_then(|p| dirs.get(p));
        let found = match (known, m.target.file_name()) {
            (Some(dir), Some(name)) => Place {
                dir: dir.clone(),
                name: name.to_os_string(),
            },
            // A removal whose directory is gone is done already: nothing is created for it.
            _ if m.state.is_none() => match place(roots, &m.target, Missing::Absent)? {
                Some(found) => found,
                None => continue,
            },
            _ => match place(roots, &m.target, Missing::Create(created_dirs))? {
                Some(found) => found,
                None => continue,
            },
        };
        if let Some(parent) = parent {
            dirs.entry(parent).or_insert_with(|| found.dir.clone());
        }
        places.push(found);
        placed_moves.push(m);
    }
    for (m, p) in placed_moves.into_iter().zip(places.iter()) {
        let Some(state) = &m.state else {
            staged.push(None);
            continue;
        };
        let temp = unique_name("new");
        staged.push(Some(temp.clone()));
        // The error names the file being restored, not the temp file.
        write_state_at(&p.dir.fd, &temp, &m.target, state, m.content.as_deref()).map_err(|e| {
            match e {
                CheckpointError::Io { source, .. } => {
                    CheckpointError::io("write the restored version of", &m.target, source)
                }
                other => other,
            }
        })?;
    }
    Ok(())
}

fn commit(
    places: &[Place],
    staged: &[Option<OsString>],
    done: &mut Vec<Done>,
) -> Result<(), CheckpointError> {
    for (at, (p, temp)) in places.iter().zip(staged).enumerate() {
        let exists =
            rustix::fs::statat(&p.dir.fd, &p.name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok();
        if exists {
            let aside = unique_name("old");
            rustix::fs::renameat(&p.dir.fd, &p.name, &p.dir.fd, &aside)
                .map_err(|e| CheckpointError::io("move aside", &p.shown(), e.into()))?;
            done.push(Done::MovedAside { at, aside });
        }
        if let Some(temp) = temp {
            rustix::fs::renameat(&p.dir.fd, temp, &p.dir.fd, &p.name)
                .map_err(|e| CheckpointError::io("put back", &p.shown(), e.into()))?;
            done.push(Done::Placed(at));
        }
    }
    Ok(())
}

fn discard(places: &[Place], staged: &[Option<OsString>], created_dirs: &[Place]) {
    for (p, temp) in places.iter().zip(staged) {
        if let Some(temp) = temp {
            let _ = rustix::fs::unlinkat(&p.dir.fd, temp, rustix::fs::AtFlags::empty());
        }
    }
    for dir in created_dirs.iter().rev() {
        let _ = rustix::fs::unlinkat(&dir.dir.fd, &dir.name, rustix::fs::AtFlags::REMOVEDIR);
    }
}

/// Creates `name` in `dir` (it must not exist) holding `state`; `shown` names it in errors.
pub(crate) fn write_state_at(
    dir: &OwnedFd,
    name: &OsStr,
    shown: &Path,
    state: &FileState,
    content: Option<&[u8]>,
) -> Result<(), CheckpointError> {
    match state {
        FileState::Symlink { target: link } => rustix::fs::symlinkat(link.as_str(), dir, name)
            .map_err(|e| CheckpointError::io("create", shown, e.into())),
        FileState::File { mode, .. } => {
            let fd = rustix::fs::openat(
                dir,
                name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(|e| CheckpointError::io("create", shown, e.into()))?;
            let mut file = std::fs::File::from(fd);
            file.write_all(content.unwrap_or_default())
                .and_then(|()| file.flush())
                .map_err(|e| CheckpointError::io("write", shown, e))?;
            rustix::fs::fchmod(&file, Mode::from_raw_mode(*mode))
                .map_err(|e| CheckpointError::io("set the mode of", shown, e.into()))
        }
    }
}

/// One path to put back: its state (`None`: removed) and content.
pub(crate) struct Move {
    pub target: PathBuf,
    pub state: Option<FileState>,
    pub content: Option<Vec<u8>>,
}
