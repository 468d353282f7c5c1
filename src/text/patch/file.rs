//! The [`patch`] entry point: everything that touches the file (steps 1, 4 and 5 of the module
//! docs) around the pure validation and application.
//!
//! The file is opened once, through the descriptor of its confined directory, under the
//! directory lock; it is refused if it is a directory, special, binary, or read-only for the
//! caller by its mode bits (root included, unless `force`). The new bytes go through the syntax
//! gate and are then written atomically; the write is refused if the file changed since it was
//! read. Each low-level failure becomes the [`TextError`] the model should see.

use std::path::Path;

use crate::text::atomic::{Faults, Identity, LockedFile, OpenError, WriteError};
use crate::text::confine::{Access, Kind, Workspace};
use crate::text::lines::{find_nul, Document};
use crate::text::syntax::{gate_changes, Change, Verdict};
use crate::text::{Result, TextError};

use super::apply::apply;
use super::options::{no_edits, Edit, PatchOptions};
use super::render::{merge_regions, render_regions, syntax_report, PatchOutput};
use super::validate::validate;

/// Apply `edits` to the file at `path`, all or nothing.
pub fn patch(
    workspace: &Workspace,
    path: &Path,
    edits: &[Edit],
    options: &PatchOptions,
) -> Result<PatchOutput> {
    let located = workspace.locate(path, Access::Write)?;
    let display = located.resolved.display.clone();
    let real = located.resolved.real.clone();
    if edits.is_empty() {
        return Err(no_edits());
    }
    match located.resolved.kind {
        Kind::Directory => return Err(is_directory(&display)),
        Kind::Other => return Err(TextError::NotAFile { path: display }),
        Kind::File => {}
    }
    let mut file = LockedFile::open(&located).map_err(|err| open_error(err, &display))?;
    if !options.force {
        if let Some(reason) = write_refusal(&file.identity()) {
            return Err(TextError::NotWritable {
                path: display,
                reason,
            });
        }
    }
    let original = file.read_all().map_err(|source| TextError::Io {
        path: display.clone(),
        source,
    })?;
    if let Some(offset) = find_nul(&original) {
        return Err(TextError::Binary {
            path: display,
            offset,
        });
    }
    let document = Document::parse(original);

    let splices = validate(&document, edits, &display, options.max_line_chars)?;
    let (new_bytes, new_ranges) = apply(&document, &splices);

    let syntax = if options.check_syntax {
        let changes: Vec<Change> = splices
            .iter()
            .zip(&new_ranges)
            .map(|(splice, &new)| Change {
                old: (splice.from, splice.to),
                new,
            })
            .collect();
        gate_changes(&real, document.bytes(), &new_bytes, &changes)
    } else {
        Verdict::Unchecked
    };
    if let Verdict::Worse { .. } = &syntax {
        return Err(TextError::Syntax {
            path: display.clone(),
            report: syntax_report(
                &display,
                &syntax,
                &new_bytes,
                &new_ranges,
                options.max_line_chars,
            ),
        });
    }

    let changed = new_bytes != document.bytes();
    if changed {
        let faults = Faults {
            fail_before_rename: options.fail_before_rename,
            before_commit: options.before_commit.clone(),
            after_exchange: options.after_exchange.clone(),
        };
        file.replace(document.bytes(), &new_bytes, &faults)
            .map_err(|err| write_error(err, &display))?;
    }
    drop(file);

    let lines_removed = splices.iter().map(|s| s.to - s.from).sum();
    let lines_added = splices.iter().map(|s| s.lines.len()).sum();
    let lines_before = document.len();
    let new_document = Document::parse(new_bytes);
    let regions = merge_regions(&new_ranges, new_document.len());
    let rendered_region = render_regions(&new_document, &regions, options.max_line_chars);
    Ok(PatchOutput {
        path: display,
        lines_removed,
        lines_added,
        lines_before,
        lines_after: new_document.len(),
        changed,
        syntax,
        regions,
        rendered_region,
    })
}

fn is_directory(display: &str) -> TextError {
    TextError::IsDirectory {
        path: display.to_string(),
        hint: "patch edits one file — give the path of a file",
    }
}

fn open_error(err: OpenError, display: &str) -> TextError {
    let path = display.to_string();
    match err {
        OpenError::Io(source) => TextError::Io { path, source },
        OpenError::NotAFile(Kind::Directory) => is_directory(display),
        OpenError::NotAFile(_) => TextError::NotAFile { path },
        OpenError::Swapped => TextError::Changed {
            path,
            reason: "a symlink replaced it after its path was checked",
        },
        OpenError::OpenForWriting => TextError::OpenForWriting { path },
    }
}

fn write_error(err: WriteError, display: &str) -> TextError {
    let path = display.to_string();
    match err {
        WriteError::Injected => TextError::Injected { path },
        WriteError::Io(source) => TextError::Io { path, source },
        WriteError::Changed(reason) => TextError::Changed { path, reason },
        WriteError::Escaped => TextError::Changed {
            path,
            reason: "its directory was moved out of the workspace",
        },
        WriteError::ModeNotKept { mode, uid, gid } => TextError::ModeNotKept {
            path,
            mode: mode & 0o7777,
            uid,
            gid,
            euid: rustix::process::geteuid().as_raw(),
        },
    }
}

/// Why the caller may not write a file with this mode, judged by the mode bits alone so the
/// answer is the same for root: no write bit at all means read-only; otherwise the bit of the
/// caller's class (owner, group, other) decides, except for root, who may write any file that
/// has a write bit.
fn write_refusal(identity: &Identity) -> Option<String> {
    let mode = identity.mode & 0o7777;
    if mode & 0o222 == 0 {
        return Some(format!(
            "read-only (mode {mode:04o}: nobody has write permission)"
        ));
    }
    let euid = rustix::process::geteuid().as_raw();
    if euid == 0 {
        return None;
    }
    let in_group = rustix::process::getegid().as_raw() == identity.gid
        || rustix::process::getgroups()
            .map(|groups| groups.iter().any(|g| g.as_raw() == identity.gid))
            .unwrap_or(false);
    let (bit, class) = if euid == identity.uid {
        (0o200, "its owner")
    } else if in_group {
        (0o020, "its group")
    } else {
        (0o002, "others")
    };
    (mode & bit == 0).then(|| {
        format!(
            "not writable by you (mode {mode:04o}, owner uid {}, gid {}: no write permission for \
             {class}, and you are uid {euid})",
            identity.uid, identity.gid
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(mode: u32, uid: u32, gid: u32) -> Identity {
        Identity {
            dev: 0,
            ino: 0,
            size: 0,
            mtime: (0, 0),
            ctime: (0, 0),
            mode,
            uid,
            gid,
        }
    }

    #[test]
    fn no_write_bit_at_all_is_refused_for_everyone() {
        let me = rustix::process::geteuid().as_raw();
        let reason = write_refusal(&identity(0o100444, me, 0)).expect("refused");
        assert_eq!(reason, "read-only (mode 0444: nobody has write permission)");
    }

    #[test]
    fn the_callers_class_bit_decides() {
        let me = rustix::process::geteuid().as_raw();
        let my_group = rustix::process::getegid().as_raw();
        assert_eq!(write_refusal(&identity(0o100644, me, my_group)), None);
        if me == 0 {
            // Root may write anything that has some write bit.
            assert_eq!(write_refusal(&identity(0o100404 | 0o020, 1, 1)), None);
            return;
        }
        let owner_cannot = write_refusal(&identity(0o100464, me, my_group)).expect("refused");
        assert!(
            owner_cannot.contains("no write permission for its owner"),
            "{owner_cannot}"
        );
        let stranger = me.wrapping_add(1);
        let others_cannot =
            write_refusal(&identity(0o100664, stranger, u32::MAX - 1)).expect("refused");
        assert!(others_cannot.contains("for others"), "{others_cannot}");
        assert_eq!(
            write_refusal(&identity(0o100646, stranger, u32::MAX - 1)),
            None
        );
    }

    #[test]
    fn low_level_failures_become_errors_the_model_can_act_on() {
        let err = write_error(WriteError::Injected, "f.txt");
        assert!(matches!(err, TextError::Injected { .. }), "{err}");
        let err = write_error(WriteError::Escaped, "f.txt");
        assert!(
            err.to_string().contains("moved out of the workspace"),
            "{err}"
        );
        let err = write_error(
            WriteError::ModeNotKept {
                mode: 0o104755,
                uid: 0,
                gid: 0,
            },
            "f.txt",
        );
        match err {
            TextError::ModeNotKept { mode, .. } => assert_eq!(mode, 0o4755),
            other => panic!("expected ModeNotKept, got {other}"),
        }
        let err = open_error(OpenError::NotAFile(Kind::Directory), "d");
        assert!(matches!(err, TextError::IsDirectory { .. }), "{err}");
        let err = open_error(OpenError::Swapped, "f.txt");
        assert!(err.to_string().contains("a symlink replaced it"), "{err}");
    }

    #[test]
    fn patching_needs_a_workspace_and_edits() {
        let err = patch(
            &Workspace::default(),
            Path::new("f.txt"),
            &[Edit::insert_at_end("x")],
            &PatchOptions::default(),
        )
        .expect_err("no workspace");
        assert!(matches!(err, TextError::NoWorkspace), "{err}");

        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f.txt"), "a\n").expect("write");
        let ws = Workspace::new([dir.path()]);
        let err =
            patch(&ws, Path::new("f.txt"), &[], &PatchOptions::default()).expect_err("no edits");
        assert!(matches!(err, TextError::InvalidArgument(_)), "{err}");
        let err = patch(
            &ws,
            Path::new("."),
            &[Edit::insert_at_end("x")],
            &PatchOptions::default(),
        )
        .expect_err("a directory");
        assert!(matches!(err, TextError::IsDirectory { .. }), "{err}");
        assert_eq!(
            std::fs::read(dir.path().join("f.txt")).expect("read"),
            b"a\n"
        );
    }
}
