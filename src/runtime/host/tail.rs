//! A running block's output as it arrives, for display: the exec loop reads what the block
//! has added to the worker's capture file every [`LIVE_INTERVAL`] and hands it to the
//! caller's watcher ([`LiveOutput`]).
//!
//! Nothing here changes what the block returns: the worker still caps the whole capture when
//! the block ends, and the host reads the file only through its own descriptor (`pread` at
//! its own offsets, never moving a shared file position). Bounded whatever the block prints:
//! each read takes at most [`LIVE_CHUNK_BYTES`], the newest ones; the bytes before them are
//! only counted ([`LiveOutput::skipped_bytes`]), so a block printing gigabytes costs a few
//! kilobytes ten times a second. The bytes are the worker's: invalid UTF-8 becomes U+FFFD, a
//! character split across two reads is held until its end arrives, and control characters
//! pass through as text for the display to escape.

use std::fs::File;
use std::time::Duration;

use crate::runtime::output::read_at_most;

/// How often a running block's output is read: at most ten updates a second.
pub const LIVE_INTERVAL: Duration = Duration::from_millis(100);

/// The most one update carries; what a block prints beyond that between two reads is
/// skipped (counted, not sent).
pub const LIVE_CHUNK_BYTES: usize = 8 * 1024;

/// What a running block printed since the previous update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveOutput {
    /// The newest text (lossily decoded).
    pub text: String,
    /// Bytes printed before `text`, since the previous update, that are not in it.
    pub skipped_bytes: u64,
}

/// Where a block's live output goes while it runs (display only).
pub type OutputWatcher<'a> = &'a mut (dyn FnMut(LiveOutput) + Send);

/// A block being watched: its watcher and where its reading is.
pub(super) struct Watching<'w> {
    watch: OutputWatcher<'w>,
    tail: Tail,
}

impl<'w> Watching<'w> {
    pub(super) fn new(watch: OutputWatcher<'w>) -> Watching<'w> {
        Watching {
            watch,
            tail: Tail::default(),
        }
    }

    /// Hands what was added to `capture` since the last read to the watcher. A capture that
    /// cannot be read now only means nothing to show yet.
    pub(super) fn poll(&mut self, capture: &File) {
        if let Ok(Some(output)) = self.tail.read(capture) {
            (self.watch)(output);
        }
    }

    /// The block ended: what it printed since the last read, when the watcher has seen it
    /// streaming (a block shorter than one interval streams nothing, at no cost).
    pub(super) fn finish(&mut self, capture: &File) {
        if self.tail.polled {
            self.poll(capture);
        }
    }
}

/// The read position in one block's capture file.
#[derive(Debug, Default)]
pub(super) struct Tail {
    /// The capture's length at the last read.
    offset: u64,
    /// The start of a UTF-8 character whose end has not been printed yet (at most 3 bytes).
    held: Vec<u8>,
    /// A read happened (the block ran for at least one interval).
    polled: bool,
}

impl Tail {
    /// What was added to `capture` since the last read, if anything.
    fn read(&mut self, capture: &File) -> std::io::Result<Option<LiveOutput>> {
        self.polled = true;
        let len = capture.metadata()?.len();
        if len < self.offset {
            // Emptied under us (the worker empties it as a block starts): start over.
            self.offset = 0;
            self.held.clear();
        }
        if len == self.offset {
            return Ok(None);
        }
        let new = len - self.offset;
        let mut skipped = 0u64;
        let from = if new > LIVE_CHUNK_BYTES as u64 {
            skipped = new - LIVE_CHUNK_BYTES as u64 + self.held.len() as u64;
            self.held.clear();
            len - LIVE_CHUNK_BYTES as u64
        } else {
            self.offset
        };
        let mut bytes = std::mem::take(&mut self.held);
        let start = bytes.len();
        bytes.resize(start + (len - from) as usize, 0);
        let n = read_at_most(capture, from, &mut bytes[start..])?;
        bytes.truncate(start + n);
        self.offset = from + n as u64;
        if skipped > 0 {
            // The cut may have landed inside a character: its continuation bytes are skipped too.
            let stray = bytes.iter().take_while(|&&b| is_continuation(b)).count();
            bytes.drain(..stray);
            skipped += stray as u64;
        }
        let complete = bytes.len() - incomplete_suffix(&bytes);
        self.held = bytes.split_off(complete);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if text.is_empty() && skipped == 0 {
            return Ok(None);
        }
        Ok(Some(LiveOutput {
            text,
            skipped_bytes: skipped,
        }))
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The length of a UTF-8 sequence `bytes` ends in that is started but not complete (0 when
/// the last character is whole, or the tail cannot become valid anyway).
fn incomplete_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if is_continuation(b) {
            continue;
        }
        let needed = match b {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn capture() -> File {
        tempfile::tempfile().unwrap()
    }

    fn append(file: &mut File, bytes: &[u8]) {
        use std::io::{Seek, SeekFrom};
        file.seek(SeekFrom::End(0)).unwrap();
        file.write_all(bytes).unwrap();
    }

    #[test]
    fn each_read_gives_what_was_added_since_the_last() {
        let mut file = capture();
        let mut tail = Tail::default();
        assert_eq!(tail.read(&file).unwrap(), None);
        append(&mut file, b"one\ntw");
        let got = tail.read(&file).unwrap().unwrap();
        assert_eq!((got.text.as_str(), got.skipped_bytes), ("one\ntw", 0));
        assert_eq!(tail.read(&file).unwrap(), None, "nothing new");
        append(&mut file, b"o\n");
        assert_eq!(tail.read(&file).unwrap().unwrap().text, "o\n");
        // Emptied (a new block): read from the start again.
        file.set_len(0).unwrap();
        append(&mut file, b"x");
        assert_eq!(tail.read(&file).unwrap().unwrap().text, "x");
    }

    #[test]
    fn a_character_split_between_reads_is_held_whole_and_bad_bytes_are_replaced() {
        let mut file = capture();
        let mut tail = Tail::default();
        let snow = "☃".as_bytes();
        append(&mut file, b"a");
        append(&mut file, &snow[..2]);
        assert_eq!(tail.read(&file).unwrap().unwrap().text, "a");
        append(&mut file, &snow[2..]);
        assert_eq!(tail.read(&file).unwrap().unwrap().text, "☃");
        append(&mut file, b"\xff\xfe ok \x1b[2J");
        assert_eq!(
            tail.read(&file).unwrap().unwrap().text,
            "\u{fffd}\u{fffd} ok \u{1b}[2J"
        );
        // Every partial form of a 4-byte character is held; a byte that can never start one
        // is not.
        let crab = "🦀".as_bytes();
        for cut in 1..4 {
            assert_eq!(incomplete_suffix(&crab[..cut]), cut);
        }
        assert_eq!(incomplete_suffix(crab), 0);
        assert_eq!(incomplete_suffix(b"ab\xff"), 0);
    }

    #[test]
    fn a_flood_sends_only_the_newest_bytes_and_counts_the_rest() {
        let mut file = capture();
        let mut tail = Tail::default();
        let line = "é-line\n".repeat(10_000);
        append(&mut file, line.as_bytes());
        let got = tail.read(&file).unwrap().unwrap();
        assert!(got.text.len() <= LIVE_CHUNK_BYTES, "{}", got.text.len());
        assert!(!got.text.starts_with('\u{fffd}'), "cut inside a character");
        assert_eq!(got.skipped_bytes as usize + got.text.len(), line.len());
        assert!(line.ends_with(&got.text));
        append(&mut file, b"next\n");
        let got = tail.read(&file).unwrap().unwrap();
        assert_eq!((got.text.as_str(), got.skipped_bytes), ("next\n", 0));
    }
}
