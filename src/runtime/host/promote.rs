//! `promote()`'s one write: an extension file under the workspace's `.vis/extensions/`, which
//! the worker cannot write itself (`.vis` is read-only in its view: it also holds the MCP
//! commands the host runs). The worker composes the file; the host writes it, and nothing
//! else: one file name it checks, a size it caps, no symlink followed on the way, atomically.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags, CWD};

use crate::protocol::{CallAnswer, CallError, HostReply};

/// The largest extension file `promote()` may write.
pub const MAX_EXTENSION_BYTES: usize = 1024 * 1024;

/// Writes `text` to `<workspace>/.vis/extensions/<name>.py`.
pub fn write_extension(workspace: Option<&Path>, name: &str, text: &str) -> CallAnswer {
    let Some(workspace) = workspace else {
        return Err("promote() needs a workspace: this worker was started without one".into());
    };
    if !is_plain_identifier(name) {
        return Err(CallError(format!(
            "invalid extension name {name:?}: use one identifier such as 'helpers' (letters, digits, _; at most 64)"
        )));
    }
    if text.len() > MAX_EXTENSION_BYTES {
        return Err(CallError(format!(
            "the extension file would be {} bytes, over the {} MiB limit; promote into a new extension name",
            text.len(),
            MAX_EXTENSION_BYTES / (1024 * 1024)
        )));
    }
    let path = workspace
        .join(".vis")
        .join("extensions")
        .join(format!("{name}.py"));
    write_beneath(workspace, name, text.as_bytes())
        .map(|()| HostReply::Written {
            path: path.to_string_lossy().into_owned(),
        })
        .map_err(|e| CallError(format!("cannot write {}: {e}", path.display())))
}

fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Opens (or makes) the directory `name` in `parent`, refusing a symlink.
fn dir_in(parent: &OwnedFd, name: &str) -> std::io::Result<OwnedFd> {
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(rustix::fs::openat(
        parent,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )?)
}

fn write_beneath(workspace: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let root = rustix::fs::openat(
        CWD,
        workspace,
        OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )?;
    let dir = dir_in(&dir_in(&root, ".vis")?, "extensions")?;
    let target = format!("{name}.py");
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(|e| std::io::Error::other(e.to_string()))?;
    let temp = format!(
        ".{name}.{}.tmp",
        suffix
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let fd = rustix::fs::openat(
        &dir,
        temp.as_str(),
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    let renamed = written.and_then(|()| {
        rustix::fs::renameat(&dir, temp.as_str(), &dir, target.as_str()).map_err(Into::into)
    });
    if renamed.is_err() {
        let _ = rustix::fs::unlinkat(&dir, temp.as_str(), rustix::fs::AtFlags::empty());
    }
    renamed?;
    rustix::fs::fsync(&dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_file_and_refuses_bad_names_sizes_and_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let ok = write_extension(Some(ws), "helpers", "X = 1\n");
        assert!(ok.is_ok(), "{ok:?}");
        assert_eq!(
            std::fs::read_to_string(ws.join(".vis/extensions/helpers.py")).unwrap(),
            "X = 1\n"
        );
        for bad in ["../x", "a/b", "", "mcp.toml", "x y"] {
            let e = write_extension(Some(ws), bad, "").unwrap_err();
            assert!(e.0.contains("invalid extension name"), "{bad}: {e}");
        }
        let big = "#".repeat(MAX_EXTENSION_BYTES + 1);
        let e = write_extension(Some(ws), "big", &big).unwrap_err();
        assert!(e.0.contains("limit"), "{e}");
        // A `.vis` that is a symlink elsewhere is not followed.
        let other = tempfile::tempdir().unwrap();
        let ws2 = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(other.path(), ws2.path().join(".vis")).unwrap();
        let e = write_extension(Some(ws2.path()), "h", "1").unwrap_err();
        assert!(e.0.contains("cannot write"), "{e}");
        assert_eq!(std::fs::read_dir(other.path()).unwrap().count(), 0);
    }
}
