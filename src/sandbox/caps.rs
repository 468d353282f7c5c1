//! Capabilities: none left when a block runs.
//!
//! Root runs its worker without a user namespace (so files keep root's ownership), which
//! would leave it every capability of the host's root: loading kernel settings, reading any
//! file, mounting. An unprivileged user's worker holds every capability of its own user
//! namespace. Both drop them all before the interpreter starts: the bounding set (so an
//! `execve` of a setuid or file-capability program gains nothing back), the ambient,
//! inheritable, permitted and effective sets, and root's special treatment at `execve`
//! (`SECBIT_NOROOT`, locked).

use super::SandboxError;

const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

/// `CAP_SETPCAP`: changes the bounding set and the secure bits.
const CAP_SETPCAP: u32 = 8;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops every capability of this thread (and what it starts later); call it while the
/// process has one thread. Dropping what one does not hold succeeds.
pub fn drop_all() -> Result<(), SandboxError> {
    let fail = |what: &str| {
        SandboxError::Capabilities(format!("{what}: {}", std::io::Error::last_os_error()))
    };
    let has_setpcap = holds_setpcap();
    if has_setpcap {
        let bits = SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        // SAFETY: prctl with constant arguments.
        if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) } != 0 {
            return Err(fail("securebits"));
        }
        for cap in 0..=last_cap() {
            // SAFETY: prctl with constant arguments.
            if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0 {
                return Err(fail("bounding set"));
            }
        }
    }
    // SAFETY: prctl with constant arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: capset with a valid header and two data words, as version 3 requires.
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) } != 0 {
        return Err(fail("capset"));
    }
    Ok(())
}

/// True when this thread may change its bounding set and secure bits (`CAP_SETPCAP`).
fn holds_setpcap() -> bool {
    held().is_some_and(|data| data[0].effective & (1 << CAP_SETPCAP) != 0)
}

/// This thread's capability sets (two words each, version 3), or `None` when capget fails.
fn held() -> Option<[CapData; 2]> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget with a valid header and two data words.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    (rc == 0).then_some(data)
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// True when this thread holds no capability in any set (for tests and `Layers`).
pub fn none_held() -> bool {
    held().is_some_and(|data| {
        data.iter()
            .all(|d| d.effective == 0 && d.permitted == 0 && d.inheritable == 0)
    })
}
