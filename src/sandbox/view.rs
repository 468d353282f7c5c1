//! The filesystem a block sees, planned by the host (applied in the worker by `mounts`).
//!
//! As in Codex's Linux sandbox, the view is built in the worker's own mount namespace: the
//! whole tree is read-only, the writable roots are bound again read-write, and protected paths
//! inside them are bound read-only. Like Claude Code's sandbox it also hides secrets: a hidden
//! directory is an empty read-only tmpfs, a hidden file an empty read-only file. `/tmp`,
//! `/var/tmp` and `/dev/shm` are the worker's own size-capped tmpfs, `/dev` holds only the
//! harmless devices and a private pty instance, and `/run` (sockets, system credentials) is
//! hidden.
//!
//! The host plans (here) because it knows what must stay out of reach: its database and
//! token, its config with the provider keys, the user's credentials. Paths are resolved here
//! (symlinks followed) before any block of this worker runs; the worker only mounts what it is
//! given.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Mode, Policy};

/// What the worker mounts, as the host planned it. Every path is absolute and resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// Bound read-write again over the read-only root (workspace roots in workspace-write,
    /// the session's own directories in every mode).
    pub writable: Vec<PathBuf>,
    /// Bound read-only inside the writable roots: `.git` (and where a `gitdir:` file points),
    /// `.vis`.
    pub protected: Vec<PathBuf>,
    /// Empty in the worker's view.
    pub hidden: Vec<PathBuf>,
    /// Bound read-only again beneath a hidden path: the cache, the user's extensions and
    /// skills, `[sandbox] allow_read`.
    pub readable: Vec<PathBuf>,
    /// The size cap of each private tmpfs (`/tmp`, `/var/tmp`, `/dev/shm`), in bytes.
    pub tmp_bytes: u64,
}

/// Where Vis keeps its own things on this host (hidden from every block).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VisPlaces {
    /// `$VIS_HOME`: the default database, artifacts, the serve token, the prompt history.
    pub data_dir: Option<PathBuf>,
    /// The user's config directory: `config.toml` (provider keys), `trusted.toml`.
    pub config_dir: Option<PathBuf>,
    /// The cache: read-only for workers (the host writes it).
    pub cache_dir: Option<PathBuf>,
}

/// Credentials every coding agent's user has somewhere under their home directory.
pub const HIDDEN_IN_HOME: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".config/gh",
    ".docker",
    ".kube",
    ".azure",
    ".config/gcloud",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
    ".vault-token",
];

/// System paths hidden from every block: password hashes, the users' runtime directories
/// (agent and bus sockets), and `/run` with its system sockets and credentials.
pub const HIDDEN_SYSTEM: &[&str] = &["/etc/shadow", "/etc/gshadow", "/run/user", "/run"];

/// Directories the worker gets its own of (fresh tmpfs): what lies beneath them on the host
/// is out of sight unless bound again.
pub const FRESH_IN_VIEW: &[&str] = &["/tmp", "/var/tmp", "/dev", "/run"];

/// The workspace subpaths a block may read but not change: git runs hooks and config from
/// `.git` outside any sandbox, and `.vis` holds the workspace's extensions and MCP commands.
pub const PROTECTED_IN_WORKSPACE: &[&str] = &[".git", ".vis"];

/// The default size cap of each private tmpfs.
pub const DEFAULT_TMP_BYTES: u64 = 1024 * 1024 * 1024;

/// Plans the view for `policy` with these workspace roots. `home` is the user's home directory
/// (root also hides the secrets in every home under `/home`); `worker_reads` are paths beneath
/// Vis's directories that the worker itself needs (the user's extensions and skills).
pub fn plan(
    policy: &Policy,
    roots: &[PathBuf],
    home: Option<&Path>,
    vis: &VisPlaces,
    worker_reads: &[PathBuf],
) -> View {
    let mut writable: Vec<PathBuf> = policy.session_dirs.clone();
    let mut workspace_roots: Vec<PathBuf> = Vec::new();
    if policy.mode == Mode::WorkspaceWrite {
        workspace_roots.extend(roots.iter().cloned());
        writable.extend(policy.writable.iter().cloned());
    }
    writable.extend(workspace_roots.iter().cloned());
    let writable = resolved_existing(writable);

    let mut protected = Vec::new();
    for root in resolved_existing(workspace_roots) {
        for name in PROTECTED_IN_WORKSPACE {
            let path = root.join(name);
            if path.symlink_metadata().is_ok() {
                protected.extend(resolve(&path));
                protected.extend(git_dirs_named_by(&path));
            }
        }
    }
    let protected = sorted_unique(protected);

    let own: Vec<PathBuf> = [&vis.data_dir, &vis.config_dir]
        .into_iter()
        .flatten()
        .cloned()
        .chain(policy.private.iter().cloned())
        .collect();
    let own = resolved_existing(own);
    let mut hidden: Vec<PathBuf> = Vec::new();
    for home in homes(home) {
        hidden.extend(HIDDEN_IN_HOME.iter().map(|rel| home.join(rel)));
    }
    hidden.extend(HIDDEN_SYSTEM.iter().map(PathBuf::from));
    hidden.extend(policy.hide.iter().cloned());
    let allow_read = resolved_existing(policy.allow_read.clone());
    // `allow_read` takes back what the defaults and `[sandbox] hide` hide (never Vis's own).
    let mut hidden: Vec<PathBuf> = resolved_existing(hidden)
        .into_iter()
        .filter(|h| !allow_read.iter().any(|a| h.starts_with(a)))
        .collect();
    hidden.extend(own.iter().cloned());
    let hidden = sorted_unique(hidden);

    let mut readable: Vec<PathBuf> = worker_reads.to_vec();
    readable.extend(vis.cache_dir.iter().cloned());
    if policy.mode == Mode::ReadOnly {
        // Read-only roots under `/tmp` would vanish behind the private one.
        readable.extend(roots.iter().cloned());
    }
    let mut readable = resolved_existing(readable);
    readable.extend(
        allow_read
            .into_iter()
            .filter(|a| !own.iter().any(|o| a.starts_with(o))),
    );
    if policy.network {
        // Name resolution often reads a file under `/run` (systemd-resolved's stub).
        readable.extend(resolve(Path::new("/etc/resolv.conf")));
    }
    // Only what the view covers (a hidden path, or a directory the worker gets its own of)
    // needs binding again.
    let covered = |r: &Path| {
        hidden.iter().any(|h| r.starts_with(h) && r != h)
            || FRESH_IN_VIEW.iter().any(|f| r.starts_with(f))
    };
    let readable = sorted_unique(readable)
        .into_iter()
        .filter(|r| covered(r))
        .collect();
    View {
        writable,
        protected,
        hidden,
        readable,
        tmp_bytes: policy.tmp_bytes,
    }
}

/// The home directories whose secrets are hidden: the user's, and as root every one under
/// `/home` and `/root` too (root reads them all).
fn homes(home: Option<&Path>) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = home.into_iter().map(Path::to_path_buf).collect();
    if rustix::process::geteuid().is_root() {
        homes.push(PathBuf::from("/root"));
        if let Ok(dir) = std::fs::read_dir("/home") {
            homes.extend(dir.flatten().map(|e| e.path()));
        }
    }
    homes
}

/// Where a `.git` file (a worktree or submodule: `gitdir: PATH`) points, and the common
/// directory that holds the hooks and config of a worktree.
fn git_dirs_named_by(dot_git: &Path) -> Vec<PathBuf> {
    if !dot_git.is_file() {
        return Vec::new();
    }
    let Ok(text) = std::fs::read_to_string(dot_git) else {
        return Vec::new();
    };
    let Some(target) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    let gitdir = base.join(target.trim());
    let mut dirs: Vec<PathBuf> = resolve(&gitdir).into_iter().collect();
    if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
        dirs.extend(resolve(&gitdir.join(common.trim())));
    }
    dirs
}

fn resolve(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}

fn resolved_existing(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    sorted_unique(paths.iter().filter_map(|p| resolve(p)).collect())
}

fn sorted_unique(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort();
    paths.dedup();
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: Mode) -> Policy {
        Policy::for_mode(mode)
    }

    /// The view of `policy` for the one workspace `ws`, with no home or Vis directories.
    fn plan_in(policy: &Policy, ws: &Path) -> View {
        let roots = [ws.to_path_buf()];
        plan(policy, &roots, None, &VisPlaces::default(), &[])
    }

    #[test]
    fn workspace_write_binds_roots_and_protects_git_and_vis() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join(".vis")).unwrap();
        let ws = ws.canonicalize().unwrap();
        let view = plan_in(&policy(Mode::WorkspaceWrite), &ws);
        assert_eq!(view.writable, vec![ws.clone()]);
        assert_eq!(view.protected, vec![ws.join(".git"), ws.join(".vis")]);
        assert!(view.hidden.contains(&PathBuf::from("/etc/shadow")));
        // read-only: the workspace is not writable, only the session's own directories.
        let mut read_only = policy(Mode::ReadOnly);
        read_only.session_dirs.push(dir.path().to_path_buf());
        let view = plan_in(&read_only, &ws);
        assert_eq!(view.writable, vec![dir.path().canonicalize().unwrap()]);
        assert!(view.protected.is_empty());
    }

    #[test]
    fn a_worktree_protects_the_git_dir_it_names_and_its_common_dir() {
        let dir = tempfile::tempdir().unwrap();
        let main_git = dir.path().join("main/.git");
        let wt_git = main_git.join("worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let ws = dir.path().join("wt");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        let view = plan_in(&policy(Mode::WorkspaceWrite), &ws);
        let main_git = main_git.canonicalize().unwrap();
        assert!(view.protected.contains(&main_git), "{view:?}");
        assert!(
            view.protected.contains(&wt_git.canonicalize().unwrap()),
            "{view:?}"
        );
        assert!(view
            .protected
            .contains(&ws.canonicalize().unwrap().join(".git")));
    }

    #[test]
    fn secrets_are_hidden_and_allow_read_takes_them_back_but_never_vis_own() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        for rel in [
            ".ssh",
            ".aws",
            ".config/gh",
            "data/cache",
            "config/extensions",
        ] {
            std::fs::create_dir_all(home.join(rel)).unwrap();
        }
        std::fs::write(home.join(".netrc"), "machine x password y").unwrap();
        std::fs::write(home.join(".ssh/known_hosts"), "").unwrap();
        let vis = VisPlaces {
            data_dir: Some(home.join("data")),
            config_dir: Some(home.join("config")),
            cache_dir: Some(home.join("data/cache")),
        };
        let mut p = policy(Mode::WorkspaceWrite);
        p.allow_read = vec![
            home.join(".aws"),
            home.join(".ssh/known_hosts"),
            home.join("data"),
        ];
        let view = plan(
            &p,
            &[],
            Some(&home),
            &vis,
            &[home.join("config/extensions")],
        );
        for hidden in [".ssh", ".config/gh", ".netrc", "data", "config"] {
            assert!(
                view.hidden.contains(&home.join(hidden)),
                "{hidden}: {view:?}"
            );
        }
        assert!(!view.hidden.contains(&home.join(".aws")), "{view:?}");
        assert!(view.readable.contains(&home.join(".ssh/known_hosts")));
        assert!(view.readable.contains(&home.join("data/cache")));
        assert!(view.readable.contains(&home.join("config/extensions")));
        // allow_read cannot expose Vis's own data directory.
        assert!(!view.readable.contains(&home.join("data")), "{view:?}");
    }
}
