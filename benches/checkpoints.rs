//! What checkpoints cost (issue 25 §1): `cargo bench --bench checkpoints [-- --files N
//! --iterations N]`.
//!
//! 1. the baseline of a 10,000-file repository (once per session, at its first block);
//! 2. the overhead per iteration with a few changed files on the block's critical path, as
//!    the runner runs it (target: ≤ 5 ms), and the scans themselves: the one after each block
//!    (on its own thread while the model answers) and the one at a turn's first block;
//! 3. a changed 100 MB file: skipped over the largest file kept (the default), and hashed and
//!    kept when the limit allows it.

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::Path;
use std::time::Instant;

use vis::checkpoints::{CheckpointSettings, Recorder};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// `files` source-like files in 100 directories, plus an ignored build directory.
fn repository(root: &Path, files: usize) {
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(root.join("target")).unwrap();
    for i in 0..200 {
        std::fs::write(root.join(format!("target/obj{i}.o")), [0u8; 512]).unwrap();
    }
    for i in 0..files {
        let dir = root.join(format!("src/m{:03}", i % 100));
        if i < 100 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let body = format!("// file {i}\n").repeat(40 + i % 80);
        std::fs::write(dir.join(format!("f{i}.rs")), body).unwrap();
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

fn main() {
    let files = arg("--files", 10_000);
    let iterations = arg("--iterations", 50);
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("vis.db");
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    repository(&ws, files);
    let roots = vec![ws.to_string_lossy().into_owned()];

    let mut recorder = Recorder::new(&db, "bench", &roots, CheckpointSettings::default());
    let start = Instant::now();
    recorder.before_block(1, 1).unwrap();
    println!(
        "checkpoints: baseline of {files} files (metadata, hashes, content kept): {:.1} ms",
        ms(start)
    );
    recorder.after_block(1, 1).unwrap();
    recorder.settle().unwrap();

    // Iterations within a turn, as the runner runs them: the block writes three files; the
    // scan after it starts on its own thread; the model answers (300 ms here, seconds in
    // practice); the next block waits for the scan. Critical path: the two calls.
    let mut critical = Vec::new();
    let mut scan_alone = Vec::new();
    let mut turn_start = Vec::new();
    let mut turn_start_prepared = Vec::new();
    for n in 0..iterations {
        let turn = n as i64 + 2;
        for k in 0..3 {
            let path = ws.join(format!("src/m{:03}/f{}.rs", (n + k) % 100, (n + k) % 100));
            std::fs::write(&path, format!("// changed in iteration {n}\n")).unwrap();
        }
        let start = Instant::now();
        recorder.after_block(turn, 1).unwrap();
        let spawn = ms(start);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let start = Instant::now();
        recorder.before_block(turn, 2).unwrap();
        critical.push(spawn + ms(start));
        // The same scan waited for at once: what it costs, off the critical path.
        std::fs::write(ws.join("src/m000/f0.rs"), format!("// again {n}\n")).unwrap();
        let start = Instant::now();
        recorder.after_block(turn, 2).unwrap();
        recorder.settle().unwrap();
        scan_alone.push(ms(start));
        // The next turn's first block also looks for changes made outside Vis meanwhile: in
        // `vis exec` right before the block; in chat and serve while the model answers.
        let start = Instant::now();
        recorder.before_block(turn + 1, 1).unwrap();
        turn_start.push(ms(start));
        recorder.after_block(turn + 1, 1).unwrap();
        recorder.settle().unwrap();
        recorder.prepare_turn(turn + 100);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let start = Instant::now();
        recorder.before_block(turn + 100, 1).unwrap();
        turn_start_prepared.push(ms(start));
        recorder.after_block(turn + 100, 1).unwrap();
        recorder.settle().unwrap();
    }
    let report = |what: &str, xs: &mut Vec<f64>| {
        xs.sort_by(|a, b| a.total_cmp(b));
        println!(
            "checkpoints: {what}: p50 {:.2} ms, p90 {:.2} ms, max {:.2} ms",
            percentile(xs, 0.5),
            percentile(xs, 0.9),
            xs.last().copied().unwrap_or(0.0)
        );
    };
    report(
        &format!(
            "per iteration on the block's critical path, {files} files, 3 changed (target ≤ 5 ms)"
        ),
        &mut critical,
    );
    report(
        &format!("the scan after a block itself ({files} files, on its own thread)"),
        &mut scan_alone,
    );
    report(
        &format!(
            "a turn's first block in vis exec: the scan for outside changes first ({files} files)"
        ),
        &mut turn_start,
    );
    report(
        &format!("a turn's first block in chat/serve: that scan ran while the model answered ({files} files)"),
        &mut turn_start_prepared,
    );

    // A 100 MB file changed by a block.
    let big = ws.join("big.bin");
    std::fs::write(&big, vec![1u8; 100 * 1024 * 1024]).unwrap();
    let start = Instant::now();
    recorder.after_block(1000, 1).unwrap();
    recorder.settle().unwrap();
    println!(
        "checkpoints: a new 100 MB file, over max_file_mb (default 16): {:.1} ms",
        ms(start)
    );
    let mut kept = Recorder::new(
        &db,
        "bench-big",
        &roots,
        CheckpointSettings {
            max_file_bytes: 512 * 1024 * 1024,
            budget_bytes: 4 * 1024 * 1024 * 1024,
            ..CheckpointSettings::default()
        },
    );
    kept.before_block(1, 1).unwrap();
    kept.after_block(1, 1).unwrap();
    kept.settle().unwrap();
    std::fs::write(&big, vec![2u8; 100 * 1024 * 1024]).unwrap();
    let start = Instant::now();
    kept.after_block(2, 1).unwrap();
    kept.settle().unwrap();
    println!(
        "checkpoints: a changed 100 MB file, hashed and kept (max_file_mb = 512): {:.1} ms",
        ms(start)
    );
}
