//! The metadata walk: every file and symlink beneath the roots, with what tells a change
//! (size, mtime, ctime, inode, mode), without reading any content. Directories are not
//! entries (an empty directory is not recorded). Symlinks are never followed: a link is its
//! target text. Paths that are not UTF-8 are skipped (and counted), as are the store's own
//! files when they lie beneath a root.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the walk sees of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    /// `st_mode`: the file type bits tell a file from a symlink.
    pub mode: u32,
}

impl Meta {
    pub fn of(metadata: &std::fs::Metadata) -> Meta {
        Meta {
            size: metadata.size(),
            mtime_ns: metadata.mtime() * 1_000_000_000 + metadata.mtime_nsec(),
            ctime_ns: metadata.ctime() * 1_000_000_000 + metadata.ctime_nsec(),
            ino: metadata.ino(),
            mode: metadata.mode(),
        }
    }

    pub fn is_symlink(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFLNK
    }

    /// The permission bits (what a rewind restores).
    pub fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// One walk's result.
#[derive(Debug, Default)]
pub struct Scan {
    pub files: BTreeMap<String, Meta>,
    /// Paths skipped because their names are not UTF-8.
    pub unreadable_names: usize,
    /// Files with more than one name (a write through one name changes them all).
    pub linked: Vec<PathBuf>,
}

/// What to walk and what to leave out.
pub struct ScanRules<'a> {
    pub roots: &'a [String],
    pub include_ignored: bool,
    /// The store's own files and directories (never recorded, even beneath a root).
    pub exclude: &'a [PathBuf],
}

impl Meta {
    // The `stat` field types differ between architectures: the casts are not no-ops everywhere.
    #[allow(clippy::unnecessary_cast)]
    fn of_stat(stat: &rustix::fs::Stat) -> Meta {
        Meta {
            size: stat.st_size as u64,
            mtime_ns: stat.st_mtime as i64 * 1_000_000_000 + stat.st_mtime_nsec as i64,
            ctime_ns: stat.st_ctime as i64 * 1_000_000_000 + stat.st_ctime_nsec as i64,
            ino: stat.st_ino as u64,
            mode: stat.st_mode as u32,
        }
    }
}

/// The directories of the walk's current path, by depth, opened (`O_PATH`, following no
/// link) so each file is stat-ed relative to its directory: a stat by full path resolves
/// every component again, a third of a walk's time.
#[derive(Default)]
struct OpenDirs {
    fds: Vec<Option<std::os::fd::OwnedFd>>,
}

impl OpenDirs {
    /// The walk entered the directory `path` at `depth`.
    fn enter(&mut self, depth: usize, path: &Path) {
        use rustix::fs::{Mode, OFlags};
        const FLAGS: OFlags = OFlags::PATH
            .union(OFlags::DIRECTORY)
            .union(OFlags::NOFOLLOW)
            .union(OFlags::CLOEXEC);
        self.fds.truncate(depth);
        let parent = depth
            .checked_sub(1)
            .and_then(|d| self.fds.get(d))
            .and_then(Option::as_ref);
        let fd = match (parent, path.file_name()) {
            (Some(parent), Some(name)) => rustix::fs::openat(parent, name, FLAGS, Mode::empty()),
            // The root is opened as the person named it (it may be a link).
            _ => rustix::fs::open(path, FLAGS.difference(OFlags::NOFOLLOW), Mode::empty()),
        };
        self.fds.resize_with(depth, || None);
        self.fds.push(fd.ok());
    }

    /// The metadata and link count of the entry `path` at `depth`, not following a link:
    /// relative to its directory when that is open, else by path.
    fn stat(&self, depth: usize, path: &Path) -> Option<(Meta, u64)> {
        let parent = depth
            .checked_sub(1)
            .and_then(|d| self.fds.get(d))
            .and_then(Option::as_ref);
        match (parent, path.file_name()) {
            (Some(dir), Some(name)) => {
                rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                    .ok()
                    .map(|st| (Meta::of_stat(&st), st.st_nlink))
            }
            _ => path
                .symlink_metadata()
                .ok()
                .map(|m| (Meta::of(&m), m.nlink())),
        }
    }
}

/// Walks the roots; `on_dir` is called with each directory before its files are looked at
/// (the change feed watches it there).
pub fn scan(rules: &ScanRules<'_>, on_dir: &mut dyn FnMut(&Path)) -> Scan {
    let mut out = Scan::default();
    for root in rules.roots {
        let mut dirs = OpenDirs::default();
        for entry in walker(rules, Path::new(root)).build().flatten() {
            let Some(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                on_dir(entry.path());
                dirs.enter(entry.depth(), entry.path());
                continue;
            }
            if !(kind.is_file() || kind.is_symlink()) {
                continue;
            }
            let Some(path) = entry.path().to_str() else {
                out.unreadable_names += 1;
                continue;
            };
            let Some((meta, links)) = dirs.stat(entry.depth(), entry.path()) else {
                continue;
            };
            // Only a regular file or a link is recorded (the entry may have been swapped
            // since the directory was read).
            let file_kind = meta.mode & libc::S_IFMT;
            if file_kind != libc::S_IFREG && file_kind != libc::S_IFLNK {
                continue;
            }
            if file_kind == libc::S_IFREG && links > 1 {
                out.linked.push(entry.path().to_path_buf());
            }
            out.files.insert(path.to_string(), meta);
        }
    }
    out
}

/// The walk of `start` with the rules' filters (ignore files of `start`'s parents apply too,
/// so a walk of one directory deep in a root leaves out what the root's walk leaves out).
fn walker(rules: &ScanRules<'_>, start: &Path) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(start);
    // `standard_filters` sets every filter, hidden files' among them, so it comes first and
    // the ones Vis wants otherwise after it (dotfiles such as `.gitignore` or `.env.example`
    // are the workspace's files like any other).
    builder
        .standard_filters(!rules.include_ignored)
        .follow_links(false)
        .hidden(false)
        .git_global(false)
        .require_git(false);
    // One predicate (a second `filter_entry` would replace the first): the store's own
    // files, and `.git/` unless ignored files are included.
    let exclude = rules.exclude.to_vec();
    let skip_git = !rules.include_ignored;
    builder.filter_entry(move |e| {
        let git = skip_git && e.file_name() == ".git";
        !(git
            || exclude
                .iter()
                .any(|x| e.path().as_os_str() == x.as_os_str()))
    });
    builder
}

/// The names in `dir` the walk records (not ignored, not the store's), without their
/// metadata: what a walk of the roots would find there.
pub fn recorded_names_in(rules: &ScanRules<'_>, dir: &Path) -> BTreeSet<PathBuf> {
    let mut walk = walker(rules, dir);
    walk.max_depth(Some(1));
    walk.build()
        .flatten()
        .filter(|e| e.depth() == 1)
        .map(|e| e.into_path())
        .collect()
}

/// The metadata of one path now (`None`: absent), without following a symlink.
pub fn meta_of(path: &Path) -> Option<Meta> {
    path.symlink_metadata().ok().map(|m| Meta::of(&m))
}
