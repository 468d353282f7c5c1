//! `[checkpoints]`: what a session records of its workspace (see `crate::checkpoints`).

/// `[checkpoints]` as written; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct CheckpointsConfig {
    /// Record checkpoints at all (default true).
    pub enabled: Option<bool>,
    /// Record files the ignore rules exclude, and `.git/`, too (default false).
    pub include_ignored: Option<bool>,
    /// Content kept per session, MiB (default 512); changes past it are "not kept".
    pub budget_mb: Option<u64>,
    /// The largest file whose content is kept, MiB (default 16).
    pub max_file_mb: Option<u64>,
    /// Directories the change feed watches at most (default 4096; 0: no feed, every scan
    /// walks in full).
    pub max_watched_dirs: Option<usize>,
}
