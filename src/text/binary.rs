//! A confined read of a file's bytes (`show()` reads images this way): the same confinement
//! as `cat`, without its text checks, and with a size cap checked before reading.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use rustix::fs::{fstat, openat, FileType, Mode, OFlags};

use super::confine::{Access, Kind, Workspace};
use super::TextError;

/// The bytes of the file at `path` (confined to `ws`, read-only roots included); a file over
/// `limit` bytes is refused with `too_large`'s message.
pub fn read_bytes(
    ws: &Workspace,
    path: &Path,
    limit: u64,
    too_large: impl Fn(&str, u64) -> String,
) -> Result<Vec<u8>, TextError> {
    let located = ws.locate(path, Access::Read)?;
    let display = located.resolved.display.clone();
    let io_err = |source: std::io::Error| TextError::Io {
        path: display.clone(),
        source,
    };
    match located.resolved.kind {
        Kind::File => {}
        Kind::Directory => {
            return Err(TextError::IsDirectory {
                path: display,
                hint:
                    "show() takes an image file; list the directory with sorted(Path(p).iterdir())",
            })
        }
        Kind::Other => return Err(TextError::NotAFile { path: display }),
    }
    let fd = openat(
        &located.parent,
        &located.name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err(e.into()))?;
    let stat = fstat(&fd).map_err(|e| io_err(e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(TextError::NotAFile { path: display });
    }
    let size = stat.st_size.max(0) as u64;
    if size > limit {
        return Err(TextError::InvalidArgument(too_large(&display, size)));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // A file that grows while it is read stops at the cap plus one byte: refused below.
    File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > limit {
        return Err(TextError::InvalidArgument(too_large(
            &display,
            bytes.len() as u64,
        )));
    }
    Ok(bytes)
}
