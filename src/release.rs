//! Closing descriptors whose last close is slow off the path a person waits on.
//!
//! Two kinds are: an inotify instance (the checkpoints' change feed) and a worker's capture
//! file (a file without a name on a journaling filesystem: its last close frees its blocks and
//! takes it off the orphan list, about 0.3–0.8 ms measured here on ext4).
//!
//! The last close of an inotify instance that held watches waits for the kernel to retire
//! them: `fsnotify_destroy_group` flushes the mark reaper, which waits out an SRCU grace
//! period. Measured here: 5–20 ms, whatever the number of watches. Inline, that was most of
//! what checkpoints added to a `vis exec` (its process closed the feed on the way out: +15 ms
//! on a workspace of 200 files, against about 1 ms of walking).
//!
//! So neither is closed for the last time where someone waits:
//! - a long-lived process (`vis chat`, `vis serve`, `vis mcp`) closes it on a short thread of
//!   its own;
//! - a process about to exit (`vis exec`, see [`close_in_a_child_process`]) cannot: its exit
//!   would wait for that thread. It hands the last reference to a child instead (sharing its
//!   memory, see [`hand_to_child`]), which holds it until this process has exited and then
//!   pays the teardown, with no one waiting.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by processes that exit right after their turn.
static IN_A_CHILD: AtomicBool = AtomicBool::new(false);

/// For a process that ends after one turn (`vis exec`): what [`release`] closes is closed by
/// a child that outlives this process, since its exit would otherwise wait for the teardown.
pub fn close_in_a_child_process() {
    IN_A_CHILD.store(true, Ordering::Relaxed);
}

/// Closes `fd` (this process's last reference, or one of them) without waiting for what its
/// last close does (an inotify instance's watches' teardown, a nameless file's blocks freed).
pub(crate) fn release(fd: OwnedFd) {
    if IN_A_CHILD.load(Ordering::Relaxed) && hand_to_child(&fd) {
        // The child holds a reference: this close only drops ours.
        drop(fd);
        return;
    }
    // If no thread can be made, the closure (and `fd`) is dropped here: closed inline.
    let _ = std::thread::Builder::new()
        .name("vis-slow-close".into())
        .spawn(move || drop(fd));
}

/// What the holder of [`hand_to_child`] reads: the descriptor it keeps and the pid of the
/// process it must not outlive.
struct Holder {
    keep: libc::c_int,
    parent: libc::pid_t,
}

/// The holder's stack: it runs in this process's memory (`CLONE_VM`), on a stack of its own.
const HOLDER_STACK_BYTES: usize = 16 * 1024;

/// Starts a child that keeps `fd` open until the calling thread has ended (at the latest,
/// when this process exits), then ends, closing it. `false` when no child could be made.
///
/// The child shares this process's memory (`CLONE_VM`, not a copy: `fork` would copy the page
/// tables of the whole process, about half a millisecond on the way out) and has its own
/// descriptor table. So this process's exit does not tear its memory down either: the child,
/// killed by that exit, does, with no one waiting.
fn hand_to_child(fd: &OwnedFd) -> bool {
    // Both stay for the child, whatever this process does after the call (never freed: the
    // memory goes with the process).
    let holder: &'static Holder = Box::leak(Box::new(Holder {
        keep: fd.as_raw_fd(),
        parent: rustix::process::getpid().as_raw_nonzero().get(),
    }));
    let stack: &'static mut [u8] = Box::leak(vec![0u8; HOLDER_STACK_BYTES].into_boxed_slice());
    // The stack grows down from its end, 16-byte aligned as the ABI wants.
    let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    // The child starts with every signal blocked: no handler of this process (tokio's) ever
    // runs on its stack. The parent-death SIGKILL cannot be blocked.
    // SAFETY: sigset_t is plain data; the calls only read and write the sets given.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
        // SAFETY: `holder_main` makes system calls only (no allocation, no lock, no Rust
        // runtime, nothing that sets `errno` in practice: see there) on the stack above,
        // which stays valid, like `holder`, for as long as the memory exists.
        let pid = libc::clone(
            holder_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::SIGCHLD,
            holder as *const Holder as *mut libc::c_void,
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        pid
    };
    pid > 0
}

/// The holder: makes system calls and nothing else (it shares the memory of a process that
/// goes on running). None of them fails here, so none sets the `errno` it shares with the
/// thread that started it.
extern "C" fn holder_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the leaked `Holder` of `hand_to_child`, never freed.
    let holder = unsafe { &*(arg as *const Holder) };
    // SAFETY: plain system calls on values we own.
    unsafe {
        // Killed when the thread that started it ends (the process's exit included).
        libc::syscall(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::syscall(libc::SYS_getppid) != libc::c_long::from(holder.parent) {
            libc::syscall(libc::SYS_exit, 0);
        }
        // Nothing else stays open: a pipe the person reads (stdout) must see its end when
        // this process's parent ends, not when the child does.
        let keep = holder.keep;
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
        loop {
            // Every signal is blocked: only the parent-death SIGKILL ends this.
            libc::syscall(libc::SYS_pause);
        }
    }
}
