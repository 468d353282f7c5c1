//! The recorder: the scans before and after each block, and what they append to the log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::blobs::Blobs;
use super::log::{apply, Change, Checkpoint, Entry, FileState, Log, Origin, Record};
use super::scan::{scan, Meta, ScanRules};
use super::CheckpointError;

/// `[checkpoints]` in config.toml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointSettings {
    pub enabled: bool,
    /// Record files the ignore rules exclude (and `.git/`) too.
    pub include_ignored: bool,
    /// Bytes of content kept per session; changes past it are recorded as not kept.
    pub budget_bytes: u64,
    /// The largest file whose content is hashed and kept.
    pub max_file_bytes: u64,
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        CheckpointSettings {
            enabled: true,
            include_ignored: false,
            budget_bytes: 512 * 1024 * 1024,
            max_file_bytes: 16 * 1024 * 1024,
        }
    }
}

/// A session's checkpoints, as the runner and the commands use them. The log is read at the
/// first use and followed from then on (re-read when another process appended to it).
pub struct Recorder {
    dir: PathBuf,
    roots: Vec<String>,
    settings: CheckpointSettings,
    exclude: Vec<PathBuf>,
    loaded: Option<Loaded>,
}

pub(crate) struct Loaded {
    pub log: Log,
    pub manifest: BTreeMap<String, Entry>,
    pub blobs: Blobs,
    pub kept_bytes: u64,
}

impl Recorder {
    /// The recorder of session `session_id` of the database at `db`.
    pub fn new(
        db: &Path,
        session_id: &str,
        roots: &[String],
        settings: CheckpointSettings,
    ) -> Recorder {
        let dir = super::session_dir(db, session_id);
        let mut exclude = crate::config::store_files(db);
        exclude.push(super::checkpoints_root(db));
        Recorder {
            dir,
            roots: roots.to_vec(),
            settings,
            exclude,
            loaded: None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn settings(&self) -> &CheckpointSettings {
        &self.settings
    }

    /// Before a block: the baseline at the session's first block; then what changed since
    /// the last checkpoint (given to the block that was cut short, if the gateway was killed
    /// mid-block, else recorded as made outside Vis); then the block's `begin`.
    pub fn before_block(&mut self, turn: i64, iteration: i64) -> Result<(), CheckpointError> {
        if !self.settings.enabled {
            return Ok(());
        }
        self.catch_up(turn, iteration)?;
        self.loaded()?.log.append(Record::Begin { turn, iteration })
    }

    /// After a block: what it changed (always a record, so its `begin` is closed).
    pub fn after_block(&mut self, turn: i64, iteration: i64) -> Result<(), CheckpointError> {
        if !self.settings.enabled {
            return Ok(());
        }
        self.record(Origin::Block, turn, iteration, true, None)
            .map(|_| ())
    }

    /// Brings the log up to what is on disk now: the baseline if there is none, then the
    /// changes since the last checkpoint (to the interrupted block, or as made outside Vis at
    /// `turn`/`iteration`). Used before blocks and before a rewind.
    pub fn catch_up(&mut self, turn: i64, iteration: i64) -> Result<(), CheckpointError> {
        if self.loaded_or_none()?.is_none() {
            self.start()?;
            return Ok(());
        }
        let pending = self.loaded()?.log.pending();
        match pending {
            Some((t, i)) => self.record(Origin::Interrupted, t, i, true, None)?,
            None => self.record(Origin::Outside, turn, iteration, false, None)?,
        };
        Ok(())
    }

    /// The log as it stands (re-read when another process appended to it).
    pub(crate) fn loaded(&mut self) -> Result<&mut Loaded, CheckpointError> {
        if self.loaded_or_none()?.is_none() {
            let session = self
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            return Err(CheckpointError::NoCheckpoints(session));
        }
        match self.loaded.as_mut() {
            Some(loaded) => Ok(loaded),
            None => Err(CheckpointError::NoCheckpoints(String::new())),
        }
    }

    fn loaded_or_none(&mut self) -> Result<Option<&mut Loaded>, CheckpointError> {
        let on_disk = std::fs::metadata(Log::path_in(&self.dir)).map_or(0, |m| m.len());
        let stale = match &self.loaded {
            Some(l) => l.log.len != on_disk,
            None => true,
        };
        if stale {
            self.loaded = match Log::load(&self.dir)? {
                Some(log) => {
                    let blobs = Blobs::new(&self.dir);
                    Some(Loaded {
                        manifest: log.manifest(),
                        kept_bytes: blobs.total_bytes(),
                        blobs,
                        log,
                    })
                }
                None => None,
            };
            if let Some(l) = &self.loaded {
                if self.roots.is_empty() {
                    self.roots = l.log.roots().to_vec();
                }
            }
        }
        Ok(self.loaded.as_mut())
    }

    /// The baseline: every file's metadata and content as the first block finds them.
    fn start(&mut self) -> Result<(), CheckpointError> {
        let found = self.walk();
        let blobs = Blobs::new(&self.dir);
        let mut kept_bytes = 0;
        let mut files = BTreeMap::new();
        let mut not_kept = 0usize;
        for (path, meta) in found.files {
            if let Some((state, note)) =
                self.state_of(&blobs, &mut kept_bytes, Path::new(&path), &meta)
            {
                not_kept += usize::from(note.is_some());
                files.insert(path, Entry { meta, state });
            }
        }
        let mut notes = Vec::new();
        if not_kept > 0 {
            notes.push(format!(
                "{not_kept} files' content was not kept (over the budget or the largest file kept): they cannot be restored to this state"
            ));
        }
        if found.unreadable_names > 0 {
            notes.push(format!(
                "{} paths whose names are not UTF-8 are not recorded",
                found.unreadable_names
            ));
        }
        let log = Log::create(
            &self.dir,
            Record::Baseline {
                roots: self.roots.clone(),
                at: crate::store::now_millis(),
                files,
                notes,
            },
        )?;
        self.loaded = Some(Loaded {
            manifest: log.manifest(),
            log,
            blobs,
            kept_bytes,
        });
        Ok(())
    }

    fn walk(&self) -> super::scan::Scan {
        scan(&ScanRules {
            roots: &self.roots,
            include_ignored: self.settings.include_ignored,
            exclude: &self.exclude,
        })
    }

    /// What `path` holds now, its content kept when the limits allow (the note says why
    /// not). `None` when it cannot be read (it went away mid-scan: the next scan sees it).
    fn state_of(
        &self,
        blobs: &Blobs,
        kept_bytes: &mut u64,
        path: &Path,
        meta: &Meta,
    ) -> Option<(FileState, Option<String>)> {
        if meta.is_symlink() {
            let target = std::fs::read_link(path).ok()?;
            return Some((
                FileState::Symlink {
                    target: target.to_string_lossy().into_owned(),
                },
                None,
            ));
        }
        let mode = meta.permissions();
        if meta.size > self.settings.max_file_bytes {
            let note = format!(
                "not kept: {} bytes is over the largest file kept ({} bytes, [checkpoints] max_file_mb)",
                meta.size, self.settings.max_file_bytes
            );
            let state = FileState::File {
                hash: None,
                size: meta.size,
                mode,
            };
            return Some((state, Some(note)));
        }
        let keep = *kept_bytes + meta.size <= self.settings.budget_bytes;
        let taken = blobs.take(path, keep).ok()?;
        *kept_bytes += taken.added;
        let kept = keep || blobs.has(&taken.hash);
        let note = (!kept).then(|| {
            format!(
                "not kept: the session's checkpoints reached their budget ({} bytes, [checkpoints] budget_mb)",
                self.settings.budget_bytes
            )
        });
        let state = FileState::File {
            hash: Some(taken.hash),
            size: taken.size,
            mode,
        };
        Some((state, note))
    }

    /// Scans, and appends a checkpoint of what changed (when anything did, or `always`).
    pub(crate) fn record(
        &mut self,
        origin: Origin,
        turn: i64,
        iteration: i64,
        always: bool,
        cut_from_turn: Option<i64>,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        self.loaded()?;
        let found = self.walk();
        let Some(mut loaded) = self.loaded.take() else {
            return Ok(None);
        };
        let mut changes = Vec::new();
        let mut seen = BTreeMap::new();
        for (path, meta) in &found.files {
            let before = loaded.manifest.get(path);
            if before.is_some_and(|e| e.meta == *meta) {
                continue;
            }
            let Some((state, note)) =
                self.state_of(&loaded.blobs, &mut loaded.kept_bytes, Path::new(path), meta)
            else {
                continue;
            };
            seen.insert(path.clone(), *meta);
            let unchanged = before.is_some_and(|e| {
                e.state == state && !matches!(state, FileState::File { hash: None, .. })
            });
            if !unchanged {
                changes.push(Change {
                    path: path.clone(),
                    before: before.map(|e| e.state.clone()),
                    after: Some(state),
                    note,
                });
            }
        }
        for (path, entry) in &loaded.manifest {
            if !found.files.contains_key(path) {
                changes.push(Change {
                    path: path.clone(),
                    before: Some(entry.state.clone()),
                    after: None,
                    note: None,
                });
            }
        }
        if changes.is_empty() && seen.is_empty() && !always {
            self.loaded = Some(loaded);
            return Ok(None);
        }
        let checkpoint = Checkpoint {
            turn,
            iteration,
            origin,
            at: crate::store::now_millis(),
            changes,
            seen,
            cut_from_turn,
        };
        let appended = loaded.log.append(Record::Checkpoint(checkpoint.clone()));
        if appended.is_ok() {
            apply(&mut loaded.manifest, &checkpoint);
        }
        self.loaded = Some(loaded);
        appended.map(|()| Some(checkpoint))
    }
}
