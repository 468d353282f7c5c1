//! Sub-session benchmarks (issue 27 §3), `cargo bench --bench spawn`:
//!
//! 1. the overhead of a sub-session: from the block's `spawn()` call to the child's first
//!    request arriving at the fake provider (target ≤ 10 ms each; median and p90), for a
//!    child with every tool and for one with `tools=["cat", "grep"]`;
//! 2. the input tokens of a 4-file review done with `spawn` (one child per file) against the
//!    same review done in the parent (four `cat` blocks): the raw input tokens summed over
//!    every request of every session involved (the gateway's o200k estimate of each request),
//!    and the parent's context growth (its last request's estimate less its first's).
//!
//! `SPAWN_ROUNDS` sets how many children the overhead is measured over (default 41).
//! `SPAWN_TRACE=1` prints where each child's start goes (`vis::trace` marks: the host call,
//! the child's records, its store and session, its turn, its request) and the median of
//! every step.
//!
//! Figures (docs/spawn.md, 2026-12-05, 2 cores, old and new builds alternated): every tool,
//! median 6.6–9.5 ms → 2.3–3.0 ms, p90 10.0–11.1 → 3.2–4.7 ms, max 10.4–14.4 → 4.9–10.2 ms
//! (once 15.4); `tools=["cat", "grep"]` median 8.5–11.1 → 2.5–3.2 ms, p90 11.6–17.7 →
//! 3.1–4.0 ms, max 12.6–18.9 → 4.1–8.8 ms. What changed: one HTTP client per process, the
//! request on its own task ahead of the worker's fork, a child's catalog rendered once per
//! parent, the store's log checkpointed when a child ends.
//!
//! 2026-12-06 (480 children per build, alternated): every tool median 2.45–2.99 ms, p90
//! 3.01–4.00 ms, max 3.19–6.57 ms (before: max 4.03–6.78); `tools=["cat", "grep"]` median
//! 2.73–3.29 ms, p90 3.28–3.99 ms, max 4.06–5.26 ms (before: p90 up to 5.41, max up to 9.03);
//! children over 5 ms 29 → 6, none now for the worker: its launch waits 10 ms for the request
//! to go out, and SQLite's lock waits start at 50 µs instead of 1 ms.

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "../tests/it/support/fake_provider.rs"]
mod fake_provider;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fake_provider::{FakeProvider, Reply};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use vis::gateway::{ChatSession, ChatSettings};
use vis::providers::ProviderKind;
use vis::runtime::WorkerOptions;
use vis::store::Store;

/// The `q` quantile (0..=1) of `xs`, nearest rank.
fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    xs[rank - 1]
}

fn settings(dir: &Path, fake: &FakeProvider) -> ChatSettings {
    let mut worker = WorkerOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_vis-worker")));
    worker.workspace = Some(dir.join("ws"));
    worker.config_dir = Some(dir.join("config"));
    worker.trusted = true;
    let mut provider = fake.settings(ProviderKind::OpenAi);
    provider.request_timeout = Duration::from_secs(60);
    ChatSettings {
        provider,
        worker,
        max_iterations: 100,
        max_output_tokens: 1000,
        thinking_budget: None,
        block_timeout: Duration::from_secs(60),
        output_limit: 20_000,
        catalog_budget: 2000,
        folding: Default::default(),
        cache_prices: vis::providers::pricing::CachePrices::builtin(
            ProviderKind::OpenAi,
            "fake-model",
        ),
        checkpoints: Default::default(),
        images: Default::default(),
    }
}

fn call(id: &str, code: &str) -> Reply {
    Reply::openai()
        .tool_call(id, "python_execution", &json!({"code": code}).to_string())
        .build()
}

fn text(t: &str) -> Reply {
    Reply::openai().text(t).build()
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn session(dir: &Path, fake: &FakeProvider, id: &str) -> ChatSession {
    let store = Store::open(&dir.join("vis.db")).unwrap();
    let roots = vec![dir.join("ws").to_string_lossy().into_owned()];
    ChatSession::create(store, &dir.join("vis.db"), id, roots, settings(dir, fake)).unwrap()
}

fn run(rt: &tokio::runtime::Runtime, s: &mut ChatSession, message: &str) {
    rt.block_on(async {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let end = s
            .run_turn(message, &tx, &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(end.status, vis::protocol::TurnStatus::Done, "{end:?}");
    });
}

/// 1: `spawn()` to the child's first request, `rounds` times (a new child each turn);
/// `tools` is the `spawn()` argument.
fn overhead(rt: &tokio::runtime::Runtime, rounds: usize, tools: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    let fake = FakeProvider::start();
    let arrivals: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut s = session(dir.path(), &fake, "bench-spawn");
    let mut overheads = Vec::new();
    let tracing = std::env::var_os("SPAWN_TRACE").is_some();
    vis::trace::enable(tracing);
    // Per child: every step's time after the block's spawn() call, in ms.
    let mut steps: Vec<Vec<(&'static str, f64)>> = Vec::new();
    for round in 0..rounds {
        // The parent's block, the child's answer (its arrival noted), the parent's answer.
        fake.push(call(
            &format!("p{round}"),
            &format!("import time\nt0 = time.time()\ns = spawn('BENCH child: answer ok', tools={tools})\nprint('T0', repr(t0))\ns.wait()"),
        ));
        let noted = arrivals.clone();
        fake.push_fn(move |_| {
            noted.lock().unwrap().push(now_secs());
            text("ok")
        });
        fake.push(text("done"));
        run(rt, &mut s, "spawn one");
        let body = fake.requests()[fake.request_count() - 1].body_str();
        // The parent's request carries its whole history: this round's block printed the last.
        let t0: f64 = body
            .rsplit("T0 ")
            .next()
            .and_then(|rest| {
                rest.split(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .next()
            })
            .and_then(|n| n.parse().ok())
            .expect("the block printed its spawn time");
        let arrived = arrivals.lock().unwrap()[round];
        overheads.push((arrived - t0) * 1000.0);
        if tracing {
            // This round's child is the only sub-session: its marks up to its first request.
            let marks = vis::trace::take();
            let child = marks
                .iter()
                .find(|m| m.step == "host: spawn call")
                .map(|m| m.key.clone())
                .unwrap_or_default();
            let mut marks: Vec<(&'static str, f64)> = marks
                .into_iter()
                .filter(|m| m.key == child && m.at <= arrived)
                .map(|m| (m.step, (m.at - t0) * 1000.0))
                .collect();
            marks.sort_by(|a, b| a.1.total_cmp(&b.1));
            marks.push(("provider: first request", (arrived - t0) * 1000.0));
            let line: Vec<String> = marks
                .iter()
                .map(|(step, ms)| format!("{step} {ms:.2}"))
                .collect();
            eprintln!("round {round}: {}", line.join(" | "));
            steps.push(marks);
        }
    }
    vis::trace::enable(false);
    if tracing && steps.len() > 1 {
        print_steps(&steps[1..]);
    }
    rt.block_on(s.shutdown());
    // The first child pays for the parent's first-use costs; report it apart.
    let first = overheads[0];
    let rest = &overheads[1..];
    println!(
        "spawn(tools={tools}) → child's first request: first {first:.2} ms; then median {:.2} ms, p90 {:.2} ms, max {:.2} ms over {} children",
        quantile(rest, 0.5),
        quantile(rest, 0.9),
        quantile(rest, 1.0),
        rest.len()
    );
}

/// The median time of each step after `spawn()` and after the step before it, over the
/// children (steps in the order of their median time).
fn print_steps(children: &[Vec<(&'static str, f64)>]) {
    let mut names: Vec<&'static str> = Vec::new();
    for marks in children {
        for (step, _) in marks {
            if !names.contains(step) {
                names.push(step);
            }
        }
    }
    let mut rows: Vec<(&'static str, f64, f64)> = names
        .iter()
        .map(|name| {
            let mut at = Vec::new();
            let mut gap = Vec::new();
            for marks in children {
                if let Some(i) = marks.iter().position(|(s, _)| s == name) {
                    at.push(marks[i].1);
                    gap.push(marks[i].1 - if i == 0 { 0.0 } else { marks[i - 1].1 });
                }
            }
            (*name, quantile(&at, 0.5), quantile(&gap, 0.5))
        })
        .collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    eprintln!(
        "step (median over {} children): ms after spawn(), ms after the step before",
        children.len()
    );
    for (name, at, gap) in rows {
        eprintln!("  {name:<34} {at:>7.2} {gap:>7.2}");
    }
}

/// A Python file of about `lines` lines that reads like real code.
fn source(k: usize, lines: usize) -> String {
    let mut s = format!("\"\"\"Module {k}: order handling.\"\"\"\n\nimport json\n\n");
    let mut n = 0;
    while s.lines().count() < lines {
        n += 1;
        s.push_str(&format!(
            "def total_{n}(items, discount=0.{k}):\n    \"\"\"Sum of the order's items after the discount.\"\"\"\n    subtotal = sum(i['price'] * i['qty'] for i in items)\n    if subtotal > {n}00:\n        subtotal -= subtotal * discount\n    return round(subtotal, 2)\n\n"
        ));
    }
    s
}

/// What one way of doing the review cost: the requests' o200k estimates.
struct Spent {
    /// Summed over every request of every session in the store.
    total: i64,
    requests: usize,
    /// The parent's first and last request.
    parent_first: i64,
    parent_last: i64,
}

fn spent(dir: &Path, parent: &str) -> Spent {
    let store = Store::open(&dir.join("vis.db")).unwrap();
    let mut total = 0;
    let mut requests = 0;
    for s in store.list_sessions().unwrap() {
        for r in store.requests(&s.id).unwrap() {
            total += r.estimate_tokens;
            requests += 1;
        }
    }
    let own = store.requests(parent).unwrap();
    Spent {
        total,
        requests,
        parent_first: own.first().map_or(0, |r| r.estimate_tokens),
        parent_last: own.last().map_or(0, |r| r.estimate_tokens),
    }
}

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} input tokens over {} requests; the parent's context {} → {} (+{})",
            self.total,
            self.requests,
            self.parent_first,
            self.parent_last,
            self.parent_last - self.parent_first
        )
    }
}

/// 2: a 4-file review in the parent, and with one child per file.
fn review_tokens(rt: &tokio::runtime::Runtime) {
    let files = 4;
    let prepare = || {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("config")).unwrap();
        for k in 0..files {
            std::fs::write(dir.path().join(format!("ws/mod{k}.py")), source(k, 300)).unwrap();
        }
        dir
    };
    // In the parent: one block per file, then the answer.
    let dir = prepare();
    let fake = FakeProvider::start();
    for k in 0..files {
        fake.push(call(&format!("r{k}"), &format!("cat('mod{k}.py')")));
    }
    fake.push(text(
        "mod0..3: the discount applies only above a threshold; no other bugs",
    ));
    let mut s = session(dir.path(), &fake, "bench-inline");
    run(rt, &mut s, "review the four modules");
    rt.block_on(s.shutdown());
    let inline = spent(dir.path(), "bench-inline");
    // With spawn: the parent fans out; each child reads its file and answers in one line.
    let dir = prepare();
    let fake = FakeProvider::start();
    for k in 0..files {
        fake.conversation(
            &format!("REVIEW mod{k}.py"),
            vec![
                call(&format!("c{k}"), &format!("cat('mod{k}.py')")),
                text(&format!(
                    "mod{k}.py: the discount applies only above a threshold"
                )),
            ],
        );
    }
    fake.push(call(
        "p",
        "subs = [spawn(f'REVIEW mod{k}.py for bugs; answer in one line') for k in range(4)]\nfor s in subs:\n    print(s.wait())",
    ));
    fake.push(text(
        "mod0..3: the discount applies only above a threshold; no other bugs",
    ));
    let mut s = session(dir.path(), &fake, "bench-spawned");
    run(rt, &mut s, "review the four modules");
    rt.block_on(s.shutdown());
    let spawned = spent(dir.path(), "bench-spawned");
    println!("4-file review (300-line files), in the parent: {inline}");
    println!("4-file review (300-line files), with spawn:    {spawned}");
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rounds = std::env::var("SPAWN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(41);
    overhead(&rt, rounds, "'all'");
    overhead(&rt, rounds, "['cat', 'grep']");
    review_tokens(&rt);
}
