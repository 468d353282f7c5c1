//! What checkpoints cost (issue 25 §1): `cargo bench --bench checkpoints [-- --files N
//! --iterations N --exec-runs N]`.
//!
//! 1. the baseline of a 10,000-file repository (once per session, at its first block);
//! 2. the overhead per iteration with a few changed files on the block's critical path, as
//!    the runner runs it (target: ≤ 5 ms), and the scans themselves: the one after each block
//!    (on its own thread while the model answers) and the one at a turn's first block; and
//!    what a `vis mcp` call adds, where both scans around its block are on its path;
//! 3. what one `vis exec` pays in its own process, with no worker beside it: opening the
//!    session's checkpoints, the turn's scan for outside changes, the block's scan;
//! 4. a changed 100 MB file: skipped over the largest file kept (the default), and hashed and
//!    kept when the limit allows it;
//! 5. `vis exec` end to end (the release binary, or `--vis PATH`: another build to compare)
//!    on the same files, checkpoints on and off alternating in the same sitting
//!    (`--exec-runs` each, default 15; 0 skips it; `--exec-only` skips 1 to 4): medians.

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
    let runs = arg("--exec-runs", 15);
    if std::env::args().any(|a| a == "--exec-only") {
        exec_comparison(files, runs);
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("vis.db");
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    repository(&ws, files);
    let roots = vec![ws.to_string_lossy().into_owned()];

    let mut recorder = Recorder::new(&db, "bench", &roots, CheckpointSettings::default());
    let start = Instant::now();
    recorder.before_block(1, 1, false).unwrap();
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
    let mut mcp_call = Vec::new();
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
        recorder.before_block(turn, 2, false).unwrap();
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
        recorder.before_block(turn + 1, 1, false).unwrap();
        turn_start.push(ms(start));
        recorder.after_block(turn + 1, 1).unwrap();
        recorder.settle().unwrap();
        recorder.prepare_turn(turn + 100);
        std::thread::sleep(std::time::Duration::from_millis(300));
        let start = Instant::now();
        recorder.before_block(turn + 100, 1, false).unwrap();
        turn_start_prepared.push(ms(start));
        recorder.after_block(turn + 100, 1).unwrap();
        recorder.settle().unwrap();
        // A `vis mcp` call later in that turn: what the client changed since is looked up
        // through the feed before the block, and the block's own scan is waited for before
        // its result goes back. Critical path: both.
        std::fs::write(ws.join("src/m002/f2.rs"), format!("// client {n}\n")).unwrap();
        let start = Instant::now();
        recorder.before_block(turn + 100, 2, true).unwrap();
        let before = ms(start);
        std::fs::write(ws.join("src/m003/f3.rs"), format!("// block {n}\n")).unwrap();
        let start = Instant::now();
        recorder.after_block(turn + 100, 2).unwrap();
        recorder.settle().unwrap();
        mcp_call.push(before + ms(start));
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
    report(
        &format!("a vis mcp call: the client's changes looked up before the block, the block's scan waited for after it, 1 changed each ({files} files)"),
        &mut mcp_call,
    );

    // One `vis exec`: a recorder opened cold on the session's log, the turn's scan for
    // outside changes (started at once, waited for by the block), the block, its scan.
    let mut open_and_turn = Vec::new();
    let mut block_scan = Vec::new();
    for n in 0..iterations.min(15) {
        let turn = 10_000 + n as i64;
        let start = Instant::now();
        let mut cold = Recorder::new(&db, "bench", &roots, CheckpointSettings::default());
        cold.prepare_turn(turn);
        cold.before_block(turn, 1, false).unwrap();
        open_and_turn.push(ms(start));
        for k in 0..3 {
            let path = ws.join(format!(
                "src/m{:03}/f{}.rs",
                (n + k) % 100,
                100 + (n + k) % 100
            ));
            std::fs::write(&path, format!("// exec {n}\n")).unwrap();
        }
        let start = Instant::now();
        cold.after_block(turn, 1).unwrap();
        cold.settle().unwrap();
        block_scan.push(ms(start));
    }
    report(
        &format!("vis exec in process: open the log and scan for outside changes ({files} files)"),
        &mut open_and_turn,
    );
    report(
        &format!("vis exec in process: the block's scan, 3 changed ({files} files)"),
        &mut block_scan,
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
    kept.before_block(1, 1, false).unwrap();
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

    if runs > 0 {
        exec_comparison(files, runs);
    }
}

/// `vis exec` end to end, checkpoints on and off, alternating (which goes first swaps every
/// round, so neither is always the one after a pause): the release binary on `files` files,
/// one session per mode, a block that changes 3 files.
fn exec_comparison(files: usize, runs: usize) {
    let args: Vec<String> = std::env::args().collect();
    let vis = args
        .iter()
        .position(|a| a == "--vis")
        .and_then(|i| args.get(i + 1))
        .map_or_else(|| env!("CARGO_BIN_EXE_vis").to_string(), Clone::clone);
    println!("checkpoints: vis exec with {vis}");
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    repository(&ws, files);
    let ws = ws.canonicalize().unwrap();
    let db = home.path().join("vis.db");
    let modes = [("on", ""), ("off", "[checkpoints]\nenabled = false\n")];
    for (name, config) in modes {
        let dir = home.path().join(format!("config-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), config).unwrap();
        vis::trust::trust(&dir, &ws).unwrap();
    }
    let exec = |mode: &str, n: usize| -> f64 {
        let code = format!(
            "for k in range(3):\n    open(f'src/m{{k:03}}/f{{k}}.rs', 'w').write('// {mode} {n}\\n')"
        );
        let start = Instant::now();
        let out = std::process::Command::new(&vis)
            .arg("--db")
            .arg(&db)
            .args(["exec", "--session", &format!("exec-{mode}"), "--workspace"])
            .arg(&ws)
            .arg(&code)
            .env("VIS_HOME", home.path().join("home"))
            .env("VIS_CONFIG_DIR", home.path().join(format!("config-{mode}")))
            .env_remove("VIS_DB")
            .current_dir(&ws)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let took = ms(start);
        assert!(
            out.status.success(),
            "vis exec ({mode}) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        took
    };
    // The first run of each makes its session (and, with checkpoints, the baseline).
    exec("on", 0);
    exec("off", 0);
    let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for n in 1..=runs {
        let order = if n % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            times[i].push(exec(modes[i].0, n));
        }
    }
    let median = |xs: &mut Vec<f64>| {
        xs.sort_by(|a, b| a.total_cmp(b));
        percentile(xs, 0.5)
    };
    let (on, off) = (median(&mut times[0]), median(&mut times[1]));
    println!(
        "checkpoints: vis exec end to end, {files} files, 3 changed, {runs} runs each alternating: checkpoints on median {on:.1} ms (p90 {:.1}), off median {off:.1} ms (p90 {:.1}): +{:.1} ms",
        percentile(&times[0], 0.9),
        percentile(&times[1], 0.9),
        on - off
    );
}
