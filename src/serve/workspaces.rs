//! Which directories a client may make a session's workspace (a session's blocks may write
//! there). With `[serve] workspaces = [...]`, only those directories and what lies beneath
//! them; in every case never `/`, the home directory itself, or a directory that holds — or
//! lies inside — Vis's own files (the database, the serve token, artifacts, `$VIS_HOME`, the
//! config directory, whose `config.toml` names providers and keys).
//!
//! Paths are resolved first (symlinks, `..`), so a link inside an allowed directory that
//! points elsewhere is judged by where it points.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "workspace '{0}' is not an absolute path; send the full path of a directory on the server"
    )]
    Relative(String),
    #[error("workspace '{0}' is not an existing directory on the server")]
    Missing(String),
    #[error("workspace '/' is refused: a session there could write every file the server can; choose a project directory")]
    Root,
    #[error("workspace '{}' is the home directory itself, which holds keys and settings; choose a project directory inside it", .0.display())]
    Home(PathBuf),
    #[error("workspace '{}' {relation} Vis's own {} ('{}'), which sessions must not write; choose a project directory elsewhere", .path.display(), .what, .own.display())]
    VisOwn {
        path: PathBuf,
        relation: &'static str,
        what: &'static str,
        own: PathBuf,
    },
    #[error("workspace '{}' is not beneath the directories this server allows ([serve] workspaces: {}); choose one there, or add its parent to that list", .path.display(), .allowed.join(", "))]
    NotAllowed { path: PathBuf, allowed: Vec<String> },
}

/// The rules, with every directory in them resolved once.
#[derive(Debug, Clone)]
pub struct WorkspacePolicy {
    allowed: Option<Vec<PathBuf>>,
    home: Option<PathBuf>,
    own: Vec<(&'static str, PathBuf)>,
}

impl WorkspacePolicy {
    /// The policy of a server on database `db`: `allowed` is `[serve] workspaces` (empty:
    /// anywhere but the refused places); the home, data and config directories are this
    /// process's.
    pub fn for_server(allowed: &[String], db: &Path) -> WorkspacePolicy {
        // For a PostgreSQL URL the database is on a server; its files here are in the store dir.
        let db_dir = crate::config::store_dir(db);
        let database = if db.to_str().is_some_and(crate::store::is_postgres_url) {
            db_dir.clone()
        } else {
            db.to_path_buf()
        };
        let own = vec![
            ("database", database),
            ("serve token", crate::config::serve_token_path(db)),
            ("artifacts directory", db_dir.join("artifacts")),
            ("data directory", crate::config::vis_home()),
            ("config directory", crate::config::config_dir()),
        ];
        WorkspacePolicy {
            allowed: (!allowed.is_empty())
                .then(|| allowed.iter().map(|a| resolved(Path::new(a))).collect()),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| resolved(Path::new(&h))),
            own: own
                .into_iter()
                .map(|(what, p)| (what, resolved(&p)))
                .collect(),
        }
    }

    /// The resolved workspace for `requested`, or why it is refused.
    pub fn check(&self, requested: &str) -> Result<PathBuf, WorkspaceError> {
        if !Path::new(requested).is_absolute() {
            return Err(WorkspaceError::Relative(requested.to_string()));
        }
        let path = Path::new(requested)
            .canonicalize()
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| WorkspaceError::Missing(requested.to_string()))?;
        if path == Path::new("/") {
            return Err(WorkspaceError::Root);
        }
        if self.home.as_deref() == Some(path.as_path()) {
            return Err(WorkspaceError::Home(path));
        }
        for (what, own) in &self.own {
            let relation = if *own == path {
                "is"
            } else if own.starts_with(&path) {
                "holds"
            } else if path.starts_with(own) {
                "lies inside"
            } else {
                continue;
            };
            return Err(WorkspaceError::VisOwn {
                path,
                relation,
                what,
                own: own.clone(),
            });
        }
        if let Some(allowed) = &self.allowed {
            if !allowed.iter().any(|a| path.starts_with(a)) {
                return Err(WorkspaceError::NotAllowed {
                    path,
                    allowed: allowed.iter().map(|a| a.display().to_string()).collect(),
                });
            }
        }
        Ok(path)
    }
}

/// `path` with symlinks resolved as far as it exists (the rest appended as written).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => resolved(parent).join(name),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(top: &Path, allowed: &[&Path]) -> WorkspacePolicy {
        WorkspacePolicy {
            allowed: (!allowed.is_empty()).then(|| allowed.iter().map(|a| resolved(a)).collect()),
            home: Some(resolved(&top.join("home"))),
            own: vec![
                ("database", resolved(&top.join("data/vis.db"))),
                ("config directory", resolved(&top.join("home/.config/vis"))),
            ],
        }
    }

    #[test]
    fn refuses_root_home_and_vis_directories() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        for d in ["home/.config/vis/x", "home/src", "data/sub", "other"] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        let p = policy(top, &[]);
        let err = |path: &Path| p.check(path.to_str().unwrap()).unwrap_err().to_string();
        assert!(err(Path::new("/")).contains("'/' is refused"));
        assert!(err(&top.join("home")).contains("home directory itself"));
        let e = err(&top.join("data"));
        assert!(e.contains("holds Vis's own database"), "{e}");
        let e = err(&top.join("home/.config/vis/x"));
        assert!(e.contains("lies inside Vis's own config directory"), "{e}");
        let e = err(&top.join("home/.config"));
        assert!(e.contains("holds"), "{e}");
        assert!(p
            .check("relative/dir")
            .unwrap_err()
            .to_string()
            .contains("absolute"));
        assert!(err(&top.join("nope")).contains("not an existing directory"));
        assert_eq!(
            p.check(top.join("home/src").to_str().unwrap()).unwrap(),
            resolved(&top.join("home/src"))
        );
        assert!(p.check(top.join("data/sub").to_str().unwrap()).is_ok());
    }

    #[test]
    fn with_a_list_only_beneath_it_and_links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        for d in ["allowed/project", "other"] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(top.join("other"), top.join("allowed/link")).unwrap();
        let p = policy(top, &[&top.join("allowed")]);
        assert!(p.check(top.join("allowed").to_str().unwrap()).is_ok());
        assert!(p
            .check(top.join("allowed/project").to_str().unwrap())
            .is_ok());
        for bad in [
            top.join("other"),
            top.join("allowed/link"),
            top.join("allowed/project/../../other"),
        ] {
            let e = p.check(bad.to_str().unwrap()).unwrap_err().to_string();
            assert!(e.contains("not beneath") && e.contains("allowed"), "{e}");
        }
    }
}
