//! The filesystem view, built in the worker's own mount namespace (planned by the host in
//! `view`). Runs once, in the launcher, after `unshare(CLONE_NEWNS)` and before any thread
//! or any block exists.
//!
//! Order matters, and is fixed here:
//! 1. every tree that will be bound again (writable roots, read-only re-exposures, device
//!    nodes) is cloned first (`open_tree`), while nothing covers it yet;
//! 2. the whole tree becomes read-only and `nosuid` (`mount_setattr(AT_RECURSIVE)`);
//! 3. the mounts are attached from the shallowest path to the deepest, so a deeper one lands
//!    on top: fresh tmpfs for `/tmp`, `/var/tmp`, `/dev` (with `/dev/shm` and a private
//!    devpts) and each hidden directory, an empty file over each hidden file, the clones.
//!    A mount point beneath a fresh tmpfs is created in it; a hidden path beneath one is
//!    already invisible and skipped;
//! 4. protected paths are bound read-only in place, over the view as it now is;
//! 5. the fresh tmpfs that only hide are made read-only.
//!
//! The clones keep the flags they had before step 2, which is what makes the writable roots
//! writable again; a clone bound for reading is made read-only before it is attached.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode as FileMode, OFlags, CWD};
use rustix::mount::{
    fsconfig_create, fsconfig_set_string, fsmount, fsopen, move_mount, open_tree, FsMountFlags,
    FsOpenFlags, MountAttrFlags, MountFlags, MoveMountFlags, OpenTreeFlags,
};

use super::view::View;

/// A step of the view that failed, with the path it was for.
#[derive(Debug, thiserror::Error)]
#[error("{step} {}: {source}", path.display())]
pub struct MountError {
    step: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

fn failed(step: &'static str, path: &Path) -> impl FnOnce(rustix::io::Errno) -> MountError {
    let path = path.to_path_buf();
    move |e| MountError {
        step,
        path,
        source: e.into(),
    }
}

/// What the view holds once built, for `Layers`.
#[derive(Debug, Default)]
pub struct Built {
    /// Hidden paths that are empty in the view.
    pub hidden: Vec<PathBuf>,
    /// Paths bound read-only inside writable roots.
    pub protected: Vec<PathBuf>,
    /// Paths that could not be mounted as planned (the rest of the view stands).
    pub notes: Vec<String>,
}

/// The devices a block gets in its `/dev`: nothing that reaches a disk or the host's
/// terminals.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const AT_RECURSIVE: u32 = 0x8000;
const AT_EMPTY_PATH: u32 = 0x1000;

/// `struct mount_attr` of `mount_setattr(2)` (not wrapped by rustix or libc).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Sets `attrs` on the mount at `path` (relative to `dirfd`), and beneath it when `recursive`.
fn set_attrs(dirfd: i32, path: &CStr, flags: u32, attrs: u64) -> std::io::Result<()> {
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr with a valid path, a struct of the size passed, checked result.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn read_only_tree(fd: &OwnedFd) -> std::io::Result<()> {
    set_attrs(
        fd.as_raw_fd(),
        c"",
        AT_EMPTY_PATH | AT_RECURSIVE,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
    )
}

fn read_only_at(path: &Path) -> std::io::Result<()> {
    let c = cstring(path)?;
    set_attrs(libc::AT_FDCWD, &c, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID)
}

fn cstring(path: &Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

fn clone_tree(path: &Path) -> Result<OwnedFd, MountError> {
    open_tree(
        CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE,
    )
    .map_err(failed("clone", path))
}

fn attach(fd: &OwnedFd, path: &Path) -> Result<(), MountError> {
    move_mount(
        fd.as_fd(),
        c"",
        CWD,
        path,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(failed("attach", path))
}

fn tmpfs(path: &Path, options: &str, flags: MountFlags) -> Result<(), MountError> {
    let options = std::ffi::CString::new(options).map_err(|_| MountError {
        step: "tmpfs options",
        path: path.to_path_buf(),
        source: std::io::ErrorKind::InvalidInput.into(),
    })?;
    rustix::mount::mount(c"tmpfs", path, c"tmpfs", flags, options.as_c_str())
        .map_err(failed("tmpfs", path))
}

/// What goes at one path of the view.
enum Source {
    /// A copy of the tree at this path taken before anything was covered.
    Clone { fd: OwnedFd, writable: bool },
    /// A private, size-capped tmpfs of mode 0700.
    PrivateTmp,
    /// `/dev` with only [`DEVICES`], a private devpts and a private `/dev/shm`.
    Dev,
    /// Hidden: an empty read-only directory or file.
    Hidden { dir: bool },
}

impl Source {
    /// At the same depth, fresh tmpfs first, then what hides, then the clones on top.
    fn rank(&self) -> u8 {
        match self {
            Source::PrivateTmp | Source::Dev => 0,
            Source::Hidden { .. } => 1,
            Source::Clone { .. } => 2,
        }
    }

    /// A fresh filesystem of ours, in which mount points may be created.
    fn fresh(&self) -> bool {
        !matches!(self, Source::Clone { .. })
    }
}

/// Builds the view. An error means the root could not be made read-only (then nothing is in
/// force and the caller reports the layer missing); a path that fails later is a note.
pub fn build(view: &View) -> Result<Built, MountError> {
    let mut built = Built::default();
    let cwd = std::env::current_dir().ok();
    let mut mounts: Vec<(PathBuf, Source)> = Vec::new();
    for (paths, writable) in [(&view.writable, true), (&view.readable, false)] {
        for path in paths {
            match clone_tree(path) {
                Ok(fd) => mounts.push((path.clone(), Source::Clone { fd, writable })),
                Err(e) => built.notes.push(e.to_string()),
            }
        }
    }
    let devices: Vec<(&str, OwnedFd)> = DEVICES
        .iter()
        .filter_map(|name| Some((*name, clone_tree(&Path::new("/dev").join(name)).ok()?)))
        .collect();
    let empty_file = empty_file_mount().map_err(|source| MountError {
        step: "empty file",
        path: PathBuf::from("tmpfs"),
        source,
    })?;

    set_attrs(
        libc::AT_FDCWD,
        c"/",
        AT_RECURSIVE,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
    )
    .map_err(|source| MountError {
        step: "read-only root",
        path: PathBuf::from("/"),
        source,
    })?;

    for tmp in ["/tmp", "/var/tmp"] {
        if Path::new(tmp).is_dir() {
            mounts.push((PathBuf::from(tmp), Source::PrivateTmp));
        }
    }
    mounts.push((PathBuf::from("/dev"), Source::Dev));
    for path in &view.hidden {
        let dir = path.is_dir();
        mounts.push((path.clone(), Source::Hidden { dir }));
    }
    mounts.sort_by_key(|(path, source)| (path.components().count(), source.rank()));

    // Paths attached so far, and whether each is a fresh filesystem of ours.
    let mut attached: Vec<(PathBuf, bool)> = Vec::new();
    let mut to_seal: Vec<PathBuf> = Vec::new();
    for (path, source) in mounts {
        let under_fresh = attached
            .iter()
            .filter(|(p, _)| path.starts_with(p))
            .max_by_key(|(p, _)| p.components().count())
            .is_some_and(|(_, fresh)| *fresh);
        let result = match &source {
            Source::Hidden { .. } if under_fresh => continue,
            Source::Hidden { dir: true } => {
                tmpfs(&path, "size=16k,nr_inodes=64,mode=0755", hide_flags()).map(|()| {
                    to_seal.push(path.clone());
                    built.hidden.push(path.clone());
                })
            }
            Source::Hidden { dir: false } => attach_empty_file(&empty_file, &path).map(|()| {
                built.hidden.push(path.clone());
            }),
            Source::Clone { fd, writable } => {
                let made = if under_fresh {
                    make_mount_point(&path, fd)
                } else {
                    Ok(())
                };
                made.and_then(|()| {
                    if !writable {
                        read_only_tree(fd).map_err(|source| MountError {
                            step: "read-only",
                            path: path.clone(),
                            source,
                        })?;
                    }
                    attach(fd, &path)
                })
            }
            Source::PrivateTmp => private_tmp(&path, view.tmp_bytes),
            Source::Dev => build_dev(&devices, view.tmp_bytes).map(|()| {
                to_seal.push(path.clone());
            }),
        };
        match result {
            Ok(()) => attached.push((path, source.fresh())),
            Err(e) => built.notes.push(e.to_string()),
        }
    }

    for path in &view.protected {
        let bound = clone_tree(path).and_then(|fd| {
            read_only_tree(&fd).map_err(|source| MountError {
                step: "read-only",
                path: path.clone(),
                source,
            })?;
            attach(&fd, path)
        });
        match bound {
            Ok(()) => built.protected.push(path.clone()),
            // A protected path that is absent here (hidden, or gone) protects nothing.
            Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => built.notes.push(e.to_string()),
        }
    }
    for path in &to_seal {
        if let Err(source) = read_only_at(path) {
            built.notes.push(
                MountError {
                    step: "seal",
                    path: path.clone(),
                    source,
                }
                .to_string(),
            );
        }
    }
    // The working directory still points into the tree as it was before the view: enter
    // the workspace again through the view.
    if let Some(cwd) = cwd {
        let _ = std::env::set_current_dir(cwd);
    }
    Ok(built)
}

fn hide_flags() -> MountFlags {
    MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC
}

/// A detached read-only tmpfs holding one empty file, bound over each hidden file.
fn empty_file_mount() -> std::io::Result<OwnedFd> {
    let fs = fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
    fsconfig_set_string(&fs, "size", "4k")?;
    fsconfig_set_string(&fs, "mode", "0555")?;
    fsconfig_create(&fs)?;
    let mnt = fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV
            | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )?;
    drop(rustix::fs::openat(
        &mnt,
        "empty",
        OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
        FileMode::from_raw_mode(0o444),
    )?);
    read_only_tree(&mnt)?;
    Ok(mnt)
}

fn attach_empty_file(empty: &OwnedFd, path: &Path) -> Result<(), MountError> {
    let fd = open_tree(
        empty,
        "empty",
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )
    .map_err(failed("empty file", path))?;
    attach(&fd, path)
}

/// Creates the mount point of a clone beneath a fresh tmpfs: a directory, or an empty file
/// for a file.
fn make_mount_point(path: &Path, fd: &OwnedFd) -> Result<(), MountError> {
    let is_dir = rustix::fs::fstat(fd)
        .map(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
        })
        .unwrap_or(true);
    let made = if is_dir {
        std::fs::create_dir_all(path)
    } else {
        path.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::File::create(path).map(drop))
    };
    made.map_err(|source| MountError {
        step: "mount point",
        path: path.to_path_buf(),
        source,
    })
}

fn private_tmp(path: &Path, bytes: u64) -> Result<(), MountError> {
    tmpfs(
        path,
        &format!("size={bytes},mode=0700"),
        MountFlags::NOSUID | MountFlags::NODEV,
    )
}

/// A `/dev` of the worker's own: the harmless devices bound from the host, the usual links,
/// a private pty instance (no host terminal is reachable) and a private `/dev/shm`.
fn build_dev(devices: &[(&str, OwnedFd)], tmp_bytes: u64) -> Result<(), MountError> {
    let dev = Path::new("/dev");
    tmpfs(
        dev,
        "size=64k,nr_inodes=256,mode=0755",
        MountFlags::NOSUID | MountFlags::NOEXEC,
    )?;
    let io = |step: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| MountError { step, path, source }
    };
    for (name, fd) in devices {
        let path = dev.join(name);
        std::fs::File::create(&path).map_err(io("device", &path))?;
        attach(fd, &path)?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        let path = dev.join(link);
        std::os::unix::fs::symlink(target, &path).map_err(io("link", &path))?;
    }
    let pts = dev.join("pts");
    std::fs::create_dir(&pts).map_err(io("mkdir", &pts))?;
    rustix::mount::mount(
        c"devpts",
        &pts,
        c"devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        c"newinstance,ptmxmode=0666,mode=0620",
    )
    .map_err(failed("devpts", &pts))?;
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(io("mkdir", &shm))?;
    private_tmp(&shm, tmp_bytes)
}

/// Hardens the `/proc` that init just mounted: kernel settings read-only (root without a
/// user namespace could otherwise write them), and files that say too much about the host
/// masked.
pub fn harden_proc() -> Vec<String> {
    let mut notes = Vec::new();
    for dir in [
        "/proc/sys",
        "/proc/sysrq-trigger",
        "/proc/irq",
        "/proc/bus",
        "/proc/fs",
    ] {
        let path = Path::new(dir);
        if path.symlink_metadata().is_err() {
            continue;
        }
        let bound = clone_tree(path).and_then(|fd| {
            read_only_tree(&fd).map_err(|source| MountError {
                step: "read-only",
                path: path.to_path_buf(),
                source,
            })?;
            attach(&fd, path)
        });
        if let Err(e) = bound {
            notes.push(e.to_string());
        }
    }
    for file in [
        "/proc/kcore",
        "/proc/keys",
        "/proc/timer_list",
        "/proc/sched_debug",
    ] {
        let path = Path::new(file);
        if path.symlink_metadata().is_err() {
            continue;
        }
        let masked = rustix::mount::mount_bind(c"/dev/null", path).map_err(failed("mask", path));
        if let Err(e) = masked {
            notes.push(e.to_string());
        }
    }
    notes
}
