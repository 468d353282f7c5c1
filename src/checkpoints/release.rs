//! Closing an inotify instance off the path a person waits on.
//!
//! The last close of an inotify instance that held watches waits for the kernel to retire
//! them: `fsnotify_destroy_group` flushes the mark reaper, which waits out an SRCU grace
//! period. Measured here: 5–20 ms, whatever the number of watches. Inline, that was most of
//! what checkpoints added to a `vis exec` (its process closed the feed on the way out: +15 ms
//! on a workspace of 200 files, against about 1 ms of walking).
//!
//! So a feed's instance is never closed where someone waits:
//! - a long-lived process (`vis chat`, `vis serve`, `vis mcp`) closes it on a short thread of
//!   its own;
//! - a process about to exit (`vis exec`, see [`close_in_a_child_process`]) cannot: its exit
//!   would wait for that thread. It hands the last reference to a forked child instead, which
//!   holds it until this process has exited and then pays the teardown, with no one waiting.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by processes that exit right after their turn.
static IN_A_CHILD: AtomicBool = AtomicBool::new(false);

/// For a process that ends after one turn (`vis exec`): feeds are closed by a forked child
/// that outlives this process, since its exit would otherwise wait for their teardown.
pub fn close_in_a_child_process() {
    IN_A_CHILD.store(true, Ordering::Relaxed);
}

/// Closes `fd` (an inotify instance) without waiting for its watches' teardown.
pub(crate) fn release(fd: OwnedFd) {
    if IN_A_CHILD.load(Ordering::Relaxed) && hand_to_child(&fd) {
        // The child holds a reference: this close only drops ours.
        drop(fd);
        return;
    }
    // If no thread can be made, the closure (and `fd`) is dropped here: closed inline.
    let _ = std::thread::Builder::new()
        .name("vis-inotify-close".into())
        .spawn(move || drop(fd));
}

/// Forks a child that keeps `fd` open until the calling thread has ended (at the latest, when
/// this process exits), then ends, closing it. `false` when no child could be made.
fn hand_to_child(fd: &OwnedFd) -> bool {
    let keep = fd.as_raw_fd();
    let parent = rustix::process::getpid().as_raw_nonzero().get();
    // SAFETY: after `fork` in a multi-threaded process the child may only make
    // async-signal-safe calls: it makes system calls and nothing else (no allocation, no
    // lock, no Rust runtime), then ends with `_exit`.
    match unsafe { libc::fork() } {
        0 => unsafe {
            // Killed when the thread that forked ends (the process's exit included).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            if libc::getppid() != parent {
                libc::_exit(0);
            }
            // Nothing else stays open: a pipe the person reads (stdout) must see its end
            // when this process's parent ends, not when the child does.
            if keep > 0 {
                libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
            }
            libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
            loop {
                libc::pause();
            }
        },
        pid => pid > 0,
    }
}
