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
//!   pays the teardown, with no one waiting. The child starts with a copy of every
//!   descriptor, standard output included, and drops the others first; the process waits
//!   for that before it exits ([`wait_for_holders`]), or whoever reads its output would wait
//!   for the teardown after all.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
/// process it must not outlive; and where it says how far it is.
struct Holder {
    keep: libc::c_int,
    parent: libc::pid_t,
    /// A futex word: the holder's pid while it may hold more than `keep` (written by the
    /// kernel before `clone` returns, `CLONE_PARENT_SETTID`); [`LET_GO`] once it holds
    /// `keep` only; 0 once it has ended, however it ended (written by the kernel as it exits,
    /// `CLONE_CHILD_CLEARTID`, which also wakes the waiters).
    state: AtomicU32,
    /// Tests only: the holder stops before it lets go (as one killed early would).
    #[cfg(test)]
    stall: bool,
}

/// [`Holder::state`] once the holder holds its one descriptor only (no pid is this large).
const LET_GO: u32 = u32::MAX;

/// The holders started by this process, for [`wait_for_holders`].
static HOLDERS: Mutex<Vec<&'static Holder>> = Mutex::new(Vec::new());

/// How long [`wait_for_holders`] waits at most (it is a scheduling round, microseconds, on any
/// machine not stalled): a holder not scheduled by then still lets go when it dies, later.
const HOLDERS_WAIT: Duration = Duration::from_millis(900);

/// Waits until every child started by [`release`] holds its one descriptor only, or has
/// ended: call it before this process exits. Returns how many were still holding more when
/// the wait gave up (0 but on a stalled machine).
///
/// A holder starts with a copy of this process's descriptor table, standard output and error
/// included, and closes them as its first step. On a busy machine that step may come after
/// this process's exit; the program reading our output (a shell's pipe, a benchmark) then sees
/// its end only when the holder dies, after the slow teardown it exists to take off the way
/// (measured: 12–21 ms late in 16 of 67 `vis exec` runs on 2 cores). Waiting here costs a
/// scheduling round at most, usually nothing. A holder that ended first (the thread that
/// started it ended, and took it along) holds nothing either.
pub fn wait_for_holders() -> usize {
    let holders = match HOLDERS.lock() {
        Ok(holders) => holders.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    wait_for(&holders, HOLDERS_WAIT)
}

/// [`wait_for_holders`] for these holders, waiting at most `longest`.
fn wait_for(holders: &[&Holder], longest: Duration) -> usize {
    let deadline = Instant::now() + longest;
    let mut holding = 0;
    for holder in holders {
        loop {
            let state = holder.state.load(Ordering::Acquire);
            if state == 0 || state == LET_GO {
                break;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                holding += 1;
                break;
            };
            let timeout = libc::timespec {
                tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
                // Below 10^9: fits any `c_long`.
                tv_nsec: left.subsec_nanos() as libc::c_long,
            };
            // SAFETY: the word is valid for the process's life (leaked); FUTEX_WAIT only reads
            // it and sleeps while it still holds `state`, at most `timeout`.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    holder.state.as_ptr(),
                    libc::FUTEX_WAIT,
                    state,
                    &timeout as *const libc::timespec,
                );
            }
        }
    }
    holding
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
    hand_over(Holder {
        keep: fd.as_raw_fd(),
        parent: rustix::process::getpid().as_raw_nonzero().get(),
        state: AtomicU32::new(0),
        #[cfg(test)]
        stall: false,
    })
    .is_some()
}

/// [`hand_to_child`] for a holder made: the child's pid and the holder, once started.
fn hand_over(holder: Holder) -> Option<(libc::pid_t, &'static Holder)> {
    // Both stay for the child, whatever this process does after the call (never freed: the
    // memory goes with the process).
    let holder: &'static Holder = Box::leak(Box::new(holder));
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
        // The kernel writes the pid into the state word before `clone` returns, and 0 into it
        // (waking the waiters) when the child ends.
        let state = holder.state.as_ptr().cast::<libc::pid_t>();
        // SAFETY: `holder_main` makes system calls only (no allocation, no lock, no Rust
        // runtime, nothing that sets `errno` in practice: see there) on the stack above,
        // which stays valid, like `holder` and its state word, for as long as the memory
        // exists.
        let pid = libc::clone(
            holder_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_PARENT_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD,
            holder as *const Holder as *mut libc::c_void,
            state,
            std::ptr::null_mut::<libc::c_void>(),
            state,
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        pid
    };
    if pid <= 0 {
        return None;
    }
    match HOLDERS.lock() {
        Ok(mut holders) => holders.push(holder),
        Err(poisoned) => poisoned.into_inner().push(holder),
    }
    Some((pid, holder))
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
        #[cfg(test)]
        if holder.stall {
            loop {
                libc::syscall(libc::SYS_pause);
            }
        }
        // Nothing else stays open: a pipe the person reads (stdout) must see its end when
        // this process's parent ends, not when the child does.
        let keep = holder.keep;
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
        // An atomic store is a plain store here: no call, nothing shared but the word.
        holder.state.store(LET_GO, Ordering::Release);
        libc::syscall(
            libc::SYS_futex,
            holder.state.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
        );
        loop {
            // Every signal is blocked: only the parent-death SIGKILL ends this.
            libc::syscall(libc::SYS_pause);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two-element array.
        assert_eq!(
            unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) },
            0
        );
        // SAFETY: both are new descriptors owned here alone.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn holder_of(keep: &OwnedFd, stall: bool) -> (libc::pid_t, &'static Holder) {
        hand_over(Holder {
            keep: keep.as_raw_fd(),
            parent: rustix::process::getpid().as_raw_nonzero().get(),
            state: AtomicU32::new(0),
            stall,
        })
        .expect("a holder child")
    }

    fn end(pid: libc::pid_t) {
        // SAFETY: a child of this process, signalled and reaped here only.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL);
        }
    }

    #[test]
    fn a_holder_keeps_its_descriptor_and_nothing_else_once_waited_for() {
        let (_read, write) = pipe();
        let (pid, holder) = holder_of(&write, false);
        assert_eq!(wait_for(&[holder], Duration::from_secs(10)), 0);
        assert_eq!(holder.state.load(Ordering::Acquire), LET_GO);
        // Its own table, not this process's (other tests' children may copy ours).
        let open: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .expect("the holder's descriptors")
            .map(|entry| {
                entry
                    .expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(open, vec![write.as_raw_fd().to_string()]);
        end(pid);
    }

    #[test]
    fn a_holder_that_ended_before_letting_go_is_not_waited_for() {
        // As one whose starting thread ended (and took it along) before it was scheduled.
        let (_read, write) = pipe();
        let (pid, holder) = holder_of(&write, true);
        assert_eq!(holder.state.load(Ordering::Acquire), pid as u32);
        end(pid);
        assert_eq!(wait_for(&[holder], Duration::from_secs(10)), 0);
        assert_eq!(holder.state.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_holder_still_holding_everything_is_reported_when_the_wait_gives_up() {
        let (_read, write) = pipe();
        let (pid, holder) = holder_of(&write, true);
        assert_eq!(wait_for(&[holder], Duration::from_millis(20)), 1);
        end(pid);
    }
}
