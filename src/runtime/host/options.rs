//! How a session's workers are started: [`WorkerOptions`] (program, limits, sandbox, the
//! places a worker reads) and the defaults the front ends share.

use std::time::Duration;

/// Default block timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Default cap on the worker's address space.
pub const DEFAULT_MEMORY_LIMIT_MB: u64 = 4096;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The worker binary (`vis-worker`, installed beside `vis`).
    pub program: std::path::PathBuf,
    pub memory_limit_mb: u64,
    /// Used by the worker to find a `.venv` whose packages blocks can import.
    pub workspace: Option<std::path::PathBuf>,
    pub startup_timeout: Duration,
    pub restore_timeout: Duration,
    /// How long an interrupted block gets to stop before the worker is killed.
    pub interrupt_grace: Duration,
    /// The user's config directory (its `extensions/` and `skills/` are loaded); `None`
    /// loads nothing from a user config.
    pub config_dir: Option<std::path::PathBuf>,
    /// Denied names and namespaces (`[permissions] deny`): omitted from the manifest and
    /// absent from the model's namespace.
    pub deny: Vec<String>,
    /// Environment variables passed to the worker beyond the allow-list (`[sandbox] env`).
    pub env: Vec<String>,
    /// The user trusts the workspace (see `trust`): its own code may load at start.
    pub trusted: bool,
    /// The sandbox (mode, network, extra writable paths, the session's own directories,
    /// what to hide). The filesystem view is planned from it when a worker starts.
    pub sandbox: crate::sandbox::Policy,
    /// Vis's data directory (`$VIS_HOME`): hidden from blocks.
    pub data_dir: Option<std::path::PathBuf>,
    /// Vis's cache directory (see `runtime::cache`): the worker reads it, the host writes what
    /// the worker rebuilt; `None` caches nothing. Defaults to [`crate::runtime::cache::cache_dir`].
    pub cache_dir: Option<std::path::PathBuf>,
    /// `[jobs] max`: background jobs running at once in the session.
    pub jobs_max: u32,
    /// `[jobs] output_mb` in bytes: what one job's artifact keeps.
    pub job_output_bytes: u64,
}

impl WorkerOptions {
    pub fn new(program: std::path::PathBuf) -> Self {
        WorkerOptions {
            program,
            memory_limit_mb: DEFAULT_MEMORY_LIMIT_MB,
            workspace: None,
            startup_timeout: Duration::from_secs(30),
            restore_timeout: Duration::from_secs(60),
            interrupt_grace: Duration::from_secs(2),
            config_dir: None,
            deny: Vec::new(),
            env: Vec::new(),
            trusted: false,
            sandbox: crate::sandbox::Policy::default(),
            data_dir: None,
            cache_dir: crate::runtime::cache::cache_dir(),
            jobs_max: super::jobs::DEFAULT_MAX_JOBS,
            job_output_bytes: super::jobs::DEFAULT_OUTPUT_MB * 1024 * 1024,
        }
    }

    /// The cache directory this options' workers read and the host fills for them: their
    /// workspace's own under Vis's cache directory, one for while it is trusted and one for
    /// while it is not (its code may run in the worker before the worker reports what it
    /// cached; see `runtime::cache`); Vis's cache directory itself without a workspace.
    pub fn worker_cache_dir(&self) -> Option<std::path::PathBuf> {
        let dir = self.cache_dir.as_ref()?;
        Some(match &self.workspace {
            Some(workspace) => crate::runtime::cache::workspace_dir(dir, workspace, self.trusted),
            None => dir.clone(),
        })
    }
}

impl WorkerOptions {
    /// Adds a session's own places to the sandbox: its artifacts directory (writable in every
    /// mode), its workspace roots beyond the first, and the files of the store it is kept in
    /// (`config::store_files`: the database and its log, the serve token, other sessions'
    /// artifacts), which no block may see.
    pub fn add_session(
        &mut self,
        store_files: Vec<std::path::PathBuf>,
        artifact_dir: &std::path::Path,
        roots: &[String],
    ) {
        let _ = std::fs::create_dir_all(artifact_dir);
        let policy = &mut self.sandbox;
        policy.session_dirs.push(artifact_dir.to_path_buf());
        policy
            .extra_roots
            .extend(roots.iter().skip(1).map(std::path::PathBuf::from));
        policy.private.extend(store_files);
    }
}
