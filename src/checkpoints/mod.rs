//! Checkpoints: every change a session makes to the files beneath its workspace roots,
//! recorded after every iteration, with the content before and after (issue 25 §1).
//!
//! Design (the user's view is `docs/checkpoints.md`):
//! - **Where.** `<database dir>/checkpoints/<session>/`, never inside the workspace, and
//!   hidden from blocks with the rest of the store's files (`config::store_files`). It holds
//!   `log.jsonl` (the index, [`log`]) and `blobs/` (content-addressed by blake3, [`blobs`]).
//! - **Files, not SQLite.** The index is an append-only JSON-lines log beside the blobs: the
//!   blobs are files anyway, an append per iteration costs less than a transaction, the
//!   database stays small, and a session's checkpoints are removed by removing one directory.
//!   A line cut short by a crash is ignored when the log is read.
//! - **Finding changes** ([`scan`]): a metadata walk (size, mtime, ctime, inode, mode) of the
//!   roots, honouring the ignore rules, compared with the manifest of the last checkpoint;
//!   only candidates are hashed. A file whose content hashes the same records no change.
//! - **The start state.** At a session's first block the baseline is recorded: every file's
//!   metadata and content (stored once per content). Content has to be taken before a block
//!   can change it, and a later scan sees only the result; the cost is paid once per session
//!   and bounded by the budget and the largest file kept (measured in `benches/checkpoints.rs`).
//! - **Each iteration** ([`record`]): before the block, a scan records what changed outside
//!   Vis since the last checkpoint (origin `outside`) and a `begin` line; after it, a scan
//!   records the block's changes. A `begin` without its checkpoint (the gateway was killed
//!   mid-block) is closed at the next scan, which gives the changes to that iteration.
//! - **Limits.** A per-session budget of stored bytes and a largest file kept: a change over
//!   either is recorded with its hash (when hashed) but its content is "not kept", with the
//!   reason; such a file cannot be restored and rewinding past it says so.
//! - **Restoring** ([`restore`]): the state at a point is the baseline plus every checkpoint
//!   before it; `restore_into` makes a copy of the workspace look like that, `rewind` does it
//!   in place, atomically (staged temp files, then renames, rolled back on failure).

mod atomic;
mod beneath;
mod blobs;
mod diff;
mod feed;
mod fork;
mod log;
mod record;
mod restore;
mod rules;
mod scan;
mod session;

use std::path::{Path, PathBuf};

pub use diff::{render_diff, DiffOptions};
pub use fork::{fork_history, ForkedHistory};
pub use log::{Change, FileState, Origin};
pub use record::Recorder;
pub use restore::{
    copy_workspace, plan_rewind, restore_into, rewind_files, Conflict, RestoreReport, RewindPlan,
    RewindReport,
};
pub use rules::CheckpointSettings;
pub use session::{rewind_session, RewindOptions, RewindOutcome};

/// A moment of a session that files can be restored to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Before the session's first block: the baseline.
    Start,
    /// Before turn N's first block.
    BeforeTurn(i64),
}

/// What `vis diff` shows: the whole session, one turn, or one iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    Session,
    Turn(i64),
    Iteration(i64, i64),
}

/// Why a checkpoint operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("session {0} has no checkpoints (it ran no block with checkpoints enabled, or its checkpoint directory was removed)")]
    NoCheckpoints(String),
    #[error("bad key {key:?}: {why}; keys look like t3 (a turn) or t3/i2 (an iteration), numbers from 1")]
    BadKey { key: String, why: String },
    #[error("session {session} has no turn {turn} (it has {turns}); `vis sessions show {session}` lists them")]
    NoSuchTurn {
        session: String,
        turn: i64,
        turns: i64,
    },
    #[error("cannot {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the checkpoint log {path} is damaged at line {line}: {detail}; it was left as it is")]
    Corrupt {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    #[error("{0}")]
    Refused(String),
}

impl CheckpointError {
    pub(crate) fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        CheckpointError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where a session's checkpoints live: `<database dir>/checkpoints/<session>/`.
pub fn session_dir(db: &Path, session_id: &str) -> PathBuf {
    checkpoints_root(db).join(session_id)
}

/// `<store dir>/checkpoints/` (the database's directory; for PostgreSQL the database's
/// directory under `$VIS_HOME/postgres/`, see `config::store_dir`): hidden from blocks with
/// the store's other files.
pub fn checkpoints_root(db: &Path) -> PathBuf {
    crate::config::store_dir(db).join("checkpoints")
}

/// Creates `<database dir>/checkpoints/` if needed: it must exist before a worker starts,
/// since the sandbox hides only paths that exist. Best effort: a failure surfaces when a
/// checkpoint is recorded.
pub fn prepare_root(db: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    // The blobs are copies of workspace files: no other local user reads them.
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(checkpoints_root(db));
}

/// Parses `t3` or `t3/i2` (numbers from 1).
pub fn parse_span(key: &str) -> Result<Span, CheckpointError> {
    let bad = |why: &str| CheckpointError::BadKey {
        key: key.to_string(),
        why: why.to_string(),
    };
    let number = |text: &str, what: &str| -> Result<i64, CheckpointError> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) || text.len() > 12 {
            return Err(bad(&format!("{what} must be a number")));
        }
        match text.parse::<i64>() {
            Ok(0) => Err(bad(&format!("{what} numbers start at 1"))),
            Ok(n) => Ok(n),
            Err(_) => Err(bad(&format!("{what} must be a number"))),
        }
    };
    let Some(rest) = key.strip_prefix('t') else {
        return Err(bad("it must start with t"));
    };
    match rest.split_once('/') {
        None => Ok(Span::Turn(number(rest, "the turn")?)),
        Some((turn, iteration)) => {
            let Some(iteration) = iteration.strip_prefix('i') else {
                return Err(bad("the part after / must start with i"));
            };
            Ok(Span::Iteration(
                number(turn, "the turn")?,
                number(iteration, "the iteration")?,
            ))
        }
    }
}

/// Parses the key of a rewind or fork point: a turn (`t3`).
pub fn parse_point(key: &str) -> Result<Point, CheckpointError> {
    match parse_span(key)? {
        Span::Turn(t) => Ok(Point::BeforeTurn(t)),
        _ => Err(CheckpointError::BadKey {
            key: key.to_string(),
            why: "a rewind or fork point is a turn, such as t3".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoints_directory_is_the_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let db = home.path().join("data/vis.db");
        prepare_root(&db);
        let mode = std::fs::metadata(checkpoints_root(&db))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }

    #[test]
    fn keys_parse_and_bad_ones_say_why() {
        assert_eq!(parse_span("t3").unwrap(), Span::Turn(3));
        assert_eq!(parse_span("t3/i2").unwrap(), Span::Iteration(3, 2));
        for bad in [
            "t0",
            "x3",
            "",
            "t",
            "t3/2",
            "t-1",
            "t3/i0",
            "t99999999999999",
        ] {
            assert!(parse_span(bad).is_err(), "{bad}");
        }
        assert!(parse_point("t3/i1").is_err());
    }
}
