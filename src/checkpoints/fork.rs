//! A fork carries its checkpoint history (issue 25 §2): `vis sessions fork ID --at tN` gives
//! the new session the original's checkpoints up to the end of turn N, so `vis diff` and
//! `vis rewind` on the fork reach back before the fork point.
//!
//! The fork's log is written anew from the original's timeline (what truncating rewinds cut
//! is left out): the baseline, then every `begin` and checkpoint of turns 1 to N. Paths under
//! the original's first root are moved to the fork's when the fork works in a copy of the
//! workspace. Blobs are content-addressed and never changed once written, so the fork's are
//! hard links to the original's (copies across file systems): removing either session's
//! checkpoints leaves the other's whole.
//!
//! The fork's first scan compares the files with this history: in a copy it finds the same
//! content (the metadata differs, so it hashes and notes it); in the original's workspace it
//! records what the original changed after turn N as made outside the fork.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::blobs::Blobs;
use super::log::{Change, Checkpoint, Entry, FileState, Log, Record, Step};
use super::CheckpointError;

/// What [`fork_history`] copied.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ForkedHistory {
    pub checkpoints: usize,
    pub blobs: usize,
}

/// Gives session `new_id` the checkpoints of `source` through turn `through`, its paths
/// under `roots` (the fork's). `None`: the source has no checkpoints. Removes what it wrote
/// when it fails.
pub fn fork_history(
    db: &Path,
    source: &str,
    new_id: &str,
    through: i64,
    roots: &[String],
) -> Result<Option<ForkedHistory>, CheckpointError> {
    let from = super::session_dir(db, source);
    let Some(log) = Log::load(&from)? else {
        return Ok(None);
    };
    let to = super::session_dir(db, new_id);
    super::prepare_root(db);
    let written = write_history(&log, &from, &to, through, roots);
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&to);
    }
    written.map(Some)
}

fn write_history(
    log: &Log,
    from: &Path,
    to: &Path,
    through: i64,
    roots: &[String],
) -> Result<ForkedHistory, CheckpointError> {
    let old_root = log.roots().first().cloned().unwrap_or_default();
    let new_root = roots.first().cloned().unwrap_or_default();
    let moved = |path: &str| -> String {
        match Path::new(path).strip_prefix(&old_root) {
            Ok(rel) if old_root != new_root && !old_root.is_empty() => Path::new(&new_root)
                .join(rel)
                .to_string_lossy()
                .into_owned(),
            _ => path.to_string(),
        }
    };
    let mut hashes = BTreeSet::new();
    let mut note = |state: &FileState| {
        if let FileState::File {
            hash: Some(hash), ..
        } = state
        {
            hashes.insert(hash.clone());
        }
    };
    let Some(Record::Baseline {
        at, files, notes, ..
    }) = log.records.first()
    else {
        return Err(CheckpointError::NoCheckpoints(String::new()));
    };
    let files: BTreeMap<String, Entry> = files
        .iter()
        .map(|(path, entry)| {
            note(&entry.state);
            (moved(path), entry.clone())
        })
        .collect();
    let mut fork = Log::create(
        to,
        Record::Baseline {
            roots: roots.to_vec(),
            at: *at,
            files,
            notes: notes.clone(),
        },
    )?;
    let mut checkpoints = 0;
    for step in log.timeline() {
        let record = match step {
            Step::Begin { turn, .. } if turn > through => break,
            Step::Begin { turn, iteration } => Record::Begin { turn, iteration },
            Step::Checkpoint(c) if c.turn > through => break,
            Step::Checkpoint(c) => {
                checkpoints += 1;
                let changes = c
                    .changes
                    .iter()
                    .map(|change| {
                        change
                            .before
                            .iter()
                            .chain(&change.after)
                            .for_each(&mut note);
                        Change {
                            path: moved(&change.path),
                            ..change.clone()
                        }
                    })
                    .collect();
                Record::Checkpoint(Checkpoint {
                    changes,
                    seen: c.seen.iter().map(|(p, m)| (moved(p), *m)).collect(),
                    // The timeline already left out what a cut removed.
                    cut_from_turn: None,
                    ..c.clone()
                })
            }
        };
        fork.append(record)?;
    }
    let (source_blobs, fork_blobs) = (Blobs::new(from), Blobs::new(to));
    let mut linked = 0;
    for hash in &hashes {
        let (src, dest) = (source_blobs.path_of(hash), fork_blobs.path_of(hash));
        if !src.is_file() {
            // Not kept (over the budget): the fork cannot restore it either, and says so.
            continue;
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| CheckpointError::io("create", parent, e))?;
        }
        if std::fs::hard_link(&src, &dest).is_err() {
            std::fs::copy(&src, &dest).map_err(|e| CheckpointError::io("copy", &src, e))?;
        }
        linked += 1;
    }
    Ok(ForkedHistory {
        checkpoints,
        blobs: linked,
    })
}
