//! Workspace confinement.
//!
//! Every path handed to cat, grep or patch is resolved here first: relative paths against the
//! first workspace root, then canonicalized (so symlinks are followed to where they really
//! point) and checked to lie under a root. Reading may also use `read_only_roots` (where the
//! runtime saves artifacts such as full block outputs); writing only `roots`.
//!
//! Checking the canonical path is what makes a symlink inside the workspace that points
//! outside it useless for escaping. Directory walks (grep) never follow symlinks, so entries
//! found while walking a confined directory stay confined.

use std::path::{Component, Path, PathBuf};

use crate::text::TextError;

/// Whether a path is about to be read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The directories a session may touch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workspace {
    /// Readable and writable; the first one is where relative paths resolve.
    pub roots: Vec<PathBuf>,
    /// Readable only (cat and grep), never patched.
    pub read_only_roots: Vec<PathBuf>,
}

/// A path that passed confinement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The path as the model should see it in output: the input, cleaned of `.` components.
    pub display: String,
    /// The absolute path without symlinks resolved (walks start here so the paths they report
    /// keep the shape the model asked for).
    pub absolute: PathBuf,
    /// The canonical path (symlinks resolved); what gets read or written.
    pub real: PathBuf,
}

impl Workspace {
    pub fn new<P: Into<PathBuf>>(roots: impl IntoIterator<Item = P>) -> Workspace {
        Workspace {
            roots: roots.into_iter().map(Into::into).collect(),
            read_only_roots: Vec::new(),
        }
    }

    pub fn with_read_only<P: Into<PathBuf>>(mut self, roots: impl IntoIterator<Item = P>) -> Self {
        self.read_only_roots
            .extend(roots.into_iter().map(Into::into));
        self
    }

    /// The directory relative paths resolve against.
    pub fn base(&self) -> Result<&Path, TextError> {
        self.roots
            .first()
            .map(PathBuf::as_path)
            .ok_or(TextError::NoWorkspace)
    }

    /// Resolve `path` for `access`, refusing anything that is missing or, once symlinks are
    /// resolved, lies outside the allowed roots.
    pub fn resolve(&self, path: &Path, access: Access) -> Result<Resolved, TextError> {
        let base = self.base()?;
        let display = clean_display(path);
        let absolute = lexical_normalize(&base.join(path));
        let real = match absolute.canonicalize() {
            Ok(real) => real,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(TextError::NotFound {
                    path: display,
                    base: base.to_path_buf(),
                })
            }
            Err(source) => {
                return Err(TextError::Io {
                    path: display,
                    source,
                })
            }
        };
        let inside = |roots: &[PathBuf]| {
            roots.iter().any(|root| {
                root.canonicalize()
                    .map(|root| real.starts_with(root))
                    .unwrap_or(false)
            })
        };
        if inside(&self.roots) {
            return Ok(Resolved {
                display,
                absolute,
                real,
            });
        }
        if inside(&self.read_only_roots) {
            if access == Access::Read {
                return Ok(Resolved {
                    display,
                    absolute,
                    real,
                });
            }
            return Err(TextError::ReadOnly { path: display });
        }
        Err(TextError::OutsideWorkspace {
            path: display,
            real,
            roots: self.roots.clone(),
        })
    }
}

/// `./a/./b` → `a/b`; `.` stays `.`.
fn clean_display(path: &Path) -> String {
    let cleaned: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if cleaned.as_os_str().is_empty() {
        ".".to_string()
    } else {
        cleaned.to_string_lossy().into_owned()
    }
}

/// Remove `.` and resolve `..` textually. Only used for the walk start and display; the
/// confinement check itself uses the canonical path.
fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(component);
                }
            }
            other => out.push(other),
        }
    }
    out
}
