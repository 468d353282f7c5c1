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
//! On x86_64, every call of the x32 ABI answers `ENOSYS`: its numbers are x86_64's with bit
//! 30 set, so on a kernel that serves x32 they would pass rules written with x86_64's.
//!
//! Everything else is allowed: this is a deny list on top of the namespaces, the filesystem
//! view and Landlock, not the boundary alone.

use super::SandboxError;
use std::collections::BTreeMap;

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
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
    if cfg!(target_arch = "x86_64") {
        refused.push("x32 ABI calls (ENOSYS)");
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

/// Classic BPF opcodes (`linux/bpf_common.h`) of [`answered_first`]: `BPF_LD | BPF_W |
/// BPF_ABS` (the first two are 0), `BPF_JMP | BPF_JEQ | BPF_K`, `BPF_JMP | BPF_JGE | BPF_K`,
/// `BPF_RET | BPF_K`.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;

/// Bit 30 of the system call number: a call of the x32 ABI (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The instructions run before seccompiler's program, which either answer `ENOSYS` or fall
/// through to it:
/// - `clone3`: its flags are in memory a filter cannot read; the C library then falls back
///   to `clone`, whose flags the rules check;
/// - on x86_64, every call of the x32 ABI: the rules name x86_64's numbers, which an x32
///   call carries with bit 30 set, so on a kernel that serves x32 such a call would pass
///   them.
///
/// One filter, not one per answer: the kernel runs every installed filter at every system
/// call, and compiles each one as it is installed.
fn answered_first() -> Vec<sock_filter> {
    let op = |code: u16, k: u32, jt: u8, jf: u8| sock_filter { code, jt, jf, k };
    let enosys = libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32 & libc::SECCOMP_RET_DATA);
    // `seccomp_data.nr` is at offset 0.
    let mut first = vec![op(BPF_LD_W_ABS, 0, 0, 0)];
    if cfg!(target_arch = "x86_64") {
        first.push(op(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1));
        first.push(op(BPF_RET_K, enosys, 0, 0));
    }
    first.push(op(BPF_JMP_JEQ_K, libc::SYS_clone3 as u32, 0, 1));
    first.push(op(BPF_RET_K, enosys, 0, 0));
    first
}

/// The whole filter: [`answered_first`], then the refused calls (`EPERM`).
fn program(unix_sockets: bool) -> Result<BpfProgram, SandboxError> {
    let mut program = answered_first();
    program.extend(compile(rules(unix_sockets)?, libc::EPERM)?);
    Ok(program)
}

/// Installs the filter on the calling thread (and what it starts later). Sets
/// `no_new_privs`, which the kernel requires of an unprivileged filter.
pub fn install(unix_sockets: bool) -> Result<(), SandboxError> {
    let program = program(unix_sockets)?;
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(SandboxError::NoNewPrivs(std::io::Error::last_os_error()));
    }
    seccompiler::apply_filter(&program).map_err(bad)
}

// The program is checked where its numbers are x86_64's (the CI's and this machine's).
#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Runs `program` as the kernel would on one system call (the opcodes seccompiler and
    /// [`answered_first`] emit; any other fails the test).
    fn run(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                0 => nr,
                4 => arch,
                o if (16..64).contains(&o) => {
                    let arg = args[((o - 16) / 8) as usize];
                    if (o - 16) % 8 == 0 {
                        arg as u32
                    } else {
                        (arg >> 32) as u32
                    }
                }
                o => panic!("load at offset {o}"),
            }
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let ins = &program[pc];
            let jump = |taken: bool| pc + 1 + usize::from(if taken { ins.jt } else { ins.jf });
            pc = match ins.code {
                0x20 => {
                    acc = word(ins.k);
                    pc + 1
                }
                0x54 => {
                    acc &= ins.k;
                    pc + 1
                }
                0x05 => pc + 1 + ins.k as usize,
                0x15 => jump(acc == ins.k),
                0x25 => jump(acc > ins.k),
                0x35 => jump(acc >= ins.k),
                0x45 => jump(acc & ins.k != 0),
                0x06 => return ins.k,
                code => panic!("opcode {code:#x}"),
            };
        }
    }

    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

    #[test]
    fn one_filter_answers_every_kind_of_call() {
        let program = program(false).unwrap();
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let call = |nr: i64, args: [u64; 6]| run(&program, AUDIT_ARCH_X86_64, nr as u32, args);
        let none = [0u64; 6];
        assert_eq!(call(libc::SYS_getpid, none), libc::SECCOMP_RET_ALLOW);
        assert_eq!(call(libc::SYS_clone3, none), enosys);
        assert_eq!(call(libc::SYS_ptrace, none), eperm);
        assert_eq!(call(libc::SYS_unshare, none), eperm);
        // By argument: a thread's clone passes, one making a namespace does not.
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(
            call(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        let user_ns = thread | libc::CLONE_NEWUSER as u64;
        assert_eq!(call(libc::SYS_clone, [user_ns, 0, 0, 0, 0, 0]), eperm);
        let unix = [libc::AF_UNIX as u64, 0, 0, 0, 0, 0];
        let inet = [libc::AF_INET as u64, 0, 0, 0, 0, 0];
        assert_eq!(call(libc::SYS_socket, unix), eperm);
        assert_eq!(call(libc::SYS_socket, inet), libc::SECCOMP_RET_ALLOW);
        let tiocsti = [0, libc::TIOCSTI, 0, 0, 0, 0];
        assert_eq!(call(libc::SYS_ioctl, tiocsti), eperm);
        // The x32 ABI: every call refused, the ones the rules name and the rest.
        for nr in [libc::SYS_ptrace, libc::SYS_getpid, libc::SYS_clone3] {
            let x32 = run(
                &program,
                AUDIT_ARCH_X86_64,
                nr as u32 | X32_SYSCALL_BIT,
                none,
            );
            assert_eq!(x32, enosys, "x32 call {nr}");
        }
        // Another architecture's calls (i386 through `int 0x80`): the process is killed.
        let i386 = run(&program, 0x4000_0003, 20, none);
        assert_eq!(i386, libc::SECCOMP_RET_KILL_PROCESS);
        // Unix sockets allowed when the config says so.
        let allowing = super::program(true).unwrap();
        let unix_ok = run(&allowing, AUDIT_ARCH_X86_64, libc::SYS_socket as u32, unix);
        assert_eq!(unix_ok, libc::SECCOMP_RET_ALLOW);
    }
}
