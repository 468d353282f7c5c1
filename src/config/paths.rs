//! Where Vis keeps things: `$VIS_HOME` (the database, artifacts, `vis serve`'s token) and the
//! user's config directory.

use std::path::{Path, PathBuf};

pub fn vis_home() -> PathBuf {
    if let Some(home) = std::env::var_os("VIS_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("vis")
}

/// The database path: `--db` if given, else `$VIS_HOME/vis.db`.
pub fn db_path(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .unwrap_or_else(|| vis_home().join("vis.db"))
}

/// Where Vis keeps a database's files on this machine (artifacts, checkpoints, the serve
/// token, the prompt history): the directory of a SQLite file; for a PostgreSQL URL, which has
/// no directory, `$VIS_HOME/postgres/<database>-<hash of the URL without its password>/`.
pub fn store_dir(db: &Path) -> PathBuf {
    if let Some(url) = db.to_str().filter(|d| crate::store::is_postgres_url(d)) {
        return vis_home()
            .join("postgres")
            .join(crate::store::state_key(url));
    }
    db.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Artifacts of a session: `<store dir>/artifacts/<session id>/`.
pub fn artifact_dir(db: &Path, session_id: &str) -> PathBuf {
    store_dir(db).join("artifacts").join(session_id)
}

/// The token `vis serve` requires: `<store dir>/serve-token`, generated at the first
/// start (mode 0600). Beside the database because the sandbox hides both from every worker.
pub fn serve_token_path(db: &Path) -> PathBuf {
    store_dir(db).join("serve-token")
}

/// Everything Vis keeps at a database's place that no block may see: the database and its
/// log, the serve token, and every session's artifacts and checkpoints.
pub fn store_files(db: &Path) -> Vec<PathBuf> {
    let base = store_dir(db);
    if db.to_str().is_some_and(crate::store::is_postgres_url) {
        // The database is on a server; everything of it on this machine is in its store dir.
        return vec![base];
    }
    let mut files: Vec<PathBuf> = ["", "-wal", "-shm", "-journal"]
        .iter()
        .filter_map(|suffix| {
            let name = db.file_name()?.to_string_lossy().into_owned();
            Some(base.join(format!("{name}{suffix}")))
        })
        .collect();
    files.push(serve_token_path(db));
    files.push(base.join("artifacts"));
    // Every session's checkpoints (content of workspace files, kept outside the workspace).
    files.push(base.join("checkpoints"));
    files
}

/// The user's config directory: `$VIS_CONFIG_DIR` if set, else `$XDG_CONFIG_HOME/vis`, else
/// `~/.config/vis`. It holds `config.toml`, `extensions/` and `skills/`.
pub fn config_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("VIS_CONFIG_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("vis")
}
