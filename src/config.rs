//! Where things live: `$VIS_HOME` (default `~/.local/share/vis`) holds `vis.db` and the
//! artifacts directory; `--db PATH` moves the database, and artifacts go beside it.

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

/// Artifacts of a session: `<dir of the database>/artifacts/<session id>/`.
pub fn artifact_dir(db: &Path, session_id: &str) -> PathBuf {
    let base = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    base.join("artifacts").join(session_id)
}
