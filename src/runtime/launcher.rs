//! Process isolation at worker start: a PID namespace so nothing a block starts outlives it.
//!
//! `vis worker` calls [`isolate`] first thing, while it is still single-threaded:
//!
//! ```text
//! host ── launcher (host's PID namespace; the pid the host knows)
//!           └─ init    (PID 1 of a new PID namespace: reaps orphans, relays the exit)
//!                └─ worker (PID 2: runs Python; `isolate` returns here)
//! ```
//!
//! When init exits the kernel kills every process left in the namespace, however it was
//! started (`setsid`, double forks, `start_new_session=True`). Init dies with the worker, and
//! with the launcher (parent-death signal), which dies with the host's kill; the worker also
//! exits when the host's pipe closes, so a host killed with `kill -9` takes everything along.
//!
//! Why three processes: the process that calls `unshare(CLONE_NEWPID)` stays outside the new
//! namespace, and PID 1 ignores signals from inside its namespace and must reap orphans, which
//! would steal exit statuses from Python's `subprocess` if the interpreter itself were PID 1.
//!
//! A PID namespace needs `CAP_SYS_ADMIN`; an unprivileged user gets it inside a new user
//! namespace that maps only its own uid and gid (so files keep their owners). Root skips the
//! user namespace, so it keeps its powers over files it does not own. Where the kernel refuses
//! (no user namespaces, a seccomp policy), the worker runs without the namespace as a child
//! subreaper, so the host's kill still finds orphans among its descendants; [`Isolation`] says
//! which layer is missing and why.

use std::io::Write;

use super::wire::Isolation;

/// Enters the isolation; returns in the process that should run the interpreter. Must be
/// called before any thread is started.
pub fn isolate() -> Isolation {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let flags = if uid == 0 {
        libc::CLONE_NEWPID
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWPID
    };
    // SAFETY: unshare with namespace flags; the process is single-threaded here.
    if unsafe { libc::unshare(flags) } != 0 {
        return fallback(format!(
            "no PID namespace (unshare: {}); processes a block starts in the background may outlive a crashed worker",
            std::io::Error::last_os_error()
        ));
    }
    if uid != 0 {
        if let Err(e) = map_ids(uid, gid) {
            return fallback(format!("no PID namespace (uid map: {e})"));
        }
    }
    let mut status_pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return fallback(format!(
            "no PID namespace (pipe: {})",
            std::io::Error::last_os_error()
        ));
    }
    let [status_read, status_write] = status_pipe;
    // SAFETY: single-threaded fork; the child only continues with async-signal-safe setup
    // before it forks again or returns.
    let init = unsafe { libc::fork() };
    if init < 0 {
        return fallback(format!(
            "no PID namespace (fork: {})",
            std::io::Error::last_os_error()
        ));
    }
    if init > 0 {
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(status_write) };
        run_launcher(init, status_read);
    }
    // PID 1 of the new namespace.
    // SAFETY: closing the read end we do not use.
    unsafe { libc::close(status_read) };
    die_with_parent();
    // SAFETY: as above.
    let worker = unsafe { libc::fork() };
    if worker < 0 {
        // SAFETY: plain _exit.
        unsafe { libc::_exit(71) };
    }
    if worker > 0 {
        run_init(worker, status_write);
    }
    // SAFETY: as above.
    unsafe { libc::close(status_write) };
    die_with_parent();
    // SAFETY: getppid has no effects. Init may have died before the line above.
    if unsafe { libc::getppid() } != 1 {
        // SAFETY: plain _exit.
        unsafe { libc::_exit(70) };
    }
    Isolation {
        pid_namespace: true,
        missing: None,
    }
}

fn fallback(why: String) -> Isolation {
    // SAFETY: prctl with a constant option; failure only loses the subreaper.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    Isolation {
        pid_namespace: false,
        missing: Some(why),
    }
}

/// Maps our own uid and gid into the new user namespace (identity mapping).
fn map_ids(uid: libc::uid_t, gid: libc::gid_t) -> std::io::Result<()> {
    let write = |path: &str, text: &str| -> std::io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)?
            .write_all(text.as_bytes())
    };
    write("/proc/self/uid_map", &format!("{uid} {uid} 1\n"))?;
    // Required before an unprivileged process may write gid_map.
    write("/proc/self/setgroups", "deny")?;
    write("/proc/self/gid_map", &format!("{gid} {gid} 1\n"))
}

/// SIGKILL when the parent goes. (Init cannot check whether the launcher is already gone:
/// its parent lives outside its namespace, so `getppid` says 0. That window is covered by the
/// worker, which exits when the host's pipe closes.)
fn die_with_parent() {
    // SAFETY: prctl has no memory effects.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
}

/// The launcher: waits for init, then ends the way the worker ended (its exit code, or the
/// same signal), so the host reads the worker's fate from the pid it knows.
fn run_launcher(init: libc::pid_t, status_read: libc::c_int) -> ! {
    // SAFETY: only plain syscalls on our own descriptors and child.
    unsafe {
        // The pipes belong to the worker: the host must see EOF as soon as the worker goes.
        let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if devnull >= 0 {
            libc::dup2(devnull, 0);
            libc::dup2(devnull, 1);
            libc::close(devnull);
        }
        let mut status: libc::c_int = 0;
        while libc::waitpid(init, &mut status, 0) < 0 {
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                libc::_exit(71);
            }
        }
        // Init reports the worker's raw wait status; without it, init's own status.
        let mut raw = [0u8; 4];
        let worker_status = if libc::read(status_read, raw.as_mut_ptr().cast(), 4) == 4 {
            libc::c_int::from_ne_bytes(raw)
        } else {
            status
        };
        exit_like(worker_status)
    }
}

/// Init (PID 1): reaps every process that ends in the namespace until the worker ends, then
/// reports the worker's status and exits, which kills whatever is left.
fn run_init(worker: libc::pid_t, status_write: libc::c_int) -> ! {
    // SAFETY: plain syscalls.
    unsafe {
        let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if devnull >= 0 {
            libc::dup2(devnull, 0);
            libc::dup2(devnull, 1);
            libc::close(devnull);
        }
        loop {
            let mut status: libc::c_int = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == worker {
                let bytes = status.to_ne_bytes();
                libc::write(status_write, bytes.as_ptr().cast(), 4);
                libc::_exit(0);
            }
            if pid < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                libc::_exit(71);
            }
        }
    }
}

/// Exits with `status`'s code, or dies by its signal.
fn exit_like(status: libc::c_int) -> ! {
    // SAFETY: plain syscalls; re-raising a fatal signal with its default action.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            71
        })
    }
}
