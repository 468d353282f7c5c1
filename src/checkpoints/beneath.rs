//! Directories beneath a workspace root (or a copy's), opened without following a symbolic
//! link, so a rewind or a restore into a copy writes, renames and removes only beneath the
//! root even when another process swaps a directory for a link meanwhile: every later step is relative to the descriptor
//! (`openat`, `renameat`, `unlinkat`), never a path resolved again.
//!
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` resolves a whole existing path in
//! one call (Linux 5.6+); where it is refused (an older kernel, a seccomp filter), or a
//! directory has to be created, the path is walked one component at a time with
//! `openat(O_NOFOLLOW | O_DIRECTORY)`. The root itself is opened as the person named it.

use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::CheckpointError;

/// A directory opened beneath a root, and the path it was opened as (for messages).
pub(crate) struct Dir {
    pub fd: OwnedFd,
    pub path: PathBuf,
}

/// Where a target lives: its directory, opened beneath its root, and its name there.
pub(crate) struct Place {
    pub dir: std::sync::Arc<Dir>,
    pub name: OsString,
}

impl Place {
    pub fn shown(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }
}

const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

fn refused(target: &Path, why: String) -> CheckpointError {
    CheckpointError::Refused(format!(
        "cannot restore {}: {why}; files are restored only beneath their root, following no symbolic link on the way",
        target.display()
    ))
}

/// What [`place`] does when a directory on the way does not exist.
pub(crate) enum Missing<'a> {
    /// Creates it (each created directory noted, so a failure can remove them again).
    Create(&'a mut Vec<Place>),
    /// Leaves it: the target cannot exist (`None`), e.g. a removal that is already done.
    Absent,
}

/// The root among `roots` that holds `target`, and `target`'s parent relative to it (only
/// plain names: no `..`, no `.`).
fn split<'a, R: AsRef<Path>>(
    roots: &'a [R],
    target: &'a Path,
) -> Option<(&'a Path, Vec<&'a OsStr>, &'a OsStr)> {
    let (root, rel) = roots
        .iter()
        .map(AsRef::as_ref)
        .filter_map(|root| target.strip_prefix(root).ok().map(|rel| (root, rel)))
        .max_by_key(|(root, _)| root.as_os_str().len())?;
    let mut names = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => names.push(name),
            _ => return None,
        }
    }
    let file = names.pop()?;
    Some((root, names, file))
}

/// Opens the parent of `target` beneath its root, following no link; a directory on the
/// way that is missing is created or ends the look (`None`), as `missing` says. Refused
/// when `target` is not beneath a root or a directory on the way is a link or not a
/// directory.
pub(crate) fn place<R: AsRef<Path>>(
    roots: &[R],
    target: &Path,
    missing: Missing<'_>,
) -> Result<Option<Place>, CheckpointError> {
    let Some((root, names, file)) = split(roots, target) else {
        return Err(refused(
            target,
            "it is not beneath a workspace root of the session".into(),
        ));
    };
    let root_fd = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| CheckpointError::io("open", root, e.into()))?;
    let rel: PathBuf = names.iter().collect();
    let whole = if names.is_empty() {
        Err(Errno::NOENT)
    } else {
        rustix::fs::openat2(
            &root_fd,
            &rel,
            DIR_FLAGS,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
    };
    let dir = match whole {
        Ok(fd) => std::sync::Arc::new(Dir {
            fd,
            path: root.join(&rel),
        }),
        Err(Errno::XDEV | Errno::LOOP | Errno::NOTDIR) => {
            return Err(refused(
                target,
                format!(
                    "a directory on the way ({}) is a symbolic link or not a directory now",
                    root.join(&rel).display()
                ),
            ))
        }
        // Missing directories, or no openat2: one component at a time.
        Err(_) => match walk(root, root_fd, &names, target, missing)? {
            Some(dir) => dir,
            None => return Ok(None),
        },
    };
    Ok(Some(Place {
        dir,
        name: file.to_os_string(),
    }))
}

fn walk(
    root: &Path,
    root_fd: OwnedFd,
    names: &[&OsStr],
    target: &Path,
    mut missing: Missing<'_>,
) -> Result<Option<std::sync::Arc<Dir>>, CheckpointError> {
    let mut dir = std::sync::Arc::new(Dir {
        fd: root_fd,
        path: root.to_path_buf(),
    });
    for name in names {
        let opened = match rustix::fs::openat(&dir.fd, *name, DIR_FLAGS, Mode::empty()) {
            Err(Errno::NOENT) => {
                let Missing::Create(created) = &mut missing else {
                    return Ok(None);
                };
                rustix::fs::mkdirat(&dir.fd, *name, Mode::from_raw_mode(0o777))
                    .map_err(|e| CheckpointError::io("create", &dir.path.join(name), e.into()))?;
                created.push(Place {
                    dir: dir.clone(),
                    name: name.to_os_string(),
                });
                rustix::fs::openat(&dir.fd, *name, DIR_FLAGS, Mode::empty())
            }
            other => other,
        };
        let path = dir.path.join(name);
        let fd = match opened {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR) => {
                return Err(refused(
                    target,
                    format!(
                        "a directory on the way ({}) is a symbolic link or not a directory now",
                        path.display()
                    ),
                ))
            }
            Err(e) => return Err(CheckpointError::io("open", &path, e.into())),
        };
        dir = std::sync::Arc::new(Dir { fd, path });
    }
    Ok(Some(dir))
}

/// Removes `name` in `dir` without following links: a file or link is unlinked, a directory
/// emptied (the same way) and removed.
pub(crate) fn remove_at(dir: &OwnedFd, name: &OsStr) -> std::io::Result<()> {
    match rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty()) {
        Err(Errno::ISDIR | Errno::PERM) => {}
        other => return other.map_err(Into::into),
    }
    let sub = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    let entries = rustix::fs::Dir::read_from(&sub)?;
    for entry in entries {
        let entry = entry?;
        let entry_name = entry.file_name().to_bytes();
        if entry_name != b"." && entry_name != b".." {
            names.push(OsString::from(
                <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(entry_name),
            ));
        }
    }
    for entry_name in names {
        remove_at(&sub, &entry_name)?;
    }
    rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::REMOVEDIR).map_err(Into::into)
}
