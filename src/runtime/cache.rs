//! Vis's cache directory, and the cache files the host writes on behalf of workers.
//!
//! What is cached, so a worker does not redo it at every start:
//! - `entry-points/<8 hex>.json`: the `vis.extensions` entry points of one sys.path directory
//!   (`python/vis/_extensions/entry_points.py`), so site-packages' `*.dist-info` are not all
//!   opened again;
//! - `signatures/<16 hex>.json`: the signatures and docstrings of the functions the prelude or
//!   one extension registers, per digest of their source files
//!   (`python/vis/_extensions/signatures.py`), so a start does not import `inspect`;
//! - `restore/<32 hex>.json`: the compiled code of one session's persisted definitions, per
//!   digest of the workspace and the definitions' names, kinds and sources ([`restore_path`],
//!   computed by the host; `python/vis/_codecache.py`), so a restart does not compile them
//!   again. The worker hands the code over in its `compiled` message, sent before any
//!   definition runs, and the host writes the file with its own copy of the definitions
//!   (`runtime::restore`).
//!
//! (The prelude's bytecode needs no cache: the build compiles it into the binary.)
//!
//! The worker reads a cache file with `vis._native.read_cache` (parsed here, in Rust, so the
//! prelude does not import `json` at start) and hands new content over as Python values.
//!
//! Who writes: the host, never the worker. A worker may read the directory but the sandbox
//! gives it no write access there, and that is on purpose: a cache a block could write would
//! let one session steer another's start-up (an index entry names code that runs). A worker
//! that found a cache missing, stale or corrupt rebuilds it while it starts, before any block
//! or persisted definition runs, and reports the new content in its `ready` message (the
//! restore's code in its `compiled` message); the host checks the path against the known
//! cache kinds and the size cap, and writes it atomically (a temp file, then a rename), so a
//! reader sees the old file or the new one, never half of one. Readers still treat every cache
//! as untrusted input: one that does not parse or does not have the expected shape and key is
//! rebuilt.
//!
//! What a worker reports is only as clean as the code that ran in it before. Nothing of the
//! session's runs before `ready` and `compiled`, but the workspace's may: in a trusted
//! workspace its extensions and its venv's `.pth` files, in any workspace a module of it that
//! start-up code imports (the workspace is on `sys.path`, after the standard library). So the
//! workers of a workspace read and fill a cache directory of that workspace alone, one for
//! while it is trusted and one for while it is not ([`workspace_dir`]): what a worker reports
//! can only reach workers that run the same workspace code anyway, never another workspace's,
//! and never this one's after its trust is revoked. Workers without a workspace share the
//! directory itself.
//!
//! Where: `$VIS_CACHE_DIR`; else `$VIS_HOME/cache` when `VIS_HOME` is set (one Vis home holds
//! everything, as tests rely on); else `$XDG_CACHE_HOME/vis`; else `~/.cache/vis`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The largest cache file the host writes for a worker.
pub const MAX_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// One cache file a worker computed: `path` relative to the cache directory, `content` its
/// JSON value. The prelude hands it over as a dict with these keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheWrite {
    pub path: String,
    pub content: serde_json::Value,
}

impl<'py> pyo3::FromPyObject<'_, 'py> for CacheWrite {
    type Error = pyo3::PyErr;

    fn extract(obj: pyo3::Borrowed<'_, 'py, pyo3::PyAny>) -> pyo3::PyResult<Self> {
        use pyo3::types::PyAnyMethods;
        Ok(CacheWrite {
            path: obj.get_item("path")?.extract()?,
            content: crate::protocol::json_from_py(&obj.get_item("content")?)?,
        })
    }
}

/// Why a cache file was not written (the next start rebuilds it; nothing else is lost).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "cache path `{0}` is not a known cache file (expected entry-points/<8 hex digits>.json, \
         signatures/<16 hex digits>.json or restore/<32 hex digits>.json)"
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

/// The cache directory of the workers of `workspace` (while it is `trusted`, or while it is
/// not), under Vis's cache directory `base`: `workspaces/<32 hex digits of the workspace
/// path's digest>/trusted` (or `untrusted`).
pub fn workspace_dir(base: &Path, workspace: &Path, trusted: bool) -> PathBuf {
    let digest = blake3::hash(workspace.as_os_str().as_encoded_bytes());
    base.join("workspaces")
        .join(hex(&digest.as_bytes()[..16]))
        .join(if trusted { "trusted" } else { "untrusted" })
}

/// The format of `restore/` files (`python/vis/_codecache.py` reads the same number).
pub const RESTORE_FORMAT: u64 = 2;

/// The `restore/` file for exactly these definitions (in this order) in `workspace`: a
/// digest of the format, the workspace and each definition's name, kind and source.
pub fn restore_path(workspace: Option<&str>, defs: &[crate::protocol::PersistedDef]) -> String {
    let mut hasher = blake3::Hasher::new();
    // Each part with its length, so no two lists of parts run together into the same bytes.
    let mut part = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    part(&RESTORE_FORMAT.to_le_bytes());
    part(workspace.unwrap_or_default().as_bytes());
    for def in defs {
        part(def.name.as_bytes());
        part(def.kind.as_bytes());
        part(def.source.as_bytes());
    }
    format!("restore/{}.json", hex(&hasher.finalize().as_bytes()[..16]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache directory of this worker process (set once at start from `--cache-dir`).
static WORKER_CACHE_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Sets this worker's cache directory (read by `vis._native.read_cache`); a second call is
/// ignored.
pub fn set_worker_cache_dir(dir: PathBuf) {
    let _ = WORKER_CACHE_DIR.set(dir);
}

/// This worker's cache directory, if it has one.
pub fn worker_cache_dir() -> Option<&'static Path> {
    WORKER_CACHE_DIR.get().map(PathBuf::as_path)
}

/// True for the cache files a worker may read and ask the host to write.
fn known_path(path: &str) -> bool {
    let hex_name = |prefix: &str, digits: usize| {
        path.strip_prefix(prefix)
            .and_then(|name| name.strip_suffix(".json"))
            .is_some_and(|hex| hex.len() == digits && hex.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    hex_name("entry-points/", 8) || hex_name("signatures/", 16) || hex_name("restore/", 32)
}

/// The JSON value of cache file `path` under `dir`; `None` when the path is not a known cache
/// file, or the file is missing, over the cap or not JSON (the caller rebuilds it).
pub fn read(dir: &Path, path: &str) -> Option<serde_json::Value> {
    if !known_path(path) {
        return None;
    }
    let file = std::fs::File::open(dir.join(path)).ok()?;
    let mut text = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_CACHE_BYTES as u64 + 1),
        &mut text,
    )
    .ok()?;
    if text.len() > MAX_CACHE_BYTES {
        return None;
    }
    serde_json::from_slice(&text).ok()
}

/// Writes the cache files a worker reported; one that cannot be written is skipped (the next
/// start computes it again; nothing else depends on it).
pub fn write_all(dir: &Path, caches: &[CacheWrite]) {
    for cache in caches {
        let _ = write(dir, cache);
    }
    if caches.iter().any(|c| c.path.starts_with("restore/")) {
        prune(&dir.join("restore"), MAX_RESTORE_FILES);
    }
}

/// How many `restore/` files the cache keeps: one per set of definitions a session had at a
/// start, so sessions that keep changing them would otherwise fill the directory.
pub const MAX_RESTORE_FILES: usize = 200;

/// Removes the least recently written files of `dir` beyond the newest `keep`.
fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_file()
                .then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), e.path()))
        })
        .collect();
    if files.len() <= keep {
        return;
    }
    files.sort();
    for (_, path) in &files[..files.len() - keep] {
        let _ = std::fs::remove_file(path);
    }
}

/// Checks one cache file a worker reported and writes it atomically under `dir`.
pub fn write(dir: &Path, cache: &CacheWrite) -> Result<(), CacheError> {
    if !known_path(&cache.path) {
        return Err(CacheError::UnknownPath(cache.path.clone()));
    }
    let text = cache.content.to_string();
    if text.len() > MAX_CACHE_BYTES {
        return Err(CacheError::TooLarge {
            path: cache.path.clone(),
            size: text.len(),
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
    tmp.write_all(text.as_bytes()).map_err(io(tmp.path()))?;
    tmp.persist(&target).map_err(|e| CacheError::Io {
        path: target.clone(),
        source: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(path: &str, content: serde_json::Value) -> CacheWrite {
        CacheWrite {
            path: path.into(),
            content,
        }
    }

    #[test]
    fn writes_a_known_cache_file_replaces_it_and_reads_it_back() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            &entry("entry-points/0123abcd.json", json!({"v": 1})),
        )
        .unwrap();
        write(
            dir.path(),
            &entry("entry-points/0123abcd.json", json!({"v": 2})),
        )
        .unwrap();
        let text = std::fs::read_to_string(dir.path().join("entry-points/0123abcd.json")).unwrap();
        assert_eq!(text, "{\"v\":2}");
        assert_eq!(
            read(dir.path(), "entry-points/0123abcd.json"),
            Some(json!({"v": 2}))
        );
        write(
            dir.path(),
            &entry("signatures/0123456789abcdef.json", json!(["x"])),
        )
        .unwrap();
        assert_eq!(
            read(dir.path(), "signatures/0123456789abcdef.json"),
            Some(json!(["x"]))
        );
        let restore = "restore/0123456789abcdef0123456789abcdef.json";
        write(dir.path(), &entry(restore, json!({"defs": []}))).unwrap();
        assert_eq!(read(dir.path(), restore), Some(json!({"defs": []})));
        // No temp files are left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("entry-points"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn restore_files_beyond_the_cap_are_pruned_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let name = |i: usize| format!("restore/{i:032x}.json");
        for i in 0..MAX_RESTORE_FILES + 3 {
            write(dir.path(), &entry(&name(i), json!({"defs": []}))).unwrap();
            let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(dir.path().join(name(i)))
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        write_all(dir.path(), &[entry(&name(9999), json!({"defs": []}))]);
        let left = std::fs::read_dir(dir.path().join("restore"))
            .unwrap()
            .count();
        assert_eq!(left, MAX_RESTORE_FILES);
        for i in 0..4 {
            assert!(!dir.path().join(name(i)).exists(), "{i}");
        }
        assert!(dir.path().join(name(4)).exists());
        assert!(dir.path().join(name(9999)).exists());
    }

    #[test]
    fn refuses_unknown_paths_and_oversize() {
        let dir = tempfile::tempdir().unwrap();
        for path in [
            "../escape.json",
            "/etc/passwd",
            "entry-points/../../x.json",
            "entry-points/0123abcg.json",
            "entry-points/0123abc.json",
            "signatures/0123abcd.json",
            "restore/0123456789abcdef.json",
            "restore/0123456789abcdef0123456789abcdeg.json",
            "prelude/0123abcd.json",
            "entry-points/0123abcd.json.tmp",
        ] {
            let err = write(dir.path(), &entry(path, json!({}))).unwrap_err();
            assert!(matches!(err, CacheError::UnknownPath(_)), "{path}: {err}");
            assert_eq!(read(dir.path(), path), None, "{path}");
        }
        let big = json!("x".repeat(MAX_CACHE_BYTES));
        let err = write(dir.path(), &entry("entry-points/00000000.json", big)).unwrap_err();
        assert!(err.to_string().contains("cap"), "{err}");
        assert!(!dir.path().join("entry-points/00000000.json").exists());
    }

    #[test]
    fn a_missing_oversize_or_corrupt_file_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path(), "entry-points/00000000.json"), None);
        std::fs::create_dir_all(dir.path().join("entry-points")).unwrap();
        std::fs::write(dir.path().join("entry-points/00000000.json"), "{not json").unwrap();
        assert_eq!(read(dir.path(), "entry-points/00000000.json"), None);
        let big = format!("\"{}\"", "x".repeat(MAX_CACHE_BYTES));
        std::fs::write(dir.path().join("entry-points/00000001.json"), big).unwrap();
        assert_eq!(read(dir.path(), "entry-points/00000001.json"), None);
    }

    #[test]
    fn an_unwritable_directory_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "").unwrap();
        let err = write(&file, &entry("entry-points/00000000.json", json!({}))).unwrap_err();
        assert!(err.to_string().contains("plain-file"), "{err}");
    }
}
