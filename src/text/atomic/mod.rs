//! Locking, reading and atomically replacing one file, all relative to its directory's
//! descriptor: the file work under `patch`.
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
//! So the file is opened with a read *lease* (`lease.rs`), which makes such writers wait and
//! shows them. Before the commit a pending break rejects the batch. The commit is a
//! `renameat2(RENAME_EXCHANGE)`, which keeps the old version linked under the temp name, and
//! the new version is leased too: if a writer is then waiting for the old version, the
//! exchange is undone and the writer goes on into the restored file (lines held back at the
//! new version are carried over to it); otherwise the old version is removed *before* the lease
//! is released, and writers that were still on their way to it are waited for and what they
//! appended is carried over to the new version. What no save by rename can see is an `open`
//! that resolved the name before the exchange and reaches the file only after the carry-over:
//! it gets a deleted file (`st_nlink == 0`, which such a writer can check).
//!
//! Without a lease (not our file and no `CAP_LEASE`, or a filesystem without leases) the
//! file's identity (`identity.rs`), its name and its content are compared just before the
//! commit, an inotify watch (`watch.rs`) reports opens and writes, and the old version is
//! checked once more a moment after the exchange, undoing it if a write slipped in. Where the
//! filesystem cannot exchange, a plain rename is used after the same checks.
//!
//! **Write.** Data written to the temp file (`temp.rs`), then owner copied (when permitted),
//! then mode — in that order because `chown` and unprivileged writes clear the setuid/setgid
//! bits — then fsync, commit, unlink of the old version, fsync of the directory so the rename
//! is durable. Any failure before the commit removes the temp file, leaving the original
//! untouched.
//!
//! One responsibility a file: `locked.rs` opens the file under the lock and runs a write up to
//! the commit; `commit.rs` is the commit itself, with and without a lease, its undo and the
//! carry-over of late appends; `lease.rs`, `watch.rs`, `temp.rs` and `identity.rs` are the
//! pieces they use.

mod commit;
mod identity;
mod lease;
mod locked;
mod temp;
mod watch;

use std::io;
use std::sync::Arc;

use rustix::io::Errno;

use crate::text::confine::Kind;

pub use identity::Identity;
pub use locked::LockedFile;
pub use temp::is_temp_name;

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
    /// `lease::WRITER_WAIT`; it would go on writing into the replaced version.
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

/// The names in a directory, sorted: what a write left behind, for the tests here.
#[cfg(test)]
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
