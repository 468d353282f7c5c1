//! Read leases (`F_SETLEASE`): how a patch sees the writers that neither inotify nor `stat`
//! can, and holds them back while it replaces the file.
//!
//! A read lease can only be taken while nobody has the file open for writing. While it is
//! held, the kernel makes every `open` of the file for writing (and every truncate) wait until
//! it is released, and shows the waiting writer as a pending break ([`lease_broken`]). That
//! covers the two writers timing cannot catch: one that opened the file before the patch
//! began and writes after the commit, and one whose `open` resolved the name just before the
//! commit and reaches the old version after it. Leases need the file to be ours (or
//! `CAP_LEASE`) and a filesystem that has them; without one, [`LeaseTake::Unsupported`] sends
//! the patch to the inotify watch (`watch.rs`).
//!
//! The kernel announces a break with a signal; the lease is set up so that none is delivered
//! (see [`take_lease`]) and breaks are polled instead.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

/// How long opening a file for a patch waits for other writers to close it before refusing
/// ([`super::OpenError::OpenForWriting`]).
pub(super) const WRITER_WAIT: Duration = Duration::from_millis(500);

/// How long a commit waits at most for writers it held back to finish, so that what they
/// append is carried over (a writer that keeps the file open longer loses what it writes
/// after that, as with any save by rename).
pub(super) const CARRY_WAIT: Duration = Duration::from_secs(1);

/// How often the loops below look again.
const POLL: Duration = Duration::from_micros(100);

/// `F_SETSIG`: the asm-generic value, used by every Linux architecture Rust targets (the libc
/// crate defines it for musl only).
const F_SETSIG: libc::c_int = 10;

/// What trying to take a read lease found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LeaseTake {
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

/// Take a read lease on `fd` (opened read-only), at once or not at all.
pub(super) fn take_lease(fd: BorrowedFd<'_>) -> LeaseTake {
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
pub(super) fn lease_broken(fd: BorrowedFd<'_>) -> bool {
    !matches!(fcntl_int(fd, libc::F_GETLEASE, 0), Ok(kind) if kind == libc::F_RDLCK)
}

/// Let the writers held back by the lease on `fd` go on.
pub(super) fn release_lease(fd: BorrowedFd<'_>) {
    let _ = fcntl_int(fd, libc::F_SETLEASE, libc::F_UNLCK);
}

/// Take a read lease on `fd`, waiting until `deadline` for writers to close the file.
pub(super) fn acquire_lease(fd: BorrowedFd<'_>, deadline: Instant) -> LeaseTake {
    loop {
        let taken = take_lease(fd);
        if taken != LeaseTake::Writers || Instant::now() >= deadline {
            return taken;
        }
        std::thread::sleep(POLL);
    }
}

/// Wait (until `deadline`) until nobody has the file open for writing or is about to: a
/// writer counts from the moment its `open` reaches the file.
pub(super) fn wait_for_writers(fd: BorrowedFd<'_>, deadline: Instant) {
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
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{File, OpenOptions};
    use std::io::Write;
    use std::os::fd::AsFd;
    use std::path::{Path, PathBuf};

    /// A file of ours in a fresh directory (the test's own, so leases are allowed), holding
    /// "one\n", and a read-only descriptor of it to lease.
    fn leasable() -> (tempfile::TempDir, PathBuf, File) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "one\n").unwrap();
        let reader = File::open(&path).unwrap();
        (dir, path, reader)
    }

    fn writer(path: &Path) -> File {
        OpenOptions::new().append(true).open(path).unwrap()
    }

    #[test]
    fn a_lease_is_refused_while_the_file_is_open_for_writing_and_taken_once_it_is_closed() {
        let (_dir, path, reader) = leasable();
        let open_writer = writer(&path);
        assert_eq!(take_lease(reader.as_fd()), LeaseTake::Writers);
        // A deadline already past: one try, no waiting.
        assert_eq!(
            acquire_lease(reader.as_fd(), Instant::now()),
            LeaseTake::Writers
        );
        drop(open_writer);
        assert_eq!(take_lease(reader.as_fd()), LeaseTake::Held);
        assert!(!lease_broken(reader.as_fd()));
        release_lease(reader.as_fd());
        assert!(lease_broken(reader.as_fd()), "released: no lease any more");
    }

    #[test]
    fn a_writer_waits_for_the_lease_and_shows_as_a_break_until_it_is_released() {
        let (_dir, path, reader) = leasable();
        assert_eq!(take_lease(reader.as_fd()), LeaseTake::Held);
        let appender = {
            let path = path.clone();
            std::thread::spawn(move || writer(&path).write_all(b"two\n").unwrap())
        };
        let patience = Instant::now() + Duration::from_secs(60);
        while !lease_broken(reader.as_fd()) {
            assert!(Instant::now() < patience, "the writer never showed");
            std::thread::sleep(POLL);
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "one\n",
            "held back until the lease is released"
        );
        release_lease(reader.as_fd());
        appender.join().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
    }

    #[test]
    fn waiting_for_writers_returns_once_the_last_one_closed() {
        let (_dir, path, reader) = leasable();
        let open_writer = writer(&path);
        let closer = std::thread::spawn(move || drop(open_writer));
        wait_for_writers(reader.as_fd(), Instant::now() + Duration::from_secs(60));
        closer.join().unwrap();
        assert!(
            lease_broken(reader.as_fd()),
            "the lease it took to find out is released again"
        );
        assert_eq!(take_lease(reader.as_fd()), LeaseTake::Held, "nobody writes");
        release_lease(reader.as_fd());
    }
}
