//! Bounded fuzzing (proptest) of the worker protocol's decoding, which takes untrusted input: a
//! block can write any bytes to the protocol pipe. Byte streams (well-formed frames, garbage,
//! huge length headers) arrive in random chunkings; the worker's blocking `FrameReader` and the
//! host's codec must agree on every frame, never panic, and stop cleanly at a bad header; every frame
//! must decode to a message or to a short error free of control characters. Counts are
//! printed with `--nocapture`.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tokio_util::codec::Decoder;
use vis::runtime::child::frames::FrameReader;
use vis::runtime::wire::{codec, decode_message, MAX_FRAME_BYTES};

static STREAMS: AtomicUsize = AtomicUsize::new(0);
static FRAMES: AtomicUsize = AtomicUsize::new(0);

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// JSON that is close to a worker message: right and wrong types, fields, values.
fn message_like() -> impl Strategy<Value = Vec<u8>> {
    let kind = prop_oneof![
        Just("result"),
        Just("ready"),
        Just("request"),
        Just("restored"),
        Just("restoring"),
        Just("compiled"),
        Just("fatal"),
        Just("manifest"),
        Just("bogus"),
    ];
    let value = prop_oneof![
        Just("null".to_string()),
        Just("1".to_string()),
        Just("-1".to_string()),
        Just("18446744073709551616".to_string()),
        Just("\"ok\"".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        ".{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        Just("\"\\u001b]52;c;aGk=\\u0007\"".to_string()),
    ];
    let field = prop_oneof![
        Just("id"),
        Just("status"),
        Just("output"),
        Just("defs_set"),
        Just("method"),
        Just("params"),
        Just("message"),
        Just("entries"),
        Just("pid"),
        Just("result"),
        Just("manifest"),
    ];
    (kind, prop::collection::vec((field, value), 0..6)).prop_map(|(kind, fields)| {
        let mut text = format!("{{\"type\":\"{kind}\"");
        for (f, v) in fields {
            text.push_str(&format!(",\"{f}\":{v}"));
        }
        text.push('}');
        text.into_bytes()
    })
}

/// One piece of a stream: a frame around a message-like or random body, raw garbage, or a
/// header that claims too much.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => message_like().prop_map(|b| framed(&b)),
        2 => prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| framed(&b)),
        1 => prop::collection::vec(any::<u8>(), 0..12),
        1 => (MAX_FRAME_BYTES as u32 + 1..=u32::MAX).prop_map(|n| n.to_le_bytes().to_vec()),
    ]
}

fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    prop::collection::vec(piece(), 0..8).prop_flat_map(|pieces| {
        let bytes = pieces.concat();
        let len = bytes.len();
        (Just(bytes), prop::collection::vec(0..=len, 0..6))
    })
}

/// `bytes` cut at `cuts` (in any order), as the pipe might deliver them.
fn chunks<'a>(bytes: &'a [u8], cuts: &[usize]) -> impl Iterator<Item = &'a [u8]> {
    let mut bounds: Vec<usize> = cuts.to_vec();
    bounds.push(bytes.len());
    bounds.sort_unstable();
    let mut start = 0;
    bounds.into_iter().map(move |end| {
        let chunk = &bytes[start..end];
        start = end;
        chunk
    })
}

/// A pipe that delivers `chunks` one read at a time, as the kernel might.
struct Chunked<'a> {
    chunks: std::vec::IntoIter<&'a [u8]>,
    current: &'a [u8],
}

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.chunks.next() {
                Some(next) => self.current = next,
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current[..n]);
        self.current = &self.current[n..];
        Ok(n)
    }
}

/// Frames out of the worker's reader, fed in the given chunking, and whether it hit an error.
fn worker_side(bytes: &[u8], cuts: &[usize]) -> (Vec<Vec<u8>>, bool) {
    let pipe = Chunked {
        chunks: chunks(bytes, cuts).collect::<Vec<_>>().into_iter(),
        current: &[],
    };
    let mut reader = FrameReader::new(pipe);
    let mut frames = Vec::new();
    loop {
        match reader.read_frame() {
            Ok(Some(frame)) => frames.push(frame.to_vec()),
            Ok(None) => return (frames, false),
            Err(_) => return (frames, true),
        }
    }
}

/// The same through the host's codec.
fn host_side(bytes: &[u8], cuts: &[usize]) -> (Vec<Vec<u8>>, bool) {
    let mut codec = codec();
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for chunk in chunks(bytes, cuts) {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame.to_vec()),
                Ok(None) => break,
                Err(_) => return (frames, true),
            }
        }
    }
    (frames, false)
}

#[test]
fn fuzz_frame_decoding_on_both_sides() {
    let mut runner = TestRunner::new(Config {
        cases: 20_000,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&stream(), |(bytes, cuts)| {
            STREAMS.fetch_add(1, Ordering::Relaxed);
            let (worker_frames, worker_err) = worker_side(&bytes, &cuts);
            let (host_frames, host_err) = host_side(&bytes, &cuts);
            prop_assert_eq!(&worker_frames, &host_frames);
            prop_assert_eq!(worker_err, host_err);
            for frame in &host_frames {
                FRAMES.fetch_add(1, Ordering::Relaxed);
                if let Err(bad) = decode_message(frame) {
                    let detail = bad.to_string();
                    prop_assert!(detail.starts_with("a frame of "), "{}", detail);
                    prop_assert!(detail.chars().count() < 200, "{}", detail);
                    prop_assert!(!detail.chars().any(char::is_control), "{:?}", detail);
                }
            }
            Ok(())
        })
        .expect("frame decoding");
    eprintln!(
        "fuzz_frame_decoding_on_both_sides: {} streams, {} frames decoded",
        STREAMS.load(Ordering::Relaxed),
        FRAMES.load(Ordering::Relaxed)
    );
}

#[test]
fn a_real_result_survives_any_chunking() {
    let body = serde_json::to_vec(&serde_json::json!({
        "type": "result", "id": 7, "result": {
            "status": "ok", "output": "hé\n", "cut_chars": 0, "total_chars": 3, "artifact": null,
            "defs_set": [], "defs_deleted": [], "exec_micros": 5, "manifest": null,
        },
    }))
    .unwrap();
    let bytes = framed(&body);
    for cut in 0..=bytes.len() {
        let (frames, err) = worker_side(&bytes, &[cut]);
        assert!(!err);
        assert_eq!(frames, vec![body.clone()]);
        let msg = decode_message(&frames[0]).unwrap();
        assert_eq!(msg.kind(), "result");
    }
}
