//! The temp file a patch writes its new version to, next to the file it replaces.
//!
//! It is created in the file's directory (through the directory's descriptor) so that the
//! commit is a rename within one directory, and with `O_EXCL | O_NOFOLLOW` so that it can
//! never be an existing file or a symlink planted at its name. Its name, `.NAME.XXXXXX.vis-tmp`,
//! is hidden, says whose it is, and stays under `NAME_MAX` whatever the target's length. Until
//! the commit succeeds it is removed when dropped, so a failed patch leaves nothing behind;
//! after an exchange the same guard removes whichever version ends up under its name.

use std::cell::{Cell, RefCell};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{fstat, openat, unlinkat, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::lease::{take_lease, LeaseTake};
use super::watch::OpenWatch;
use super::WriteError;

/// A temp file next to the target, removed on drop unless disarmed.
pub(super) struct TempFile<'a> {
    dir: &'a OwnedFd,
    pub(super) name: OsString,
    pub(super) fd: OwnedFd,
    armed: Cell<bool>,
    /// Watches the new version while it is in place, for a commit that has to be undone.
    pub(super) watch: RefCell<Option<OpenWatch>>,
}

/// The name's length limit (`NAME_MAX`) less room for the dots, the suffix and `.vis-tmp`.
const STEM_MAX: usize = 180;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl<'a> TempFile<'a> {
    /// `.NAME.XXXXXX.vis-tmp` in `dir`, a new file only this patch has opened.
    pub(super) fn create(dir: &'a OwnedFd, target: &OsStr) -> Result<TempFile<'a>, WriteError> {
        let stem = &target.as_bytes()[..target.len().min(STEM_MAX)];
        for _ in 0..64 {
            let mut name = Vec::with_capacity(stem.len() + 20);
            name.push(b'.');
            name.extend_from_slice(stem);
            name.push(b'.');
            name.extend_from_slice(unique_suffix().as_bytes());
            name.extend_from_slice(b".vis-tmp");
            let name = OsString::from(OsStr::from_bytes(&name));
            match openat(
                dir,
                &name,
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            ) {
                Ok(fd) => {
                    return Ok(TempFile {
                        dir,
                        name,
                        fd,
                        armed: Cell::new(true),
                        watch: RefCell::new(None),
                    })
                }
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(WriteError::Io(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "could not find a free temp file name",
        )))
    }

    /// Swap the descriptor for a read-only one (a read lease needs one, and no writer) and
    /// take a read lease on the new version; false if the lease could not be taken.
    pub(super) fn lease_read_only(&mut self) -> Result<bool, WriteError> {
        let Ok(read_only) = openat(
            self.dir,
            &self.name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            // Its mode (the original's) may deny us reading: then it goes without a lease.
            return Ok(false);
        };
        let (reopened, written) = (fstat(&read_only)?, fstat(&self.fd)?);
        if (reopened.st_dev, reopened.st_ino) != (written.st_dev, written.st_ino) {
            return Err(WriteError::Changed(
                "another file appeared at its temp file's name",
            ));
        }
        self.fd = read_only;
        Ok(take_lease(self.fd.as_fd()) == LeaseTake::Held)
    }

    /// Keep what is under the temp name when this is dropped.
    pub(super) fn disarm(&self) {
        self.armed.set(false);
    }

    /// Remove what is under the temp name when this is dropped (again).
    pub(super) fn rearm(&self) {
        self.armed.set(true);
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if self.armed.get() {
            let _ = unlinkat(self.dir, &self.name, AtFlags::empty());
        }
    }
}

/// Six base-36 characters, different across processes, threads and calls.
fn unique_suffix() -> String {
    let count = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let seed = [count, nanos, u64::from(std::process::id())];
    let mut bytes = [0u8; 24];
    for (chunk, value) in bytes.chunks_mut(8).zip(seed) {
        chunk.copy_from_slice(&value.to_le_bytes());
    }
    let mut h = xxhash_rust::xxh3::xxh3_64(&bytes);
    let alphabet = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..6)
        .map(|_| {
            let c = alphabet[(h % 36) as usize] as char;
            h /= 36;
            c
        })
        .collect()
}

/// Whether a path's file name is one of our temp files (tests check none is left behind).
pub fn is_temp_name(path: &Path) -> bool {
    path.file_name()
        .map(|n| n.as_bytes().starts_with(b".") && n.as_bytes().ends_with(b".vis-tmp"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::super::lease::{lease_broken, release_lease};
    use super::super::names_in;
    use super::*;

    fn open_dir(path: &Path) -> OwnedFd {
        openat(
            rustix::fs::CWD,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap()
    }

    #[test]
    fn a_temp_file_is_hidden_named_after_its_target_and_removed_unless_disarmed() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path());
        let temp = TempFile::create(&fd, OsStr::new("notes.md")).unwrap();
        let name = temp.name.to_string_lossy().into_owned();
        assert!(
            name.starts_with(".notes.md.") && name.ends_with(".vis-tmp"),
            "{name}"
        );
        assert!(is_temp_name(Path::new(&name)));
        assert_eq!(names_in(dir.path()), std::slice::from_ref(&name));
        drop(temp);
        assert!(names_in(dir.path()).is_empty(), "removed when dropped");

        let kept = TempFile::create(&fd, OsStr::new("notes.md")).unwrap();
        kept.disarm();
        let name = kept.name.clone();
        drop(kept);
        assert_eq!(names_in(dir.path()), [name.to_string_lossy().into_owned()]);
    }

    #[test]
    fn every_temp_file_is_new_and_its_name_fits_whatever_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path());
        let long = "x".repeat(255);
        let temps: Vec<TempFile<'_>> = (0..20)
            .map(|_| TempFile::create(&fd, OsStr::new(&long)).unwrap())
            .collect();
        let names = names_in(dir.path());
        assert_eq!(names.len(), temps.len(), "each one its own file");
        assert!(names.iter().all(|n| n.len() <= 255), "{names:?}");
    }

    #[test]
    fn only_our_hidden_suffix_counts_as_a_temp_name() {
        assert!(is_temp_name(Path::new("/w/.a.rs.k3v9x2.vis-tmp")));
        assert!(!is_temp_name(Path::new("/w/a.rs.vis-tmp")));
        assert!(!is_temp_name(Path::new("/w/.a.rs")));
        assert!(!is_temp_name(Path::new("/")));
    }

    #[test]
    fn the_read_only_descriptor_names_the_file_written_and_holds_a_lease() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path());
        let mut temp = TempFile::create(&fd, OsStr::new("a.txt")).unwrap();
        assert!(
            temp.lease_read_only().unwrap(),
            "our own file, on a filesystem with leases"
        );
        assert!(!lease_broken(temp.fd.as_fd()));
        release_lease(temp.fd.as_fd());
    }
}
