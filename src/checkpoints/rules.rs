//! What one scan does: the rules of a session's recording (roots, settings, what is
//! excluded), and the walk, the comparison with the manifest, the blobs kept and the record
//! appended to the log. [`super::record::Recorder`] decides when scans run and on which
//! thread.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

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

/// The paths a scan looked at, and what each holds now (`None`: absent).
pub(super) type Looked = BTreeMap<String, Option<Meta>>;

/// A session's log as read, with its manifest and the change feed of its last walk.
pub(crate) struct Loaded {
    /// What a recorder appends with: its baseline's files were moved into `manifest`
    /// ([`Log::take_manifest`]); history comes from a fresh [`Log::load`].
    pub log: Log,
    pub manifest: BTreeMap<String, Entry>,
    pub blobs: Blobs,
    pub kept_bytes: u64,
    /// What changed since the last full walk (or why the next scan walks in full).
    pub feed: FeedState,
}

/// What a scan walks and keeps (cloned onto the scanning thread).
#[derive(Clone)]
pub(super) struct Rules {
    pub roots: Vec<String>,
    pub settings: CheckpointSettings,
    pub exclude: Vec<PathBuf>,
}

impl Rules {
    /// The session's log as it is on disk (`None`: there is none).
    pub(super) fn open(&self, dir: &Path) -> Result<Option<Loaded>, CheckpointError> {
        Ok(Log::load(dir)?.map(|mut log| {
            let kept_bytes = log.kept_bytes();
            Loaded {
                manifest: log.take_manifest(),
                kept_bytes,
                blobs: Blobs::new(dir),
                log,
                feed: FeedState::Off,
            }
        }))
    }

    /// The baseline: every file's metadata and content as the first block finds them.
    pub(super) fn baseline(&self, dir: &Path) -> Result<Loaded, CheckpointError> {
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
        let mut log = Log::create(
            dir,
            Record::Baseline {
                roots: self.roots.clone(),
                at: crate::store::now_millis(),
                files,
                notes,
            },
        )?;
        Ok(Loaded {
            manifest: log.take_manifest(),
            log,
            blobs,
            kept_bytes,
            feed,
        })
    }

    pub(super) fn scan_rules(&self) -> ScanRules<'_> {
        ScanRules {
            roots: &self.roots,
            include_ignored: self.settings.include_ignored,
            exclude: &self.exclude,
        }
    }

    /// A full walk, and the change feed watching what it walked (see [`watched_walk`]).
    pub(super) fn walk(&self, last: &FeedState) -> (super::scan::Scan, FeedState) {
        watched_walk(&self.scan_rules(), self.settings.max_watched_dirs, last)
    }

    /// What the paths that changed since the last walk hold now (`None`: absent, or no
    /// longer a file or a symlink), as a full walk would find them; `None` when only a full
    /// walk can tell (see [`Feed`]).
    pub(super) fn narrowed(
        &self,
        feed: &mut Feed,
        manifest: &BTreeMap<String, Entry>,
    ) -> Option<Looked> {
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
    pub(super) fn state_of(
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
    /// `always`). After a block, the change feed names what to look at; every other scan
    /// walks the tree.
    pub(super) fn record(
        &self,
        loaded: &mut Loaded,
        origin: Origin,
        turn: i64,
        iteration: i64,
        always: bool,
        cut_from_turn: Option<i64>,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let narrow = origin == Origin::Block;
        let at = (turn, iteration);
        self.record_looking(loaded, narrow, origin, at, always, cut_from_turn)
    }

    /// Between two blocks of one turn whose caller changes files itself in between (the
    /// client of `vis mcp`): what changed since the last checkpoint, through the change feed
    /// when it watches, appended as made outside Vis (when anything did).
    pub(super) fn record_between_blocks(
        &self,
        loaded: &mut Loaded,
        turn: i64,
        iteration: i64,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        self.record_looking(
            loaded,
            true,
            Origin::Outside,
            (turn, iteration),
            false,
            None,
        )
    }

    fn record_looking(
        &self,
        loaded: &mut Loaded,
        narrow: bool,
        origin: Origin,
        (turn, iteration): (i64, i64),
        always: bool,
        cut_from_turn: Option<i64>,
    ) -> Result<Option<Checkpoint>, CheckpointError> {
        let narrowed = match &mut loaded.feed {
            FeedState::Watching(feed) if narrow => self.narrowed(feed, &loaded.manifest),
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
