//! The output cap: what the model gets back from a block (or a shell command) that printed a
//! lot. Head and tail are kept, cut at line boundaries when one is near, with a marker that says
//! how much was cut and where the full text was saved.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub use crate::protocol::group_thousands;

/// Default cap on block output, in characters.
pub const DEFAULT_OUTPUT_LIMIT: usize = 20_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped {
    pub text: String,
    pub total_chars: usize,
    pub cut_chars: usize,
    /// The raw bytes were not valid UTF-8 (invalid sequences became U+FFFD).
    pub lossy: bool,
}

/// Decodes `raw` (invalid UTF-8 becomes U+FFFD) and caps it to `limit` characters.
///
/// `artifact` is the path the full output is (or will be) saved under; the marker names it so
/// the model can `cat` or `grep` it.
pub fn cap_output(raw: &[u8], limit: usize, artifact: Option<&Path>) -> Capped {
    let decoded = String::from_utf8_lossy(raw);
    let lossy = matches!(decoded, std::borrow::Cow::Owned(_));
    let text: &str = &decoded;
    let total_chars = text.chars().count();
    if total_chars <= limit {
        return Capped {
            text: text.to_string(),
            total_chars,
            cut_chars: 0,
            lossy,
        };
    }
    let mut capped = cut_between(text, text, total_chars, limit, artifact);
    capped.lossy = lossy;
    capped
}

/// Outputs up to this size are capped in memory; larger ones are streamed, so a block that
/// prints gigabytes costs neither the worker nor the host that much memory.
const IN_MEMORY_BYTES: u64 = 16 * 1024 * 1024;

/// Default cap on the artifacts one session keeps (full outputs); the sandbox policy owns it.
pub use crate::sandbox::DEFAULT_ARTIFACT_QUOTA;

/// Whether a full output was kept (`Ok(true)`), nothing needed keeping (`Ok(false)`), or why
/// it could not be kept.
pub type Saved = Result<bool, NotSaved>;

/// Why the full output of a block was not kept as an artifact; the text is shown to the model
/// under the capped output.
#[derive(Debug, thiserror::Error)]
pub enum NotSaved {
    /// Keeping it would take the session's artifacts over their quota.
    #[error(
        "the session's artifacts would exceed their quota ({used_mib} MiB used, this output \
         {size_mib} MiB, quota {quota_mib} MiB; [sandbox] artifact_quota_mb)"
    )]
    OverQuota {
        used_mib: u64,
        size_mib: u64,
        quota_mib: u64,
    },
    /// The copy failed (disk full, the directory not writable...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Caps the output held in `file` (read from its start through this descriptor, never by a
/// path another process could swap); when something is cut, the whole of it is copied to
/// `artifact`, unless that would take the artifact directory over `quota` bytes. Returns the
/// capped text and whether the artifact was written (or why not).
///
/// The descriptor must be a regular file: anything else (a FIFO that never ends, a device
/// that never runs dry) is refused before a byte is read.
pub fn cap_file(
    file: &File,
    limit: usize,
    artifact: &Path,
    quota: u64,
) -> std::io::Result<(Capped, Saved)> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the capture is not a regular file",
        ));
    }
    let len = meta.len();
    if len <= IN_MEMORY_BYTES {
        let mut raw = vec![0u8; len as usize];
        let n = read_at_most(file, 0, &mut raw)?;
        raw.truncate(n);
        let capped = cap_output(&raw, limit, Some(artifact));
        let saved = if capped.cut_chars > 0 {
            save_copy(file, n as u64, artifact, quota).map(|()| true)
        } else {
            Ok(false)
        };
        return Ok((capped, saved));
    }
    // Characters are counted as UTF-8 lead bytes (invalid bytes count one each, as U+FFFD).
    let mut total_chars = 0usize;
    let mut lossy = false;
    let mut chunk = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    while offset < len {
        let want = chunk.len().min((len - offset) as usize);
        let n = read_at_most(file, offset, &mut chunk[..want])?;
        if n == 0 {
            break;
        }
        total_chars += chunk[..n].iter().filter(|&&b| (b & 0xC0) != 0x80).count();
        lossy = lossy || std::str::from_utf8(&chunk[..n]).is_err();
        offset += n as u64;
    }
    // What was there to read (a file that shrank meanwhile is read as it now is).
    let len = offset;
    // Four bytes per character is the most UTF-8 needs, plus room to snap to a line.
    let window = (limit as u64 * 4 + 1024).min(len);
    let mut head = vec![0u8; window as usize];
    let n = read_at_most(file, 0, &mut head)?;
    head.truncate(n);
    let mut tail = vec![0u8; window as usize];
    let n = read_at_most(file, len - window, &mut tail)?;
    tail.truncate(n);
    let skip = tail.iter().take_while(|&&b| (b & 0xC0) == 0x80).count();
    let head_text = String::from_utf8_lossy(&head);
    let tail_text = String::from_utf8_lossy(&tail[skip..]);
    let mut capped = cut_between(&head_text, &tail_text, total_chars, limit, Some(artifact));
    capped.lossy = lossy;
    let saved = save_copy(file, len, artifact, quota).map(|()| true);
    Ok((capped, saved))
}

/// Fills `buf` from `offset` as far as the file goes (a file that shrinks meanwhile gives
/// fewer bytes, never a wait).
pub(crate) fn read_at_most(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Bytes of the files directly in `dir` (an artifact directory is flat).
pub fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Copies the first `len` bytes of `from` to `to` through a temp file, so an artifact is never
/// half written; refuses when the directory would hold more than `quota` bytes.
fn save_copy(from: &File, len: u64, to: &Path, quota: u64) -> Result<(), NotSaved> {
    let dir = to.parent().unwrap_or(Path::new("."));
    let used = dir_bytes(dir);
    if used + len > quota {
        return Err(NotSaved::OverQuota {
            used_mib: used / (1024 * 1024),
            size_mib: len.div_ceil(1024 * 1024),
            quota_mib: quota / (1024 * 1024),
        });
    }
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        let mut chunk = vec![0u8; 1 << 20];
        let mut offset = 0u64;
        while offset < len {
            let want = chunk.len().min((len - offset) as usize);
            let n = read_at_most(from, offset, &mut chunk[..want])?;
            if n == 0 {
                break;
            }
            tmp.write_all(&chunk[..n])?;
            offset += n as u64;
        }
        tmp.persist(to).map_err(|e| e.error)?;
        Ok(())
    };
    Ok(write()?)
}

/// Keeps the first half of the limit from `head_src` and the second half from the end of
/// `tail_src` (the same string when everything fits in memory), with the marker between.
fn cut_between(
    head_src: &str,
    tail_src: &str,
    total_chars: usize,
    limit: usize,
    artifact: Option<&Path>,
) -> Capped {
    let head_chars = limit / 2;
    let tail_chars = limit - head_chars;
    let head_end = snap_back_to_line(head_src, byte_index_of_char(head_src, head_chars));
    let tail_src_chars = tail_src.chars().count();
    let tail_start = snap_forward_to_line(
        tail_src,
        byte_index_of_char(tail_src, tail_src_chars.saturating_sub(tail_chars)),
    );
    let head = &head_src[..head_end];
    let tail = &tail_src[tail_start..];
    let cut_chars = total_chars.saturating_sub(head.chars().count() + tail.chars().count());
    let whereto = match artifact {
        Some(p) => format!("; full output: {}", p.display()),
        None => String::new(),
    };
    let mut out = String::with_capacity(head.len() + tail.len() + 160);
    out.push_str(head);
    if !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "[… vis: {} of {} characters cut{} …]\n",
        group_thousands(cut_chars),
        group_thousands(total_chars),
        whereto
    ));
    out.push_str(tail);
    Capped {
        text: out,
        total_chars,
        cut_chars,
        lossy: false,
    }
}

/// Byte offset of the `n`th character (or the end).
fn byte_index_of_char(text: &str, n: usize) -> usize {
    text.char_indices()
        .nth(n)
        .map(|(i, _)| i)
        .unwrap_or(text.len())
}

/// How far a cut may move to land on a line boundary.
const LINE_SNAP_BYTES: usize = 400;

fn snap_back_to_line(text: &str, end: usize) -> usize {
    let window_start = end.saturating_sub(LINE_SNAP_BYTES);
    match text.as_bytes()[window_start..end]
        .iter()
        .rposition(|&b| b == b'\n')
    {
        Some(pos) => window_start + pos + 1,
        None => end,
    }
}

fn snap_forward_to_line(text: &str, start: usize) -> usize {
    let window_end = (start + LINE_SNAP_BYTES).min(text.len());
    match text.as_bytes()[start..window_end]
        .iter()
        .position(|&b| b == b'\n')
    {
        Some(pos) => start + pos + 1,
        None => start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_passes_unchanged() {
        let c = cap_output(b"hello\n", 100, None);
        assert_eq!(c.text, "hello\n");
        assert_eq!((c.total_chars, c.cut_chars, c.lossy), (6, 0, false));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_names_the_artifact() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let c = cap_output(text.as_bytes(), 1000, Some(Path::new("/tmp/a.txt")));
        assert!(c.text.starts_with("line 0\n"));
        assert!(c.text.ends_with("line 9999\n"));
        assert!(
            c.text.contains("characters cut; full output: /tmp/a.txt"),
            "{}",
            c.text
        );
        assert!(c.cut_chars > 0 && c.cut_chars < c.total_chars);
        // Cuts land on line boundaries.
        for line in c.text.lines() {
            assert!(
                line.starts_with("line ") || line.starts_with("[… vis:"),
                "{line:?}"
            );
        }
    }

    #[test]
    fn a_single_huge_line_is_cut_by_characters() {
        let text = "é".repeat(1_000_000);
        let c = cap_output(text.as_bytes(), 2000, None);
        assert_eq!(c.total_chars, 1_000_000);
        assert_eq!(c.cut_chars, 1_000_000 - 2000);
        assert!(c.text.chars().count() < 2200);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_flagged() {
        let c = cap_output(b"ok \xff\xfe done", 100, None);
        assert!(c.lossy);
        assert_eq!(c.text, "ok \u{fffd}\u{fffd} done");
    }

    #[test]
    fn a_huge_file_is_capped_by_streaming_and_copied_whole() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("out");
        let mut text = String::new();
        let mut i = 0;
        while text.len() <= IN_MEMORY_BYTES as usize + 1000 {
            text.push_str(&format!("line {i} é\n"));
            i += 1;
        }
        std::fs::write(&src, &text).unwrap();
        let art = dir.path().join("art/full.txt");
        let file = File::open(&src).unwrap();
        let (c, saved) = cap_file(&file, 1000, &art, DEFAULT_ARTIFACT_QUOTA).unwrap();
        assert!(matches!(saved, Ok(true)), "{saved:?}");
        assert_eq!(std::fs::read(&art).unwrap(), text.as_bytes());
        assert_eq!(c.total_chars, text.chars().count());
        assert!(c.text.starts_with("line 0 é\n"), "{}", &c.text[..50]);
        assert!(c.text.ends_with(&format!("line {} é\n", i - 1)));
        assert_eq!(
            c.cut_chars + c.text.chars().count() - marker_len(&c.text),
            c.total_chars
        );
        // Small files take the in-memory path with the same result shape.
        std::fs::write(&src, "short\n").unwrap();
        let file = File::open(&src).unwrap();
        let (c, saved) = cap_file(&file, 1000, &art, DEFAULT_ARTIFACT_QUOTA).unwrap();
        assert_eq!(c.text, "short\n");
        assert!(matches!(saved, Ok(false)), "{saved:?}");
    }

    #[test]
    fn a_capture_that_is_not_a_regular_file_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let art = dir.path().join("full.txt");
        for device in ["/dev/zero", "/dev/null"] {
            let file = File::open(device).unwrap();
            let e = cap_file(&file, 1000, &art, DEFAULT_ARTIFACT_QUOTA).unwrap_err();
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let e = cap_file(&file, 1000, &art, DEFAULT_ARTIFACT_QUOTA).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(!art.exists());
    }

    fn marker_len(text: &str) -> usize {
        text.lines()
            .find(|l| l.starts_with("[… vis:"))
            .map(|l| l.chars().count() + 1)
            .unwrap_or(0)
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(1234567), "1,234,567");
    }
}
