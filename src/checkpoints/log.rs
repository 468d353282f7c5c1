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
#[serde(tag = "kind", rename_all = "snake_case")]
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
            match serde_json::from_str::<Record>(line) {
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
        Ok(Some(Log { path, records, len }))
    }

    /// A new log holding `baseline`.
    pub fn create(dir: &Path, baseline: Record) -> Result<Log, CheckpointError> {
        std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io("create", dir, e))?;
        let mut log = Log {
            path: Self::path_in(dir),
            records: Vec::new(),
            len: 0,
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

    /// What is on disk as far as Vis knows: every record applied in order.
    pub fn manifest(&self) -> BTreeMap<String, Entry> {
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
        let mut seen = std::collections::HashSet::new();
        let mut total = 0;
        let mut count = |state: &FileState| {
            if let FileState::File {
                hash: Some(hash),
                size,
                ..
            } = state
            {
                if seen.insert(hash.clone()) {
                    total += size;
                }
            }
        };
        for record in &self.records {
            match record {
                Record::Baseline { files, .. } => files.values().for_each(|e| count(&e.state)),
                Record::Begin { .. } => {}
                Record::Checkpoint(c) => {
                    for change in c.changes.iter().filter(|c| c.note.is_none()) {
                        change.after.iter().for_each(&mut count);
                    }
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
