//! The recorder: the scans before and after each block, and what they append to the log.
//!
//! Off the block's critical path where it can be: the scan after a block runs on a thread of
//! its own while the model reads the result and answers, and the next block waits for it
//! (it is nearly always done by then). The scan before a block runs only at a turn's first
//! block (the person edits between turns; changes made within a turn are the blocks'), after
//! a gateway was killed mid-block, and at a session's first block (the baseline).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::feed::FeedState;
use super::log::{Checkpoint, Log, Origin, Record};
use super::rules::{CheckpointSettings, Loaded, Rules};
use super::CheckpointError;

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

/// The turn a scan for outside changes is recorded under.
enum TurnNumber {
    Known(i64),
    /// Sent once the turn is begun in the store (dropped: it never is).
    Later(mpsc::Receiver<i64>),
}

/// What a scanning thread gives back: the log, and whether the scan was recorded.
type Scanned = (Option<Loaded>, Result<(), CheckpointError>);

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
    /// outside Vis); then the block's `begin`. With `between`, for a caller that changes
    /// files itself between the blocks of a turn (the client of `vis mcp`), what changed
    /// since the last block is recorded as made outside Vis before every later block too.
    pub fn before_block(
        &mut self,
        turn: i64,
        iteration: i64,
        between: bool,
    ) -> Result<(), CheckpointError> {
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
        } else if between {
            self.loaded()?;
            if let Some(mut loaded) = self.loaded.take() {
                let recorded = self
                    .rules
                    .record_between_blocks(&mut loaded, turn, iteration);
                self.loaded = Some(loaded);
                recorded?;
            }
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
