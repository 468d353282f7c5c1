//! Length-prefixed frames over a pipe.
//!
//! A frame is a 4-byte little-endian length followed by that many bytes of JSON. The reader
//! keeps its own buffer (rather than a `BufReader`) so that `poll(2)` on the raw descriptor
//! tells the truth about whether a frame can make progress: that is what lets the host wait
//! for a result with a deadline without a helper thread.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

/// Frames larger than this are a protocol violation, not data (block output is capped long
/// before it gets here).
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Writes one frame and flushes it.
pub fn write_frame(out: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    if payload.len() > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "frame of {} bytes exceeds the {MAX_FRAME_BYTES}-byte limit",
                payload.len()
            ),
        ));
    }
    let len = (payload.len() as u32).to_le_bytes();
    // One write for header and body keeps small frames to a single syscall.
    let mut buf = Vec::with_capacity(4 + payload.len());
    buf.extend_from_slice(&len);
    buf.extend_from_slice(payload);
    out.write_all(&buf)?;
    out.flush()
}

/// What a read with a deadline produced.
#[derive(Debug)]
pub enum ReadOutcome {
    Frame(Vec<u8>),
    /// The deadline passed before a whole frame arrived (partial data stays buffered).
    TimedOut,
    /// The other side closed the pipe.
    Closed,
}

/// Splits a byte stream into frames, with no I/O of its own (so it can be fuzzed): bytes go
/// in with [`FrameDecoder::push`] in any chunking, whole frames come out of
/// [`FrameDecoder::next_frame`] in order. A header over [`MAX_FRAME_BYTES`] is an error, and
/// the stream cannot be re-synchronized after it.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
}

impl FrameDecoder {
    pub fn new() -> Self {
        FrameDecoder::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that do not make a whole frame yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, if the buffered bytes hold one.
    pub fn next_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        let Some(header) = self.buf.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_le_bytes(*header) as usize;
        if len > MAX_FRAME_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("incoming frame claims {len} bytes, over the {MAX_FRAME_BYTES}-byte limit"),
            ));
        }
        let Some(body) = self.buf.get(4..4 + len) else {
            return Ok(None);
        };
        let frame = body.to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(frame))
    }
}

/// Reads frames from a file descriptor, optionally with a deadline.
pub struct FrameReader<R: Read + AsFd> {
    inner: R,
    decoder: FrameDecoder,
}

impl<R: Read + AsFd> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        FrameReader {
            inner,
            decoder: FrameDecoder {
                buf: Vec::with_capacity(64 * 1024),
            },
        }
    }

    /// Blocks until a frame arrives or the pipe closes.
    pub fn read_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        match self.read_frame_until(None)? {
            ReadOutcome::Frame(f) => Ok(Some(f)),
            ReadOutcome::Closed => Ok(None),
            ReadOutcome::TimedOut => Ok(None),
        }
    }

    /// Reads one frame, giving up at `deadline` (None waits forever).
    pub fn read_frame_until(&mut self, deadline: Option<Instant>) -> io::Result<ReadOutcome> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                return Ok(ReadOutcome::Frame(frame));
            }
            if let Some(deadline) = deadline {
                // A passed deadline still gets a zero-wait look: data may be waiting.
                let remaining = deadline.saturating_duration_since(Instant::now());
                if !wait_readable(self.inner.as_fd(), remaining)? {
                    return Ok(ReadOutcome::TimedOut);
                }
            }
            match self.inner.read(&mut chunk) {
                Ok(0) => return Ok(ReadOutcome::Closed),
                Ok(n) => self.decoder.push(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Waits until `fd` is readable (or hung up). Returns false on timeout.
fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    // Beyond what a timespec holds the wait is as good as forever.
    let timeout = Timespec::try_from(timeout).ok();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    loop {
        match poll(&mut fds, timeout.as_ref()) {
            Ok(ready) => return Ok(ready > 0),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn frames_round_trip_and_split_reads_reassemble() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut reader = FrameReader::new(b);
        write_frame(&mut a, b"hello").unwrap();
        write_frame(&mut a, b"").unwrap();
        // A frame written in two pieces is reassembled.
        let big = vec![7u8; 100_000];
        let mut raw = (big.len() as u32).to_le_bytes().to_vec();
        raw.extend_from_slice(&big);
        a.write_all(&raw[..10]).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            a.write_all(&raw[10..]).unwrap();
            a
        });
        assert_eq!(reader.read_frame().unwrap().unwrap(), b"hello");
        assert_eq!(reader.read_frame().unwrap().unwrap(), b"");
        assert_eq!(reader.read_frame().unwrap().unwrap(), big);
        drop(writer.join().unwrap());
        assert!(reader.read_frame().unwrap().is_none());
    }

    #[test]
    fn deadline_times_out_without_losing_partial_data() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut reader = FrameReader::new(b);
        a.write_all(&3u32.to_le_bytes()).unwrap();
        a.write_all(b"ab").unwrap();
        let deadline = Instant::now() + Duration::from_millis(30);
        assert!(matches!(
            reader.read_frame_until(Some(deadline)).unwrap(),
            ReadOutcome::TimedOut
        ));
        a.write_all(b"c").unwrap();
        match reader
            .read_frame_until(Some(Instant::now() + Duration::from_secs(5)))
            .unwrap()
        {
            ReadOutcome::Frame(f) => assert_eq!(f, b"abc"),
            other => panic!("expected frame, got {other:?}"),
        }
    }

    #[test]
    fn decoder_takes_bytes_in_any_chunking() {
        let mut stream = Vec::new();
        for body in [&b"one"[..], b"", b"three"] {
            stream.extend_from_slice(&(body.len() as u32).to_le_bytes());
            stream.extend_from_slice(body);
        }
        let mut decoder = FrameDecoder::new();
        let mut frames = Vec::new();
        for byte in &stream {
            decoder.push(std::slice::from_ref(byte));
            while let Some(frame) = decoder.next_frame().unwrap() {
                frames.push(frame);
            }
        }
        assert_eq!(frames, vec![b"one".to_vec(), Vec::new(), b"three".to_vec()]);
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn oversized_frame_header_is_rejected() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut reader = FrameReader::new(b);
        a.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let err = reader.read_frame().unwrap_err();
        assert!(err.to_string().contains("limit"), "{err}");
    }
}
