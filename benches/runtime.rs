//! Runtime benchmarks (issue 2), run by `scripts/bench.sh` or `cargo bench --bench runtime`:
//!
//! 1. round trip of a trivial block through the worker, p50/p99 over N blocks, against a
//!    Jupyter kernel's execute round trip measured in the same run;
//! 2. `vis exec` cold start in a session holding 100 persisted definitions (median);
//! 3. worker kill + restart + restore of 100 definitions (median).
//!
//! 2 and 3 are also given as ratios to `python3 -c pass` (the interpreter's own start, `site`
//! included, as in the worker), timed in the same run, alternating with the measured runs so
//! both see the same machine load. `python3` is resolved to the interpreter it runs (a pyenv
//! shim would add a shell script's start-up to the baseline). Target: both ratios ≤ 1.5.
//!
//! Options: `--blocks N` (default 10000), `--runs N` for 2 and 3 (default 20), `--jupyter-python
//! PATH` (a Python with jupyter_client and ipykernel; without it the Jupyter comparison is
//! skipped and says so).

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use vis::protocol::{Block, PersistedDef};
use vis::runtime::{NoHostCalls, Runtime, WorkerOptions};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    percentile(&xs, 0.5)
}

/// The interpreter `python3` really runs (its `sys.executable`).
fn python3() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH (the baseline of the start-up ratios)");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Wall time of `python3 -c pass`, in ms.
fn python_start(python: &Path) -> f64 {
    let t0 = Instant::now();
    let status = Command::new(python)
        .args(["-c", "pass"])
        .status()
        .expect("python3 -c pass");
    assert!(status.success());
    t0.elapsed().as_secs_f64() * 1e3
}

fn hundred_defs() -> Vec<PersistedDef> {
    (0..100)
        .map(|i| PersistedDef {
            name: format!("helper_{i}"),
            kind: "function".into(),
            source: format!(
                "def helper_{i}(path, limit={i}):\n    \"\"\"Helper number {i}.\"\"\"\n    items = [p for p in range(limit)]\n    return len(items), path\n"
            ),
            signature: format!("def helper_{i}(path, limit={i})"),
            doc: format!("Helper number {i}."),
        })
        .collect()
}

fn block(dir: &std::path::Path, code: &str) -> Block {
    Block {
        code: code.into(),
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let blocks: usize = arg("--blocks")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let runs: usize = arg("--runs").and_then(|v| v.parse().ok()).unwrap_or(20);
    let jupyter_python = arg("--jupyter-python");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_vis"));
    let dir = tempfile::tempdir().expect("tempdir");
    // Vis's caches (the entry-point index) live in this run's directory; the first start of
    // each figure fills them and is not counted.
    std::env::set_var("VIS_CACHE_DIR", dir.path().join("cache"));
    let python = python3();

    // 1. Round trip.
    let mut opts = WorkerOptions::new(bin.clone());
    opts.workspace = Some(dir.path().to_path_buf());
    let mut rt = Runtime::new(opts.clone(), vec![]);
    for _ in 0..200 {
        rt.exec(block(dir.path(), "x = 1"), &mut NoHostCalls)
            .expect("warm-up");
    }
    let mut samples = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        let t0 = Instant::now();
        let out = rt
            .exec(block(dir.path(), "x = 1"), &mut NoHostCalls)
            .expect("block");
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
        assert_eq!(out.output, "");
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let (vis_p50, vis_p99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));
    println!("block round trip (vis, {blocks} blocks): p50 {vis_p50:.0} µs, p99 {vis_p99:.0} µs");
    drop(rt);

    match jupyter_python {
        Some(py) => {
            let script =
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/jupyter_roundtrip.py");
            let out = Command::new(&py)
                .arg(&script)
                .arg(blocks.to_string())
                .output()
                .expect("run jupyter bench");
            if !out.status.success() {
                eprintln!(
                    "jupyter bench failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            } else {
                let v: serde_json::Value =
                    serde_json::from_slice(&out.stdout).expect("jupyter json");
                let (j50, j99) = (
                    v["p50_us"].as_f64().unwrap_or(0.0),
                    v["p99_us"].as_f64().unwrap_or(0.0),
                );
                println!(
                    "block round trip (jupyter, {blocks} cells): p50 {j50:.0} µs, p99 {j99:.0} µs"
                );
                println!(
                    "ratio jupyter/vis: p50 {:.1}x, p99 {:.1}x",
                    j50 / vis_p50,
                    j99 / vis_p99
                );
            }
        }
        None => println!(
            "jupyter comparison skipped: pass --jupyter-python (scripts/bench.sh sets it up)"
        ),
    }

    // 2. Cold start of `vis exec` in a session with 100 persisted definitions.
    let db = dir.path().join("vis.db");
    {
        let mut store = vis::store::Store::open(&db).expect("db");
        store
            .ensure_session("bench", &[dir.path().to_string_lossy().into_owned()])
            .expect("session");
        let turn = store
            .begin_turn("bench", vis::protocol::TurnKind::Exec, None)
            .expect("turn");
        let defs = hundred_defs();
        store
            .finish_iteration(
                &vis::store::IterationRecord {
                    session_id: "bench",
                    turn,
                    iteration: 1,
                    code: "",
                    output: "",
                    status: vis::protocol::IterationStatus::Ended(vis::protocol::Status::Ok),
                    started_at: 0,
                    duration_ms: 0,
                    exec_us: 0,
                    artifact: None,
                    worker_exit: None,
                    defs_set: &defs,
                    defs_deleted: &[],
                },
                None,
            )
            .expect("defs");
    }
    let mut cold = Vec::new();
    let mut cold_python = Vec::new();
    for i in 0..=runs {
        let py = python_start(&python);
        let t0 = Instant::now();
        let out = Command::new(&bin)
            .args([
                "--db",
                db.to_str().unwrap_or_default(),
                "exec",
                "--session",
                "bench",
                "helper_99('p')[0]",
            ])
            .current_dir(dir.path())
            .output()
            .expect("vis exec");
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        assert!(
            String::from_utf8_lossy(&out.stdout).ends_with("99\n"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        if i > 0 {
            cold.push(ms);
            cold_python.push(py);
        }
    }
    let (vis_ms, py_ms) = (median(cold), median(cold_python));
    println!(
        "vis exec cold start, 100 persisted defs: median {vis_ms:.1} ms; python3 -c pass: median {py_ms:.1} ms ({runs} runs each, alternating); ratio {:.2}x (target <= 1.5x)",
        vis_ms / py_ms
    );

    // 3. Kill + restart + restore of 100 definitions.
    let mut rt = Runtime::new(opts, hundred_defs());
    rt.exec(block(dir.path(), "x = 1"), &mut NoHostCalls)
        .expect("first");
    let mut restarts = Vec::new();
    let mut restart_python = Vec::new();
    for _ in 0..runs {
        restart_python.push(python_start(&python));
        let t0 = Instant::now();
        rt.kill_worker("bench");
        rt.start().expect("restart");
        restarts.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let out = rt
        .exec(block(dir.path(), "helper_42('p')[0]"), &mut NoHostCalls)
        .expect("after restart");
    assert!(out.output.ends_with("42\n"), "{}", out.output);
    let (vis_ms, py_ms) = (median(restarts), median(restart_python));
    println!(
        "worker kill + restart + restore of 100 defs: median {vis_ms:.1} ms; python3 -c pass: median {py_ms:.1} ms ({runs} runs each, alternating); ratio {:.2}x (target <= 1.5x)",
        vis_ms / py_ms
    );
}
