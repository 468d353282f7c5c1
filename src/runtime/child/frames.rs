//! The worker's end of the framed pipe: blocking reads and writes over the same codec the host
//! uses (`wire::codec`, tokio-util's length-delimited frames), so both ends split a byte stream
//! into frames by one implementation. The worker reads on a thread of its own, so it needs no
//! runtime: bytes are read into a buffer and handed to the codec's decoder.

use std::io::{self, Read, Write};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

use crate::runtime::wire::codec;

/// Reads whole frames from a blocking reader.
pub struct FrameReader<R: Read> {
    inner: R,
    codec: LengthDelimitedCodec,
    buf: BytesMut,
}

impl<R: Read> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        FrameReader {
            inner,
            codec: codec(),
            buf: BytesMut::with_capacity(64 * 1024),
        }
    }

    /// Blocks until a frame arrives; `None` once the other side closed the pipe. A header over
    /// the codec's limit is an error, after which the stream cannot be re-synchronized.
    pub fn read_frame(&mut self) -> io::Result<Option<BytesMut>> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if let Some(frame) = self.codec.decode(&mut self.buf)? {
                return Ok(Some(frame));
            }
            match self.inner.read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Writes one frame (header and body in one write) and flushes it.
pub fn write_frame(out: &mut impl Write, payload: &[u8]) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(4 + payload.len());
    codec().encode(Bytes::copy_from_slice(payload), &mut buf)?;
    out.write_all(&buf)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::wire::MAX_FRAME_BYTES;
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
            std::thread::sleep(std::time::Duration::from_millis(20));
            a.write_all(&raw[10..]).unwrap();
            a
        });
        assert_eq!(&reader.read_frame().unwrap().unwrap()[..], b"hello");
        assert_eq!(&reader.read_frame().unwrap().unwrap()[..], b"");
        assert_eq!(&reader.read_frame().unwrap().unwrap()[..], &big[..]);
        drop(writer.join().unwrap());
        assert!(reader.read_frame().unwrap().is_none());
    }

    #[test]
    fn oversized_frames_are_refused_both_ways() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut reader = FrameReader::new(b);
        a.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let err = reader.read_frame().unwrap_err();
        assert!(err.to_string().contains("frame size too big"), "{err}");
        let mut sink = Vec::new();
        assert!(write_frame(&mut sink, &vec![0u8; MAX_FRAME_BYTES + 1]).is_err());
        assert!(sink.is_empty());
    }
}
