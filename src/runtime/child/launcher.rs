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
//! user namespace (files keep root's ownership) and drops every capability before a block runs
//! (`sandbox::drop_capabilities`). Where the kernel refuses (no user namespaces, a seccomp
//! policy), the worker runs without the namespace as a child subreaper, so the host's kill
//! still finds orphans among its descendants; [`Layers`] says which layer is missing and why.
//!
//! The filesystem view (`sandbox::build_view`) is built here, in the new mount namespace and
//! before init forks, so init and the worker share it; init then mounts the private `/proc`.
//! Init starts a session of its own, so neither it nor the worker has a controlling terminal
//! (without a PID namespace the launcher forks once for the same reason): a block cannot open
//! `/dev/tty` or type into the user's shell.

use std::io::Write;

use crate::sandbox::{Layers, Mode, Policy};

/// Enters the namespaces; returns in the process that should run the interpreter, with
/// what is in force. Must be called before any thread is started.
pub fn isolate(policy: &Policy) -> Layers {
    let mut layers = Layers {
        mode: Some(policy.mode),
        ..Layers::default()
    };
    if policy.mode == Mode::Off {
        return fallback(
            layers,
            "sandbox off (mode off): no namespaces, Landlock or seccomp".into(),
        );
    }
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let want_net = !policy.network;
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if uid != 0 {
        flags |= libc::CLONE_NEWUSER;
    }
    if want_net {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare with namespace flags; the process is single-threaded here.
    let mut ok = unsafe { libc::unshare(flags) } == 0;
    if !ok {
        let first = std::io::Error::last_os_error();
        // A kernel or policy that refuses some namespace types may still allow the PID one.
        let basic = libc::CLONE_NEWPID | if uid != 0 { libc::CLONE_NEWUSER } else { 0 };
        // SAFETY: as above.
        ok = unsafe { libc::unshare(basic) } == 0;
        if !ok {
            return fallback(
                layers,
                format!(
                    "no namespaces (unshare: {first}); processes a block starts in the background may outlive a crashed worker, and the host's /proc stays visible"
                ),
            );
        }
        layers.note("mount and network namespaces", format!("unshare: {first}"));
        flags = basic;
    }
    layers.user_namespace = flags & libc::CLONE_NEWUSER != 0;
    if layers.user_namespace {
        if let Err(e) = map_ids(uid, gid) {
            return fallback(layers, format!("no namespaces (uid map: {e})"));
        }
    }
    if flags & libc::CLONE_NEWNS != 0 {
        // Mount changes stay inside: nothing the worker mounts reaches the host.
        // SAFETY: mount(2) with constant, valid arguments.
        let private = unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        } == 0;
        if private {
            layers.mount_namespace = true;
        } else {
            layers.note("mount namespace", std::io::Error::last_os_error());
        }
    }
    if layers.mount_namespace && matches!(policy.mode, Mode::ReadOnly | Mode::WorkspaceWrite) {
        build_view(policy, &mut layers);
    }
    if flags & libc::CLONE_NEWNET != 0 {
        match loopback_up() {
            Ok(()) => layers.network_off = true,
            Err(e) => layers.note("network namespace", format!("loopback: {e}")),
        }
    } else if want_net {
        layers.note("network off", "no network namespace");
    }
    let mut status_pipe = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let why = format!(
            "no PID namespace (pipe: {})",
            std::io::Error::last_os_error()
        );
        return fallback(layers, why);
    }
    let [status_read, status_write] = status_pipe;
    // SAFETY: single-threaded fork; the child only continues with async-signal-safe setup
    // before it forks again or returns.
    let init = unsafe { libc::fork() };
    if init < 0 {
        let why = format!(
            "no PID namespace (fork: {})",
            std::io::Error::last_os_error()
        );
        return fallback(layers, why);
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
    layers.no_terminal = new_session();
    if layers.mount_namespace {
        // A /proc of this PID namespace: the host and other sessions are not in it.
        // SAFETY: mount(2) with constant, valid arguments.
        let mounted = unsafe {
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        } == 0;
        if mounted {
            layers.private_proc = true;
            for note in crate::sandbox::harden_proc() {
                layers.note("private /proc", note);
            }
        } else {
            layers.note("private /proc", std::io::Error::last_os_error());
        }
    } else {
        layers.note("private /proc", "no mount namespace");
    }
    // SAFETY: as above.
    let worker = unsafe { libc::fork() };
    if worker < 0 {
        // SAFETY: plain _exit.
        unsafe { libc::_exit(71) };
    }
    if worker > 0 {
        // First: the worker is about to start Python.
        release_interpreter_pages();
        // Init only reaps from here on: it needs none of its powers.
        let _ = crate::sandbox::drop_capabilities();
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
    layers.pid_namespace = true;
    layers
}

/// Without a PID namespace: the worker is a child subreaper of its own, in a session of its
/// own (a fork, since the launcher leads its process group and so cannot start a session).
fn fallback(mut layers: Layers, why: String) -> Layers {
    layers.missing.push(why);
    // SAFETY: single-threaded fork; the parent only waits and relays the child's end.
    let child = unsafe { libc::fork() };
    if child > 0 {
        run_launcher(child, -1);
    }
    if child == 0 {
        die_with_parent();
        layers.no_terminal = new_session();
    } else {
        layers.note("no terminal", std::io::Error::last_os_error());
    }
    // SAFETY: prctl with a constant option; failure only loses the subreaper.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    layers
}

/// A session of our own: no controlling terminal from here on (`/dev/tty` cannot be opened,
/// and nothing can be typed into the user's terminal).
fn new_session() -> bool {
    // SAFETY: setsid has no memory effects; it fails only for a process group leader.
    unsafe { libc::setsid() >= 0 }
}

/// Builds the filesystem view the host planned, and records what is in force.
fn build_view(policy: &Policy, layers: &mut Layers) {
    let Some(view) = &policy.view else {
        layers.note("filesystem view", "the host planned none");
        return;
    };
    match crate::sandbox::build_view(view) {
        Ok(built) => {
            layers.read_only_root = true;
            layers.private_tmp = true;
            layers.hidden = built
                .hidden
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            layers.protected = built
                .protected
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            for note in built.notes {
                layers.note("filesystem view", note);
            }
        }
        Err(e) => layers.note("filesystem view", e),
    }
}

/// Brings the loopback interface of the new network namespace up, so servers a block starts
/// on 127.0.0.1 work while nothing else is reachable.
fn loopback_up() -> std::io::Result<()> {
    // SAFETY: a socket for ioctls, an ifreq we own, and checked return codes.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        let result = if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut ifr) < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(sock, libc::SIOCSIFFLAGS, &ifr) < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        libc::close(sock);
        result
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

/// Points stdin and stdout at `/dev/null`: the pipes to the host are the worker's alone, so
/// the host sees EOF as soon as the worker goes.
///
/// # Safety
/// Plain syscalls on the process's own descriptors 0 and 1.
unsafe fn release_pipes() {
    let devnull = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
    if devnull >= 0 {
        libc::dup2(devnull, 0);
        libc::dup2(devnull, 1);
        libc::close(devnull);
    }
}

/// Unmaps the interpreter library's writable pages in this process (the launcher or init,
/// which never run Python). A fork shares them copy-on-write, and the worker writes most of
/// them while Python starts (type objects, module tables): while another process still maps
/// a page, each first write copies it; once the worker alone maps it, the write only makes
/// it writable. That is about a millisecond of every worker start.
fn release_interpreter_pages() {
    // SAFETY: Dl_info is plain data (pointers and integers), valid all zero.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills `info` for an address of a loaded object; nothing is freed.
    let known = unsafe {
        libc::dladdr(
            pyo3::ffi::Py_IsInitialized as *const libc::c_void,
            &mut info,
        )
    } != 0;
    // SAFETY: as above, for a function of this binary.
    let mut own: libc::Dl_info = unsafe { std::mem::zeroed() };
    let own_known = unsafe { libc::dladdr(release_pipes as *const libc::c_void, &mut own) } != 0;
    // A libpython linked into this binary: its writable pages are this process's own data.
    if !known || !own_known || own.dli_fbase == info.dli_fbase {
        return;
    }
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    let base = info.dli_fbase as usize;
    // The library's own file: the one mapped at its load address.
    let entries: Vec<(usize, usize, &str, &str)> = maps
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let perms = fields.next()?;
            let file = fields.nth(3)?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            Some((start, end, perms, file))
        })
        .collect();
    let Some(library) = entries
        .iter()
        .find(|(start, end, _, _)| (*start..*end).contains(&base))
        .map(|(_, _, _, file)| *file)
    else {
        return;
    };
    for (start, end, perms, file) in &entries {
        if *file == library && perms.as_bytes().get(1) == Some(&b'w') {
            // SAFETY: the range is a whole mapping of the interpreter library, which this
            // process never calls (it only waits and relays an exit status).
            unsafe {
                libc::munmap(*start as *mut libc::c_void, end - start);
            }
        }
    }
}

/// The launcher: waits for init, then ends the way the worker ended (its exit code, or the
/// same signal), so the host reads the worker's fate from the pid it knows.
fn run_launcher(init: libc::pid_t, status_read: libc::c_int) -> ! {
    release_interpreter_pages();
    // SAFETY: only plain syscalls on our own descriptors and child.
    unsafe {
        release_pipes();
        let mut status: libc::c_int = 0;
        while libc::waitpid(init, &mut status, 0) < 0 {
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                libc::_exit(71);
            }
        }
        // Init reports the worker's raw wait status; without it, init's own status.
        let mut raw = [0u8; 4];
        let worker_status =
            if status_read >= 0 && libc::read(status_read, raw.as_mut_ptr().cast(), 4) == 4 {
                libc::c_int::from_ne_bytes(raw)
            } else {
                status
            };
        crate::runtime::process::exit_like(worker_status)
    }
}

/// Init (PID 1): reaps every process that ends in the namespace until the worker ends, then
/// reports the worker's status and exits, which kills whatever is left.
fn run_init(worker: libc::pid_t, status_write: libc::c_int) -> ! {
    // SAFETY: plain syscalls.
    unsafe {
        release_pipes();
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
