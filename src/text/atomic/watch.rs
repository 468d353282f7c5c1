//! Watching a file through inotify, for patches that cannot take a read lease (not our file
//! and no `CAP_LEASE`, or a filesystem without leases).
//!
//! Without a lease nothing holds a concurrent writer back, so a commit can only notice one and
//! undo itself: an [`OpenWatch`] reports who opened, wrote to and closed the file while the
//! patch worked, and [`settle`] gives a write that raced the commit a moment ([`SETTLE`]) to
//! land and be seen before the old version is let go. Writers that open, write and close
//! (`echo >> file`) are seen opening, so a commit waits until they are done instead of
//! guessing.
//!
//! One inotify instance serves the whole process: closing an inotify descriptor waits for an
//! RCU grace period (milliseconds), far too slow to pay per patch, while adding and removing a
//! watch is cheap. Events are routed to watches by watch descriptor.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::fs::inotify;

/// How long a commit waits before its last check: long enough for an `open` that found the
/// old version just before the exchange to finish and announce itself.
pub(super) const SETTLE: Duration = Duration::from_micros(200);

/// How long a commit waits at most for other processes to close a file they opened during
/// the patch (a reader that keeps it open longer only delays the patch by this much).
const CLOSE_WAIT: Duration = Duration::from_millis(50);

/// Wait for writes in flight to land; true if the watched file was modified meanwhile.
pub(super) fn settle(watch: &Option<OpenWatch>) -> bool {
    std::thread::sleep(SETTLE);
    match watch {
        Some(watch) => {
            watch.wait_closed(CLOSE_WAIT);
            watch.modified()
        }
        None => false,
    }
}

/// What one watch has seen since it began.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// Opens seen minus closes seen.
    open: i64,
    modified: bool,
}

/// The process's one inotify instance and what each of its watches has seen.
struct Notifier {
    fd: OwnedFd,
    seen: HashMap<i32, Seen>,
}

/// `None` inside once inotify turned out to be unavailable (then it is not retried).
static NOTIFIER: Mutex<Option<Option<Notifier>>> = Mutex::new(None);

impl Notifier {
    /// Read every pending event into the `Seen` of its watch.
    fn drain(&mut self) {
        use inotify::{ReadFlags, Reader};
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = Reader::new(&self.fd, &mut buf);
        while let Ok(event) = reader.next() {
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were dropped: every watch must assume the worst.
                for seen in self.seen.values_mut() {
                    seen.modified = true;
                }
                continue;
            }
            let Some(seen) = self.seen.get_mut(&event.wd()) else {
                continue;
            };
            if flags.contains(ReadFlags::OPEN) {
                seen.open += 1;
            }
            if flags.intersects(ReadFlags::CLOSE_WRITE | ReadFlags::CLOSE_NOWRITE) {
                seen.open -= 1;
            }
            if flags.contains(ReadFlags::MODIFY) {
                seen.modified = true;
            }
        }
    }
}

/// Run `f` on the shared notifier, creating it on first use; `None` without inotify.
fn with_notifier<T>(f: impl FnOnce(&mut Notifier) -> T) -> Option<T> {
    let mut guard = NOTIFIER.lock().ok()?;
    if guard.is_none() {
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK);
        *guard = Some(fd.ok().map(|fd| Notifier {
            fd,
            seen: HashMap::new(),
        }));
    }
    guard.as_mut()?.as_mut().map(f)
}

/// The opens, closes and writes of one file by anyone, from the moment the watch began.
pub(super) struct OpenWatch {
    wd: i32,
}

impl OpenWatch {
    /// Watch the file open as `file`; `None` when inotify or `/proc` is not available, in
    /// which case commits rely on the status checks and [`SETTLE`] alone.
    pub(super) fn new(file: &OwnedFd) -> Option<OpenWatch> {
        // The descriptor's /proc link names exactly the open file, even if renamed since.
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let flags = inotify::WatchFlags::OPEN
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::CLOSE_NOWRITE
            | inotify::WatchFlags::MODIFY;
        with_notifier(|n| {
            // Events of an earlier watch with the same number must not count for this one.
            n.drain();
            let wd = inotify::add_watch(&n.fd, &path, flags).ok()?;
            n.seen.insert(wd, Seen::default());
            Some(OpenWatch { wd })
        })
        .flatten()
    }

    /// Everything seen so far.
    fn seen(&self) -> Seen {
        with_notifier(|n| {
            n.drain();
            n.seen.get(&self.wd).copied().unwrap_or_default()
        })
        .unwrap_or_default()
    }

    /// Whether anyone wrote to the file since the watch began.
    pub(super) fn modified(&self) -> bool {
        self.seen().modified
    }

    /// Wait (at most `limit`) until everyone who opened the file since the watch began has
    /// closed it again.
    fn wait_closed(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.seen().open > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        with_notifier(|n| {
            let _ = inotify::remove_watch(&n.fd, self.wd);
            n.seen.remove(&self.wd);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{File, OpenOptions};
    use std::io::Write;

    fn watched(dir: &std::path::Path) -> (std::path::PathBuf, OwnedFd, OpenWatch) {
        let path = dir.join("f.txt");
        std::fs::write(&path, "one\n").unwrap();
        let fd = OwnedFd::from(File::open(&path).unwrap());
        let watch = OpenWatch::new(&fd).expect("inotify and /proc on Linux");
        (path, fd, watch)
    }

    /// Wait until the watch has seen `done` (events arrive asynchronously).
    fn until(watch: &OpenWatch, done: impl Fn(Seen) -> bool) -> Seen {
        let patience = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = watch.seen();
            if done(seen) {
                return seen;
            }
            assert!(
                Instant::now() < patience,
                "never seen; the watch saw {seen:?}"
            );
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    #[test]
    fn a_watch_sees_a_writer_open_write_and_close() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _fd, watch) = watched(dir.path());
        assert!(!watch.modified(), "nothing happened yet");
        let mut writer = OpenOptions::new().append(true).open(&path).unwrap();
        until(&watch, |seen| seen.open == 1);
        writer.write_all(b"two\n").unwrap();
        until(&watch, |seen| seen.modified);
        drop(writer);
        let seen = until(&watch, |seen| seen.open == 0);
        assert!(seen.modified);
        assert!(settle(&Some(watch)), "settle reports the write");
    }

    #[test]
    fn a_reader_is_no_write_and_settle_without_a_watch_sees_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _fd, watch) = watched(dir.path());
        let reader = File::open(&path).unwrap();
        until(&watch, |seen| seen.open == 1);
        drop(reader);
        until(&watch, |seen| seen.open == 0);
        assert!(!watch.modified());
        assert!(!settle(&Some(watch)));
        assert!(!settle(&None));
    }

    #[test]
    fn a_new_watch_starts_blind_to_what_an_old_one_saw() {
        let dir = tempfile::tempdir().unwrap();
        let (path, fd, first) = watched(dir.path());
        std::fs::write(&path, "rewritten\n").unwrap();
        until(&first, |seen| seen.modified);
        drop(first);
        // The kernel may hand out the same watch number again.
        let second = OpenWatch::new(&fd).unwrap();
        assert!(!second.modified());
    }
}
