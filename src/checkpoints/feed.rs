//! The change feed: which paths changed since the last full walk, so the scan after a block
//! looks at those instead of stat-ing every file of the workspace (issue 25 §1: ≤ 5 ms per
//! iteration on 10,000 files; a full metadata walk of them alone takes 20–40 ms).
//!
//! An inotify watch is added to every directory the full walk visits, before that directory's
//! files are stat-ed, so no change after the walk's look at a file goes unseen. Blocks write
//! through bind mounts of the same directories, which inotify sees (it watches inodes).
//!
//! The feed only narrows what is looked at, and it gives up (the next scan is a full walk)
//! whenever it cannot vouch for the answer: the kernel's queue overflowed; a watched directory
//! was deleted, moved or unmounted; a directory was created, deleted or moved into or out of a
//! watched one (its files were never watched); an ignore file (`.gitignore`, `.ignore`)
//! changed; a watch could not be added (the per-user limits are shared with the person's
//! other tools, so a workspace of more than `[checkpoints] max_watched_dirs` directories
//! (default [`MAX_WATCHED_DIRS`]) is always walked in full: once a walk finds too many, the
//! walks after it add no watch at all until one counts few enough again). A file with several names (hard links) is looked at after every block, since a
//! write through one name is reported for that name only. Writes inotify does not report at
//! all (through a shared memory mapping whose file is never closed) are found by the full walk
//! at the next turn's start.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::scan::{scan, Scan, ScanRules};
use crate::release::release;

/// The default of `[checkpoints] max_watched_dirs`: more directories than this are not
/// watched, since inotify watches are a per-user resource that editors and build tools need
/// too (the kernel's default limit is 8,192 on many systems).
pub const MAX_WATCHED_DIRS: usize = 4096;

/// The names whose change alters which files are recorded.
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];

/// Watches on the directories of one full walk.
pub(crate) struct Feed {
    /// `None` once given up: closing it frees every watch at once.
    fd: Option<OwnedFd>,
    dirs: HashMap<i32, PathBuf>,
    /// More directories than this make the feed give up.
    cap: usize,
    /// Directories the walk offered (watched or not).
    offered: usize,
    /// Files with several names: looked at every time.
    linked: BTreeSet<PathBuf>,
    /// A watch could not be added, or too many were asked for: the feed cannot vouch for
    /// anything.
    broken: bool,
}

impl Drop for Feed {
    /// Closing the instance waits for the kernel to retire its watches: never inline.
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            release(fd);
        }
    }
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("dirs", &self.dirs.len())
            .field("broken", &self.broken)
            .finish()
    }
}

/// The change feed between two scans.
#[derive(Debug, Default)]
pub(crate) enum FeedState {
    /// None: the next scan walks in full, and watches what it walks.
    #[default]
    Off,
    /// Watching what the last full walk walked.
    Watching(Feed),
    /// The last full walk found more directories than the cap: walks stay plain (no
    /// inotify at all) until one counts no more than the cap.
    TooManyDirs,
}

/// A full walk of the roots. Unless the last walk found too many directories (or `cap` is
/// 0), a new feed watches every directory before its files are looked at; the state it
/// leaves is what the next scan can rely on.
pub(crate) fn watched_walk(
    rules: &ScanRules<'_>,
    cap: usize,
    last: &FeedState,
) -> (Scan, FeedState) {
    let mut feed = match last {
        FeedState::TooManyDirs => None,
        _ if cap == 0 => None,
        _ => Feed::new(cap),
    };
    let mut dirs = 0usize;
    let mut found = scan(rules, &mut |dir| {
        dirs += 1;
        if let Some(feed) = feed.as_mut() {
            feed.watch(dir);
        }
    });
    let next = match feed {
        Some(feed) if feed.offered > cap => FeedState::TooManyDirs,
        Some(mut feed) => {
            for file in std::mem::take(&mut found.linked) {
                feed.linked(&file);
            }
            FeedState::Watching(feed)
        }
        None if cap > 0 && dirs > cap => FeedState::TooManyDirs,
        // Few enough directories (again): the next walk watches them.
        None => FeedState::Off,
    };
    (found, next)
}

impl Feed {
    /// A new feed that gives up past `cap` directories (`None`: inotify is not to be had,
    /// e.g. the per-user instance limit).
    pub fn new(cap: usize) -> Option<Feed> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        Some(Feed {
            fd: Some(fd),
            dirs: HashMap::new(),
            cap,
            offered: 0,
            linked: BTreeSet::new(),
            broken: false,
        })
    }

    /// Watches `dir` (called by the walk before it looks at the directory's files).
    pub fn watch(&mut self, dir: &Path) {
        self.offered += 1;
        if self.broken {
            return;
        }
        if self.offered > self.cap {
            self.give_up();
            return;
        }
        let Some(fd) = &self.fd else {
            return;
        };
        let mask = WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CLOSE_WRITE
            | WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::EXCL_UNLINK;
        match inotify::add_watch(fd, dir, mask) {
            // The same directory under two names (a bind mount inside the workspace): an
            // event could not say which path changed.
            Ok(wd) if self.dirs.contains_key(&wd) => self.give_up(),
            Ok(wd) => {
                self.dirs.insert(wd, dir.to_path_buf());
            }
            Err(_) => self.give_up(),
        }
    }

    /// A file with several names: it is named among the changed paths every time.
    pub fn linked(&mut self, file: &Path) {
        self.linked.insert(file.to_path_buf());
    }

    /// Frees the watches at once (they count against the person's limits).
    fn give_up(&mut self) {
        self.broken = true;
        self.dirs.clear();
        if let Some(fd) = self.fd.take() {
            release(fd);
        }
    }

    /// The paths that may have changed since the walk (each once, sorted), and drains the
    /// events; `None` when only a full walk can tell.
    pub fn changed(&mut self) -> Option<BTreeSet<PathBuf>> {
        let fd = self.fd.as_ref().filter(|_| !self.broken)?;
        let mut paths = self.linked.clone();
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        let mut whole_walk = false;
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    whole_walk = true;
                    break;
                }
            };
            let flags = event.events();
            let structural = ReadFlags::QUEUE_OVERFLOW
                | ReadFlags::IGNORED
                | ReadFlags::UNMOUNT
                | ReadFlags::DELETE_SELF
                | ReadFlags::MOVE_SELF;
            if flags.intersects(structural) {
                whole_walk = true;
                continue;
            }
            let Some(dir) = self.dirs.get(&event.wd()) else {
                whole_walk = true;
                continue;
            };
            let Some(name) = event.file_name() else {
                // The watched directory's own attributes: nothing recorded changes.
                continue;
            };
            let name = OsStr::from_bytes(name.to_bytes());
            let moved_or_made =
                ReadFlags::CREATE | ReadFlags::DELETE | ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO;
            if flags.contains(ReadFlags::ISDIR) && flags.intersects(moved_or_made) {
                whole_walk = true;
                continue;
            }
            if IGNORE_FILES.iter().any(|f| name == OsStr::new(f)) {
                whole_walk = true;
                continue;
            }
            if !flags.contains(ReadFlags::ISDIR) {
                paths.insert(dir.join(name));
            }
        }
        if whole_walk {
            // The next full walk makes a new feed; these watches are of no more use.
            self.give_up();
            return None;
        }
        Some(paths)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feed_names_changed_files_and_gives_up_on_new_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let mut feed = Feed::new(MAX_WATCHED_DIRS).unwrap();
        feed.watch(dir.path());
        assert_eq!(feed.changed(), Some(BTreeSet::new()));
        std::fs::write(dir.path().join("a.txt"), "changed").unwrap();
        std::fs::write(dir.path().join("b.txt"), "new").unwrap();
        std::fs::remove_file(dir.path().join("a.txt")).unwrap();
        let changed = feed.changed().unwrap();
        assert_eq!(
            changed.into_iter().collect::<Vec<_>>(),
            vec![dir.path().join("a.txt"), dir.path().join("b.txt")]
        );
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(feed.changed(), None);
        // Once given up, it stays so (the next full walk makes a new one).
        std::fs::write(dir.path().join("c.txt"), "c").unwrap();
        assert_eq!(feed.changed(), None);
    }

    #[test]
    fn an_ignore_file_changed_or_too_many_directories_mean_a_full_walk() {
        let dir = tempfile::tempdir().unwrap();
        let mut feed = Feed::new(MAX_WATCHED_DIRS).unwrap();
        feed.watch(dir.path());
        std::fs::write(dir.path().join(".gitignore"), "*.o\n").unwrap();
        assert_eq!(feed.changed(), None);

        let mut feed = Feed::new(3).unwrap();
        for i in 0..=3 {
            let sub = dir.path().join(format!("d{i}"));
            std::fs::create_dir(&sub).unwrap();
            feed.watch(&sub);
        }
        assert_eq!(feed.changed(), None);
    }

    #[test]
    fn past_the_cap_walks_stay_plain_until_the_directories_are_few_enough_again() {
        let home = tempfile::tempdir().unwrap();
        let root = home.path().join("ws");
        for d in ["a", "b", "c/d"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
            std::fs::write(root.join(d).join("f.txt"), d).unwrap();
        }
        let roots = vec![root.to_string_lossy().into_owned()];
        let rules = ScanRules {
            roots: &roots,
            include_ignored: false,
            exclude: &[],
        };
        // 5 directories (the root, a, b, c, c/d) against a cap of 3: the feed gives up, and
        // says why.
        let (found, state) = watched_walk(&rules, 3, &FeedState::Off);
        assert_eq!(found.files.len(), 3);
        assert!(matches!(state, FeedState::TooManyDirs), "{state:?}");
        // From then on no feed is made (no inotify instance, no watch): the walk is plain
        // and still finds everything.
        let (found, state) = watched_walk(&rules, 3, &state);
        assert_eq!(found.files.len(), 3);
        assert!(matches!(state, FeedState::TooManyDirs), "{state:?}");
        // Few enough directories again: that walk counts them, and the next one watches.
        std::fs::remove_dir_all(root.join("c")).unwrap();
        let (found, state) = watched_walk(&rules, 3, &state);
        assert_eq!(found.files.len(), 2);
        assert!(matches!(state, FeedState::Off), "{state:?}");
        let (_, mut state) = watched_walk(&rules, 3, &state);
        let FeedState::Watching(feed) = &mut state else {
            panic!("{state:?}");
        };
        std::fs::write(root.join("a/f.txt"), "changed").unwrap();
        assert_eq!(
            feed.changed().map(|c| c.into_iter().collect::<Vec<_>>()),
            Some(vec![root.join("a/f.txt")])
        );
        // A cap of 0 turns the feed off.
        let (_, state) = watched_walk(&rules, 0, &FeedState::Off);
        assert!(matches!(state, FeedState::Off), "{state:?}");
    }
}
