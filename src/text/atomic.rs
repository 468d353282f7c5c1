//! Locking, reading and atomically replacing one file, all relative to its directory's
//! descriptor.
//!
//! **Descriptors, not paths.** [`crate::text::confine`] hands over the open directory that
//! holds the file. Everything here — the lock, opening the file, creating the temp file,
//! the rename — is an `*at` call on that descriptor with `O_NOFOLLOW`/`O_EXCL`, so swapping the
//! directory or the file for a symlink between the confinement check and the write cannot
//! send the write anywhere else: the descriptor still names the checked directory, a symlink
//! at the file's name is refused when opening, and a rename replaces a name, never what a
//! symlink points to.
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
//! **Concurrent writers.** Other programs do not take the lock. Timing cannot catch them all:
//! a writer may open the file before the patch starts and write after the commit, or its
//! `open` may resolve the name just before the commit and reach the old version after it
//! (under load, milliseconds later); either way its lines would go into the replaced file.
//! So the file is opened with a read *lease* (`F_SETLEASE`): it can only be taken while nobody
//! has the file open for writing (patch waits up to [`WRITER_WAIT`] for such a writer to
//! close, then refuses), and while it is held the kernel makes every `open` for writing wait
//! and shows it as a pending break. Before the commit a pending break rejects the batch. The
//! commit is a `renameat2(RENAME_EXCHANGE)`, which keeps the old version linked under the temp
//! name, and the new version is leased too: if a writer is then waiting for the old version,
//! the exchange is undone and the writer goes on into the restored file (lines held back at
//! the new version are carried over to it); otherwise the old version is removed *before*
//! the lease is released, and writers that were still on their way to it are waited for and
//! what they appended is carried over to the new version. What no save by rename can see is
//! an `open` that resolved the name before the exchange and reaches the file only after the
//! carry-over: it gets a deleted file (`st_nlink == 0`, which such a writer can check).
//!
//! Without a lease (not our file and no `CAP_LEASE`, or a filesystem without leases) the
//! file's identity (device, inode, size, mtime, ctime, mode, owner), its name and its content
//! are compared just before the commit, an inotify watch reports opens and writes, and the
//! old version is checked once more a moment ([`SETTLE`]) after the exchange, undoing it if a
//! write slipped in. Where the filesystem cannot exchange, a plain rename is used after the
//! same checks.
//!
//! **Write.** Data written to the temp file, then owner copied (when permitted), then mode —
//! in that order because `chown` and unprivileged writes clear the setuid/setgid bits — then
//! fsync, commit, unlink of the old version, fsync of the directory so the rename is durable.
//! Any failure before the commit removes the temp file, leaving the original untouched.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::{
    fchmod, fchown, flock, fstat, fsync, openat, renameat, renameat_with, statat, unlinkat,
    AtFlags, FlockOperation, Gid, Mode, OFlags, RenameFlags, Stat, Uid,
};
use rustix::io::Errno;

use crate::text::confine::{kind_of, still_beneath, Kind, Located};

/// The identity of a file's content as seen through `stat`; any write, replacement, chmod or
/// chown changes at least one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, u64),
    pub ctime: (i64, u64),
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

// `Stat`'s field types differ between architectures; the casts are no-ops only on some.
#[allow(clippy::unnecessary_cast)]
impl Identity {
    pub fn of(stat: &Stat) -> Identity {
        Identity {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
            size: stat.st_size as u64,
            mtime: (stat.st_mtime as i64, stat.st_mtime_nsec as u64),
            ctime: (stat.st_ctime as i64, stat.st_ctime_nsec as u64),
            mode: stat.st_mode as u32,
            uid: stat.st_uid as u32,
            gid: stat.st_gid as u32,
        }
    }

    fn same_object(&self, stat: &Stat) -> bool {
        (self.dev, self.ino) == (stat.st_dev as u64, stat.st_ino as u64)
    }

    /// What differs from `now`, in words for the error message.
    fn difference(&self, now: &Identity) -> &'static str {
        if (self.dev, self.ino) != (now.dev, now.ino) {
            "it was replaced by another file"
        } else if self.size != now.size {
            "its size changed (another process wrote to it)"
        } else if self.mtime != now.mtime {
            "its modification time changed (another process wrote to it)"
        } else if self.mode != now.mode || (self.uid, self.gid) != (now.uid, now.gid) {
            "its mode or owner changed"
        } else {
            "its status changed (another process touched it)"
        }
    }
}

/// Why opening the file failed in a way the caller explains to the model.
#[derive(Debug)]
pub enum OpenError {
    Io(io::Error),
    /// The name now holds a directory, FIFO, device or symlink: it changed after resolution
    /// or was never a regular file.
    NotAFile(Kind),
    /// A symlink appeared at the name after it was resolved.
    Swapped,
    /// Another process (or this one) kept the file open for writing for longer than
    /// [`WRITER_WAIT`]; it would go on writing into the replaced version.
    OpenForWriting,
}

/// Why a write failed.
#[derive(Debug)]
pub enum WriteError {
    Io(io::Error),
    /// Fault injection (`Faults::fail_before_rename`).
    Injected,
    /// The file changed after it was read; the reason in words.
    Changed(&'static str),
    /// The directory was moved out of the workspace after it was resolved.
    Escaped,
    /// A setuid/setgid bit or the mode could not be kept (the new file would not be owned by
    /// the original owner/group).
    ModeNotKept {
        mode: u32,
        uid: u32,
        gid: u32,
    },
}

impl From<io::Error> for WriteError {
    fn from(err: io::Error) -> Self {
        WriteError::Io(err)
    }
}

impl From<Errno> for WriteError {
    fn from(err: Errno) -> Self {
        WriteError::Io(err.into())
    }
}

/// Something to run just before the commit checks, in tests that play a concurrent writer or
/// attacker.
#[derive(Clone)]
pub struct Hook(pub Arc<dyn Fn() + Send + Sync>);

impl Hook {
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Hook {
        Hook(Arc::new(f))
    }
}

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook(..)")
    }
}

/// Where a write may be made to fail on purpose (fault-injection tests).
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Fail after the temp file is written and synced, just before the rename.
    pub fail_before_rename: bool,
    /// Run after the temp file is synced, before the checks that precede the commit.
    pub before_commit: Option<Hook>,
    /// Run right after the exchange put the new version at the name.
    pub after_exchange: Option<Hook>,
}

/// A regular file opened for patching, its directory locked.
pub struct LockedFile {
    /// The directory, opened for reading (flock and fsync need a real descriptor) and locked.
    dir: OwnedFd,
    name: OsString,
    file: File,
    identity: Identity,
    root: (u64, u64),
    /// Whether `file` holds a read lease (see [`take_lease`]); cleared when it is released.
    leased: std::cell::Cell<bool>,
    /// Without a lease: who opens, writes and closes the file while we work (None without
    /// inotify or /proc).
    watch: std::cell::RefCell<Option<OpenWatch>>,
    /// Test hooks still running (see [`LockedFile::run_hook`]).
    hooks: std::cell::RefCell<Vec<std::thread::JoinHandle<()>>>,
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
            leased: std::cell::Cell::new(leased),
            watch: std::cell::RefCell::new(watch),
            hooks: std::cell::RefCell::new(Vec::new()),
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
    fn run_hook(&self, hook: &Hook, new_version: Option<BorrowedFd<'_>>) {
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

    fn release_lease(&self) {
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

    /// Swaps the temp file and the file at the name (`RENAME_EXCHANGE`).
    fn exchange(&self, temp: &TempFile<'_>) -> Result<(), Errno> {
        renameat_with(
            &self.dir,
            &temp.name,
            &self.dir,
            &self.name,
            RenameFlags::EXCHANGE,
        )
    }

    /// True when the locked file is as it was read, except for its ctime (the exchange itself
    /// updates that).
    fn unchanged_but_ctime(&self) -> Result<bool, WriteError> {
        let now = Identity::of(&fstat(&self.file)?);
        Ok(Identity {
            ctime: self.identity.ctime,
            ..now
        } == self.identity)
    }

    /// True when the exchange put the file this patch read under the temp name (nobody
    /// pointed the name at another file meanwhile).
    fn swapped_out(&self, temp: &TempFile<'_>) -> bool {
        statat(&self.dir, &temp.name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|st| self.identity.same_object(&st))
            .unwrap_or(false)
    }

    /// Put the temp file (holding `bytes`) in place. With `RENAME_EXCHANGE` the old file stays
    /// linked under the temp name until it is checked once more after [`SETTLE`], so a write
    /// that raced the exchange is undone rather than lost.
    fn commit(&self, temp: TempFile<'_>, bytes: &[u8], faults: &Faults) -> Result<(), WriteError> {
        match self.exchange(&temp) {
            Ok(()) => {}
            Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP | Errno::PERM) => {
                // No exchange here (filesystem or seccomp): the checks above were the last.
                renameat(&self.dir, &temp.name, &self.dir, &self.name)?;
                temp.disarm();
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
        if let Some(hook) = &faults.after_exchange {
            self.run_hook(hook, None);
        }
        // A writer that opened the old version just before the exchange writes a moment later;
        // wait for it (and for anyone who opened the file meanwhile to close it) so its write
        // is seen below instead of going into the file about to be unlinked.
        let modified = settle(&self.watch.borrow());
        let old_still_same = !modified && self.unchanged_but_ctime()?;
        let swapped_out_ours = self.swapped_out(&temp);
        if old_still_same && swapped_out_ours {
            // The temp name now holds the old version; the guard removes it.
            return Ok(());
        }
        // Undo: what was at the name goes back, the new version returns to the temp name and
        // is removed by the guard. If the undo itself fails, both versions are kept.
        temp.disarm();
        self.exchange(&temp)?;
        temp.armed.set(true);
        if old_still_same {
            return Err(WriteError::Changed(
                "its name was pointed at another file during the write",
            ));
        }
        settle(&temp.watch.borrow());
        self.keep_appends(&temp, bytes)?;
        Err(WriteError::Changed(
            "another process wrote to it during the write",
        ))
    }

    /// Put the temp file (holding `bytes`) in place while the lease holds back every writer
    /// that reaches the old version — including one whose `open` resolved the name just before
    /// the exchange. If one is waiting, the exchange is undone and it writes to the restored
    /// file; otherwise the old version is removed before anyone may write to it, so a writer
    /// that still gets to it gets a deleted file, and what it appends is carried over.
    fn commit_leased(
        &self,
        temp: TempFile<'_>,
        original: &[u8],
        bytes: &[u8],
        new_leased: bool,
        faults: &Faults,
    ) -> Result<(), WriteError> {
        match self.exchange(&temp) {
            Ok(()) => {}
            Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP | Errno::PERM) => {
                // No exchange here (filesystem or seccomp): the rename removes the old version
                // while it is still leased, as the unlink below does.
                renameat(&self.dir, &temp.name, &self.dir, &self.name)?;
                temp.disarm();
                return self.carry_late_appends(&temp, original, new_leased);
            }
            Err(e) => return Err(e.into()),
        }
        if let Some(hook) = &faults.after_exchange {
            self.run_hook(hook, new_leased.then(|| temp.fd.as_fd()));
        }
        let old_unchanged = self.unchanged_but_ctime()?;
        let swapped_out_ours = self.swapped_out(&temp);
        let writer_waiting = lease_broken(self.file.as_fd());
        if old_unchanged && swapped_out_ours && !writer_waiting {
            unlinkat(&self.dir, &temp.name, AtFlags::empty())?;
            temp.disarm();
            return self.carry_late_appends(&temp, original, new_leased);
        }
        // Undo: what was at the name goes back, the new version returns to the temp name and
        // is removed. If the undo itself fails, both versions are kept.
        temp.disarm();
        self.exchange(&temp)?;
        temp.armed.set(true);
        // The original is at its name again: a writer waiting for it may go on.
        self.release_lease();
        if !swapped_out_ours {
            return Err(WriteError::Changed(
                "its name was pointed at another file during the write",
            ));
        }
        if new_leased {
            // Writers of the new version (held back by its lease while it was at the name)
            // get a removed file; what they append is carried to the restored original.
            unlinkat(&self.dir, &temp.name, AtFlags::empty())?;
            temp.disarm();
            release_lease(temp.fd.as_fd());
            wait_for_writers(temp.fd.as_fd(), Instant::now() + CARRY_WAIT);
        } else {
            settle(&temp.watch.borrow());
        }
        self.keep_appends(&temp, bytes)?;
        Err(WriteError::Changed(if old_unchanged {
            "another process opened it for writing during the write"
        } else {
            "another process wrote to it during the write"
        }))
    }

    /// After a leased commit removed the old version: writers the lease held back (their
    /// `open` had resolved the name before the exchange) now write into the removed file.
    /// Wait until they are done and append what they added to the new version.
    fn carry_late_appends(
        &self,
        temp: &TempFile<'_>,
        original: &[u8],
        new_leased: bool,
    ) -> Result<(), WriteError> {
        if new_leased {
            // The new version is final: its writers (and the carry-over below) may write.
            release_lease(temp.fd.as_fd());
        }
        self.release_lease();
        wait_for_writers(self.file.as_fd(), Instant::now() + CARRY_WAIT);
        let size = fstat(&self.file)?.st_size as u64;
        let kept = original.len() as u64;
        if size <= kept {
            return Ok(());
        }
        let mut head = vec![0u8; original.len()];
        self.file.read_exact_at(&mut head, 0)?;
        if head != original {
            // Not an append: nothing to carry over safely.
            return Ok(());
        }
        let mut tail = vec![0u8; (size - kept) as usize];
        self.file.read_exact_at(&mut tail, kept)?;
        let new = fstat(&temp.fd)?;
        let fd = openat(
            &self.dir,
            &self.name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let at_name = fstat(&fd)?;
        if (at_name.st_dev, at_name.st_ino) != (new.st_dev, new.st_ino) {
            return Ok(());
        }
        File::from(fd).write_all(&tail)?;
        Ok(())
    }

    /// After an undone commit: lines a writer appended to the new version while it was in
    /// place belong to the file too, so they are appended to the restored original.
    fn keep_appends(&self, temp: &TempFile<'_>, bytes: &[u8]) -> Result<(), WriteError> {
        let size = fstat(&temp.fd)?.st_size as u64;
        if size <= bytes.len() as u64 {
            return Ok(());
        }
        let new = File::from(temp.fd.try_clone()?);
        let mut tail = vec![0u8; (size - bytes.len() as u64) as usize];
        new.read_exact_at(&mut tail, bytes.len() as u64)?;
        let mut head = vec![0u8; bytes.len()];
        new.read_exact_at(&mut head, 0)?;
        if head != bytes {
            // Not an append: nothing to carry over safely.
            return Ok(());
        }
        let fd = openat(
            &self.dir,
            &self.name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if !self.identity.same_object(&fstat(&fd)?) {
            return Ok(());
        }
        File::from(fd).write_all(&tail)?;
        Ok(())
    }
}

/// How long opening a file for a patch waits for other writers to close it before refusing
/// ([`OpenError::OpenForWriting`]).
const WRITER_WAIT: Duration = Duration::from_millis(500);

/// How long a commit waits at most for writers it held back to finish, so that what they
/// append is carried over (a writer that keeps the file open longer loses what it writes
/// after that, as with any save by rename).
const CARRY_WAIT: Duration = Duration::from_secs(1);

/// `F_SETSIG`: the asm-generic value, used by every Linux architecture Rust targets (the libc
/// crate defines it for musl only).
const F_SETSIG: libc::c_int = 10;

/// What trying to take a read lease found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeaseTake {
    Held,
    /// Someone has the file open for writing.
    Writers,
    /// Not our file and no `CAP_LEASE`, a filesystem without leases, or leases disabled.
    Unsupported,
}

/// `fcntl` with an integer argument.
fn fcntl_int(fd: BorrowedFd<'_>, cmd: libc::c_int, arg: libc::c_int) -> io::Result<libc::c_int> {
    // SAFETY: `fd` is a live descriptor and the commands used here take an integer argument
    // and touch no memory of ours.
    let result = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, arg) };
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// Take a read lease on `fd` (opened read-only). While it is held, the kernel makes every
/// `open` of the file for writing (and every truncate) wait until it is released, and the
/// waiting writer shows as a pending break ([`lease_broken`]); it can only be taken while
/// nobody has the file open for writing. This is what lets a patch see the writers that
/// inotify and `stat` cannot: one that opened the file before the patch began and writes
/// later, or one whose `open` resolved the name just before the commit.
fn take_lease(fd: BorrowedFd<'_>) -> LeaseTake {
    // The kernel announces a break with a signal, SIGIO unless F_SETSIG says otherwise, and
    // SIGIO's default action ends the process. SIGURG is ignored by default, and clearing the
    // owner afterwards stops the signal altogether; breaks are polled instead.
    if fcntl_int(fd, F_SETSIG, libc::SIGURG).is_err() {
        return LeaseTake::Unsupported;
    }
    match fcntl_int(fd, libc::F_SETLEASE, libc::F_RDLCK) {
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return LeaseTake::Writers,
        Err(_) => return LeaseTake::Unsupported,
    }
    let _ = fcntl_int(fd, libc::F_SETOWN, 0);
    LeaseTake::Held
}

/// Whether a writer is waiting for the lease on `fd` (or the lease is gone).
fn lease_broken(fd: BorrowedFd<'_>) -> bool {
    !matches!(fcntl_int(fd, libc::F_GETLEASE, 0), Ok(kind) if kind == libc::F_RDLCK)
}

fn release_lease(fd: BorrowedFd<'_>) {
    let _ = fcntl_int(fd, libc::F_SETLEASE, libc::F_UNLCK);
}

/// Take a read lease on `fd`, waiting until `deadline` for writers to close the file.
fn acquire_lease(fd: BorrowedFd<'_>, deadline: Instant) -> LeaseTake {
    loop {
        let taken = take_lease(fd);
        if taken != LeaseTake::Writers || Instant::now() >= deadline {
            return taken;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Wait (until `deadline`) until nobody has the file open for writing or is about to: a
/// writer counts from the moment its `open` reaches the file.
fn wait_for_writers(fd: BorrowedFd<'_>, deadline: Instant) {
    loop {
        match take_lease(fd) {
            LeaseTake::Held => {
                let writer_arrived = lease_broken(fd);
                release_lease(fd);
                if !writer_arrived {
                    return;
                }
            }
            LeaseTake::Writers => {}
            LeaseTake::Unsupported => return,
        }
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// How long a commit waits before its last check: long enough for an `open` that found the
/// old version just before the exchange to finish and announce itself.
const SETTLE: Duration = Duration::from_micros(200);

/// How long a commit waits at most for other processes to close a file they opened during
/// the patch (a reader that keeps it open longer only delays the patch by this much).
const CLOSE_WAIT: Duration = Duration::from_millis(50);

/// Wait for writes in flight to land; true if the watched file was modified meanwhile.
fn settle(watch: &Option<OpenWatch>) -> bool {
    std::thread::sleep(SETTLE);
    match watch {
        Some(watch) => {
            watch.wait_closed(CLOSE_WAIT);
            watch.modified()
        }
        None => false,
    }
}

/// What one watch has seen since it began.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// Opens seen minus closes seen.
    open: i64,
    modified: bool,
}

/// One inotify instance for the whole process, shared by every patch: closing an inotify
/// descriptor waits for an RCU grace period (milliseconds), far too slow to pay per patch,
/// while adding and removing a watch is cheap. Events are routed to watches by descriptor.
struct Notifier {
    fd: OwnedFd,
    seen: std::collections::HashMap<i32, Seen>,
}

/// `None` inside once inotify turned out to be unavailable (then it is not retried).
static NOTIFIER: std::sync::Mutex<Option<Option<Notifier>>> = std::sync::Mutex::new(None);

impl Notifier {
    fn drain(&mut self) {
        use rustix::fs::inotify::{ReadFlags, Reader};
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = Reader::new(&self.fd, &mut buf);
        while let Ok(event) = reader.next() {
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were dropped: every watch must assume the worst.
                for seen in self.seen.values_mut() {
                    seen.modified = true;
                }
                continue;
            }
            let Some(seen) = self.seen.get_mut(&event.wd()) else {
                continue;
            };
            if flags.contains(ReadFlags::OPEN) {
                seen.open += 1;
            }
            if flags.intersects(ReadFlags::CLOSE_WRITE | ReadFlags::CLOSE_NOWRITE) {
                seen.open -= 1;
            }
            if flags.contains(ReadFlags::MODIFY) {
                seen.modified = true;
            }
        }
    }
}

/// Run `f` on the shared notifier, creating it on first use; `None` without inotify.
fn with_notifier<T>(f: impl FnOnce(&mut Notifier) -> T) -> Option<T> {
    use rustix::fs::inotify;
    let mut guard = NOTIFIER.lock().ok()?;
    if guard.is_none() {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK);
        *guard = Some(fd.ok().map(|fd| Notifier {
            fd,
            seen: std::collections::HashMap::new(),
        }));
    }
    guard.as_mut()?.as_mut().map(f)
}

/// The opens, closes and writes of one file by anyone, through inotify. Writers that open,
/// write and close (`echo >> file`) are seen opening, so a commit can wait until they are done
/// instead of guessing.
struct OpenWatch {
    wd: i32,
}

impl OpenWatch {
    /// Watch the file open as `file`; `None` when inotify or `/proc` is not available, in
    /// which case commits rely on the status checks and [`SETTLE`] alone.
    fn new(file: &OwnedFd) -> Option<OpenWatch> {
        use rustix::fs::inotify;
        // The descriptor's /proc link names exactly the open file, even if renamed since.
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let flags = inotify::WatchFlags::OPEN
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::CLOSE_NOWRITE
            | inotify::WatchFlags::MODIFY;
        with_notifier(|n| {
            // Events of an earlier watch with the same number must not count for this one.
            n.drain();
            let wd = inotify::add_watch(&n.fd, &path, flags).ok()?;
            n.seen.insert(wd, Seen::default());
            Some(OpenWatch { wd })
        })
        .flatten()
    }

    /// Everything seen so far.
    fn seen(&self) -> Seen {
        with_notifier(|n| {
            n.drain();
            n.seen.get(&self.wd).copied().unwrap_or_default()
        })
        .unwrap_or_default()
    }

    fn modified(&self) -> bool {
        self.seen().modified
    }

    /// Wait (at most `limit`) until everyone who opened the file since the watch began has
    /// closed it again.
    fn wait_closed(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.seen().open > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        with_notifier(|n| {
            let _ = rustix::fs::inotify::remove_watch(&n.fd, self.wd);
            n.seen.remove(&self.wd);
        });
    }
}

/// Compare the file's current bytes with `original` without holding a second copy.
fn same_content(file: &File, original: &[u8]) -> io::Result<bool> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut offset = 0usize;
    loop {
        let n = file.read_at(&mut buf, offset as u64)?;
        if n == 0 {
            return Ok(offset == original.len());
        }
        let end = offset + n;
        if end > original.len() || buf[..n] != original[offset..end] {
            return Ok(false);
        }
        offset = end;
    }
}

/// A temp file next to the target, removed on drop unless disarmed.
struct TempFile<'a> {
    dir: &'a OwnedFd,
    name: OsString,
    fd: OwnedFd,
    armed: std::cell::Cell<bool>,
    /// Watches the new version while it is in place, for a commit that has to be undone.
    watch: std::cell::RefCell<Option<OpenWatch>>,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl<'a> TempFile<'a> {
    /// `.NAME.XXXXXX.vis-tmp`, created `O_EXCL | O_NOFOLLOW` so it can never be an existing
    /// file or a planted symlink.
    fn create(dir: &'a OwnedFd, target: &OsStr) -> Result<TempFile<'a>, WriteError> {
        // Keep the whole name under NAME_MAX (255) whatever the target's length.
        let stem = &target.as_bytes()[..target.len().min(180)];
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
                        armed: std::cell::Cell::new(true),
                        watch: std::cell::RefCell::new(None),
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
    fn lease_read_only(&mut self) -> Result<bool, WriteError> {
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

    fn disarm(&self) {
        self.armed.set(false);
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
