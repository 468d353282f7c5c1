//! Content-addressed blobs: `blobs/<first two hex digits>/<blake3 hex>`, written once per
//! content. A file is read once, in chunks, hashed and copied at the same time, so a large
//! file never sits in memory; a blob appears under its name only when complete (temp file,
//! then rename), so a crash leaves no half blob behind a valid name.

use std::fs::File;
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

    /// Hashes `path`, and keeps its content when `keep`.
    pub fn take(&self, path: &Path, keep: bool) -> Result<Taken, CheckpointError> {
        let mut source = File::open(path).map_err(|e| CheckpointError::io("read", path, e))?;
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
