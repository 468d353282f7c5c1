//! The Landlock layer: everything readable, writes only beneath the allowed paths; no
//! connection to an abstract Unix socket and no signal to a process outside the sandbox.
//!
//! The filesystem view (`mounts`) already makes the rest read-only; Landlock is the second
//! wall, and the only one where the kernel gave the worker no mount namespace.

use super::SandboxError;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, ABI,
};

/// The newest ABI this code knows; an older kernel enforces what it can (best effort).
const ABI_VERSION: ABI = ABI::V7;

/// Paths every mode may write: devices programs write to, and the worker's own ptys (the
/// private `/dev/shm` and `/tmp` are added by the caller when the view made them private).
const ALWAYS_WRITABLE: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
];

/// How much of the write rules the kernel enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    Full,
    Partial,
}

impl Enforcement {
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Full => "full",
            Enforcement::Partial => "partial",
        }
    }
}

/// A Landlock step that failed, for [`SandboxError::Landlock`].
fn step(what: &str) -> impl FnOnce(landlock::RulesetError) -> SandboxError + '_ {
    move |e| SandboxError::Landlock {
        what: what.to_string(),
        detail: e.to_string(),
    }
}

/// Restricts this thread (and every thread and process started later) to writing beneath
/// `writable`. Returns how much the kernel enforces, or why nothing is.
pub fn restrict(writable: &[PathBuf]) -> Result<Enforcement, SandboxError> {
    let all = AccessFs::from_all(ABI_VERSION);
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(step("ruleset"))?
        .scope(Scope::from_all(ABI_VERSION))
        .map_err(step("scope"))?
        .create()
        .map_err(step("ruleset"))?;
    let root = PathFd::new("/").map_err(|e| SandboxError::Landlock {
        what: "/".into(),
        detail: e.to_string(),
    })?;
    ruleset = ruleset
        .add_rule(PathBeneath::new(root, AccessFs::from_read(ABI_VERSION)))
        .map_err(step("/"))?;
    let extra: Vec<PathBuf> = ALWAYS_WRITABLE.iter().map(PathBuf::from).collect();
    for path in writable.iter().chain(&extra) {
        // A path that does not exist (yet) grants nothing; skipping it keeps the rest.
        let Ok(fd) = PathFd::new(path) else {
            continue;
        };
        let rights = if is_dir(path) {
            all
        } else {
            AccessFs::from_file(ABI_VERSION)
        };
        let what = path.display().to_string();
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(step(&what))?;
    }
    let status = ruleset.restrict_self().map_err(step("restrict_self"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(Enforcement::Full),
        RulesetStatus::PartiallyEnforced => Ok(Enforcement::Partial),
        RulesetStatus::NotEnforced => Err(SandboxError::LandlockNotEnforced),
    }
}

fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}
