//! Faults: a failure before the rename, and concurrent patches of one file.

use std::path::Path;
use std::sync::Arc;

use vis::text::{patch, Edit, PatchOptions, TextError};

use super::support::{dir_entries, Ws};

#[test]
fn failure_before_rename_leaves_original_and_no_temp_file() {
    let w = Ws::new();
    let original = b"\xef\xbb\xbfkeep\r\nme\r\n".to_vec();
    w.write("f.txt", &original);
    let before = dir_entries(w.dir.path());
    let a = w.addresses("f.txt");
    let options = PatchOptions {
        fail_before_rename: true,
        ..PatchOptions::default()
    };
    let err = patch(
        &w.ws,
        Path::new("f.txt"),
        &[Edit::replace(&a[0], "changed")],
        &options,
    )
    .unwrap_err();
    assert!(matches!(err, TextError::Injected { .. }), "{err}");
    assert_eq!(w.read("f.txt"), original, "byte-identical");
    assert_eq!(
        dir_entries(w.dir.path()),
        before,
        "no temp file left behind"
    );
}

#[test]
fn concurrent_patches_never_interleave() {
    let w = Arc::new(Ws::new());
    w.write("log.txt", "start\n");
    let threads = 4;
    let per_thread = 15;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let w = Arc::clone(&w);
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let edit = Edit::insert_at_end(format!("t{t} i{i}"));
                    patch(
                        &w.ws,
                        Path::new("log.txt"),
                        &[edit],
                        &PatchOptions::default(),
                    )
                    .expect("patch");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    let text = String::from_utf8(w.read("log.txt")).expect("utf8");
    let lines: Vec<&str> = text.lines().collect();
    // A lost update (two writers reading the same version) would drop lines.
    assert_eq!(lines.len(), 1 + threads * per_thread, "{text}");
    for t in 0..threads {
        let mine: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with(&format!("t{t} ")))
            .collect();
        let expected: Vec<String> = (0..per_thread).map(|i| format!("t{t} i{i}")).collect();
        assert_eq!(mine, expected, "each thread's lines in order");
    }
    assert_eq!(dir_entries(w.dir.path()), vec!["log.txt".to_string()]);
}

#[test]
fn concurrent_address_edits_reject_the_loser() {
    // Two writers holding the same address: one wins, the other sees a stale address.
    let w = Arc::new(Ws::new());
    w.write("f.txt", "shared\n");
    let a = w.addr("f.txt", 1);
    let handles: Vec<_> = (0..2)
        .map(|t| {
            let w = Arc::clone(&w);
            let a = a.clone();
            std::thread::spawn(move || {
                patch(
                    &w.ws,
                    Path::new("f.txt"),
                    &[Edit::replace(&a, format!("by {t}"))],
                    &PatchOptions::default(),
                )
                .is_ok()
            })
        })
        .collect();
    let wins: usize = handles
        .into_iter()
        .map(|h| h.join().expect("thread") as usize)
        .sum();
    assert_eq!(wins, 1);
}
