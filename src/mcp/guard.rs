//! A stdio MCP server's guardian: the server and everything it started die with the Vis
//! process that started it, however that process ends (`kill -9` included).
//!
//! ```text
//! vis (chat, exec, mcp, serve) ══ channel (a socket pair) ══╗
//!   └─ vis mcp guard   (own process group; child subreaper) ╝
//!        └─ the server's command (same group; stdin/stdout/stderr are vis's pipes)
//!             ├─ its children
//!             └─ daemons it double-forks (setsid): re-parented to the guard, not to init
//! ```
//!
//! The hub starts `vis mcp guard --channel FD -- COMMAND ARGS…` instead of the command. The
//! guard makes itself a child subreaper, starts the command with the same environment,
//! directory and stdio, reports `spawned PID` (or `failed REASON`) on the channel, then waits
//! for one of three things:
//!
//! - **the server exits**: the guard kills what is left of its tree and exits the way the
//!   server did (its code, or the same signal), so the hub reports the server's fate;
//! - **the channel closes**: Vis stopped the server (closing it is how the hub stops one), or
//!   Vis itself is gone — the kernel closes a dead process's descriptors, so this holds for
//!   SIGKILL too: the guard kills the whole tree and exits;
//! - **SIGTERM, SIGINT or SIGHUP** to the guard: the same.
//!
//! A parent-death signal alone would not do: it reaches one process (not the server's
//! children, not daemons that left its process group), and it fires when the *thread* that
//! forked dies, which in a multi-threaded host is not the host's death. The channel is closed
//! only by the host's process ending or by the hub.
//!
//! The tree is killed with `runtime::kill_tree` (stop every descendant, then SIGKILL), which
//! finds daemons because, as a subreaper, the guard is their parent.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// What the guard writes on its channel first.
pub const SPAWNED: &str = "spawned ";
pub const FAILED: &str = "failed ";
/// Exit code of a guard that could not start the server (as a shell's "cannot execute").
const CANNOT_START: i32 = 127;
/// Signals that end the guard (and the server's tree) in an orderly way.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// `vis mcp guard` run by hand (or by anything but the hub).
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("vis mcp guard: --channel {0} is not a socket from vis; this command is started by vis itself, for each stdio MCP server")]
    NotAChannel(RawFd),
    #[error("vis mcp guard: no command to run after `--`")]
    NoCommand,
}

/// Runs the guard (`vis mcp guard --channel FD -- COMMAND ARGS…`); returns its exit code, or
/// does not return (it dies by the server's signal).
pub fn run_guard(channel_fd: RawFd, command: &[String]) -> Result<i32, GuardError> {
    let channel = take_channel(channel_fd).ok_or(GuardError::NotAChannel(channel_fd))?;
    let mut channel = UnixStream::from(channel);
    let Some((program, args)) = command.split_first() else {
        let _ = writeln!(channel, "{FAILED}no command to run");
        return Err(GuardError::NoCommand);
    };
    // SAFETY: prctl with constant arguments; failure only loses the re-parenting of daemons.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let signals = match SignalFd::new() {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(channel, "{FAILED}the guard cannot watch signals: {e}");
            return Ok(CANNOT_START);
        }
    };
    // std resets the signal mask in the child, so the server sees signals as usual.
    let server = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => child.id() as libc::pid_t,
        Err(e) => {
            let _ = writeln!(channel, "{FAILED}{e}");
            return Ok(CANNOT_START);
        }
    };
    let _ = writeln!(channel, "{SPAWNED}{server}");
    // The server's stdin and stdout are the hub's pipes: holding copies would hide the
    // server's exit from the hub (its stdout would not close).
    release_stdio();
    let status = watch(&mut channel, &signals, server);
    end_tree();
    match status {
        Some(status) => crate::runtime::exit_like(status),
        None => Ok(0),
    }
}

/// Waits for the server's exit (its raw wait status) or for the channel to close or a stop
/// signal (`None`).
fn watch(channel: &mut UnixStream, signals: &SignalFd, server: libc::pid_t) -> Option<i32> {
    let mut fds = [
        libc::pollfd {
            fd: channel.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: signals.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two valid pollfd structs we own.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return None;
        }
        if fds[1].revents != 0 {
            if signals.drain_stop_signals() {
                return None;
            }
            if let Some(status) = reap(server) {
                return Some(status);
            }
        }
        if fds[0].revents != 0 {
            let mut buf = [0u8; 256];
            match channel.read(&mut buf) {
                // The hub closed it, or the process that held it is gone.
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }
}

/// Reaps every child that ended; the server's raw status if it was among them.
fn reap(server: libc::pid_t) -> Option<i32> {
    let mut found = None;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid on our own children, non-blocking.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid == server {
            found = Some(status);
        }
    }
}

/// Kills every process left under the guard and reaps them (bounded: a process that forks
/// between two scans is caught by the next round).
fn end_tree() {
    // SAFETY: getpid has no effects.
    let me = unsafe { libc::getpid() };
    for _ in 0..50 {
        crate::runtime::kill_tree(me, false);
        let mut status: libc::c_int = 0;
        loop {
            // SAFETY: waitpid on our own children.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid == 0 {
                break;
            }
            if pid < 0 {
                // No children left.
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The channel descriptor, checked to be a socket and made close-on-exec (the server must
/// not hold it: then it would outlive the guard's view of it).
fn take_channel(fd: RawFd) -> Option<OwnedFd> {
    if fd < 3 {
        return None;
    }
    // SAFETY: the descriptor is only borrowed for fstat.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let stat = rustix::fs::fstat(borrowed).ok()?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return None;
    }
    rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC).ok()?;
    // SAFETY: vis passed this descriptor to us alone; nothing else in this process owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn release_stdio() {
    if let Ok(devnull) = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        let _ = rustix::stdio::dup2_stdin(&devnull);
        let _ = rustix::stdio::dup2_stdout(&devnull);
    }
}

/// A signalfd for SIGCHLD and the stop signals (blocked, so they queue there).
struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    fn new() -> std::io::Result<SignalFd> {
        // SAFETY: a sigset we own, filled with sigaddset; the mask applies to this
        // single-threaded process; signalfd returns a new descriptor we take ownership of.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            for s in STOP_SIGNALS {
                libc::sigaddset(&mut set, s);
            }
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(SignalFd {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    /// Reads the queued signals; true if a stop signal was among them.
    fn drain_stop_signals(&self) -> bool {
        let mut stop = false;
        loop {
            // SAFETY: zeroed plain-data struct as the read buffer.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reading into a buffer of exactly `size` bytes we own.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n != size as isize {
                return stop;
            }
            if STOP_SIGNALS.contains(&(info.ssi_signo as libc::c_int)) {
                stop = true;
            }
            // Only one signal may be queued: poll again before reading once more.
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd we own, no wait.
            if unsafe { libc::poll(&mut pfd, 1, 0) } <= 0 {
                return stop;
            }
        }
    }
}

/// A stdio server started under its guard (the hub's side).
pub struct Guarded {
    /// The guard process (the pid Vis knows; it exits the way the server did).
    pub child: tokio::process::Child,
    pub guard_pid: i32,
    /// The hub's end of the channel: dropping it stops the server and its whole tree.
    pub channel: UnixStream,
}

/// Starts `command args` under a guard run by `program` (the vis binary), with exactly `envs`,
/// in `dir`, its stdin, stdout and stderr piped; the guard and the server get their own
/// process group. `Err` is why it could not start (for "could not start `cmd`: …").
pub async fn spawn_guarded(
    program: &std::path::Path,
    command: &str,
    args: &[String],
    envs: Vec<(String, String)>,
    dir: &std::path::Path,
) -> Result<Guarded, String> {
    use std::process::Stdio;
    use tokio::io::AsyncReadExt;

    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("no socket pair: {e}"))?;
    let their_fd = theirs.as_raw_fd();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args([
        "mcp",
        "guard",
        "--channel",
        &their_fd.to_string(),
        "--",
        command,
    ])
    .args(args)
    .env_clear()
    .envs(envs)
    .current_dir(dir)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    // SAFETY: fcntl on a descriptor we own is async-signal-safe; it runs in the child between
    // fork and exec, so only the guard inherits its end of the channel (both ends are
    // close-on-exec in Vis, so no other process ever holds one).
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(their_fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| e.to_string())?;
    drop(theirs);
    let guard_pid = child.id().map_or(0, |p| p as i32);
    // The guard's first line: `spawned PID` or `failed REASON`.
    let report = {
        let mut reader = ours
            .try_clone()
            .and_then(|s| {
                s.set_nonblocking(true)?;
                tokio::net::UnixStream::from_std(s)
            })
            .map_err(|e| format!("the guard's channel: {e}"))?;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while line.len() < 4096 {
            match reader.read(&mut byte).await {
                Ok(1) if byte[0] != b'\n' => line.push(byte[0]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&line).into_owned()
    };
    if report.starts_with(SPAWNED) {
        return Ok(Guarded {
            child,
            guard_pid,
            channel: ours,
        });
    }
    let mut child = child;
    let _ = child.wait().await;
    Err(match report.strip_prefix(FAILED) {
        Some(reason) => reason.to_string(),
        None => "the guard exited before it started the server".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_without_a_channel_from_vis_refuses_to_run() {
        let command = vec!["true".to_string()];
        // A standard descriptor, and a file: neither is the socket vis passes.
        assert!(matches!(
            run_guard(1, &command),
            Err(GuardError::NotAChannel(1))
        ));
        let file = tempfile::tempfile().unwrap();
        let fd = file.as_raw_fd();
        let e = run_guard(fd, &command).unwrap_err();
        assert!(
            e.to_string()
                .contains("is not a socket from vis; this command is started by vis itself"),
            "{e}"
        );
    }
}
