//! The Landlock layer: everything readable, writes only beneath the allowed paths.

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    ABI,
};

/// The newest ABI this code knows; an older kernel enforces what it can (best effort).
const ABI_VERSION: ABI = ABI::V7;

/// Paths every mode may write: devices programs write to, and shared memory.
const ALWAYS_WRITABLE: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/shm",
    "/dev/pts",
];

/// Restricts this thread (and every thread and process started later) to writing beneath
/// `writable`. Returns `full` or `partial`, or why nothing is enforced.
pub fn restrict(writable: &[PathBuf]) -> Result<&'static str, String> {
    let all = AccessFs::from_all(ABI_VERSION);
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?;
    ruleset = ruleset
        .add_rule(PathBeneath::new(
            PathFd::new("/").map_err(|e| e.to_string())?,
            AccessFs::from_read(ABI_VERSION),
        ))
        .map_err(|e| e.to_string())?;
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
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let status = ruleset.restrict_self().map_err(|e| e.to_string())?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok("full"),
        RulesetStatus::PartiallyEnforced => Ok("partial"),
        RulesetStatus::NotEnforced => Err("the kernel does not enforce Landlock".into()),
    }
}

fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}
