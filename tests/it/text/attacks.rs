//! Regression tests for the security review of the text tools: one or more per finding, each
//! checking that the attack fails *and* that the files involved are byte-for-byte intact.
//!
//! Findings: (1) symlink swaps racing `patch` (TOCTOU); (2) read-only files patched as root;
//! (3) a concurrent appender losing lines; (4) `dirlink/..` resolved lexically; (5) wrong
//! hashes accepted by `cat` (also python.rs: `cat_checks_address_hashes_from_python`); (6) huge
//! numbers (python.rs: `huge_and_negative_numbers_are_value_errors`); (7) a bare `\r` in new
//! text; (8) setuid/setgid dropped; (9) the syntax gate refusing a correct Flow edit; (10) paths
//! resolved as the OS does from the first root.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vis::text::{cat, grep, patch, CatOptions, Edit, GrepOptions, Hook, PatchOptions, TextError};
use vis::text::{LineRef, Workspace};

use super::support::{dir_entries, Ws};

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).expect("meta").permissions().mode() & 0o7777
}

/// Every file under `dir` (not following symlinks) with its bytes, or the link target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).unwrap_or_default();
                out.insert(path, target.into_os_string().into_encoded_bytes());
            } else {
                out.insert(path.clone(), fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

fn temp_files_under(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir)
        .into_keys()
        .filter(|p| vis::text::is_temp_name(p))
        .collect()
}

fn edit_end(text: &str) -> Vec<Edit> {
    vec![Edit::insert_at_end(text)]
}

// ---------------------------------------------------------------------------------------------
// 1. TOCTOU: symlink swaps while patching

/// A racing thread keeps swapping the directory `d` and the file `d/g.txt` for symlinks to
/// files outside the workspace while patches run. Nothing outside may ever change.
#[test]
fn symlink_swap_race_never_writes_outside() {
    let w = Ws::new();
    let outside = tempfile::tempdir().expect("tempdir");
    fs::write(outside.path().join("f.txt"), "outside f\n").expect("write");
    fs::write(outside.path().join("g.txt"), "outside g\n").expect("write");
    w.write("d/f.txt", "inside f\n");
    w.write("d/g.txt", "inside g\n");
    let before_outside = snapshot(outside.path());

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicUsize::new(0));
    let racer = {
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let (d, away) = (w.path("d"), w.path("d.away"));
        let out = outside.path().to_path_buf();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // The directory becomes a symlink to the outside directory, then comes back.
                if fs::rename(&d, &away).is_ok() {
                    let _ = symlink(&out, &d);
                    std::thread::sleep(Duration::from_micros(50));
                    let _ = fs::remove_file(&d);
                    let _ = fs::rename(&away, &d);
                }
                // The file becomes a symlink to the outside file, then comes back.
                let (g, g_away) = (d.join("g.txt"), d.join("g.away"));
                if fs::rename(&g, &g_away).is_ok() {
                    let _ = symlink(out.join("g.txt"), &g);
                    std::thread::sleep(Duration::from_micros(50));
                    let _ = fs::remove_file(&g);
                    let _ = fs::rename(&g_away, &g);
                }
                swaps.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(50));
            }
        })
    };

    let deadline = Instant::now() + Duration::from_millis(1000);
    let mut tries = 0;
    let mut applied = 0;
    while tries < 600 && Instant::now() < deadline {
        for name in ["d/f.txt", "d/g.txt"] {
            tries += 1;
            let result = patch(
                &w.ws,
                Path::new(name),
                &edit_end(&format!("try {tries}")),
                &PatchOptions::default(),
            );
            applied += result.is_ok() as usize;
            assert_eq!(
                snapshot(outside.path()),
                before_outside,
                "try {tries}: a file outside the workspace changed ({result:?})"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().expect("racer");
    assert!(
        swaps.load(Ordering::Relaxed) > 10,
        "the racer must have run"
    );
    assert!(applied > 0, "some patches must have landed inside");
    assert_eq!(snapshot(outside.path()), before_outside);
    assert!(temp_files_under(w.dir.path()).is_empty());
    assert!(temp_files_under(outside.path()).is_empty());
}

/// The same swaps, made deterministically at the worst moment: after the file was read and
/// the new version written to the temp file, just before the commit.
#[test]
fn symlink_swapped_in_at_the_commit_point_is_refused() {
    let w = Ws::new();
    let outside = tempfile::tempdir().expect("tempdir");
    fs::write(outside.path().join("f.txt"), "outside\n").expect("write");
    w.write("d/f.txt", "inside\n");
    let before_outside = snapshot(outside.path());

    // The file's name now points outside: refused, the symlink left as the attacker put it.
    let (f, moved) = (w.path("d/f.txt"), w.path("d/f.moved"));
    let out_f = outside.path().join("f.txt");
    let options = PatchOptions {
        before_commit: Some(Hook::new(move || {
            fs::rename(&f, &moved).expect("mv");
            symlink(&out_f, &f).expect("ln");
        })),
        ..PatchOptions::default()
    };
    let err = patch(&w.ws, Path::new("d/f.txt"), &edit_end("x"), &options).unwrap_err();
    assert!(matches!(err, TextError::Changed { .. }), "{err}");
    assert!(err.to_string().contains("re-read it with cat") || err.to_string().contains("Re-read"));
    assert_eq!(snapshot(outside.path()), before_outside);
    assert_eq!(fs::read(w.path("d/f.moved")).expect("read"), b"inside\n");
    assert!(fs::symlink_metadata(w.path("d/f.txt"))
        .expect("meta")
        .file_type()
        .is_symlink());

    // The directory becomes a symlink to the outside: the write stays in the directory that
    // was checked (now called d.moved), never follows the new symlink.
    fs::remove_file(w.path("d/f.txt")).expect("rm");
    fs::rename(w.path("d/f.moved"), w.path("d/f.txt")).expect("mv");
    let (d, d_moved) = (w.path("d"), w.path("d.moved"));
    let out = outside.path().to_path_buf();
    let options = PatchOptions {
        before_commit: Some(Hook::new(move || {
            fs::rename(&d, &d_moved).expect("mv");
            symlink(&out, &d).expect("ln");
        })),
        ..PatchOptions::default()
    };
    let result = patch(&w.ws, Path::new("d/f.txt"), &edit_end("y"), &options);
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(snapshot(outside.path()), before_outside);
    assert_eq!(
        fs::read(w.path("d.moved/f.txt")).expect("read"),
        b"inside\ny\n"
    );
    assert!(temp_files_under(w.dir.path()).is_empty());
    assert!(temp_files_under(outside.path()).is_empty());
}

/// A directory moved out of the workspace after it was resolved is noticed before the commit.
#[test]
fn directory_moved_out_of_the_workspace_before_the_commit_is_refused() {
    let w = Ws::new();
    let outside = tempfile::tempdir().expect("tempdir");
    w.write("d/f.txt", "inside\n");
    let (d, gone) = (w.path("d"), outside.path().join("d"));
    let options = PatchOptions {
        before_commit: Some(Hook::new(move || fs::rename(&d, &gone).expect("mv"))),
        ..PatchOptions::default()
    };
    let err = patch(&w.ws, Path::new("d/f.txt"), &edit_end("x"), &options).unwrap_err();
    assert!(
        err.to_string().contains("moved out of the workspace"),
        "{err}"
    );
    assert_eq!(
        fs::read(outside.path().join("d/f.txt")).expect("read"),
        b"inside\n"
    );
    assert!(temp_files_under(outside.path()).is_empty());
}

// ---------------------------------------------------------------------------------------------
// 2. Read-only files

#[test]
fn read_only_file_is_refused_even_as_root_unless_forced() {
    let w = Ws::new();
    let path = w.write("ro.txt", "keep\n");
    chmod(&path, 0o444);
    let a = w.addr("ro.txt", 1);
    let err = patch(
        &w.ws,
        Path::new("ro.txt"),
        &[Edit::replace(&a, "changed")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TextError::NotWritable { .. }), "{msg}");
    assert!(msg.contains("read-only (mode 0444"), "{msg}");
    assert!(msg.contains("force=True"), "{msg}");
    assert_eq!(w.read("ro.txt"), b"keep\n");
    assert_eq!(mode_of(&path), 0o444);

    let options = PatchOptions {
        force: true,
        ..PatchOptions::default()
    };
    patch(
        &w.ws,
        Path::new("ro.txt"),
        &[Edit::replace(&a, "changed")],
        &options,
    )
    .expect("forced");
    assert_eq!(w.read("ro.txt"), b"changed\n");
    assert_eq!(mode_of(&path), 0o444, "force keeps the mode");
}

// ---------------------------------------------------------------------------------------------
// 3. Concurrent modification

fn append(path: &Path, line: &str) {
    let mut f = OpenOptions::new().append(true).open(path).expect("open");
    f.write_all(line.as_bytes()).expect("append");
}

#[test]
fn append_during_patch_is_detected_and_nothing_is_written() {
    let w = Ws::new();
    let path = w.write("log.txt", "one\ntwo\n");
    let a = w.addr("log.txt", 1);
    let target = path.clone();
    let options = PatchOptions {
        before_commit: Some(Hook::new(move || append(&target, "appended\n"))),
        ..PatchOptions::default()
    };
    let err = patch(
        &w.ws,
        Path::new("log.txt"),
        &[Edit::replace(&a, "ONE")],
        &options,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TextError::Changed { .. }), "{msg}");
    assert!(
        msg.contains("changed while patch was working on it"),
        "{msg}"
    );
    assert!(
        msg.contains("nothing was written") && msg.contains("Re-read"),
        "{msg}"
    );
    assert_eq!(w.read("log.txt"), b"one\ntwo\nappended\n");
    assert_eq!(dir_entries(w.dir.path()), vec!["log.txt".to_string()]);
}

/// A writer that opened the file before the patch and writes after it would write into the
/// replaced version, its line lost: patch waits for it to close, then refuses, and the file is
/// untouched.
#[test]
fn file_held_open_for_writing_is_refused() {
    let w = Ws::new();
    let path = w.write("log.txt", "one\n");
    let mut writer = OpenOptions::new().append(true).open(&path).expect("open");
    let err = patch(
        &w.ws,
        Path::new("log.txt"),
        &[Edit::insert_at_start("patched")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TextError::OpenForWriting { .. }), "{msg}");
    assert!(
        msg.contains("log.txt is open for writing") && msg.contains("nothing was changed"),
        "{msg}"
    );
    writer.write_all(b"late\n").expect("append");
    drop(writer);
    assert_eq!(w.read("log.txt"), b"one\nlate\n");
    assert_eq!(dir_entries(w.dir.path()), vec!["log.txt".to_string()]);

    // Closed: the patch goes through.
    patch(
        &w.ws,
        Path::new("log.txt"),
        &[Edit::insert_at_start("patched")],
        &PatchOptions::default(),
    )
    .expect("patch");
    assert_eq!(w.read("log.txt"), b"patched\none\nlate\n");
}

/// A writer whose `open` resolved the name just before the commit's swap reaches the old
/// version (then under the temp name): the swap is undone and its line lands in the restored
/// file.
#[test]
fn writer_reaching_the_old_version_after_the_swap_keeps_its_line() {
    let w = Ws::new();
    w.write("log.txt", "one\n");
    let dir = w.dir.path().to_path_buf();
    let options = PatchOptions {
        after_exchange: Some(Hook::new(move || {
            let old = temp_files_under(&dir);
            assert_eq!(old.len(), 1, "{old:?}");
            append(&old[0], "late\n");
        })),
        ..PatchOptions::default()
    };
    let err = patch(
        &w.ws,
        Path::new("log.txt"),
        &[Edit::insert_at_start("patched")],
        &options,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TextError::Changed { .. }), "{msg}");
    assert!(msg.contains("during the write"), "{msg}");
    assert_eq!(w.read("log.txt"), b"one\nlate\n");
    assert_eq!(dir_entries(w.dir.path()), vec!["log.txt".to_string()]);
}

/// A writer that opens the name right after the swap reaches the new version: the patch
/// stands and the line follows it.
#[test]
fn writer_reaching_the_new_version_after_the_swap_appends_to_it() {
    let w = Ws::new();
    let path = w.write("log.txt", "one\n");
    let options = PatchOptions {
        after_exchange: Some(Hook::new(move || append(&path, "late\n"))),
        ..PatchOptions::default()
    };
    patch(
        &w.ws,
        Path::new("log.txt"),
        &[Edit::insert_at_start("patched")],
        &options,
    )
    .expect("patch");
    assert_eq!(w.read("log.txt"), b"patched\none\nlate\n");
    assert_eq!(dir_entries(w.dir.path()), vec!["log.txt".to_string()]);
}

#[test]
fn rewrite_or_replacement_during_patch_is_detected() {
    // Same size, in place (timestamps may not move within one clock tick; content does).
    let w = Ws::new();
    let path = w.write("f.txt", "abc\n");
    let a = w.addr("f.txt", 1);
    let target = path.clone();
    let options = PatchOptions {
        before_commit: Some(Hook::new(move || {
            fs::write(&target, "xyz\n").expect("write")
        })),
        ..PatchOptions::default()
    };
    let err = patch(
        &w.ws,
        Path::new("f.txt"),
        &[Edit::replace(&a, "A")],
        &options,
    )
    .unwrap_err();
    assert!(matches!(err, TextError::Changed { .. }), "{err}");
    assert_eq!(w.read("f.txt"), b"xyz\n");

    // Another editor saving by rename.
    let a = w.addr("f.txt", 1);
    let (target, tmp) = (path.clone(), w.path(".editor-save"));
    let options = PatchOptions {
        before_commit: Some(Hook::new(move || {
            fs::write(&tmp, "saved by editor\n").expect("write");
            fs::rename(&tmp, &target).expect("rename");
        })),
        ..PatchOptions::default()
    };
    let err = patch(
        &w.ws,
        Path::new("f.txt"),
        &[Edit::replace(&a, "A")],
        &options,
    )
    .unwrap_err();
    assert!(err.to_string().contains("another file"), "{err}");
    assert_eq!(w.read("f.txt"), b"saved by editor\n");
    assert_eq!(dir_entries(w.dir.path()), vec!["f.txt".to_string()]);
}

/// A writer appending line after line (open, write, close, like `echo >> log.txt`) while patches
/// run: every appended line survives exactly once; the patches that raced it are rejected (and
/// say so), the others land.
///
/// One case is outside any save-by-rename's reach: an `open` that resolved the name before a
/// commit's rename and returned only after the commit removed the old version gets a
/// descriptor to a deleted file (`st_nlink == 0`), and nothing the patch can observe
/// distinguishes it beforehand. Such a line may be missing (never doubled); the writer itself
/// can tell from `fstat` and reopen. Every other line must be there.
#[test]
fn concurrent_appender_never_loses_lines() {
    let w = Ws::new();
    let path = w.write("log.txt", "start\n");
    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (stop, path) = (Arc::clone(&stop), path.clone());
        std::thread::spawn(move || {
            let (mut n, mut into_deleted) = (0, Vec::new());
            while !stop.load(Ordering::Relaxed) && n < 100_000 {
                let mut file = OpenOptions::new().append(true).open(&path).expect("open");
                if file.metadata().expect("fstat").nlink() == 0 {
                    into_deleted.push(n);
                }
                file.write_all(format!("appended {n}\n").as_bytes())
                    .expect("append");
                drop(file);
                n += 1;
                // Pacing only (so that some patches fit between two appends), not
                // synchronization.
                std::thread::sleep(Duration::from_millis(1));
            }
            (n, into_deleted)
        })
    };
    let (mut applied, mut rejected) = (0, 0);
    // At least 1.5 s of racing, and on until both outcomes were seen (a loaded machine can
    // make every patch in a short window overlap an append); the cap bounds the file.
    let deadline = Instant::now() + Duration::from_millis(1500);
    while applied + rejected < 4000 && (Instant::now() < deadline || applied == 0 || rejected == 0)
    {
        let k = applied + rejected;
        match patch(
            &w.ws,
            Path::new("log.txt"),
            &[Edit::insert_at_start(format!("patched {k}"))],
            &PatchOptions::default(),
        ) {
            Ok(_) => applied += 1,
            Err(TextError::Changed { .. } | TextError::OpenForWriting { .. }) => rejected += 1,
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (appended, into_deleted) = appender.join().expect("appender");
    let text = String::from_utf8(w.read("log.txt")).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    // How often each appended line is in the file. (A line appended to the new version while
    // a commit was being undone is carried over to the restored file, possibly after a later
    // one, so order is not checked.)
    let mut count = vec![0usize; appended];
    for line in &lines {
        if let Some(n) = line.strip_prefix("appended ") {
            let n: usize = n.parse().expect("line number");
            count[n] += 1;
        }
    }
    let doubled: Vec<usize> = (0..appended).filter(|&n| count[n] > 1).collect();
    let lost: Vec<usize> = (0..appended)
        .filter(|&n| count[n] == 0 && !into_deleted.contains(&n))
        .collect();
    let missing_from_deleted = into_deleted.iter().filter(|&&n| count[n] == 0).count();
    eprintln!(
        "{appended} appended, {applied} patches applied, {rejected} rejected; {} appends opened \
         a deleted file, {missing_from_deleted} of them missing",
        into_deleted.len()
    );
    assert!(
        doubled.is_empty() && lost.is_empty(),
        "appended lines lost {lost:?} or doubled {doubled:?} ({appended} appended, {applied} \
         patches applied, {rejected} rejected; opened a deleted file: {into_deleted:?})"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("patched ")).count(),
        applied
    );
    assert!(applied > 0, "some patches must land");
    assert!(rejected > 0, "the race must have been exercised");
    assert!(temp_files_under(w.dir.path()).is_empty());
}

// ---------------------------------------------------------------------------------------------
// 4 and 10. Paths resolved as the OS resolves them

#[test]
fn dotdot_after_a_directory_symlink_is_resolved_like_the_os() {
    let w = Ws::new();
    let outside = tempfile::tempdir().expect("tempdir");
    fs::create_dir(outside.path().join("sub")).expect("mkdir");
    fs::write(outside.path().join("a.txt"), "outside\n").expect("write");
    w.write("a.txt", "inside\n");
    symlink(outside.path().join("sub"), w.path("dirlink")).expect("ln");
    // The OS opens outside/a.txt for "dirlink/../a.txt": refused, not read as ws/a.txt.
    let err = cat(&w.ws, Path::new("dirlink/../a.txt"), &CatOptions::default()).unwrap_err();
    assert!(matches!(err, TextError::OutsideWorkspace { .. }), "{err}");
    let err = patch(
        &w.ws,
        Path::new("dirlink/../a.txt"),
        &edit_end("x"),
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, TextError::OutsideWorkspace { .. }), "{err}");
    let err = grep(
        &w.ws,
        "inside",
        &[PathBuf::from("dirlink/..")],
        &GrepOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, TextError::OutsideWorkspace { .. }), "{err}");
    assert_eq!(
        fs::read(outside.path().join("a.txt")).expect("read"),
        b"outside\n"
    );
    assert_eq!(w.read("a.txt"), b"inside\n");
}

#[test]
fn relative_paths_are_os_resolved_from_the_first_root() {
    let w = Ws::new();
    w.write("x/y/b.txt", "the OS's b\n");
    w.write("b.txt", "the lexical b\n");
    symlink(w.path("x/y"), w.path("link")).expect("ln");
    // link/../b.txt is x/b.txt for the OS (missing), not ./b.txt.
    let err = cat(&w.ws, Path::new("link/../b.txt"), &CatOptions::default()).unwrap_err();
    assert!(matches!(err, TextError::NotFound { .. }), "{err}");
    let shown = cat(&w.ws, Path::new("link/../y/b.txt"), &CatOptions::default()).expect("cat");
    assert!(shown.render().contains("|the OS's b"), "{shown}");
    // patch edits the same file the OS would open.
    patch(
        &w.ws,
        Path::new("link/../y/b.txt"),
        &edit_end("more"),
        &PatchOptions::default(),
    )
    .expect("patch");
    assert_eq!(w.read("x/y/b.txt"), b"the OS's b\nmore\n");
    assert_eq!(w.read("b.txt"), b"the lexical b\n");

    // With two roots, relative paths start at the first; the second is reachable by path.
    let second = tempfile::tempdir().expect("tempdir");
    fs::write(second.path().join("only2.txt"), "two\n").expect("write");
    let ws = Workspace::new([w.dir.path(), second.path()]);
    let err = cat(&ws, Path::new("only2.txt"), &CatOptions::default()).unwrap_err();
    assert!(matches!(err, TextError::NotFound { .. }), "{err}");
    let up = PathBuf::from("..")
        .join(second.path().file_name().expect("name"))
        .join("only2.txt");
    assert!(cat(&ws, &up, &CatOptions::default()).is_ok());
    // A file path used as a directory fails as it does for the OS.
    let err = cat(&w.ws, Path::new("b.txt/.."), &CatOptions::default()).unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("not a directory"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// 5. cat checks address arguments (Rust API; the Python side is in python.rs)

#[test]
fn cat_checks_address_hashes() {
    let w = Ws::new();
    w.write("f.txt", "one\ntwo\nthree\n");
    let fresh = w.addr("f.txt", 2);
    let with = |start: LineRef| CatOptions {
        start: Some(start),
        ..CatOptions::default()
    };
    let ok = cat(&w.ws, Path::new("f.txt"), &with(fresh.as_str().into())).expect("fresh");
    assert_eq!(ok.start, 2);

    let err = cat(&w.ws, Path::new("f.txt"), &with("2:zzzz".into())).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TextError::Address { .. }), "{msg}");
    assert!(msg.contains("malformed address \"2:zzzz\""), "{msg}");
    assert!(msg.contains(&format!("line 2 is now {fresh}")), "{msg}");
    assert!(msg.contains(&format!("{fresh}|two")), "{msg}");

    let wrong = if fresh.ends_with("kodu") {
        "2:bate"
    } else {
        "2:kodu"
    };
    let err = cat(&w.ws, Path::new("f.txt"), &with(wrong.into()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("{wrong:?} is stale: line 2 is now {fresh}")),
        "{err}"
    );
    let end = CatOptions {
        end: Some("9:kodu".into()),
        ..CatOptions::default()
    };
    let err = cat(&w.ws, Path::new("f.txt"), &end)
        .unwrap_err()
        .to_string();
    assert!(err.contains("past the end"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// 7. Carriage returns in new text

#[test]
fn bare_carriage_return_in_new_text_is_refused() {
    let w = Ws::new();
    w.write("f.txt", "one\ntwo\n");
    let a = w.addresses("f.txt");
    for text in ["a\rb", "a\r", "\rx\ny", "ok\nbad\r\n\r"] {
        let err = patch(
            &w.ws,
            Path::new("f.txt"),
            &[Edit::replace(&a[0], text)],
            &PatchOptions::default(),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("bare carriage return"), "{text:?}: {msg}");
        assert!(msg.contains("nothing changed"), "{msg}");
        assert_eq!(w.read("f.txt"), b"one\ntwo\n");
    }
}

#[test]
fn crlf_files_still_get_crlf_endings() {
    let w = Ws::new();
    w.write("w.txt", "one\r\ntwo\r\n");
    let a = w.addresses("w.txt");
    patch(
        &w.ws,
        Path::new("w.txt"),
        &[
            Edit::replace(&a[0], "ONE\r\nONE-B"),
            Edit::insert_after(&a[1], "three\nfour\r\n"),
        ],
        &PatchOptions::default(),
    )
    .expect("patch");
    assert_eq!(w.read("w.txt"), b"ONE\r\nONE-B\r\ntwo\r\nthree\r\nfour\r\n");
}

// ---------------------------------------------------------------------------------------------
// 8. setuid / setgid

#[test]
fn setuid_and_setgid_bits_are_kept() {
    let w = Ws::new();
    for (name, mode) in [
        ("u.sh", 0o4755),
        ("g.sh", 0o2750),
        ("ug.sh", 0o6711),
        ("t.sh", 0o1644),
    ] {
        let path = w.write(name, "#!/bin/sh\necho hi\n");
        chmod(&path, mode);
        let a = w.addr(name, 2);
        patch(
            &w.ws,
            Path::new(name),
            &[Edit::replace(&a, "echo hello")],
            &PatchOptions::default(),
        )
        .expect("patch");
        assert_eq!(w.read(name), b"#!/bin/sh\necho hello\n");
        assert_eq!(mode_of(&path), mode, "{name}: mode {:o}", mode_of(&path));
    }
}

// ---------------------------------------------------------------------------------------------
// 2 and 8 as an unprivileged user: a helper run as `nobody`

/// Run `as_nobody_helper` in this test binary as uid/gid 65534 on `dir`; returns its report.
fn run_as_nobody(dir: &Path, case: &str) -> String {
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(exe)
        .args([
            "--exact",
            "text::attacks::as_nobody_helper",
            "--ignored",
            "--nocapture",
        ])
        .env("VIS_NOBODY_DIR", dir)
        .env("VIS_NOBODY_CASE", case)
        .output()
        .expect("setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = stdout
        .lines()
        .find_map(|l| l.strip_prefix("NOBODY: "))
        .map(str::to_string);
    report.unwrap_or_else(|| {
        panic!(
            "helper printed no report: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Not a test on its own: `run_as_nobody` runs it as `nobody`.
#[test]
#[ignore]
fn as_nobody_helper() {
    let (Ok(dir), Ok(case)) = (
        std::env::var("VIS_NOBODY_DIR"),
        std::env::var("VIS_NOBODY_CASE"),
    ) else {
        return;
    };
    let ws = Workspace::new([PathBuf::from(&dir)]);
    let address = cat(&ws, Path::new(&case), &CatOptions::default())
        .map(|c| c.lines()[0].address.to_string())
        .unwrap_or_else(|e| format!("cat failed: {e}"));
    let result = patch(
        &ws,
        Path::new(&case),
        &[Edit::replace(address, "changed")],
        &PatchOptions::default(),
    );
    match result {
        Ok(_) => println!("NOBODY: ok"),
        Err(e) => println!("NOBODY: {}", e.to_string().replace('\n', " ")),
    }
}

#[test]
fn unprivileged_user_is_refused_by_mode_bits_and_setuid_is_never_dropped() {
    let w = Ws::new();
    chmod(w.dir.path(), 0o777);
    // Root's 0644 file in a directory nobody may write: the rename would work, the mode says
    // no.
    let roots_file = w.write("roots.txt", "root's\n");
    chmod(&roots_file, 0o644);
    // nobody's own 0444 file.
    let own = w.write("own.txt", "mine\n");
    chmod(&own, 0o444);
    std::os::unix::fs::chown(&own, Some(65534), Some(65534)).expect("chown");
    // A setuid-root file writable by others: nobody cannot keep root as owner, so it must not
    // become a non-setuid (or nobody-setuid) file.
    let suid = w.write("suid.sh", "#!/bin/sh\n");
    chmod(&suid, 0o4757);
    // nobody's own writable file works.
    let fine = w.write("fine.txt", "ok\n");
    std::os::unix::fs::chown(&fine, Some(65534), Some(65534)).expect("chown");
    // Root's file writable by all works too; nobody cannot take a lease on it (not the owner),
    // so this is the commit without one.
    let shared = w.write("shared.txt", "shared\n");
    chmod(&shared, 0o666);

    let report = run_as_nobody(w.dir.path(), "roots.txt");
    assert!(
        report.contains("not writable by you (mode 0644"),
        "{report}"
    );
    assert!(report.contains("force=True"), "{report}");
    let report = run_as_nobody(w.dir.path(), "own.txt");
    assert!(report.contains("read-only (mode 0444"), "{report}");
    let report = run_as_nobody(w.dir.path(), "suid.sh");
    assert!(
        report.contains("setuid/setgid bit would be lost"),
        "{report}"
    );
    let report = run_as_nobody(w.dir.path(), "fine.txt");
    assert_eq!(report, "ok");
    let report = run_as_nobody(w.dir.path(), "shared.txt");
    assert_eq!(report, "ok");

    assert_eq!(w.read("roots.txt"), b"root's\n");
    assert_eq!(w.read("own.txt"), b"mine\n");
    assert_eq!(w.read("suid.sh"), b"#!/bin/sh\n");
    assert_eq!(mode_of(&suid), 0o4757);
    assert_eq!(fs::metadata(&suid).expect("meta").uid(), 0);
    assert_eq!(w.read("fine.txt"), b"changed\n");
    assert_eq!(w.read("shared.txt"), b"changed\n");
    assert_eq!(mode_of(&shared), 0o666);
    assert!(temp_files_under(w.dir.path()).is_empty());
}

// ---------------------------------------------------------------------------------------------
// 9. The syntax gate on files that do not parse cleanly

const FLOW_COMPONENT: &str = include_str!("fixtures/UserCard.js");

fn flow_edit(w: &Ws, text: &str) -> Result<String, TextError> {
    w.write("UserCard.js", FLOW_COMPONENT);
    let line = FLOW_COMPONENT
        .lines()
        .position(|l| l.contains("const user: User = (state.user: any);"))
        .expect("anchor")
        + 1;
    let a = w.addr("UserCard.js", line);
    patch(
        &w.ws,
        Path::new("UserCard.js"),
        &[Edit::insert_before(&a, text)],
        &PatchOptions::default(),
    )
    .map(|o| o.render())
}

#[test]
fn flow_react_file_accepts_a_restored_early_return_byte_exactly() {
    let w = Ws::new();
    // The component is Flow, which the JavaScript grammar half-understands: dozens of errors.
    let js = vis::text::check_syntax(
        vis::text::Language::JavaScript,
        FLOW_COMPONENT.as_bytes(),
        "UserCard.js",
    );
    assert!(js.count > 20, "{}", js.count);
    let early_return = "      if (state.user == null) {\n        return;\n      }\n";
    let out = flow_edit(&w, early_return).expect("a correct edit must never be blocked");
    let expected = FLOW_COMPONENT.replacen(
        "      const user: User = (state.user: any);",
        &format!("{early_return}      const user: User = (state.user: any);"),
        1,
    );
    assert_eq!(w.read("UserCard.js"), expected.as_bytes());
    assert!(out.contains("tsx syntax"), "{out}");
}

#[test]
fn flow_react_file_still_rejects_a_real_error_in_the_edited_lines() {
    let w = Ws::new();
    for broken in [
        "      if (state.user == null {\n        return;\n      }\n",
        "      if (state.user == null) {\n        return (;\n      }\n",
    ] {
        let err = flow_edit(&w, broken).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, TextError::Syntax { .. }), "{msg}");
        assert!(msg.contains("in or next to the edited lines"), "{msg}");
        assert_eq!(w.read("UserCard.js"), FLOW_COMPONENT.as_bytes());
    }
}

#[test]
fn gate_compares_errors_by_position_in_broken_files() {
    let w = Ws::new();
    // Broken at the bottom; a correct edit at the top is fine, as before.
    let mut src: String = (0..30).map(|i| format!("x{i} = {i}\n")).collect();
    src.push_str("def broken(:\n    pass\n");
    w.write("b.py", &src);
    let a = w.addresses("b.py");
    patch(
        &w.ws,
        Path::new("b.py"),
        &[Edit::replace(&a[2], "x2 = 'two'\nx2b = 2")],
        &PatchOptions::default(),
    )
    .expect("an edit far from the old error");
    // A new error at the top is rejected even though the count stays at one (CPython stops at
    // the first error, so the old error is no longer reported at all).
    let a = w.addresses("b.py");
    let before = w.read("b.py");
    let err = patch(
        &w.ws,
        Path::new("b.py"),
        &[Edit::replace(&a[5], "x5 = (")],
        &PatchOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, TextError::Syntax { .. }), "{err}");
    assert_eq!(w.read("b.py"), before);
}
