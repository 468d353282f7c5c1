//! The seccomp layer: system calls no block needs, refused with `EPERM`.
//!
//! Refused outright: reading another process's memory (`ptrace`, `process_vm_readv`),
//! changing mounts (which could uncover what the view hides, or the host's `/proc` beneath
//! the worker's), loading BPF or kernel modules, the kernel keyring, performance counters,
//! entering or making namespaces, `chroot`, file handles that bypass the view
//! (`open_by_handle_at`), `fanotify`, the kernel log, the host name, the clock, swap and
//! `io_uring` (whose operations bypass seccomp).
//!
//! Refused by argument:
//! - `clone` with any namespace flag (`unshare` and `setns` are refused outright); `clone3`
//!   passes its flags in memory seccomp cannot read, so it answers `ENOSYS` and the C
//!   library falls back to `clone`;
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`, which type into a terminal;
//! - `mknod` of a character or block device;
//! - `socket(AF_UNIX, …)` unless `[sandbox] allow_unix_sockets`: Landlock does not cover
//!   `connect()` to a socket file, and a socket outside the workspace (a tmux or Docker
//!   socket) reaches programs outside the sandbox. `socketpair` stays allowed.
//!
//! Everything else is allowed: this is a deny list on top of the namespaces, the filesystem
//! view and Landlock, not the boundary alone.

use super::SandboxError;
use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The system calls refused whatever their arguments.
pub fn denied() -> Vec<(&'static str, i64)> {
    let mut calls = vec![
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("move_mount", libc::SYS_move_mount),
        ("open_tree", libc::SYS_open_tree),
        ("fsopen", libc::SYS_fsopen),
        ("fsmount", libc::SYS_fsmount),
        ("fsconfig", libc::SYS_fsconfig),
        ("fspick", libc::SYS_fspick),
        ("mount_setattr", libc::SYS_mount_setattr),
        ("chroot", libc::SYS_chroot),
        ("bpf", libc::SYS_bpf),
        ("keyctl", libc::SYS_keyctl),
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
        ("perf_event_open", libc::SYS_perf_event_open),
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
        ("name_to_handle_at", libc::SYS_name_to_handle_at),
        ("fanotify_init", libc::SYS_fanotify_init),
        ("syslog", libc::SYS_syslog),
        ("sethostname", libc::SYS_sethostname),
        ("setdomainname", libc::SYS_setdomainname),
        ("settimeofday", libc::SYS_settimeofday),
        ("clock_settime", libc::SYS_clock_settime),
        ("clock_adjtime", libc::SYS_clock_adjtime),
        ("adjtimex", libc::SYS_adjtimex),
        ("init_module", libc::SYS_init_module),
        ("finit_module", libc::SYS_finit_module),
        ("delete_module", libc::SYS_delete_module),
        ("kexec_load", libc::SYS_kexec_load),
        ("reboot", libc::SYS_reboot),
        ("swapon", libc::SYS_swapon),
        ("swapoff", libc::SYS_swapoff),
        ("acct", libc::SYS_acct),
        ("userfaultfd", libc::SYS_userfaultfd),
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register),
        ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        ("iopl", libc::SYS_iopl),
        ("ioperm", libc::SYS_ioperm),
        ("kexec_file_load", libc::SYS_kexec_file_load),
    ]);
    calls
}

/// The namespace flags `clone` may not carry (`CLONE_NEWTIME` shares its bit with the exit
/// signal in `clone`, so it can only come through `clone3`, which is refused).
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWCGROUP,
];

/// What is refused by argument, for `vis sandbox status`.
pub fn denied_by_argument(unix_sockets: bool) -> Vec<&'static str> {
    let mut refused = vec![
        "clone with namespace flags",
        "clone3 (ENOSYS)",
        "ioctl TIOCSTI/TIOCLINUX",
        "mknod of devices",
    ];
    if !unix_sockets {
        refused.push("socket(AF_UNIX)");
    }
    refused
}

fn arch() -> Result<TargetArch, SandboxError> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else if cfg!(target_arch = "riscv64") {
        Ok(TargetArch::riscv64)
    } else {
        Err(SandboxError::UnsupportedArch)
    }
}

fn bad(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Seccomp(e.to_string())
}

/// A rule that matches when argument `index` (of `len`) equals `value` under `mask`.
fn arg_rule(
    index: u8,
    len: SeccompCmpArgLen,
    mask: Option<u64>,
    value: u64,
) -> Result<SeccompRule, SandboxError> {
    let op = match mask {
        Some(mask) => SeccompCmpOp::MaskedEq(mask),
        None => SeccompCmpOp::Eq,
    };
    SeccompRule::new(vec![
        SeccompCondition::new(index, len, op, value).map_err(bad)?
    ])
    .map_err(bad)
}

/// The refused calls and arguments, as seccompiler rules.
fn rules(unix_sockets: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SandboxError> {
    use SeccompCmpArgLen::{Dword, Qword};
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied().into_iter().map(|(_, nr)| (nr, vec![])).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|&flag| arg_rule(0, Qword, Some(flag as u64), flag as u64))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            arg_rule(1, Dword, None, libc::TIOCSTI)?,
            arg_rule(1, Dword, None, libc::TIOCLINUX)?,
        ],
    );
    let device_modes = |index: u8| -> Result<Vec<SeccompRule>, SandboxError> {
        [libc::S_IFCHR, libc::S_IFBLK]
            .iter()
            .map(|&kind| arg_rule(index, Dword, Some(libc::S_IFMT as u64), kind as u64))
            .collect()
    };
    rules.insert(libc::SYS_mknodat, device_modes(2)?);
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, device_modes(1)?);
    if !unix_sockets {
        rules.insert(
            libc::SYS_socket,
            vec![arg_rule(0, Dword, None, libc::AF_UNIX as u64)?],
        );
    }
    Ok(rules)
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, SandboxError> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch()?,
    )
    .map_err(bad)?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| bad(e))
}

/// Installs the filters on the calling thread (and what it starts later). Sets
/// `no_new_privs`, which the kernel requires of an unprivileged filter.
pub fn install(unix_sockets: bool) -> Result<(), SandboxError> {
    let refused = compile(rules(unix_sockets)?, libc::EPERM)?;
    let clone3 = compile(BTreeMap::from([(libc::SYS_clone3, vec![])]), libc::ENOSYS)?;
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(SandboxError::NoNewPrivs(std::io::Error::last_os_error()));
    }
    seccompiler::apply_filter(&clone3).map_err(bad)?;
    seccompiler::apply_filter(&refused).map_err(bad)
}
