//! The commit: putting the written temp file at the file's name, making sure no concurrent
//! writer's lines are lost, and undoing the swap when one would be.
//!
//! Both ways begin with a `renameat2(RENAME_EXCHANGE)`, which keeps the old version linked
//! under the temp name so the swap can be undone; where the filesystem (or seccomp) has no
//! exchange, a plain rename follows the checks already made.
//!
//! - **Leased** ([`LockedFile::commit_leased`]): the lease holds back every writer that
//!   reaches the old version. If one is waiting, the exchange is undone and it writes to the
//!   restored file; otherwise the old version is removed before anyone may write to it, and
//!   what late writers append to it is carried over to the new version.
//! - **Watched** ([`LockedFile::commit`]): after the exchange, a moment ([`SETTLE`](super::watch::SETTLE)) for a
//!   write that raced it to land, then the old version is checked once more and the exchange
//!   undone if it changed.
//!
//! Lines appended to the version that loses are carried to the one that stays only when they
//! are a pure append (the version still begins with what this patch knows it held).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::time::Instant;

use rustix::fs::{fstat, openat, renameat, renameat_with, statat, unlinkat, AtFlags, Mode};
use rustix::fs::{OFlags, RenameFlags};
use rustix::io::Errno;

use super::identity::Identity;
use super::lease::{lease_broken, release_lease, wait_for_writers, CARRY_WAIT};
use super::locked::LockedFile;
use super::temp::TempFile;
use super::watch::settle;
use super::{Faults, WriteError};

/// What putting the temp file at the name did.
enum Swap {
    /// The two were exchanged: the old version is under the temp name.
    Exchanged,
    /// No exchange here: the temp file was renamed over the old version, which is gone.
    Renamed,
}

impl LockedFile {
    /// Put the temp file (holding `bytes`) in place. With `RENAME_EXCHANGE` the old file stays
    /// linked under the temp name until it is checked once more after [`SETTLE`](super::watch::SETTLE), so a write
    /// that raced the exchange is undone rather than lost.
    pub(super) fn commit(
        &self,
        temp: TempFile<'_>,
        bytes: &[u8],
        faults: &Faults,
    ) -> Result<(), WriteError> {
        if let Swap::Renamed = self.swap(&temp)? {
            // The checks before the commit were the last.
            return Ok(());
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
        self.undo(&temp)?;
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
    pub(super) fn commit_leased(
        &self,
        temp: TempFile<'_>,
        original: &[u8],
        bytes: &[u8],
        new_leased: bool,
        faults: &Faults,
    ) -> Result<(), WriteError> {
        if let Swap::Renamed = self.swap(&temp)? {
            // The rename removed the old version while it was still leased, as the unlink
            // below does.
            return self.carry_late_appends(&temp, original, new_leased);
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
        self.undo(&temp)?;
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

    /// Exchange the temp file and the file at the name, or, where there is no exchange
    /// (filesystem or seccomp), rename the temp file over it.
    fn swap(&self, temp: &TempFile<'_>) -> Result<Swap, WriteError> {
        match self.exchange(temp) {
            Ok(()) => Ok(Swap::Exchanged),
            Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP | Errno::PERM) => {
                renameat(&self.dir, &temp.name, &self.dir, &self.name)?;
                temp.disarm();
                Ok(Swap::Renamed)
            }
            Err(e) => Err(e.into()),
        }
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

    /// Undo an exchange: what was at the name goes back, the new version returns to the temp
    /// name, to be removed with the guard. If the undo itself fails, both versions are kept.
    fn undo(&self, temp: &TempFile<'_>) -> Result<(), WriteError> {
        temp.disarm();
        self.exchange(temp)?;
        temp.rearm();
        Ok(())
    }

    /// True when the locked file is as it was read, except for its ctime (the exchange itself
    /// updates that).
    fn unchanged_but_ctime(&self) -> Result<bool, WriteError> {
        let now = Identity::of(&fstat(&self.file)?);
        Ok(self.identity.same_but_ctime(&now))
    }

    /// True when the exchange put the file this patch read under the temp name (nobody
    /// pointed the name at another file meanwhile).
    fn swapped_out(&self, temp: &TempFile<'_>) -> bool {
        statat(&self.dir, &temp.name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|st| self.identity.same_object(&st))
            .unwrap_or(false)
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
        let Some(tail) = appended(&self.file, original)? else {
            return Ok(());
        };
        let new = Identity::of(&fstat(&temp.fd)?);
        self.append_at_name(new, &tail)
    }

    /// After an undone commit: lines a writer appended to the new version while it was in
    /// place belong to the file too, so they are appended to the restored original.
    fn keep_appends(&self, temp: &TempFile<'_>, bytes: &[u8]) -> Result<(), WriteError> {
        let new = File::from(temp.fd.try_clone()?);
        let Some(tail) = appended(&new, bytes)? else {
            return Ok(());
        };
        self.append_at_name(self.identity, &tail)
    }

    /// Append `tail` to the file at the name, if that is still `version` (nobody put another
    /// file there meanwhile).
    fn append_at_name(&self, version: Identity, tail: &[u8]) -> Result<(), WriteError> {
        let fd = openat(
            &self.dir,
            &self.name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if !version.same_object(&fstat(&fd)?) {
            return Ok(());
        }
        File::from(fd).write_all(tail)?;
        Ok(())
    }
}

/// What was appended to `version` after `kept`, if it still begins with `kept`; anything else
/// is not an append, and nothing can be carried over safely.
fn appended(version: &File, kept: &[u8]) -> io::Result<Option<Vec<u8>>> {
    let size = fstat(version)?.st_size as u64;
    let kept_len = kept.len() as u64;
    if size <= kept_len {
        return Ok(None);
    }
    let mut head = vec![0u8; kept.len()];
    version.read_exact_at(&mut head, 0)?;
    if head != kept {
        return Ok(None);
    }
    let mut tail = vec![0u8; (size - kept_len) as usize];
    version.read_exact_at(&mut tail, kept_len)?;
    Ok(Some(tail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_holding(dir: &std::path::Path, bytes: &[u8]) -> File {
        let path = dir.join("f");
        std::fs::write(&path, bytes).unwrap();
        File::open(path).unwrap()
    }

    #[test]
    fn only_a_pure_append_is_carried_over() {
        let dir = tempfile::tempdir().unwrap();
        let file = file_holding(dir.path(), b"one\ntwo\nthree\n");
        let cases = [
            (
                "one\n",
                Some("two\nthree\n"),
                "appended after what was kept",
            ),
            ("", Some("one\ntwo\nthree\n"), "everything is new"),
            ("one\ntwo\nthree\n", None, "nothing new"),
            ("ONE\n", None, "rewritten, not appended"),
            (
                "one\ntwo\nthree\nfour\n",
                None,
                "shorter than what was kept",
            ),
        ];
        for (kept, tail, why) in cases {
            let found = appended(&file, kept.as_bytes()).unwrap();
            assert_eq!(found.as_deref(), tail.map(str::as_bytes), "{why}");
        }
    }
}
