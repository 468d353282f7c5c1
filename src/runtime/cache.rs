//! Vis's cache directory, and the cache files the host writes on behalf of workers.
//!
//! What is cached: the index of installed extensions' entry points (see
//! `python/vis/_extensions/entry_points.py`), so a worker does not open every `*.dist-info` of
//! site-packages at each start. (The prelude's bytecode needs no cache: the build compiles it
//! into the binary.)
//!
//! Who writes: the host, never the worker. A worker may read the directory but the sandbox
//! gives it no write access there, and that is on purpose: a cache a block could write would
//! let one session steer another's start-up (an index entry names code that runs). A worker
//! that found a cache missing, stale or corrupt rebuilds it while it starts, before any block
//! runs, and reports the new content in its `ready` message; the host checks the path against
//! the known cache kinds and the size cap, and writes it atomically (a temp file, then a
//! rename), so a reader sees the old file or the new one, never half of one. Readers still
//! treat every cache as untrusted input: one that does not parse or does not have the expected
//! shape and key is rebuilt.
//!
//! Where: `$VIS_CACHE_DIR`; else `$VIS_HOME/cache` when `VIS_HOME` is set (one Vis home holds
//! everything, as tests rely on); else `$XDG_CACHE_HOME/vis`; else `~/.cache/vis`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The largest cache file the host writes for a worker.
pub const MAX_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// One cache file a worker computed: `path` relative to the cache directory, `content` text.
/// The prelude hands it over as a dict with these keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, pyo3::FromPyObject)]
#[pyo3(from_item_all)]
pub struct CacheWrite {
    pub path: String,
    pub content: String,
}

/// Why a cache file was not written (the next start rebuilds it; nothing else is lost).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "cache path `{0}` is not a known cache file (expected entry-points/<8 hex digits>.json)"
    )]
    UnknownPath(String),
    #[error("cache file `{path}` would be {size} bytes, over the {MAX_CACHE_BYTES}-byte cap")]
    TooLarge { path: String, size: usize },
    #[error("cache file `{path}` is not JSON: {message}")]
    NotJson { path: String, message: String },
    #[error("cannot write cache file {path}: {source}; check that the cache directory is writable (or set VIS_CACHE_DIR)")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The cache directory (see the module docs); `None` when no home directory is known.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("VIS_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(home) = var("VIS_HOME") {
        return Some(PathBuf::from(home).join("cache"));
    }
    if let Some(xdg) = var("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("vis"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".cache").join("vis"))
}

/// True for the cache files a worker may ask the host to write.
fn known_path(path: &str) -> bool {
    path.strip_prefix("entry-points/")
        .and_then(|name| name.strip_suffix(".json"))
        .is_some_and(|hex| hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Checks one cache file a worker reported and writes it atomically under `dir`.
pub fn write(dir: &Path, cache: &CacheWrite) -> Result<(), CacheError> {
    if !known_path(&cache.path) {
        return Err(CacheError::UnknownPath(cache.path.clone()));
    }
    if cache.content.len() > MAX_CACHE_BYTES {
        return Err(CacheError::TooLarge {
            path: cache.path.clone(),
            size: cache.content.len(),
        });
    }
    if let Err(e) = serde_json::from_str::<serde_json::Value>(&cache.content) {
        return Err(CacheError::NotJson {
            path: cache.path.clone(),
            message: e.to_string(),
        });
    }
    let target = dir.join(&cache.path);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CacheError::Io { path, source }
    };
    let parent = target.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent).map_err(io(parent))?;
    tmp.write_all(cache.content.as_bytes())
        .map_err(io(tmp.path()))?;
    tmp.persist(&target).map_err(|e| CacheError::Io {
        path: target.clone(),
        source: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, content: &str) -> CacheWrite {
        CacheWrite {
            path: path.into(),
            content: content.into(),
        }
    }

    #[test]
    fn writes_a_known_cache_file_and_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            &entry("entry-points/0123abcd.json", "{\"v\": 1}"),
        )
        .unwrap();
        write(
            dir.path(),
            &entry("entry-points/0123abcd.json", "{\"v\": 2}"),
        )
        .unwrap();
        let text = std::fs::read_to_string(dir.path().join("entry-points/0123abcd.json")).unwrap();
        assert_eq!(text, "{\"v\": 2}");
        // No temp files are left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("entry-points"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn refuses_unknown_paths_oversize_and_non_json() {
        let dir = tempfile::tempdir().unwrap();
        for path in [
            "../escape.json",
            "/etc/passwd",
            "entry-points/../../x.json",
            "entry-points/0123abcg.json",
            "entry-points/0123abc.json",
            "prelude/0123abcd.json",
            "entry-points/0123abcd.json.tmp",
        ] {
            let err = write(dir.path(), &entry(path, "{}")).unwrap_err();
            assert!(matches!(err, CacheError::UnknownPath(_)), "{path}: {err}");
        }
        let big = format!("\"{}\"", "x".repeat(MAX_CACHE_BYTES));
        let err = write(dir.path(), &entry("entry-points/00000000.json", &big)).unwrap_err();
        assert!(err.to_string().contains("cap"), "{err}");
        let err = write(
            dir.path(),
            &entry("entry-points/00000000.json", "{not json"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
        assert!(!dir.path().join("entry-points/00000000.json").exists());
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "").unwrap();
        let err = write(&file, &entry("entry-points/00000000.json", "{}")).unwrap_err();
        assert!(err.to_string().contains("plain-file"), "{err}");
    }
}
