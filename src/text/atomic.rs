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
//! **Concurrent writers.** Other programs do not take the lock, so the file's identity (device,
//! inode, size, mtime, ctime, mode, owner) is recorded when it is opened and compared again
//! just before the commit, together with what its name points to and its content. The commit
//! is a `renameat2(RENAME_EXCHANGE)`, which keeps the old file linked under the temp name; the
//! old file is checked once more a moment (200 µs) later, so a write that slipped in between
//! the last check and the exchange — typically an appender that opened the file just before
//! it — is still caught: the exchange is undone (lines appended meanwhile to the new version
//! are carried over to the restored file) and the batch rejected. Where the filesystem cannot
//! exchange, a plain rename is used after the same checks. A process that keeps writing
//! through a descriptor it opened long before writes into the replaced file, as with any
//! editor that saves by rename.
//!
//! **Write.** Data written to the temp file, then owner copied (when permitted), then mode —
//! in that order because `chown` and unprivileged writes clear the setuid/setgid bits — then
//! fsync, commit, unlink of the old version, fsync of the directory so the rename is durable.
//! Any failure before the commit removes the temp file, leaving the original untouched.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
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
}

/// A regular file opened for patching, its directory locked.
pub struct LockedFile {
    /// The directory, opened for reading (flock and fsync need a real descriptor) and locked.
    dir: OwnedFd,
    name: OsString,
    file: File,
    identity: Identity,
    root: (u64, u64),
    /// Who opens, writes and closes the file while we work (None without inotify or /proc).
    watch: std::cell::RefCell<Option<OpenWatch>>,
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
        let watch = OpenWatch::new(&fd);
        Ok(LockedFile {
            dir,
            name: located.name.clone(),
            file: File::from(fd),
            identity: Identity::of(&stat),
            root: located.root,
            watch: std::cell::RefCell::new(watch),
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
    /// read as `original`.
    pub fn replace(
        &self,
        original: &[u8],
        bytes: &[u8],
        faults: &Faults,
    ) -> Result<(), WriteError> {
        let temp = TempFile::create(&self.dir, &self.name)?;
        let mut out = File::from(temp.fd.try_clone()?);
        out.write_all(bytes)?;
        self.copy_owner_and_mode(&out)?;
        out.sync_all()?;
        if faults.fail_before_rename {
            return Err(WriteError::Injected);
        }
        if let Some(hook) = &faults.before_commit {
            (hook.0)();
        }
        *temp.watch.borrow_mut() = OpenWatch::new(&temp.fd);
        self.check_unchanged(original)?;
        if !still_beneath(&self.dir, self.root)? {
            return Err(WriteError::Escaped);
        }
        self.commit(temp, bytes)?;
        fsync(&self.dir)?;
        Ok(())
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

    /// Put the temp file (holding `bytes`) in place. With `RENAME_EXCHANGE` the old file stays
    /// linked under the temp name until it is checked once more after [`SETTLE`], so a write
    /// that raced the exchange is undone rather than lost.
    fn commit(&self, temp: TempFile<'_>, bytes: &[u8]) -> Result<(), WriteError> {
        match renameat_with(
            &self.dir,
            &temp.name,
            &self.dir,
            &self.name,
            RenameFlags::EXCHANGE,
        ) {
            Ok(()) => {}
            Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP | Errno::PERM) => {
                // No exchange here (filesystem or seccomp): the checks above were the last.
                renameat(&self.dir, &temp.name, &self.dir, &self.name)?;
                temp.disarm();
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        }
        // A writer that opened the old version just before the exchange writes a moment later;
        // wait for it (and for anyone who opened the file meanwhile to close it) so its write
        // is seen below instead of going into the file about to be unlinked.
        let modified = settle(&self.watch.borrow());
        // The rename itself updates the old file's ctime; anything else must be as it was.
        let old_now = Identity::of(&fstat(&self.file)?);
        let old_still_same = !modified
            && Identity {
                ctime: self.identity.ctime,
                ..old_now
            } == self.identity;
        let swapped_out_ours = statat(&self.dir, &temp.name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|st| self.identity.same_object(&st))
            .unwrap_or(false);
        if old_still_same && swapped_out_ours {
            // The temp name now holds the old version; the guard removes it.
            return Ok(());
        }
        // Undo: what was at the name goes back, the new version returns to the temp name and
        // is removed by the guard. If the undo itself fails, both versions are kept.
        temp.disarm();
        renameat_with(
            &self.dir,
            &temp.name,
            &self.dir,
            &self.name,
            RenameFlags::EXCHANGE,
        )?;
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
        use std::os::fd::AsRawFd;
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
