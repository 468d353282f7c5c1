//! The index: `log.jsonl`, one JSON record a line, appended and never rewritten.
//!
//! - `baseline`: the roots and every file as the session's first block found it;
//! - `begin`: a block is about to run (turn, iteration);
//! - `checkpoint`: what changed, by whom ([`Origin`]), with the metadata the next scan
//!   compares with. A truncating rewind's checkpoint carries `cut_from_turn`: the turns from
//!   there on were removed from the conversation, and their records leave the timeline.
//!
//! Two views are folded from it: the **manifest** (every record in order: what is on disk as
//! far as Vis knows, for change detection) and the **timeline** (the records of the
//! conversation as it stands, for diffs, rewinds and restore points).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::scan::Meta;
use super::{CheckpointError, Point};

/// What a path holds (absent paths are `None` where a state is optional).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", try_from = "StateLine")]
pub enum FileState {
    /// A regular file: its content's blake3 (`None`: not hashed, over the largest file kept)
    /// and its permission bits.
    File {
        hash: Option<String>,
        size: u64,
        mode: u32,
    },
    /// A symlink and its target, as text (never followed).
    Symlink { target: String },
}

/// A [`FileState`] as written, read field by field: serde reads an internally tagged enum
/// by buffering each value first, which for a baseline's 10,000 states was a third of the
/// time to read a log.
#[derive(Deserialize)]
struct StateLine {
    kind: StateKind,
    #[serde(default)]
    hash: Option<String>,
    size: Option<u64>,
    mode: Option<u32>,
    target: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum StateKind {
    File,
    Symlink,
}

impl TryFrom<StateLine> for FileState {
    type Error = String;

    fn try_from(line: StateLine) -> Result<FileState, String> {
        match line.kind {
            StateKind::File => Ok(FileState::File {
                hash: line.hash,
                size: line.size.ok_or("a file state without its size")?,
                mode: line.mode.ok_or("a file state without its mode")?,
            }),
            StateKind::Symlink => Ok(FileState::Symlink {
                target: line.target.ok_or("a symlink state without its target")?,
            }),
        }
    }
}

/// The baseline record's fields, read straight from its line (see [`parse_record`]).
#[derive(Deserialize)]
struct BaselineLine {
    roots: Vec<String>,
    at: i64,
    files: BTreeMap<String, Entry>,
    #[serde(default)]
    notes: Vec<String>,
}

/// One line of the log. The baseline (most of a log's bytes) is read straight into its
/// fields: its tag is written first, and a tagged enum would be buffered whole before being
/// read, which doubled the time to open a session's checkpoints.
fn parse_record(line: &str) -> serde_json::Result<Record> {
    if line.starts_with(r#"{"type":"baseline","#) {
        let b: BaselineLine = serde_json::from_str(line)?;
        return Ok(Record::Baseline {
            roots: b.roots,
            at: b.at,
            files: b.files,
            notes: b.notes,
        });
    }
    serde_json::from_str(line)
}

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The block of that iteration.
    Block,
    /// A block whose gateway was killed: recorded when the session resumed.
    Interrupted,
    /// Found before a block: made outside Vis since the last checkpoint.
    Outside,
    /// A rewind.
    Rewind,
}

impl Origin {
    /// Changes Vis made (a conflict check trusts these as "what Vis last wrote").
    pub fn by_vis(self) -> bool {
        !matches!(self, Origin::Outside)
    }
}

/// One path's change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub before: Option<FileState>,
    pub after: Option<FileState>,
    /// Why content was not kept (budget, size), when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A path in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub meta: Meta,
    pub state: FileState,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Baseline {
        roots: Vec<String>,
        at: i64,
        files: BTreeMap<String, Entry>,
        #[serde(default)]
        notes: Vec<String>,
    },
    Begin {
        turn: i64,
        iteration: i64,
    },
    Checkpoint(Checkpoint),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    pub turn: i64,
    pub iteration: i64,
    pub origin: Origin,
    pub at: i64,
    pub changes: Vec<Change>,
    /// The metadata now of every path whose metadata moved (changed or not): what the next
    /// scan compares with.
    #[serde(default)]
    pub seen: BTreeMap<String, Meta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_from_turn: Option<i64>,
}

/// One item of the timeline.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    Begin { turn: i64, iteration: i64 },
    Checkpoint(&'a Checkpoint),
}

pub struct Log {
    path: PathBuf,
    pub records: Vec<Record>,
    /// The file's length as last read or written (another process appended when it differs).
    pub len: u64,
    /// False once [`Log::take_manifest`] moved the baseline's files out.
    history: bool,
}

impl Log {
    pub fn path_in(dir: &Path) -> PathBuf {
        dir.join("log.jsonl")
    }

    /// Reads the log (`None`: there is none). A last line cut short by a crash is ignored;
    /// a damaged line before it is an error.
    pub fn load(dir: &Path) -> Result<Option<Log>, CheckpointError> {
        let path = Self::path_in(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CheckpointError::io("read", &path, e)),
        };
        let len = text.len() as u64;
        let lines: Vec<&str> = text.split('\n').collect();
        let mut records = Vec::new();
        for (n, line) in lines.iter().enumerate() {
            if line.is_empty() {
                continue;
            }
            match parse_record(line) {
                Ok(record) => records.push(record),
                // Only the last line can be cut short (appends are whole lines otherwise).
                Err(_) if n + 1 == lines.len() => {}
                Err(e) => {
                    return Err(CheckpointError::Corrupt {
                        path,
                        line: n + 1,
                        detail: e.to_string(),
                    })
                }
            }
        }
        if !matches!(records.first(), Some(Record::Baseline { .. })) {
            return Err(CheckpointError::Corrupt {
                path,
                line: 1,
                detail: "the first record is not the baseline".into(),
            });
        }
        Ok(Some(Log {
            path,
            records,
            len,
            history: true,
        }))
    }

    /// A new log holding `baseline`.
    pub fn create(dir: &Path, baseline: Record) -> Result<Log, CheckpointError> {
        std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io("create", dir, e))?;
        let mut log = Log {
            path: Self::path_in(dir),
            records: Vec::new(),
            len: 0,
            history: true,
        };
        // A log cut short before its baseline line was complete is started again.
        let _ = std::fs::remove_file(&log.path);
        log.append(baseline)?;
        Ok(log)
    }

    /// Appends one record as one line (one `write`, so a reader never sees half of it unless
    /// the process dies mid-write; then [`Log::load`] drops it).
    pub fn append(&mut self, record: Record) -> Result<(), CheckpointError> {
        let mut line = serde_json::to_vec(&record).map_err(|e| CheckpointError::Corrupt {
            path: self.path.clone(),
            line: self.records.len() + 1,
            detail: e.to_string(),
        })?;
        line.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| CheckpointError::io("open", &self.path, e))?;
        if let Err(e) = file.write_all(&line) {
            // Leave no partial line for the next append to glue onto.
            let _ = file.set_len(self.len);
            return Err(CheckpointError::io("append to", &self.path, e));
        }
        self.len += line.len() as u64;
        self.records.push(record);
        Ok(())
    }

    pub fn roots(&self) -> &[String] {
        match self.records.first() {
            Some(Record::Baseline { roots, .. }) => roots,
            _ => &[],
        }
    }

    /// The manifest, made by moving the baseline's files out of this log instead of copying
    /// them: the log then keeps what a recorder appends with (its roots, its records since
    /// the baseline, its length), not its history. On 10,000 files the copy was 3 MB, and
    /// each megabyte a `vis exec` touches costs it about half a millisecond (faulted in,
    /// then torn down at its exit). History ([`Log::files_at`], [`Log::since`]) is read from
    /// a fresh [`Log::load`].
    pub fn take_manifest(&mut self) -> BTreeMap<String, Entry> {
        let mut files = BTreeMap::new();
        for record in &mut self.records {
            match record {
                Record::Baseline { files: base, .. } => {
                    files = std::mem::take(base);
                    self.history = false;
                }
                Record::Begin { .. } => {}
                Record::Checkpoint(c) => apply(&mut files, c),
            }
        }
        files
    }

    /// Readers of the history call this first: a log whose baseline files were taken
    /// ([`Log::take_manifest`]) would answer them wrongly (debug builds stop here).
    fn expect_history(&self) {
        debug_assert!(
            self.history,
            "history read from a log whose baseline files were taken"
        );
    }

    /// What is on disk as far as Vis knows: every record applied in order.
    pub fn manifest(&self) -> BTreeMap<String, Entry> {
        self.expect_history();
        let mut files = BTreeMap::new();
        for record in &self.records {
            match record {
                Record::Baseline { files: base, .. } => files = base.clone(),
                Record::Begin { .. } => {}
                Record::Checkpoint(c) => apply(&mut files, c),
            }
        }
        files
    }

    /// Bytes of content kept, from the log alone (the budget's measure when a recorder
    /// opens; stat-ing every blob cost a `vis exec` 10-20 ms on 10,000 files): every
    /// distinct blob a state names, once. A change noted as not kept does not count; in the
    /// baseline, content not kept (the budget ran out while it was taken) counts, which can
    /// only find the budget full where it already was.
    pub fn kept_bytes(&self) -> u64 {
        self.expect_history();
        let states =
            self.records
                .iter()
                .flat_map(|record| -> Box<dyn Iterator<Item = &FileState> + '_> {
                    match record {
                        Record::Baseline { files, .. } => {
                            Box::new(files.values().map(|e| &e.state))
                        }
                        Record::Begin { .. } => Box::new(std::iter::empty()),
                        Record::Checkpoint(c) => Box::new(
                            c.changes
                                .iter()
                                .filter(|c| c.note.is_none())
                                .filter_map(|c| c.after.as_ref()),
                        ),
                    }
                });
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let mut total = 0;
        for state in states {
            if let FileState::File {
                hash: Some(hash),
                size,
                ..
            } = state
            {
                if seen.insert(hash.as_str()) {
                    total += size;
                }
            }
        }
        total
    }

    /// The block that began and has no checkpoint yet (its gateway was killed).
    pub fn pending(&self) -> Option<(i64, i64)> {
        match self
            .records
            .iter()
            .rev()
            .find(|r| !matches!(r, Record::Baseline { .. }))
        {
            Some(Record::Begin { turn, iteration }) => Some((*turn, *iteration)),
            _ => None,
        }
    }

    /// The records of the conversation as it stands (truncating rewinds applied).
    pub fn timeline(&self) -> Vec<Step<'_>> {
        self.expect_history();
        let mut steps: Vec<Step<'_>> = Vec::new();
        for record in &self.records {
            match record {
                Record::Baseline { .. } => {}
                Record::Begin { turn, iteration } => steps.push(Step::Begin {
                    turn: *turn,
                    iteration: *iteration,
                }),
                Record::Checkpoint(c) => {
                    if let Some(cut) = c.cut_from_turn {
                        steps.retain(|s| match s {
                            Step::Begin { turn, .. } => *turn < cut,
                            Step::Checkpoint(k) => k.turn < cut,
                        });
                    }
                    steps.push(Step::Checkpoint(c));
                }
            }
        }
        steps
    }

    /// The files at `point`: the baseline plus every timeline checkpoint before it.
    pub fn files_at(&self, point: Point) -> BTreeMap<String, FileState> {
        self.expect_history();
        let mut files: BTreeMap<String, FileState> = match self.records.first() {
            Some(Record::Baseline { files, .. }) => files
                .iter()
                .map(|(p, e)| (p.clone(), e.state.clone()))
                .collect(),
            _ => BTreeMap::new(),
        };
        if let Point::BeforeTurn(n) = point {
            for step in self.timeline() {
                match step {
                    Step::Begin { turn, .. } if turn >= n => break,
                    Step::Begin { .. } => {}
                    Step::Checkpoint(c) => {
                        for change in &c.changes {
                            match &change.after {
                                Some(state) => files.insert(change.path.clone(), state.clone()),
                                None => files.remove(&change.path),
                            };
                        }
                    }
                }
            }
        }
        files
    }

    /// The timeline checkpoints from `point` on (all of them for [`Point::Start`]).
    pub fn since(&self, point: Point) -> Vec<&Checkpoint> {
        let mut started = matches!(point, Point::Start);
        let mut out = Vec::new();
        for step in self.timeline() {
            match step {
                Step::Begin { turn, .. } => {
                    if let Point::BeforeTurn(n) = point {
                        started |= turn >= n;
                    }
                }
                Step::Checkpoint(c) if started => out.push(c),
                Step::Checkpoint(_) => {}
            }
        }
        out
    }
}

/// Applies a checkpoint to a manifest.
pub fn apply(files: &mut BTreeMap<String, Entry>, checkpoint: &Checkpoint) {
    for change in &checkpoint.changes {
        match (&change.after, checkpoint.seen.get(&change.path)) {
            (Some(state), Some(meta)) => {
                files.insert(
                    change.path.clone(),
                    Entry {
                        meta: *meta,
                        state: state.clone(),
                    },
                );
            }
            _ => {
                files.remove(&change.path);
            }
        }
    }
    for (path, meta) in &checkpoint.seen {
        if let Some(entry) = files.get_mut(path) {
            entry.meta = *meta;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_baseline_read_straight_is_the_record_that_was_written() {
        let mut files = BTreeMap::new();
        let meta = Meta {
            size: 3,
            mtime_ns: 1,
            ctime_ns: 2,
            ino: 7,
            mode: 0o100644,
        };
        files.insert(
            "/w/a".to_string(),
            Entry {
                meta,
                state: FileState::File {
                    hash: Some("ab".repeat(32)),
                    size: 3,
                    mode: 0o644,
                },
            },
        );
        files.insert(
            "/w/big".to_string(),
            Entry {
                meta,
                state: FileState::File {
                    hash: None,
                    size: 1 << 40,
                    mode: 0o600,
                },
            },
        );
        files.insert(
            "/w/l".to_string(),
            Entry {
                meta,
                state: FileState::Symlink {
                    target: "../x".into(),
                },
            },
        );
        let record = Record::Baseline {
            roots: vec!["/w".into()],
            at: 5,
            files,
            notes: vec!["n".into()],
        };
        let line = serde_json::to_string(&record).unwrap();
        let fast = parse_record(&line).unwrap();
        assert_eq!(serde_json::to_string(&fast).unwrap(), line);
        // A state missing a field is refused, as the tagged form refused it.
        let bad = line.replace(r#","mode":420"#, "");
        assert!(parse_record(&bad).is_err());
        let checkpoint = r#"{"type":"begin","turn":2,"iteration":1}"#;
        assert!(matches!(
            parse_record(checkpoint).unwrap(),
            Record::Begin {
                turn: 2,
                iteration: 1
            }
        ));
    }
}
