//! Putting files back: into a copy of the workspace ([`restore_into`], for forks and
//! replays) or in place ([`plan_rewind`] then [`rewind_files`]: all files or none).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::atomic::{write_state_at, Move};
use super::beneath::{place, remove_at, Missing, Place};
use super::blobs::Blobs;
use super::log::{FileState, Log, Origin};
use super::record::Recorder;
use super::scan;
use super::{CheckpointError, Point};

/// What [`restore_into`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// Paths (relative to the destination) written back.
    pub restored: Vec<String>,
    /// Paths removed (they did not exist at the point).
    pub removed: Vec<String>,
    /// Paths that could not be restored, and why (their content was not kept).
    pub not_restored: Vec<(String, String)>,
    /// Changed paths beneath the session's other roots (only the first root is restored).
    pub other_roots: Vec<String>,
}

/// Makes `dest`, a copy of the session's (first) workspace root as it is now (see
/// [`copy_workspace`]), look like that root at `point`, by undoing what was recorded since.
/// Every write and removal is made beneath `dest`, relative to a directory opened without
/// following a symbolic link (a link in the copy, planted or recorded, is never written
/// through); a directory on the way that is a link refuses the restore, whose copy the
/// caller then removes. A removal whose directory is gone is done already.
pub fn restore_into(
    db: &Path,
    session_id: &str,
    point: Point,
    dest: &Path,
) -> Result<RestoreReport, CheckpointError> {
    let dir = super::session_dir(db, session_id);
    let log = Log::load(&dir)?.ok_or_else(|| CheckpointError::NoCheckpoints(session_id.into()))?;
    let blobs = Blobs::new(&dir);
    let root = PathBuf::from(log.roots().first().cloned().unwrap_or_default());
    let want = log.files_at(point);
    let have = log.manifest();
    let mut report = RestoreReport::default();
    let dest_root = [dest];
    // Sorted, so a directory's path comes before its files': a link recorded in place of a
    // directory is removed before the files beneath that directory are put back.
    let paths: BTreeSet<&String> = want.keys().chain(have.keys()).collect();
    for path in paths {
        let (wanted, had) = (want.get(path), have.get(path));
        // Unchanged since the point, and still what was last recorded (an edit made outside
        // Vis since the last checkpoint is in the copy, and must be undone too).
        let recorded_now = had.is_none_or(|e| scan::meta_of(Path::new(path)) == Some(e.meta));
        if wanted == had.map(|e| &e.state) && recorded_now {
            continue;
        }
        let Ok(rel) = Path::new(path).strip_prefix(&root) else {
            report.other_roots.push(path.clone());
            continue;
        };
        let rel_text = rel.to_string_lossy().into_owned();
        let target = dest.join(rel);
        match wanted {
            None => {
                if let Some(at) = place(&dest_root, &target, Missing::Absent)? {
                    if remove_if_there(&at)? {
                        report.removed.push(rel_text);
                    }
                }
            }
            Some(state) => match content_of(&blobs, state) {
                Err(why) => report.not_restored.push((rel_text, why)),
                Ok(content) => {
                    // Directories the copy lacks are made; none is removed again on failure,
                    // since a failed restore's copy is removed whole.
                    let mut created = Vec::new();
                    let Some(at) = place(&dest_root, &target, Missing::Create(&mut created))?
                    else {
                        continue;
                    };
                    remove_if_there(&at)?;
                    write_state_at(&at.dir.fd, &at.name, &target, state, content.as_deref())?;
                    report.restored.push(rel_text);
                }
            },
        }
    }
    Ok(report)
}

/// Removes what is at `at` (a directory with what it holds), never following a link;
/// whether anything was there.
fn remove_if_there(at: &Place) -> Result<bool, CheckpointError> {
    match remove_at(&at.dir.fd, &at.name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(CheckpointError::io("remove", &at.shown(), e)),
    }
}

/// Copies the directory tree `src` to `dest` (created; must not exist): files with their
/// permission bits, symlinks as links (never followed), everything including ignored files.
pub fn copy_workspace(src: &Path, dest: &Path) -> Result<(), CheckpointError> {
    if dest.exists() {
        return Err(CheckpointError::Refused(format!(
            "{} exists already; give a directory that does not exist yet",
            dest.display()
        )));
    }
    copy_tree(src, dest)
}

fn copy_tree(src: &Path, dest: &Path) -> Result<(), CheckpointError> {
    std::fs::create_dir_all(dest).map_err(|e| CheckpointError::io("create", dest, e))?;
    let entries = std::fs::read_dir(src).map_err(|e| CheckpointError::io("read", src, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| CheckpointError::io("read", src, e))?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| CheckpointError::io("read", &from, e))?;
        if kind.is_dir() {
            copy_tree(&from, &to)?;
        } else if kind.is_symlink() {
            let target =
                std::fs::read_link(&from).map_err(|e| CheckpointError::io("read", &from, e))?;
            std::os::unix::fs::symlink(&target, &to)
                .map_err(|e| CheckpointError::io("create", &to, e))?;
        } else if kind.is_file() {
            std::fs::copy(&from, &to).map_err(|e| CheckpointError::io("copy", &from, e))?;
        }
    }
    Ok(())
}

/// The bytes of a file state (`None` for a symlink), or why they are not available.
fn content_of(blobs: &Blobs, state: &FileState) -> Result<Option<Vec<u8>>, String> {
    match state {
        FileState::Symlink { .. } => Ok(None),
        FileState::File { hash: None, .. } => {
            Err("its content was not kept (over the largest file kept)".into())
        }
        FileState::File {
            hash: Some(hash), ..
        } => {
            if !blobs.has(hash) {
                return Err("its content was not kept (over the session's budget)".into());
            }
            blobs.read(hash).map(Some).map_err(|e| e.to_string())
        }
    }
}

/// A file the person changed outside Vis since Vis last wrote it: the three versions.
#[derive(Debug, Clone)]
pub struct Conflict {
    pub path: String,
    /// At the rewind point.
    pub at_point: Option<FileState>,
    /// What Vis last wrote.
    pub vis_wrote: Option<FileState>,
    /// What is there now.
    pub now: Option<FileState>,
}

/// What a rewind would do.
#[derive(Debug, Default)]
pub struct RewindPlan {
    /// Paths and the state each goes back to (`None`: removed, a file the session created).
    pub targets: Vec<(String, Option<FileState>)>,
    pub conflicts: Vec<Conflict>,
    /// Paths that cannot go back (their content was not kept), and why.
    pub not_restorable: Vec<(String, String)>,
}

/// What [`rewind_files`] did.
#[derive(Debug, Default)]
pub struct RewindReport {
    pub restored: Vec<String>,
    pub removed: Vec<String>,
    /// Paths left as they are: the session created them, but someone changed them since, so
    /// they are not Vis's to delete.
    pub kept: Vec<String>,
    pub not_restored: Vec<(String, String)>,
}

/// Plans putting every file the session changed since `point` back. Records first what
/// changed since the last checkpoint (as made outside Vis before turn `next_turn`), so a
/// change the person made is seen as theirs.
pub fn plan_rewind(
    recorder: &mut Recorder,
    point: Point,
    next_turn: i64,
) -> Result<RewindPlan, CheckpointError> {
    recorder.catch_up(next_turn, 0)?;
    // The recorder keeps the manifest, not the history: the log is read afresh (it holds
    // what `catch_up` just appended).
    let history = Log::load(recorder.dir())?;
    let loaded = recorder.loaded()?;
    let Some(log) = history.as_ref() else {
        return Err(CheckpointError::NoCheckpoints(String::new()));
    };
    let want = log.files_at(point);
    // Each path the session changed since the point, with its last change.
    let mut last: BTreeMap<&str, (Origin, Option<&FileState>)> = BTreeMap::new();
    let mut by_vis: BTreeSet<&str> = BTreeSet::new();
    let mut last_by_vis: BTreeMap<&str, Option<&FileState>> = BTreeMap::new();
    for checkpoint in log.since(point) {
        for change in &checkpoint.changes {
            last.insert(&change.path, (checkpoint.origin, change.after.as_ref()));
            if checkpoint.origin.by_vis() {
                by_vis.insert(&change.path);
                last_by_vis.insert(&change.path, change.after.as_ref());
            }
        }
    }
    let mut plan = RewindPlan::default();
    for path in by_vis {
        let wanted = want.get(path);
        let now = loaded.manifest.get(path).map(|e| &e.state);
        if wanted == now {
            continue;
        }
        let outside = last.get(path).is_some_and(|(origin, _)| !origin.by_vis());
        let drifted =
            super::scan::meta_of(Path::new(path)) != loaded.manifest.get(path).map(|e| e.meta);
        if outside || drifted {
            plan.conflicts.push(Conflict {
                path: path.to_string(),
                at_point: wanted.cloned(),
                vis_wrote: last_by_vis.get(path).copied().flatten().cloned(),
                now: now.cloned(),
            });
        }
        if let Some(state) = wanted {
            if let Err(why) = available(&loaded.blobs, state) {
                plan.not_restorable.push((path.to_string(), why));
                continue;
            }
        }
        plan.targets.push((path.to_string(), wanted.cloned()));
    }
    Ok(plan)
}

fn available(blobs: &Blobs, state: &FileState) -> Result<(), String> {
    match state {
        FileState::Symlink { .. } => Ok(()),
        FileState::File { hash: None, .. } => {
            Err("its content was not kept (over the largest file kept)".into())
        }
        FileState::File {
            hash: Some(hash), ..
        } if !blobs.has(hash) => Err("its content was not kept (over the session's budget)".into()),
        FileState::File { .. } => Ok(()),
    }
}

/// Carries out `plan`: every target or none. Refused when the plan has conflicts or files
/// that cannot be restored, unless `force` (then conflicting files are overwritten, except
/// that a file the session created is never removed once someone else changed it, and files
/// that cannot be restored are reported). The rewind is recorded as a checkpoint at
/// `turn`/0; `cut_from_turn` when the conversation was cut there.
pub fn rewind_files(
    recorder: &mut Recorder,
    plan: &RewindPlan,
    force: bool,
    turn: i64,
    cut_from_turn: Option<i64>,
) -> Result<RewindReport, CheckpointError> {
    if !force && !plan.conflicts.is_empty() {
        let paths: Vec<&str> = plan.conflicts.iter().map(|c| c.path.as_str()).collect();
        return Err(CheckpointError::Refused(format!(
            "changed outside Vis since the session last wrote it: {}; nothing was changed — look at them, then run again with --force to overwrite them",
            paths.join(", ")
        )));
    }
    if !force && !plan.not_restorable.is_empty() {
        let what: Vec<String> = plan
            .not_restorable
            .iter()
            .map(|(p, why)| format!("{p} ({why})"))
            .collect();
        return Err(CheckpointError::Refused(format!(
            "cannot restore {}; nothing was changed — run again with --force to restore the rest",
            what.join(", ")
        )));
    }
    let conflicted: BTreeSet<&str> = plan.conflicts.iter().map(|c| c.path.as_str()).collect();
    let loaded = recorder.loaded()?;
    let mut report = RewindReport {
        not_restored: plan.not_restorable.clone(),
        ..RewindReport::default()
    };
    let mut moves = Vec::new();
    for (path, state) in &plan.targets {
        if state.is_none() && conflicted.contains(path.as_str()) {
            report.kept.push(path.clone());
            continue;
        }
        let content = match state {
            Some(s) => content_of(&loaded.blobs, s)
                .map_err(|why| CheckpointError::Refused(format!("cannot restore {path}: {why}")))?,
            None => None,
        };
        moves.push(Move {
            target: PathBuf::from(path),
            state: state.clone(),
            content,
        });
    }
    super::atomic::apply_all(recorder.roots(), &moves).map_err(|e| match e {
        // A directory swapped for a link: the message says what to look at.
        CheckpointError::Refused(why) => CheckpointError::Refused(format!(
            "{why}; nothing was changed — look at it, then run the rewind again"
        )),
        e => CheckpointError::Refused(format!(
            "could not put the files back ({e}); nothing was changed — free some space (a full disk?) and run the rewind again"
        )),
    })?;
    for m in &moves {
        let name = m.target.to_string_lossy().into_owned();
        match m.state {
            Some(_) => report.restored.push(name),
            None => report.removed.push(name),
        }
    }
    recorder.record(Origin::Rewind, turn, 0, true, cut_from_turn)?;
    Ok(report)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoints::CheckpointSettings;

    fn read(path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    #[test]
    fn restore_into_a_copy_undoes_what_was_recorded_since_the_point() {
        let home = tempfile::tempdir().unwrap();
        let db = home.path().join("vis.db");
        let ws = home.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "a0\n").unwrap();
        std::fs::write(ws.join("gone.txt"), "here\n").unwrap();
        let roots = vec![ws.to_string_lossy().into_owned()];
        let mut rec = Recorder::new(&db, "s1", &roots, CheckpointSettings::default());
        rec.before_block(1, 1, false).unwrap();
        std::fs::write(ws.join("a.txt"), "a1\n").unwrap();
        std::fs::remove_file(ws.join("gone.txt")).unwrap();
        rec.after_block(1, 1).unwrap();
        rec.before_block(2, 1, false).unwrap();
        std::fs::write(ws.join("a.txt"), "a2\n").unwrap();
        std::fs::create_dir(ws.join("new")).unwrap();
        std::fs::write(ws.join("new/b.txt"), "b\n").unwrap();
        rec.after_block(2, 1).unwrap();
        rec.settle().unwrap();

        let copy = home.path().join("copy2");
        copy_workspace(&ws, &copy).unwrap();
        let report = restore_into(&db, "s1", Point::BeforeTurn(2), &copy).unwrap();
        assert_eq!(read(&copy.join("a.txt")).as_deref(), Some("a1\n"));
        assert!(!copy.join("new/b.txt").exists());
        assert!(!copy.join("gone.txt").exists());
        assert_eq!(report.removed, vec!["new/b.txt".to_string()]);

        let start = home.path().join("copy0");
        copy_workspace(&ws, &start).unwrap();
        restore_into(&db, "s1", Point::Start, &start).unwrap();
        assert_eq!(read(&start.join("a.txt")).as_deref(), Some("a0\n"));
        assert_eq!(read(&start.join("gone.txt")).as_deref(), Some("here\n"));
        // The workspace itself is untouched.
        assert_eq!(read(&ws.join("a.txt")).as_deref(), Some("a2\n"));
        assert!(matches!(
            restore_into(&db, "nope", Point::Start, &start),
            Err(CheckpointError::NoCheckpoints(_))
        ));
    }

    #[test]
    fn a_directory_the_session_replaced_with_a_link_comes_back_in_the_copy_as_a_directory() {
        let home = tempfile::tempdir().unwrap();
        let db = home.path().join("vis.db");
        let ws = home.path().join("ws");
        let elsewhere = home.path().join("elsewhere");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(ws.join("sub/a.txt"), "a0\n").unwrap();
        std::fs::write(elsewhere.join("a.txt"), "theirs\n").unwrap();
        let roots = vec![ws.to_string_lossy().into_owned()];
        let mut rec = Recorder::new(&db, "s1", &roots, CheckpointSettings::default());
        rec.before_block(1, 1, false).unwrap();
        std::fs::remove_dir_all(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join("sub")).unwrap();
        rec.after_block(1, 1).unwrap();
        rec.settle().unwrap();
        let copy = home.path().join("copy");
        copy_workspace(&ws, &copy).unwrap();
        let report = restore_into(&db, "s1", Point::Start, &copy).unwrap();
        assert!(!copy.join("sub").symlink_metadata().unwrap().is_symlink());
        assert_eq!(read(&copy.join("sub/a.txt")).as_deref(), Some("a0\n"));
        assert_eq!(read(&elsewhere.join("a.txt")).as_deref(), Some("theirs\n"));
        assert_eq!(report.removed, vec!["sub".to_string()]);
        assert_eq!(report.restored, vec!["sub/a.txt".to_string()]);
    }

    #[test]
    fn an_edit_made_outside_vis_since_the_last_checkpoint_is_undone_in_the_copy() {
        let home = tempfile::tempdir().unwrap();
        let db = home.path().join("vis.db");
        let ws = home.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("kept.txt"), "k0\n").unwrap();
        std::fs::write(ws.join("a.txt"), "a0\n").unwrap();
        let roots = vec![ws.to_string_lossy().into_owned()];
        let mut rec = Recorder::new(&db, "s1", &roots, CheckpointSettings::default());
        rec.before_block(1, 1, false).unwrap();
        std::fs::write(ws.join("a.txt"), "a1\n").unwrap();
        rec.after_block(1, 1).unwrap();
        rec.settle().unwrap();
        // Not recorded yet: the person's edit after the last block.
        std::fs::write(ws.join("kept.txt"), "edited outside, longer\n").unwrap();
        let copy = home.path().join("copy");
        copy_workspace(&ws, &copy).unwrap();
        restore_into(&db, "s1", Point::BeforeTurn(2), &copy).unwrap();
        assert_eq!(read(&copy.join("kept.txt")).as_deref(), Some("k0\n"));
        assert_eq!(read(&copy.join("a.txt")).as_deref(), Some("a1\n"));
    }
}
