//! Locking and atomic replacement of a file.
//!
//! **Lock choice.** `patch` replaces a file by renaming a temp file over it, so the file's inode
//! changes on every write; a lock taken on the file itself would protect the old inode only,
//! and a second writer that opened the path after the rename would not see it. Lock files would
//! litter the workspace. So the lock is an exclusive `flock` on the file's *directory*, which
//! the rename never replaces. It serializes every patch in that directory (patches are
//! milliseconds), and because `flock` belongs to the open file description, two threads of one
//! process that each open the directory exclude each other just like two processes do. The
//! lock is advisory: it orders Vis's own writers, not arbitrary editors.
//!
//! **Write.** Temp file in the same directory (so the rename is atomic), data written and
//! fsynced, mode (and, when permitted, owner) copied from the original, rename over the
//! target, then the directory fsynced so the rename itself is durable. Any failure before the
//! rename drops the temp file, leaving the original untouched.

use std::fs::{File, Permissions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// An exclusive advisory lock on a directory, released on drop.
pub struct DirLock {
    dir: File,
}

impl DirLock {
    /// Block until the lock on `dir` is held.
    pub fn acquire(dir: &Path) -> std::io::Result<DirLock> {
        let dir = File::open(dir)?;
        loop {
            // SAFETY: flock on a valid, owned descriptor.
            let rc = unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(DirLock { dir });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// The locked directory, open; used to fsync it after a rename.
    pub fn dir(&self) -> &File {
        &self.dir
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // SAFETY: unlocking a descriptor we own; closing it would release the lock anyway.
        unsafe {
            libc::flock(self.dir.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

/// Where a write may be made to fail on purpose (fault-injection tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Fail after the temp file is written and synced, just before the rename.
    pub fail_before_rename: bool,
}

/// The error of a failed atomic write: which step failed.
#[derive(Debug)]
pub enum WriteError {
    Io(std::io::Error),
    Injected,
}

impl From<std::io::Error> for WriteError {
    fn from(err: std::io::Error) -> Self {
        WriteError::Io(err)
    }
}

/// Replace `target` with `bytes` atomically. `lock` must be the lock of `target`'s directory.
pub fn write_atomically(
    target: &Path,
    bytes: &[u8],
    lock: &DirLock,
    faults: Faults,
) -> Result<(), WriteError> {
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let original = std::fs::metadata(target)?;
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".vis-tmp")
        .tempfile_in(dir)?;
    temp.as_file_mut().write_all(bytes)?;
    temp.as_file()
        .set_permissions(Permissions::from_mode(original.mode() & 0o7777))?;
    // Keep the owner when we are allowed to (e.g. running as root); otherwise the file
    // becomes ours, as with any editor's save.
    let _ = std::os::unix::fs::fchown(temp.as_file(), Some(original.uid()), Some(original.gid()));
    temp.as_file().sync_all()?;
    if faults.fail_before_rename {
        // Dropping `temp` deletes it.
        return Err(WriteError::Injected);
    }
    temp.persist(target).map_err(|e| WriteError::Io(e.error))?;
    lock.dir().sync_all()?;
    Ok(())
}
