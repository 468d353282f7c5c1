//! The recorder: the scans before and after each block, and what they append to the log.
//!
//! Off the block's critical path where it can be: the scan after a block runs on a thread of
//! its own while the model reads the result and answers, and the next block waits for it
//! (it is nearly always done by then). The scan before a block runs only at a turn's first
//! block (the person edits between turns; changes made within a turn are the blocks'), after
//! a gateway was killed mid-block, and at a session's first block (the baseline).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::blobs::Blobs;
use super::feed::{watched_walk, Feed, FeedState};
use super::log::{apply, Change, Checkpoint, Entry, FileState, Log, Origin, Record};
use super::scan::{recorded_names_in, Meta, ScanRules};
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
    /// More directories than this are not watched by the change feed (0: no feed).
    pub max_watched_dirs: usize,
}

impl Default for CheckpointSettings {
    fn default() -> Self {
        CheckpointSettings {
            enabled: true,
            include_ignored: false,
            budget_bytes: 512 * 1024 * 1024,
            max_file_bytes: 16 * 1024 * 1024,
            max_watched_dirs: super::feed::MAX_WATCHED_DIRS,
        }
    }
}

/// A session's checkpoints, as the runner and the commands use them. The log is read at the
/// first use and followed from then on (re-read when another process appended to it).
pub struct Recorder {
    dir: PathBuf,
    rules: Rules,
    loaded: Option<Loaded>,
    /// A scan running on its own thread (after a block, or at a turn's start): it has the
    /// log meanwhile (`None` back when the baseline failed: the log is read again).
    scanning: Option<JoinHandle<Scanned>>,
    /// The turn whose scan for outside changes [`Recorder::prepare_turn`] started.
    prepared: Option<i64>,
    /// The number of the turn a [`Recorder::read_ahead`] thread waits for.
    turn_for_scan: Option<mpsc::Sender<i64>>,
}

/// The paths a scan looked at, and what each holds now (`None`: absent).
type Looked = BTreeMap<String, Option<Meta>>;

/// The turn a scan for outside changes is recorded under.
enum TurnNumber {
    Known(i64),
    /// Sent once the turn is begun in the store (dropped: it never is).
    Later(mpsc::Receiver<i64>),
}

/// What a scanning thread gives back: the log, and whether the scan was recorded.
type Scanned = (Option<Loaded>, Result<(), CheckpointError>);

pub(crate) struct Loaded {
    pub log: Log,
    pub manifest: BTreeMap<String, Entry>,
    pub blobs: Blobs,
    pub kept_bytes: u64,
    /// What changed since the last full walk (or why the next scan walks in full).
    pub feed: FeedState,
}

/// What a scan walks and keeps (cloned onto the scanning thread).
#[derive(Clone)]
struct Rules {
    roots: Vec<String>,
    settings: CheckpointSettings,
    exclude: Vec<PathBuf>,
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
        super::prepare_root(db);
        let mut exclude = crate::config::store_files(db);
        exclude.push(super::checkpoints_root(db));
        Recorder {
            dir,
            rules: Rules {
                roots: roots.to_vec(),
                settings,
                exclude,
            },
            loaded: None,
            scanning: None,
            prepared: None,
            turn_for_scan: None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The workspace roots it records.
    pub fn roots(&self) -> &[String] {
        &self.rules.roots
    }

    pub fn settings(&self) -> &CheckpointSettings {
        &self.rules.settings
    }

    /// Before a block: waits for the last block's scan; records the baseline at the
    /// session's first block; at a turn's first block, what changed since the last
    /// checkpoint (given to the block a killed gateway cut short, else recorded as made
    /// outside Vis); then the block's `begin`.
    pub fn before_block(&mut self, turn: i64, iteration: i64) -> Result<(), CheckpointError> {
        if !self.rules.settings.enabled {
            return Ok(());
        }
        let prepared = self.prepared.take() == Some(turn);
        let scanned = self.settle();
        let interrupted = self
            .loaded_or_none()?
            .is_some_and(|l| l.log.pending().is_some());
        if (iteration == 1 && !prepared) || interrupted || self.loaded.is_none() {
            self.catch_up(turn, iteration)?;
        }
        self.loaded()?
            .log
            .append(Record::Begin { turn, iteration })?;
        scanned
    }

    /// After a block: starts the scan of what it changed (always a record, so its `begin`
    /// is closed) on a thread of its own; [`Recorder::settle`] waits for it.
    pub fn after_block(&mut self, turn: i64, iteration: i64) -> Result<(), CheckpointError> {
        if !self.rules.settings.enabled {
            return Ok(());
        }
        let scanned = self.settle();
        self.loaded()?;
        let Some(mut loaded) = self.loaded.take() else {
            return scanned;
        };
        let rules = self.rules.clone();
        let spawned = std::thread::Builder::new()
            .name("vis-checkpoint".into())
            .spawn(move || {
                let recorded = rules
                    .record(&mut loaded, Origin::Block, turn, iteration, true, None)
                    .map(|_| ());
                (Some(loaded), recorded)
            });
        match spawned {
            Ok(handle) => self.scanning = Some(handle),
            // No thread to be had: the scan runs here.
            Err(_) => {
                self.loaded = None;
                self.loaded()?;
                self.record(Origin::Block, turn, iteration, true, None)?;
            }
        }
        scanned
    }

    /// A turn starts (the person's message is in; the model is asked next): the scan for
    /// changes made outside Vis since the last checkpoint (or the session's baseline) starts
    /// on its own thread, so the turn's first block does not wait for it (changes made while
    /// the model answers count as that block's). Errors surface at the first block.
    pub fn prepare_turn(&mut self, turn: i64) {
        // A thread that read ahead has the log: it scans once it has the number.
        if let Some(number) = self.turn_for_scan.take() {
            if number.send(turn).is_ok() {
                self.prepared = Some(turn);
                return;
            }
        }
        if !self.rules.settings.enabled || self.settle().is_err() {
            return;
        }
        // A log read before and still current goes along; otherwise the thread reads it
        // (tens of milliseconds on a large workspace, which `vis exec` spends while its
        // worker starts instead of before).
        let current = self
            .loaded
            .as_ref()
            .is_some_and(|l| l.log.len == log_len(&self.dir));
        let loaded = if current { self.loaded.take() } else { None };
        self.loaded = None;
        if let Some(handle) = self.scan_outside_changes(loaded, TurnNumber::Known(turn)) {
            self.scanning = Some(handle);
            self.prepared = Some(turn);
        }
    }

    /// For a process whose turn is numbered while its worker starts (`vis exec`): the log
    /// is read (tens of milliseconds on a large workspace) on its own thread from now on,
    /// and the scan of [`Recorder::prepare_turn`] follows once that gives the number. Without
    /// a number (the turn was never begun), the thread only reads.
    pub fn read_ahead(&mut self) {
        if !self.rules.settings.enabled || self.scanning.is_some() || self.loaded.is_some() {
            return;
        }
        let (number, wait) = mpsc::channel();
        if let Some(handle) = self.scan_outside_changes(None, TurnNumber::Later(wait)) {
            self.scanning = Some(handle);
            self.turn_for_scan = Some(number);
        }
    }

    /// The thread of [`Recorder::prepare_turn`]: reads the log unless `loaded` is current,
    /// then records the baseline (a session's first turn), the interrupted block's changes,
    /// or what changed outside Vis since the last checkpoint.
    fn scan_outside_changes(
        &self,
        loaded: Option<Loaded>,
        turn: TurnNumber,
    ) -> Option<JoinHandle<Scanned>> {
        let mut rules = self.rules.clone();
        let dir = self.dir.clone();
        let spawned = std::thread::Builder::new()
            .name("vis-checkpoint".into())
            .spawn(move || {
                let loaded = match loaded {
                    Some(loaded) => Some(loaded),
                    None => match rules.open(&dir) {
                        Ok(opened) => opened,
                        Err(e) => return (None, Err(e)),
                    },
                };
                let turn = match turn {
                    TurnNumber::Known(turn) => turn,
                    TurnNumber::Later(wait) => match wait.recv() {
                        Ok(turn) => turn,
                        // Not to be numbered: what was read is kept for the next use.
                        Err(_) => return (loaded, Ok(())),
                    },
                };
                if let Some(l) = loaded.as_ref().filter(|_| rules.roots.is_empty()) {
                    rules.roots = l.log.roots().to_vec();
                }
                match loaded {
                    None => match rules.baseline(&dir) {
                        Ok(loaded) => (Some(loaded), Ok(())),
                        Err(e) => (None, Err(e)),
                    },
                    Some(mut loaded) => {
                        let recorded = match loaded.log.pending() {
                            Some((t, i)) => {
                                rules.record(&mut loaded, Origin::Interrupted, t, i, true, None)
                            }
                            None => {
                                rules.record(&mut loaded, Origin::Outside, turn, 1, false, None)
                            }
                        };
                        (Some(loaded), recorded.map(|_| ()))
                    }
                }
            });
        spawned.ok()
    }

    /// For a process about to exit (`vis exec`): waits for the last scan, releases the change
    /// feed (see `checkpoints::release`), and leaves the rest (the log and the manifest,
    /// megabytes on a large workspace, in many small allocations) to the exit, which frees
    /// them at once.
    pub fn leave_at_exit(mut self) {
        let _ = self.settle();
        if let Some(loaded) = self.loaded.as_mut() {
            loaded.feed = FeedState::Off;
        }
        std::mem::forget(self);
    }

    /// Waits for the scan of the last block, if one is running; its error, if it failed.
    pub fn settle(&mut self) -> Result<(), CheckpointError> {
        // A thread still waiting for its turn's number gets none: it returns what it read.
        self.turn_for_scan = None;
        let Some(handle) = self.scanning.take() else {
            return Ok(());
        };
        match handle.join() {
            Ok((loaded, recorded)) => {
                self.loaded = loaded;
                recorded
            }
            // The log is read again at the next use.
            Err(_) => Err(CheckpointError::Refused(
                "the checkpoint scan stopped unexpectedly; the next scan takes its changes up"
                    .into(),
            )),
        }
    }

    /// Brings the log up to what is on disk now: the baseline if there is none, then the
    /// changes since the last checkpoint (to the interrupted block, or as made outside Vis at
    /// `turn`/`iteration`). Used before blocks and before a rewind.
    pub fn catch_up(&mut self, turn: i64, iteration: i64) -> Result<(), CheckpointError> {
        self.settle()?;
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
        let stale = match &self.loaded {
            Some(l) => l.log.len != log_len(&self.dir),
            None => true,
        };
        if stale {
            self.loaded = None;
            self.loaded = self.rules.open(&self.dir)?;
        }
        if let Some(l) = &self.loaded {
            if self.rules.roots.is_empty() {
                self.rules.roots = l.log.roots().to_vec();
            }
        }
        Ok(self.loaded.as_mut())
    }

    /// The baseline: every file's metadata and content as the first block finds them.
    fn start(&mut self) -> Result<(), CheckpointError> {
        self.loaded = Some(self.rules.baseline(&self.dir)?);
        Ok(())
    }

    /// Scans now, and appends a checkpoint of what changed (when anything did, or `always`).
    pub(crate) fn record(
        &mut self,
        origin: Origin,
        turn: i64,
        iteration: i64,
        always: bool,
        cut_from_turn: Option<i64>,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        self.settle()?;
        self.loaded()?;
        let Some(mut loaded) = self.loaded.take() else {
            return Ok(None);
        };
        let recorded =
            self.rules
                .record(&mut loaded, origin, turn, iteration, always, cut_from_turn);
        self.loaded = Some(loaded);
        recorded
    }
}

/// The log's length on disk (0: none): another process appended when it is not the length
/// last read.
fn log_len(dir: &Path) -> u64 {
    std::fs::metadata(Log::path_in(dir)).map_or(0, |m| m.len())
}

impl Rules {
    /// The session's log as it is on disk (`None`: there is none).
    fn open(&self, dir: &Path) -> Result<Option<Loaded>, CheckpointError> {
        Ok(Log::load(dir)?.map(|log| Loaded {
            manifest: log.manifest(),
            kept_bytes: log.kept_bytes(),
            blobs: Blobs::new(dir),
            log,
            feed: FeedState::Off,
        }))
    }

    /// The baseline: every file's metadata and content as the first block finds them.
    fn baseline(&self, dir: &Path) -> Result<Loaded, CheckpointError> {
        let (found, feed) = self.walk(&FeedState::Off);
        let blobs = Blobs::new(dir);
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
            dir,
            Record::Baseline {
                roots: self.roots.clone(),
                at: crate::store::now_millis(),
                files,
                notes,
            },
        )?;
        Ok(Loaded {
            manifest: log.manifest(),
            log,
            blobs,
            kept_bytes,
            feed,
        })
    }

    fn scan_rules(&self) -> ScanRules<'_> {
        ScanRules {
            roots: &self.roots,
            include_ignored: self.settings.include_ignored,
            exclude: &self.exclude,
        }
    }

    /// A full walk, and the change feed watching what it walked (see [`watched_walk`]).
    fn walk(&self, last: &FeedState) -> (super::scan::Scan, FeedState) {
        watched_walk(&self.scan_rules(), self.settings.max_watched_dirs, last)
    }

    /// What the paths that changed since the last walk hold now (`None`: absent, or no
    /// longer a file or a symlink), as a full walk would find them; `None` when only a full
    /// walk can tell (see [`Feed`]).
    fn narrowed(&self, feed: &mut Feed, manifest: &BTreeMap<String, Entry>) -> Option<Looked> {
        let rules = self.scan_rules();
        let mut recorded_in: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        let mut looked = Looked::new();
        for path in feed.changed()? {
            let Some(name) = path.to_str() else {
                continue;
            };
            let metadata = path.symlink_metadata().ok();
            if metadata.as_ref().is_some_and(|m| m.is_dir()) {
                return None;
            }
            if metadata
                .as_ref()
                .is_some_and(|m| m.is_file() && m.nlink() > 1)
            {
                feed.linked(&path);
            }
            let meta = metadata.as_ref().map(Meta::of);
            let meta = meta.filter(|m| {
                let kind = m.mode & libc::S_IFMT;
                kind == libc::S_IFREG || kind == libc::S_IFLNK
            });
            if meta.is_some() && !manifest.contains_key(name) {
                // New here: recorded only if a walk would find it (not ignored).
                let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
                let names = recorded_in
                    .entry(dir)
                    .or_insert_with_key(|dir| recorded_names_in(&rules, dir));
                if !names.contains(&path) {
                    continue;
                }
            }
            looked.insert(name.to_string(), meta);
        }
        Some(looked)
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
        let taken = blobs.take(path, meta.ino, keep).ok()?;
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

    /// Scans, and appends to `loaded` a checkpoint of what changed (when anything did, or
    /// `always`).
    fn record(
        &self,
        loaded: &mut Loaded,
        origin: Origin,
        turn: i64,
        iteration: i64,
        always: bool,
        cut_from_turn: Option<i64>,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let narrowed = match (origin, &mut loaded.feed) {
            (Origin::Block, FeedState::Watching(feed)) => self.narrowed(feed, &loaded.manifest),
            _ => None,
        };
        let looked = match narrowed {
            Some(looked) => looked,
            None => {
                let (found, feed) = self.walk(&loaded.feed);
                loaded.feed = feed;
                // Only the paths gone since are copied out of the manifest.
                let gone: Vec<String> = loaded
                    .manifest
                    .keys()
                    .filter(|path| !found.files.contains_key(*path))
                    .cloned()
                    .collect();
                let mut looked: Looked = found
                    .files
                    .into_iter()
                    .map(|(path, meta)| (path, Some(meta)))
                    .collect();
                looked.extend(gone.into_iter().map(|path| (path, None)));
                looked
            }
        };
        let mut changes = Vec::new();
        let mut seen = BTreeMap::new();
        for (path, meta) in &looked {
            let Some(meta) = meta else {
                continue;
            };
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
        for (path, meta) in &looked {
            let Some(entry) = loaded.manifest.get(path).filter(|_| meta.is_none()) else {
                continue;
            };
            changes.push(Change {
                path: path.clone(),
                before: Some(entry.state.clone()),
                after: None,
                note: None,
            });
        }
        if changes.is_empty() && seen.is_empty() && !always {
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
        appended.map(|()| Some(checkpoint))
    }
}
