//! Content-addressed blobs: `blobs/<first two hex digits>/<blake3 hex>`, written once per
//! content. A file is read once, in chunks, hashed and copied at the same time, so a large
//! file never sits in memory; a blob appears under its name only when complete (temp file,
//! then rename), so a crash leaves no half blob behind a valid name.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::CheckpointError;

const CHUNK: usize = 256 * 1024;

pub struct Blobs {
    dir: PathBuf,
}

/// A file read through [`Blobs::take`].
pub struct Taken {
    pub hash: String,
    pub size: u64,
    /// Bytes newly written to the store (0 when the content was there already).
    pub added: u64,
}

impl Blobs {
    pub fn new(session_dir: &Path) -> Blobs {
        Blobs {
            dir: session_dir.join("blobs"),
        }
    }

    pub fn path_of(&self, hash: &str) -> PathBuf {
        let prefix = hash.get(..2).unwrap_or("00");
        self.dir.join(prefix).join(hash)
    }

    pub fn has(&self, hash: &str) -> bool {
        self.path_of(hash).is_file()
    }

    /// Hashes `path`, and keeps its content when `keep`. `path` must still be the regular file
    /// the scan saw (inode `ino`): the workspace is the block's, and a background process may
    /// swap a file between the scan and this read. A symlink (into the person's secrets, which
    /// a restore would then copy into a workspace) or a FIFO (which would block the scan
    /// forever) is refused, as is any other file put there since; the next scan sees it.
    pub fn take(&self, path: &Path, ino: u64, keep: bool) -> Result<Taken, CheckpointError> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let mut source = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| CheckpointError::io("read", path, e))?;
        let opened = source
            .metadata()
            .map_err(|e| CheckpointError::io("read", path, e))?;
        if !opened.is_file() || opened.ino() != ino {
            return Err(CheckpointError::Refused(format!(
                "{} changed while it was read (not the regular file the scan saw); the next scan takes it up",
                path.display()
            )));
        }
        let mut hasher = blake3::Hasher::new();
        let mut buffer = vec![0u8; CHUNK];
        let mut size = 0u64;
        let mut staged = if keep {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| CheckpointError::io("create", &self.dir, e))?;
            Some(
                tempfile::NamedTempFile::new_in(&self.dir)
                    .map_err(|e| CheckpointError::io("write a blob in", &self.dir, e))?,
            )
        } else {
            None
        };
        loop {
            let n = source
                .read(&mut buffer)
                .map_err(|e| CheckpointError::io("read", path, e))?;
            if n == 0 {
                break;
            }
            let chunk = &buffer[..n];
            hasher.update(chunk);
            size += n as u64;
            if let Some(temp) = staged.as_mut() {
                temp.write_all(chunk)
                    .map_err(|e| CheckpointError::io("write a blob in", &self.dir, e))?;
            }
        }
        let hash = hasher.finalize().to_hex().to_string();
        let mut added = 0;
        if let Some(temp) = staged {
            let target = self.path_of(&hash);
            if !target.exists() {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| CheckpointError::io("create", parent, e))?;
                }
                temp.persist(&target)
                    .map_err(|e| CheckpointError::io("write", &target, e.error))?;
                added = size;
            }
        }
        Ok(Taken { hash, size, added })
    }

    /// The content of a kept blob.
    pub fn read(&self, hash: &str) -> Result<Vec<u8>, CheckpointError> {
        let path = self.path_of(hash);
        std::fs::read(&path).map_err(|e| CheckpointError::io("read the blob", &path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn only_the_regular_file_the_scan_saw_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(&dir.path().join("session"));
        let file = dir.path().join("f.txt");
        std::fs::write(&file, "content").unwrap();
        let ino = std::fs::metadata(&file).unwrap().ino();
        let taken = blobs.take(&file, ino, true).unwrap();
        assert_eq!((taken.size, taken.added), (7, 7));
        assert_eq!(blobs.read(&taken.hash).unwrap(), b"content");
        // Swapped for a symlink to a secret: refused, nothing of the secret kept.
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "key").unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&secret, &file).unwrap();
        let secret_ino = std::fs::metadata(&secret).unwrap().ino();
        assert!(blobs.take(&file, secret_ino, true).is_err());
        // A FIFO is refused at once (a blocking open would wait for a writer forever).
        std::fs::remove_file(&file).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &file,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .unwrap();
        let fifo_ino = std::fs::symlink_metadata(&file).unwrap().ino();
        assert!(blobs.take(&file, fifo_ino, true).is_err());
        // Another file put where the scanned one was: refused.
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, "other").unwrap();
        assert!(blobs.take(&file, ino ^ 1, true).is_err());
        let kept: Vec<_> = std::fs::read_dir(dir.path().join("session/blobs"))
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(kept.len(), 1, "only the first file's blob");
    }
}
