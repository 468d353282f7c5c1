//! A file opened for patching: its directory locked, the file opened without following
//! symlinks and leased (or watched), read, and replaced by a write that ends in the commit.
//!
//! [`LockedFile::open`] takes the directory's `flock` (see the module docs of `atomic` for why
//! the directory), opens the file through the directory's descriptor and waits up to
//! [`WRITER_WAIT`] for a writer that has it open to close it, so the read lease can be taken.
//! [`LockedFile::replace`] writes the temp file, copies the owner and then the mode, syncs, runs
//! the checks that the file is still what was read, and hands over to the commit
//! (`commit.rs`); whatever happens, the leases are released and the test hooks joined before
//! it returns.

use std::cell::{Cell, RefCell};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::fs::{
    fchmod, fchown, flock, fstat, fsync, openat, statat, AtFlags, FlockOperation, Gid, Mode,
    OFlags, Uid,
};
use rustix::io::Errno;

use crate::text::confine::{kind_of, still_beneath, Kind, Located};

use super::identity::{same_content, Identity};
use super::lease::{acquire_lease, lease_broken, release_lease, LeaseTake, WRITER_WAIT};
use super::temp::TempFile;
use super::watch::OpenWatch;
use super::{Faults, Hook, OpenError, WriteError};

/// A regular file opened for patching, its directory locked.
pub struct LockedFile {
    /// The directory, opened for reading (flock and fsync need a real descriptor) and locked.
    pub(super) dir: OwnedFd,
    pub(super) name: OsString,
    pub(super) file: File,
    pub(super) identity: Identity,
    root: (u64, u64),
    /// Whether `file` holds a read lease (see `lease.rs`); cleared when it is released.
    pub(super) leased: Cell<bool>,
    /// Without a lease: who opens, writes and closes the file while we work (None without
    /// inotify or /proc).
    pub(super) watch: RefCell<Option<OpenWatch>>,
    /// Test hooks still running (see [`LockedFile::run_hook`]).
    hooks: RefCell<Vec<JoinHandle<()>>>,
}

impl LockedFile {
    /// Lock the directory of `located` (blocking), then open the file in it without following
    /// symlinks.
    pub fn open(located: &Located) -> Result<LockedFile, OpenError> {
        let io = |e: Errno| OpenError::Io(e.into());
        let dir = openat(
            &located.parent,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io)?;
        loop {
            match flock(&dir, FlockOperation::LockExclusive) {
                Ok(()) => break,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(io(e)),
            }
        }
        let fd = match openat(
            &dir,
            &located.name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(OpenError::Swapped),
            Err(e) => return Err(io(e)),
        };
        let stat = fstat(&fd).map_err(io)?;
        let kind = kind_of(&stat);
        if kind != Kind::File {
            return Err(OpenError::NotAFile(kind));
        }
        let (stat, leased, watch) = match acquire_lease(fd.as_fd(), Instant::now() + WRITER_WAIT) {
            // Identity taken again: a writer waited for may have just written.
            LeaseTake::Held => (fstat(&fd).map_err(io)?, true, None),
            LeaseTake::Writers => return Err(OpenError::OpenForWriting),
            LeaseTake::Unsupported => (stat, false, OpenWatch::new(&fd)),
        };
        Ok(LockedFile {
            dir,
            name: located.name.clone(),
            file: File::from(fd),
            identity: Identity::of(&stat),
            root: located.root,
            leased: Cell::new(leased),
            watch: RefCell::new(watch),
            hooks: RefCell::new(Vec::new()),
        })
    }

    /// The file as it was when opened.
    pub fn identity(&self) -> Identity {
        self.identity
    }

    /// Read the whole file.
    pub fn read_all(&mut self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(self.identity.size as usize);
        self.file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// Replace the file with `bytes`, atomically, unless it changed since it was opened and
    /// read as `original`. Writers held back by the lease go on once this returns.
    pub fn replace(
        &self,
        original: &[u8],
        bytes: &[u8],
        faults: &Faults,
    ) -> Result<(), WriteError> {
        let mut temp = TempFile::create(&self.dir, &self.name)?;
        {
            let mut out = File::from(temp.fd.try_clone()?);
            out.write_all(bytes)?;
            self.copy_owner_and_mode(&out)?;
            out.sync_all()?;
        }
        if faults.fail_before_rename {
            return Err(WriteError::Injected);
        }
        let new_leased = self.leased.get() && temp.lease_read_only()?;
        if !new_leased {
            *temp.watch.borrow_mut() = OpenWatch::new(&temp.fd);
        }
        if let Some(hook) = &faults.before_commit {
            self.run_hook(hook, None);
        }
        let result = self.check_and_commit(temp, original, bytes, new_leased, faults);
        self.release_lease();
        for hook in self.hooks.take() {
            if let Err(panic) = hook.join() {
                std::panic::resume_unwind(panic);
            }
        }
        result
    }

    fn check_and_commit(
        &self,
        temp: TempFile<'_>,
        original: &[u8],
        bytes: &[u8],
        new_leased: bool,
        faults: &Faults,
    ) -> Result<(), WriteError> {
        self.check_unchanged(original)?;
        if !still_beneath(&self.dir, self.root)? {
            return Err(WriteError::Escaped);
        }
        if self.leased.get() {
            self.commit_leased(temp, original, bytes, new_leased, faults)?;
        } else {
            self.commit(temp, bytes, faults)?;
        }
        fsync(&self.dir)?;
        Ok(())
    }

    /// Run a test hook the way the concurrent writer it plays would run: on its own thread,
    /// so that an `open` for writing waits for a lease (the old version's, or the new one's
    /// given as `new_version`) as another process's would. Returns once the hook finished or
    /// is waiting for a lease; [`LockedFile::replace`] joins it after releasing the leases.
    pub(super) fn run_hook(&self, hook: &Hook, new_version: Option<BorrowedFd<'_>>) {
        let run = Arc::clone(&hook.0);
        let thread = std::thread::spawn(move || run());
        let waiting = || {
            self.leased.get() && lease_broken(self.file.as_fd())
                || new_version.is_some_and(lease_broken)
        };
        while !(thread.is_finished() || waiting()) {
            std::thread::sleep(Duration::from_micros(100));
        }
        self.hooks.borrow_mut().push(thread);
    }

    pub(super) fn release_lease(&self) {
        if self.leased.replace(false) {
            release_lease(self.file.as_fd());
        }
    }

    /// Owner first (when permitted), then mode: `chown` clears setuid/setgid.
    fn copy_owner_and_mode(&self, out: &File) -> Result<(), WriteError> {
        let Identity { uid, gid, mode, .. } = self.identity;
        let (owner, group) = (Uid::from_raw(uid), Gid::from_raw(gid));
        if fchown(out, Some(owner), Some(group)).is_err() {
            // Not root: keep at least the group when we belong to it; otherwise the file becomes
            // ours, as with any editor's save.
            let _ = fchown(out, None, Some(group));
        }
        fchmod(out, Mode::from_raw_mode(mode & 0o7777))?;
        let now = fstat(out)?;
        let kept_mode = now.st_mode as u32 & 0o7777 == mode & 0o7777;
        let setuid_ok = mode & 0o4000 == 0 || now.st_uid as u32 == uid;
        let setgid_ok = mode & 0o2000 == 0 || now.st_gid as u32 == gid;
        if kept_mode && setuid_ok && setgid_ok {
            Ok(())
        } else {
            Err(WriteError::ModeNotKept { mode, uid, gid })
        }
    }

    /// The file must be what was read: same identity, still at its name, same bytes.
    fn check_unchanged(&self, original: &[u8]) -> Result<(), WriteError> {
        if self.leased.get() && lease_broken(self.file.as_fd()) {
            return Err(WriteError::Changed("another process opened it for writing"));
        }
        // The name first: a file replaced by rename also shows a changed status below.
        match statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(at_name) if self.identity.same_object(&at_name) => {}
            Ok(_) => return Err(WriteError::Changed("its name now points to another file")),
            Err(Errno::NOENT) => return Err(WriteError::Changed("it was deleted or renamed")),
            Err(e) => return Err(e.into()),
        }
        let now = Identity::of(&fstat(&self.file)?);
        if now != self.identity {
            return Err(WriteError::Changed(self.identity.difference(&now)));
        }
        if let Some(watch) = self.watch.borrow().as_ref() {
            if watch.modified() {
                return Err(WriteError::Changed(
                    "another process wrote to it (its content changed)",
                ));
            }
        }
        // Timestamps are only as fine as the filesystem's clock tick, so a same-size rewrite
        // right after the read could keep them; the bytes settle it.
        if !same_content(&self.file, original)? {
            return Err(WriteError::Changed("its content changed"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::names_in;
    use super::*;
    use crate::text::confine::{Access, Workspace};
    use std::fs::OpenOptions;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn open_in(root: &Path, name: &str) -> Result<LockedFile, OpenError> {
        let located = Workspace::new([root])
            .locate(Path::new(name), Access::Write)
            .unwrap();
        LockedFile::open(&located)
    }

    #[test]
    fn a_replace_writes_the_new_bytes_keeps_the_mode_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "old\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut file = open_in(dir.path(), "a.txt").unwrap();
        let original = file.read_all().unwrap();
        assert_eq!(original, b"old\n");
        file.replace(&original, b"new\n", &Faults::default())
            .unwrap();
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), b"new\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o640);
        assert_eq!(names_in(dir.path()), ["a.txt"]);
    }

    #[test]
    fn a_file_kept_open_for_writing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "old\n").unwrap();
        let _writer = OpenOptions::new().append(true).open(&path).unwrap();
        assert!(matches!(
            open_in(dir.path(), "a.txt"),
            Err(OpenError::OpenForWriting)
        ));
    }

    #[test]
    fn a_write_between_the_read_and_the_commit_keeps_the_file_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "old\n").unwrap();
        let mut file = open_in(dir.path(), "a.txt").unwrap();
        let original = file.read_all().unwrap();
        let appender = path.clone();
        let faults = Faults {
            before_commit: Some(Hook::new(move || {
                let mut out = OpenOptions::new().append(true).open(&appender).unwrap();
                out.write_all(b"appended\n").unwrap();
            })),
            ..Faults::default()
        };
        let result = file.replace(&original, b"new\n", &faults);
        assert!(matches!(result, Err(WriteError::Changed(_))), "{result:?}");
        drop(file);
        assert_eq!(std::fs::read(&path).unwrap(), b"old\nappended\n");
        assert_eq!(names_in(dir.path()), ["a.txt"]);
    }

    #[test]
    fn a_name_that_holds_a_directory_now_is_not_a_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "old\n").unwrap();
        let located = Workspace::new([dir.path()])
            .locate(Path::new("a"), Access::Write)
            .unwrap();
        std::fs::remove_file(dir.path().join("a")).unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        assert!(matches!(
            LockedFile::open(&located),
            Err(OpenError::NotAFile(Kind::Directory))
        ));
    }
}
