//! Workspace confinement.
//!
//! Every path handed to cat, grep or patch is resolved here first, the way the kernel resolves
//! it, and only then checked against the workspace roots:
//!
//! 1. a relative path is joined to the first workspace root (never to the process's working
//!    directory), giving an absolute path;
//! 2. that path is walked one component at a time from `/` with directory file descriptors:
//!    each component is opened `O_PATH | O_NOFOLLOW` relative to the directory before it, a
//!    symlink is read and its target spliced into the rest of the walk, and `..` moves to the
//!    parent of the directory actually reached, i.e. *after* following any symlink (so
//!    `dirlink/../a.txt` means what `open(2)` would make of it, not what the text suggests);
//! 3. the real path found that way must lie under a root (`read_only_roots` count for reading
//!    only).
//!
//! The walk keeps the descriptor of the directory that holds the file ([`Located::parent`]).
//! cat and patch open, lock, create and rename relative to it with `O_NOFOLLOW`, so swapping a
//! directory or the file for a symlink after the check cannot redirect them: the descriptor
//! still names the directory that was checked. Directory walks (grep) start at the real path
//! and never follow symlinks, so entries found while walking a confined directory stay
//! confined.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{fstat, openat, readlinkat, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::text::TextError;

/// Linux gives up after 40 symlinks in one lookup (`MAXSYMLINKS`); so do we.
const MAX_SYMLINKS: usize = 40;

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

/// What kind of object a path resolved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Directory,
    /// A FIFO, socket or device: never read or written by the text tools.
    Other,
}

/// A path that passed confinement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The path as the model should see it in output: the input, cleaned of `.` components.
    pub display: String,
    /// The input made absolute (joined to the first root), symlinks and `..` not resolved.
    pub absolute: PathBuf,
    /// The real path, resolved as the OS resolves it (symlinks followed, then `..`); what gets
    /// read or written, and where walks start.
    pub real: PathBuf,
    pub kind: Kind,
}

/// A confined path together with the open directory that holds it.
#[derive(Debug)]
pub struct Located {
    pub resolved: Resolved,
    /// The directory containing the object, opened `O_PATH`. Operations go through this
    /// descriptor so a later swap of any component for a symlink cannot move them.
    pub parent: OwnedFd,
    /// The object's name inside `parent` (not a symlink when it was resolved); empty for `/`.
    pub name: OsString,
    /// `(st_dev, st_ino)` of the root the object lies under, to re-check before a write that
    /// `parent` has not been moved out of it.
    pub root: (u64, u64),
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

    /// The first root resolved as the OS resolves it (globs are matched against real paths).
    pub fn real_base(&self) -> Result<PathBuf, TextError> {
        let base = self.base()?;
        Ok(base.canonicalize().unwrap_or_else(|_| base.to_path_buf()))
    }

    /// Resolve `path` for `access`, refusing anything that is missing or, resolved as the OS
    /// resolves it, lies outside the allowed roots.
    pub fn resolve(&self, path: &Path, access: Access) -> Result<Resolved, TextError> {
        self.locate(path, access).map(|located| located.resolved)
    }

    /// Like [`Workspace::resolve`], keeping the open directory that holds the object so the
    /// caller can use it without resolving the path again.
    pub fn locate(&self, path: &Path, access: Access) -> Result<Located, TextError> {
        let base = self.base()?;
        let display = clean_display(path);
        if path.as_os_str().as_bytes().contains(&0) {
            return Err(TextError::InvalidArgument(format!(
                "the path {display:?} contains a NUL byte; give a plain file path"
            )));
        }
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        let absolute = base.join(path);
        let walked = walk(&absolute).map_err(|source| match source.kind() {
            // Outside the roots whether or not it exists (the sandbox may hide what is there).
            io::ErrorKind::NotFound if !self.lexically_inside(&absolute) => {
                TextError::OutsideWorkspace {
                    path: display.clone(),
                    real: lexically_normal(&absolute),
                    roots: self.roots.clone(),
                }
            }
            io::ErrorKind::NotFound => TextError::NotFound {
                path: display.clone(),
                base: base.clone(),
            },
            _ => TextError::Io {
                path: display.clone(),
                source,
            },
        })?;
        let real = walked.real.clone();
        let under = |roots: &[PathBuf]| {
            roots.iter().find_map(|root| {
                let root = root.canonicalize().ok()?;
                if !real.starts_with(&root) {
                    return None;
                }
                let st = rustix::fs::stat(&root).ok()?;
                Some((st.st_dev as u64, st.st_ino as u64))
            })
        };
        let root = match under(&self.roots) {
            Some(root) => root,
            None => match under(&self.read_only_roots) {
                Some(root) if access == Access::Read => root,
                Some(_) => return Err(TextError::ReadOnly { path: display }),
                None => {
                    return Err(TextError::OutsideWorkspace {
                        path: display,
                        real,
                        roots: self.roots.clone(),
                    })
                }
            },
        };
        Ok(Located {
            resolved: Resolved {
                display,
                absolute,
                real,
                kind: walked.kind,
            },
            parent: walked.parent,
            name: walked.name,
            root,
        })
    }
}

impl Workspace {
    /// Whether `absolute`, with `.` and `..` taken as written, is beneath a root.
    fn lexically_inside(&self, absolute: &Path) -> bool {
        let normal = lexically_normal(absolute);
        self.roots.iter().chain(&self.read_only_roots).any(|root| {
            let root = root
                .canonicalize()
                .unwrap_or_else(|_| lexically_normal(root));
            normal.starts_with(&root)
        })
    }
}

/// `path` with `.` dropped and each `..` taking away the component before it (no symlink is
/// looked at).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Open `name` in `dir` without following a symlink there, as a path-only handle.
fn open_path(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The kind of object a stat describes.
pub fn kind_of(stat: &Stat) -> Kind {
    match FileType::from_raw_mode(stat.st_mode as _) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Directory,
        _ => Kind::Other,
    }
}

/// One step of a walk still to take.
enum Step {
    Parent,
    Name(OsString),
}

fn steps(path: &Path) -> impl Iterator<Item = Step> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(name) => Some(Step::Name(name.to_os_string())),
        Component::ParentDir => Some(Step::Parent),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

/// The end of a walk: the directory holding the object and the object's name.
struct Walked {
    parent: OwnedFd,
    name: OsString,
    real: PathBuf,
    kind: Kind,
}

/// Resolve an absolute path as the kernel does, one component at a time from `/`.
fn walk(absolute: &Path) -> io::Result<Walked> {
    let root = openat(
        rustix::fs::CWD,
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // The chain of real directories from `/` down: `..` pops it, which is what makes `..`
    // after a symlink go to the parent of the link's *target*.
    let mut dirs: Vec<(OwnedFd, OsString)> = vec![(root, OsString::new())];
    let mut pending: VecDeque<Step> = steps(absolute).collect();
    let mut links = 0;
    // A non-directory reached as the last step.
    let mut leaf: Option<(OsString, Kind)> = None;
    while let Some(step) = pending.pop_front() {
        let name = match step {
            Step::Parent => {
                if dirs.len() > 1 {
                    dirs.pop();
                }
                continue;
            }
            Step::Name(name) => name,
        };
        let Some((dir, _)) = dirs.last() else {
            return Err(io::Error::other("internal: empty directory chain"));
        };
        let fd = open_path(dir, &name)?;
        let stat = fstat(&fd)?;
        match FileType::from_raw_mode(stat.st_mode as _) {
            FileType::Symlink => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(io::Error::from(Errno::LOOP));
                }
                let target = readlinkat(dir, &name, Vec::new())?;
                let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                if target.as_os_str().is_empty() {
                    return Err(io::Error::from(io::ErrorKind::NotFound));
                }
                if target.is_absolute() {
                    dirs.truncate(1);
                }
                for step in steps(&target).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(step);
                }
            }
            FileType::Directory => dirs.push((fd, name)),
            other => {
                if !pending.is_empty() {
                    // `file/x` and `file/..` fail in the kernel too.
                    return Err(io::Error::from(Errno::NOTDIR));
                }
                let kind = if other == FileType::RegularFile {
                    Kind::File
                } else {
                    Kind::Other
                };
                leaf = Some((name, kind));
            }
        }
    }
    let mut real = PathBuf::from("/");
    for (_, name) in &dirs[1..] {
        real.push(name);
    }
    match leaf {
        Some((name, kind)) => {
            real.push(&name);
            let (parent, _) = dirs
                .pop()
                .ok_or_else(|| io::Error::other("internal: empty directory chain"))?;
            Ok(Walked {
                parent,
                name,
                real,
                kind,
            })
        }
        None => {
            // The object is a directory: its parent is the one before it (`/` is its own).
            let (object, name) = dirs
                .pop()
                .ok_or_else(|| io::Error::other("internal: empty directory chain"))?;
            let parent = match dirs.pop() {
                Some((parent, _)) => parent,
                None => object,
            };
            Ok(Walked {
                parent,
                name,
                real,
                kind: Kind::Directory,
            })
        }
    }
}

/// Whether the directory `dir` still lies under the directory identified by `root`
/// (`(st_dev, st_ino)`), found by climbing `..` from it. Catches a directory that was renamed
/// out of the workspace after it was resolved.
pub fn still_beneath(dir: &OwnedFd, root: (u64, u64)) -> io::Result<bool> {
    let mut stat = fstat(dir)?;
    let mut current: Option<OwnedFd> = None;
    // Deeper trees than this do not exist in practice; stop rather than loop forever.
    for _ in 0..4096 {
        if (stat.st_dev as u64, stat.st_ino as u64) == root {
            return Ok(true);
        }
        let parent = {
            let here = current.as_ref().unwrap_or(dir);
            openat(
                here,
                "..",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?
        };
        let parent_stat = fstat(&parent)?;
        if (parent_stat.st_dev, parent_stat.st_ino) == (stat.st_dev, stat.st_ino) {
            // `/` is its own parent: the root was never met.
            return Ok(false);
        }
        stat = parent_stat;
        current = Some(parent);
    }
    Ok(false)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotdot_after_a_symlink_is_resolved_like_the_kernel() {
        let ws = tempfile::tempdir().expect("tempdir");
        let out = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(out.path().join("d")).expect("mkdir");
        std::fs::write(out.path().join("a.txt"), "outside").expect("write");
        std::fs::write(ws.path().join("a.txt"), "inside").expect("write");
        std::os::unix::fs::symlink(out.path().join("d"), ws.path().join("dirlink"))
            .expect("symlink");
        let walked = walk(&ws.path().join("dirlink/../a.txt")).expect("walk");
        let expected = out.path().canonicalize().expect("canon").join("a.txt");
        assert_eq!(walked.real, expected);
        assert_eq!(walked.kind, Kind::File);
    }

    #[test]
    fn walk_matches_canonicalize() {
        let ws = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(ws.path().join("a/b")).expect("mkdir");
        std::fs::write(ws.path().join("a/b/f"), "x").expect("write");
        std::os::unix::fs::symlink("b", ws.path().join("a/l")).expect("symlink");
        std::os::unix::fs::symlink("../l/f", ws.path().join("a/b/g")).expect("symlink");
        for p in ["a/l/f", "a/b/g", "a/l/../b/./f", "a", "a/l"] {
            let walked = walk(&ws.path().join(p)).expect("walk");
            let canon = ws.path().join(p).canonicalize().expect("canon");
            assert_eq!(walked.real, canon, "{p}");
        }
        let err = walk(&ws.path().join("a/b/f/x")).err().expect("ENOTDIR");
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::NOTDIR.raw_os_error())
        );
        std::os::unix::fs::symlink("loop", ws.path().join("loop")).expect("symlink");
        let err = walk(&ws.path().join("loop")).err().expect("ELOOP");
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error())
        );
    }

    /// A workspace root and a directory outside it, both real paths.
    fn roots() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let ws = tempfile::tempdir().expect("tempdir");
        let out = tempfile::tempdir().expect("tempdir");
        std::fs::write(ws.path().join("in.txt"), "inside").expect("write");
        std::fs::write(out.path().join("out.txt"), "outside").expect("write");
        let workspace = Workspace::new([ws.path().canonicalize().expect("canon")]);
        (ws, out, workspace)
    }

    #[test]
    fn relative_paths_resolve_against_the_first_root() {
        let (ws, _out, workspace) = roots();
        let resolved = workspace
            .resolve(Path::new("./in.txt"), Access::Write)
            .expect("inside");
        assert_eq!(resolved.display, "in.txt");
        assert_eq!(
            resolved.real,
            ws.path().canonicalize().expect("canon").join("in.txt")
        );
        assert_eq!(resolved.kind, Kind::File);
        let root = workspace
            .resolve(Path::new("."), Access::Read)
            .expect("root");
        assert_eq!((root.display.as_str(), root.kind), (".", Kind::Directory));
    }

    #[test]
    fn paths_that_resolve_outside_every_root_are_refused() {
        let (ws, out, workspace) = roots();
        let outside = out.path().join("out.txt");
        std::os::unix::fs::symlink(&outside, ws.path().join("link.txt")).expect("symlink");
        let escape = format!(
            "../{}/out.txt",
            out.path().file_name().expect("name").to_string_lossy()
        );
        for path in [
            outside.clone(),
            PathBuf::from("link.txt"),
            PathBuf::from(escape),
        ] {
            let err = workspace.resolve(&path, Access::Read).expect_err("outside");
            match err {
                TextError::OutsideWorkspace { real, .. } => {
                    assert_eq!(real, outside.canonicalize().expect("canon"), "{path:?}")
                }
                other => panic!("{path:?}: expected OutsideWorkspace, got {other}"),
            }
        }
    }

    #[test]
    fn read_only_roots_can_be_read_but_not_written() {
        let (_ws, out, workspace) = roots();
        let workspace = workspace.with_read_only([out.path()]);
        let target = out.path().join("out.txt");
        assert!(workspace.resolve(&target, Access::Read).is_ok());
        let err = workspace
            .resolve(&target, Access::Write)
            .expect_err("read-only");
        assert!(matches!(err, TextError::ReadOnly { .. }), "{err}");
        assert!(
            err.to_string().contains("can be read with cat or grep"),
            "{err}"
        );
    }

    #[test]
    fn missing_paths_nul_bytes_and_no_workspace_are_errors() {
        let (ws, _out, workspace) = roots();
        let err = workspace
            .resolve(Path::new("nope/x.txt"), Access::Read)
            .expect_err("missing");
        match err {
            TextError::NotFound { path, base } => {
                assert_eq!(path, "nope/x.txt");
                assert_eq!(base, ws.path().canonicalize().expect("canon"));
            }
            other => panic!("expected NotFound, got {other}"),
        }
        let err = workspace
            .resolve(Path::new("in\0.txt"), Access::Read)
            .expect_err("NUL");
        assert!(err.to_string().contains("contains a NUL byte"), "{err}");
        let err = Workspace::default()
            .resolve(Path::new("in.txt"), Access::Read)
            .expect_err("no roots");
        assert!(matches!(err, TextError::NoWorkspace), "{err}");
        let err = workspace
            .resolve(Path::new("in.txt/x"), Access::Read)
            .expect_err("a file is not a directory");
        assert!(matches!(err, TextError::Io { .. }), "{err}");
    }

    #[test]
    fn located_files_keep_their_directory_and_root() {
        let (ws, out, workspace) = roots();
        let located = workspace
            .locate(Path::new("in.txt"), Access::Write)
            .expect("inside");
        assert_eq!(located.name, OsString::from("in.txt"));
        assert!(still_beneath(&located.parent, located.root).expect("stat"));
        // The root of another tree is not above it.
        let other = rustix::fs::stat(out.path()).expect("stat");
        assert!(
            !still_beneath(&located.parent, (other.st_dev as u64, other.st_ino as u64))
                .expect("stat")
        );
        drop(ws);
    }

    #[test]
    fn display_paths_drop_dot_components_only() {
        assert_eq!(clean_display(Path::new("./a/./b")), "a/b");
        assert_eq!(clean_display(Path::new(".")), ".");
        assert_eq!(clean_display(Path::new("a/../b")), "a/../b");
        assert_eq!(clean_display(Path::new("/abs/./x")), "/abs/x");
    }
}
