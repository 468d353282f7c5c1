//! What "the file has not changed since it was read" means: the same object at the same name,
//! the same status, and the same bytes.
//!
//! `stat` alone is not enough: timestamps are only as fine as the filesystem's clock tick, so a
//! same-size rewrite right after the read can keep every field. The bytes settle it
//! ([`same_content`]), read without holding a second copy of the file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use rustix::fs::Stat;

/// The identity of a file's content as seen through `stat`; any write, replacement, chmod or
/// chown changes at least one field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, u64),
    pub ctime: (i64, u64),
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

// `Stat`'s field types differ between architectures; the casts are no-ops only on some.
#[allow(clippy::unnecessary_cast)]
impl Identity {
    pub fn of(stat: &Stat) -> Identity {
        Identity {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
            size: stat.st_size as u64,
            mtime: (stat.st_mtime as i64, stat.st_mtime_nsec as u64),
            ctime: (stat.st_ctime as i64, stat.st_ctime_nsec as u64),
            mode: stat.st_mode as u32,
            uid: stat.st_uid as u32,
            gid: stat.st_gid as u32,
        }
    }

    /// Whether `stat` is of the same file (device and inode), whatever its content.
    pub(super) fn same_object(&self, stat: &Stat) -> bool {
        (self.dev, self.ino) == (stat.st_dev as u64, stat.st_ino as u64)
    }

    /// The same file as it was, but for its ctime (renaming or exchanging it updates that).
    pub(super) fn same_but_ctime(&self, now: &Identity) -> bool {
        Identity {
            ctime: self.ctime,
            ..*now
        } == *self
    }

    /// What differs from `now`, in words for the error message.
    pub(super) fn difference(&self, now: &Identity) -> &'static str {
        if (self.dev, self.ino) != (now.dev, now.ino) {
            "it was replaced by another file"
        } else if self.size != now.size {
            "its size changed (another process wrote to it)"
        } else if self.mtime != now.mtime {
            "its modification time changed (another process wrote to it)"
        } else if self.mode != now.mode || (self.uid, self.gid) != (now.uid, now.gid) {
            "its mode or owner changed"
        } else {
            "its status changed (another process touched it)"
        }
    }
}

/// Compare the file's current bytes with `original` without holding a second copy.
pub(super) fn same_content(file: &File, original: &[u8]) -> io::Result<bool> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut offset = 0usize;
    loop {
        let n = file.read_at(&mut buf, offset as u64)?;
        if n == 0 {
            return Ok(offset == original.len());
        }
        let end = offset + n;
        if end > original.len() || buf[..n] != original[offset..end] {
            return Ok(false);
        }
        offset = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            dev: 1,
            ino: 2,
            size: 3,
            mtime: (4, 5),
            ctime: (6, 7),
            mode: 0o100644,
            uid: 1000,
            gid: 1000,
        }
    }

    /// `identity()` with one change.
    fn changed(change: fn(&mut Identity)) -> Identity {
        let mut now = identity();
        change(&mut now);
        now
    }

    #[test]
    fn the_difference_names_what_changed_first_by_what_matters_most() {
        let was = identity();
        let cases = [
            (
                changed(|i| (i.ino, i.size) = (9, 0)),
                "replaced by another file",
            ),
            (changed(|i| i.size = 4), "its size changed"),
            (changed(|i| i.mtime = (4, 6)), "modification time changed"),
            (changed(|i| i.mode = 0o100600), "mode or owner changed"),
            (changed(|i| i.gid = 0), "mode or owner changed"),
            (changed(|i| i.ctime = (8, 0)), "its status changed"),
        ];
        for (now, words) in cases {
            assert!(was.difference(&now).contains(words), "{now:?}: {words}");
        }
    }

    #[test]
    fn only_the_ctime_may_differ_after_an_exchange() {
        let was = identity();
        assert!(was.same_but_ctime(&changed(|i| i.ctime = (8, 0))));
        assert!(!was.same_but_ctime(&changed(|i| i.size = 4)));
    }

    #[test]
    fn same_content_compares_every_byte_and_the_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // Longer than one read, so the comparison crosses a buffer's end.
        let bytes: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        assert!(same_content(&file, &bytes).unwrap());
        assert!(!same_content(&file, &bytes[..bytes.len() - 1]).unwrap());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(!same_content(&file, &longer).unwrap());
        let mut other = bytes.clone();
        other[300_000] ^= 1;
        assert!(!same_content(&file, &other).unwrap());
    }
}
