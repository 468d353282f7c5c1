//! MCP benchmarks (issue 9), run by `scripts/bench.sh` or `cargo bench --bench mcp`:
//!
//! 1. a `python_execution {"code": "x = 1"}` round trip through `vis mcp`, timed by the official
//!    MCP Python SDK client, p50/p99, against the same block's round trip through the
//!    in-process `Runtime` (what `vis exec` and the gateway use), measured in the same run;
//! 2. one MCP tool call from a block (`fx.echo("x")` to the stdio fixture server, timed inside
//!    the block), p50/p99, against the same call made directly by the Python SDK client.
//!    Target: Vis adds at most 1 ms at p50.
//!
//! Options: `--calls N` (default 2000), `--python PATH` (a Python with the `mcp` package;
//! default `.test-venv/bin/python`, which `scripts/bench.sh` creates).

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

use serde_json::Value;
use vis::protocol::Block;
use vis::runtime::{NoHostCalls, Runtime, WorkerOptions};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn block(dir: &Path, code: &str) -> Block {
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
        timeout: Duration::from_secs(300),
        artifact_quota: vis::runtime::DEFAULT_ARTIFACT_QUOTA,
    }
}

fn json_line(out: &std::process::Output, what: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    match line.and_then(|l| serde_json::from_str(l).ok()) {
        Some(v) => v,
        None => {
            eprintln!(
                "{what} failed ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            std::process::exit(1);
        }
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
    let calls: usize = arg("--calls").and_then(|v| v.parse().ok()).unwrap_or(2000);
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = arg("--python")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join(".test-venv/bin/python"));
    if !python.exists() {
        eprintln!(
            "{} is missing: run scripts/bench.sh (it creates .test-venv with the MCP SDK) or pass --python PATH",
            python.display()
        );
        std::process::exit(2);
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_vis"));
    let client = repo.join("benches/mcp_client.py");
    let server = repo.join("tests/fixtures/mcp/server.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let plain_config = dir.path().join("plain");
    let mcp_config = dir.path().join("mcp");
    for d in [&ws, &plain_config, &mcp_config] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(
        mcp_config.join("config.toml"),
        format!(
            "[mcp.servers.fx]\ncommand = {:?}\nargs = [{:?}]\n",
            python.to_string_lossy(),
            server.to_string_lossy()
        ),
    )
    .expect("config");

    // 1a. The in-process round trip (Runtime::exec, as vis exec and the gateway run blocks).
    let mut opts = WorkerOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_vis-worker")));
    opts.workspace = Some(ws.clone());
    let mut rt = Runtime::new(opts, vec![]);
    for _ in 0..200 {
        rt.exec(block(&ws, "x = 1"), &mut NoHostCalls)
            .expect("warm-up");
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t0 = Instant::now();
        let o = rt
            .exec(block(&ws, "x = 1"), &mut NoHostCalls)
            .expect("block");
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
        assert_eq!(o.output, "");
    }
    rt.shutdown();
    samples.sort_by(|a, b| a.total_cmp(b));
    let (direct50, direct99) = (percentile(&samples, 0.5), percentile(&samples, 0.99));

    // 1b. The same block through `vis mcp`, timed by the Python SDK client.
    let out = Command::new(&python)
        .arg(&client)
        .args(["--n", &calls.to_string(), "--"])
        .arg(&bin)
        .arg("--db")
        .arg(dir.path().join("vis.db"))
        .args(["mcp", "--workspace"])
        .arg(&ws)
        .env("VIS_CONFIG_DIR", &plain_config)
        .env("VIS_HOME", dir.path().join("home"))
        .stderr(Stdio::piped())
        .output()
        .expect("vis mcp client");
    let via_mcp = json_line(&out, "the vis mcp round trip");
    let (mcp50, mcp99) = (
        via_mcp["p50_us"].as_f64().unwrap_or(0.0),
        via_mcp["p99_us"].as_f64().unwrap_or(0.0),
    );

    // 2a. One MCP tool call from a block, timed inside the block.
    let code = format!(
        "import json, time\nfor _ in range(200):\n    fx.echo('x')\nts = []\nfor _ in range({calls}):\n    t0 = time.perf_counter_ns()\n    fx.echo('x')\n    ts.append(time.perf_counter_ns() - t0)\nts.sort()\np = lambda q: ts[min(len(ts) - 1, round((len(ts) - 1) * q))] / 1000\nprint(json.dumps({{'p50_us': p(0.5), 'p99_us': p(0.99)}}))"
    );
    let out = Command::new(&bin)
        .arg("--db")
        .arg(dir.path().join("vis.db"))
        .args(["exec", "--session", "bench", "--workspace"])
        .arg(&ws)
        .arg(&code)
        .env("VIS_CONFIG_DIR", &mcp_config)
        .env("VIS_HOME", dir.path().join("home"))
        .stdin(Stdio::null())
        .output()
        .expect("vis exec");
    let from_block = json_line(&out, "the tool call from a block");
    let (block50, block99) = (
        from_block["p50_us"].as_f64().unwrap_or(0.0),
        from_block["p99_us"].as_f64().unwrap_or(0.0),
    );

    // 2b. The same call made directly by the Python SDK client.
    let out = Command::new(&python)
        .arg(&client)
        .args(["--n", &calls.to_string(), "--tool", "echo", "--"])
        .arg(&python)
        .arg(&server)
        .stderr(Stdio::piped())
        .output()
        .expect("direct client");
    let direct = json_line(&out, "the direct tool call");
    let (sdk50, sdk99) = (
        direct["p50_us"].as_f64().unwrap_or(0.0),
        direct["p99_us"].as_f64().unwrap_or(0.0),
    );

    println!("MCP benchmarks ({calls} calls each)");
    println!(
        "python_execution round trip through vis mcp (Python SDK client): p50 {mcp50:.0} µs, p99 {mcp99:.0} µs"
    );
    println!(
        "the same block through Runtime::exec (in process):                p50 {direct50:.0} µs, p99 {direct99:.0} µs"
    );
    println!(
        "  vis mcp adds p50 {:.0} µs (the SDK client, JSON-RPC over stdio, rmcp)",
        mcp50 - direct50
    );
    println!(
        "MCP tool call from a block (fx.echo, stdio fixture):             p50 {block50:.0} µs, p99 {block99:.0} µs"
    );
    println!(
        "the same call by the Python SDK client directly:                 p50 {sdk50:.0} µs, p99 {sdk99:.0} µs"
    );
    let added = block50 - sdk50;
    println!(
        "  Vis adds p50 {added:.0} µs (target ≤ 1000 µs): {}",
        if added <= 1000.0 { "met" } else { "NOT met" }
    );
}
