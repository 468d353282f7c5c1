//! What the sandbox costs (issue 10), measured on and off in the same run, interleaved so a
//! busy machine skews both sides alike. `cargo bench --bench sandbox [-- --blocks N --starts N]`:
//!
//! 1. block round trip (`x = 1`) in a warm worker, p50/p99, `workspace-write` vs `off`
//!    (target: the sandbox adds ≤ 20 µs);
//! 2. worker cold start (spawn, namespaces, Landlock, seccomp, interpreter, ready), median;
//! 3. `vis exec 'x = 1'` as a whole process, median (target: the sandbox adds ≤ 10%).

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vis::protocol::Block;
use vis::runtime::{NoHostCalls, Runtime, WorkerOptions};
use vis::sandbox::{Mode, Policy};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn sorted(mut xs: Vec<f64>) -> Vec<f64> {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs
}

fn block(dir: &Path) -> Block {
    Block {
        code: "x = 1".into(),
        filename: "<t1/i1>".into(),
        session: vis::protocol::SessionInfo::new(
            "s",
            1,
            1,
            vis::protocol::SessionCounts::default(),
            vis::protocol::Utilization::without_requests(),
        ),
        output_limit: 20_000,
        artifact_path: dir.join("a.txt"),
        artifact_dir: dir.to_path_buf(),
        workspace_roots: vec![dir.to_path_buf()],
        timeout: Duration::from_secs(30),
        artifact_quota: vis::runtime::DEFAULT_ARTIFACT_QUOTA,
    }
}

fn options(bin: &Path, dir: &Path, mode: Mode) -> WorkerOptions {
    let mut opts = WorkerOptions::new(bin.to_path_buf());
    opts.workspace = Some(dir.to_path_buf());
    opts.sandbox = Policy::for_mode(mode);
    opts
}

const MODES: [(Mode, &str); 2] = [
    (Mode::WorkspaceWrite, "on (workspace-write)"),
    (Mode::Off, "off"),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let blocks = arg("--blocks", 20_000);
    let starts = arg("--starts", 20);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_vis"));
    let worker = PathBuf::from(env!("CARGO_BIN_EXE_vis-worker"));
    let dir = tempfile::tempdir().expect("tempdir");

    // 1. Round trip, in rounds of 500 blocks per mode.
    let mut runtimes: Vec<Runtime> = MODES
        .iter()
        .map(|(mode, _)| Runtime::new(options(&worker, dir.path(), *mode), vec![]))
        .collect();
    for rt in &mut runtimes {
        for _ in 0..300 {
            rt.exec(block(dir.path()), &mut NoHostCalls)
                .expect("warm-up");
        }
    }
    let mut round_trips: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    while round_trips[0].len() < blocks {
        for (i, rt) in runtimes.iter_mut().enumerate() {
            for _ in 0..500 {
                let t = Instant::now();
                rt.exec(block(dir.path()), &mut NoHostCalls).expect("block");
                round_trips[i].push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    let layers = runtimes[0].supervisor().isolation().clone();
    drop(runtimes);
    println!(
        "sandbox in force (on): {}",
        serde_json::to_string(&layers.to_json()).unwrap_or_default()
    );
    println!("block round trip, {blocks} blocks per mode (µs):");
    let rt: Vec<Vec<f64>> = round_trips.into_iter().map(sorted).collect();
    for ((_, name), xs) in MODES.iter().zip(&rt) {
        println!(
            "  {name:<22} p50 {:>7.1}  p99 {:>7.1}",
            percentile(xs, 0.5),
            percentile(xs, 0.99)
        );
    }
    println!(
        "  the sandbox adds      p50 {:>+7.1}  p99 {:>+7.1}",
        percentile(&rt[0], 0.5) - percentile(&rt[1], 0.5),
        percentile(&rt[0], 0.99) - percentile(&rt[1], 0.99)
    );

    // 2. Worker cold start, alternating modes.
    let mut cold: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    for _ in 0..starts {
        for (i, (mode, _)) in MODES.iter().enumerate() {
            let mut rt = Runtime::new(options(&worker, dir.path(), *mode), vec![]);
            let t = Instant::now();
            rt.exec(block(dir.path()), &mut NoHostCalls)
                .expect("first block");
            cold[i].push(t.elapsed().as_secs_f64() * 1e3);
            rt.shutdown();
        }
    }
    report("worker start + first block", starts, cold);

    // 3. `vis exec` as a whole process.
    let home = dir.path().join("home");
    let db = dir.path().join("bench.db");
    let exec = |mode: &str| {
        let t = Instant::now();
        let status = Command::new(&bin)
            .arg("--db")
            .arg(&db)
            .args([
                "exec",
                "--session",
                "bench",
                "--sandbox",
                mode,
                "--workspace",
            ])
            .arg(dir.path())
            .arg("x = 1")
            .env("VIS_HOME", &home)
            .env("VIS_CONFIG_DIR", dir.path().join("config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("vis exec");
        assert!(status.success(), "vis exec --sandbox {mode} failed");
        t.elapsed().as_secs_f64() * 1e3
    };
    exec("workspace-write");
    let mut whole: Vec<Vec<f64>> = vec![Vec::new(), Vec::new()];
    for _ in 0..starts {
        whole[0].push(exec("workspace-write"));
        whole[1].push(exec("off"));
    }
    report("vis exec 'x = 1' (whole process)", starts, whole);
}

fn report(what: &str, runs: usize, samples: Vec<Vec<f64>>) {
    let medians: Vec<f64> = samples
        .into_iter()
        .map(|xs| percentile(&sorted(xs), 0.5))
        .collect();
    println!("{what}, median of {runs} (ms):");
    for ((_, name), m) in MODES.iter().zip(&medians) {
        println!("  {name:<22} {m:>7.1}");
    }
    println!(
        "  the sandbox adds      {:>+7.1} ms ({:+.1}%)",
        medians[0] - medians[1],
        (medians[0] / medians[1] - 1.0) * 100.0
    );
}
