//! `vis serve` load test (issue 12), run by `scripts/bench.sh` or `cargo bench --bench serve`:
//! 50 sessions doing 20 turns each, concurrently, over HTTP + SSE against the fake provider on
//! loopback. Each turn is one block and two model requests. Reports the gateway overhead per
//! iteration (turn time minus model and block time, from the events' arrival), peak memory per
//! live worker, throughput, and verifies from the store that no iteration was lost or crossed
//! between sessions.
//!
//! Options: `--sessions N` (default 50), `--turns N` (default 20), `--nodes N` (default 1):
//! N nodes (servers with their own registry) over the one database file; session i is made
//! on node i mod N and its turn t goes through node (i + t) mod N, as behind a load balancer
//! that does not route by session, so most turns are proxied to the node holding the lease.
//! `--db URL`: an empty PostgreSQL database instead of a SQLite file.
//!
//! `--kill`: the time from a node's death to its sessions being served again, on real
//! `vis serve` processes (`serve/kill.rs`).

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "../tests/it/support/fake_provider.rs"]
mod fake_provider;
#[path = "serve/kill.rs"]
mod kill;
#[path = "../tests/it/support/procs.rs"]
mod procs;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_provider::{FakeProvider, Reply};
use futures::StreamExt;
use serde_json::{json, Value};
use vis::gateway::ChatSettings;
use vis::providers::ProviderKind;
use vis::runtime::WorkerOptions;
use vis::serve::{
    Access, Registry, RegistryOptions, ServeOptions, ServeProviders, ServeToken, SettingsFor,
    WorkspacePolicy,
};

/// `--db postgres://…` measures a PostgreSQL store (an empty database); else a SQLite file in
/// `dir`.
fn db_arg(dir: &Path) -> PathBuf {
    let args: Vec<String> = std::env::args().collect();
    match args
        .iter()
        .position(|a| a == "--db")
        .and_then(|i| args.get(i + 1))
    {
        Some(url) => PathBuf::from(url),
        None => dir.join("vis.db"),
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// PSS in KiB (shared pages split between their users) of every worker process: the
/// launcher, init and interpreter of each live worker.
fn worker_rss() -> Vec<u64> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        // `vis worker …`: the worker's own processes (launcher, init, interpreter).
        if cmd.split(|b| *b == 0).nth(1) != Some(&b"worker"[..]) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(e.path().join("smaps_rollup")) else {
            continue;
        };
        if let Some(kb) = status
            .lines()
            .find(|l| l.starts_with("Pss:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<u64>().ok())
        {
            out.push(kb);
        }
    }
    out
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if std::env::args().any(|a| a == "--kill") {
        kill::run();
        return;
    }
    let sessions = arg("--sessions", 50);
    let turns = arg("--turns", 20);
    let nodes = arg("--nodes", 1).max(1);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let fake = FakeProvider::start();
    // Reply by where the conversation stands: a block after the person's message, an answer
    // after the block's result. The block prints its session and turn.
    fake.respond_with(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let sid = body["prompt_cache_key"].as_str().unwrap_or("?").to_string();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let usage = vis::protocol::Usage {
            input_tokens: Some(1000),
            cached_tokens: Some(900),
            cache_creation_tokens: None,
            output_tokens: Some(10),
        };
        if last["role"] == "tool" {
            Reply::openai().text("Done.").usage(usage).build()
        } else {
            let text = last["content"].as_str().unwrap_or("").to_string();
            let code = format!("print({:?})", format!("{sid}|{text}"));
            Reply::openai()
                .tool_call("c", "python_execution", &json!({"code": code}).to_string())
                .usage(usage)
                .build()
        }
    });
    let mut provider = fake.settings(ProviderKind::OpenAi);
    provider.request_timeout = Duration::from_secs(120);
    let program = PathBuf::from(env!("CARGO_BIN_EXE_vis-worker"));
    let config = dir.path().join("config");
    let settings_for: SettingsFor = Arc::new(move |provider, workspace| {
        let mut worker = WorkerOptions::new(program.clone());
        worker.workspace = Some(workspace.into());
        worker.config_dir = Some(config.clone());
        Ok(ChatSettings {
            cache_prices: vis::providers::pricing::CachePrices::builtin(
                provider.kind,
                &provider.model,
            ),
            checkpoints: Default::default(),
            images: Default::default(),
            provider,
            worker,
            max_iterations: 100,
            max_output_tokens: 1000,
            thinking_budget: None,
            block_timeout: Duration::from_secs(120),
            output_limit: 20_000,
            catalog_budget: 2000,
            folding: Default::default(),
        })
    });
    let registries: Vec<Arc<Registry>> = (0..nodes)
        .map(|_| {
            Arc::new(Registry::new(RegistryOptions {
                db: db.clone(),
                providers: ServeProviders::new(provider.clone(), Vec::new()),
                settings_for: settings_for.clone(),
                workspaces: WorkspacePolicy::for_server(&[], &db),
                max_live_workers: sessions,
                idle_park_after: Duration::from_secs(3600),
                event_log_bytes: vis::serve::DEFAULT_LOG_BYTES,
            }))
        })
        .collect();
    let token = ServeToken::generate().unwrap();
    let bearer = format!("Bearer {}", token.as_str());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut stops = Vec::new();
    let mut servers = Vec::new();
    let mut urls = Vec::new();
    for registry in &registries {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        servers.push(rt.spawn(vis::serve::serve_on(
            listener,
            ServeOptions {
                access: Arc::new(Access::new(token.clone(), None, addr.port())),
                registry: registry.clone(),
                grace: Duration::from_secs(5),
                limits: Default::default(),
                node: Default::default(),
            },
            async move {
                let _ = stop_rx.await;
            },
        )));
        stops.push(stop_tx);
        urls.push(format!("http://{addr}"));
    }
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let peak_rss = Arc::new(Mutex::new((0usize, 0u64, 0u64))); // (workers, total KiB, max KiB)
    let sampler = {
        let peak = peak_rss.clone();
        std::thread::spawn(move || {
            for _ in 0..100_000 {
                let rss = worker_rss();
                let total: u64 = rss.iter().sum();
                let mut p = peak.lock().unwrap();
                if total > p.1 {
                    *p = (rss.len(), total, rss.iter().copied().max().unwrap_or(0));
                }
                drop(p);
                std::thread::sleep(Duration::from_millis(200));
                if Arc::strong_count(&peak) == 1 {
                    break;
                }
            }
        })
    };
    let started = Instant::now();
    let overheads: Vec<f64> = rt.block_on(async {
        let mut auth = reqwest::header::HeaderMap::new();
        auth.insert("authorization", bearer.parse().unwrap());
        let http = reqwest::Client::builder()
            .default_headers(auth)
            .build()
            .unwrap();
        let mut tasks = Vec::new();
        for i in 0..sessions {
            let http = http.clone();
            let urls = urls.clone();
            let ws = ws.clone();
            tasks.push(tokio::spawn(async move {
                let resp = http
                    .post(format!("{}/api/sessions", urls[i % urls.len()]))
                    .header("content-type", "application/json")
                    .body(json!({"workspace": ws}).to_string())
                    .send()
                    .await
                    .unwrap();
                let body = resp.text().await.unwrap();
                let id = serde_json::from_str::<Value>(&body).unwrap()["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no session was created: {body}"))
                    .to_string();
                let mut overheads = Vec::new();
                let mut first = 0.0;
                for t in 0..turns {
                    use eventsource_stream::Eventsource;
                    let t0 = Instant::now();
                    let url = &urls[(i + t) % urls.len()];
                    let resp = http
                        .post(format!("{url}/api/sessions/{id}/turns"))
                        .header("content-type", "application/json")
                        .body(json!({"message": format!("turn {t}")}).to_string())
                        .send()
                        .await
                        .unwrap();
                    let mut events = resp.bytes_stream().eventsource();
                    let (mut model, mut block) = (Duration::ZERO, Duration::ZERO);
                    let mut open = Instant::now();
                    while let Some(Ok(ev)) = events.next().await {
                        match ev.event.as_str() {
                            "request_started" | "block_started" => open = Instant::now(),
                            "response_finished" => model += open.elapsed(),
                            "block_finished" => block += open.elapsed(),
                            "turn_finished" => break,
                            _ => {}
                        }
                    }
                    let total = t0.elapsed();
                    let overhead = total.saturating_sub(model + block).as_secs_f64() * 1000.0;
                    // The first turn also starts the worker and fixes the prompt prefix.
                    if t == 0 {
                        first = overhead;
                    } else {
                        overheads.push(overhead);
                    }
                }
                (id, overheads, first)
            }));
        }
        let mut all = Vec::new();
        let mut ids = Vec::new();
        let mut firsts = Vec::new();
        for t in tasks {
            let (id, o, first) = t.await.unwrap();
            ids.push(id);
            all.extend(o);
            firsts.push(first);
        }
        firsts.sort_by(|a, b| a.total_cmp(b));
        println!(
            "first turn of each session (worker start, catalog and prefix included): p50 {:.0} ms, p99 {:.0} ms",
            percentile(&firsts, 0.5),
            percentile(&firsts, 0.99)
        );
        // Verify from the store: every session has exactly its own iterations.
        let store = vis::store::Store::open(&db).unwrap();
        let mut lost = 0;
        let mut crossed = 0;
        for id in &ids {
            let its = store.iterations(id).unwrap();
            lost += turns.saturating_sub(its.len());
            crossed += its.iter().filter(|i| !i.output.starts_with(&format!("{id}|"))).count();
            let done = store.turns(id).unwrap().iter().filter(|t| t.status == "done").count();
            lost += turns.saturating_sub(done);
        }
        println!(
            "verified from the store: {} sessions × {turns} turns; {lost} iterations or turns lost, {crossed} crossed between sessions",
            ids.len()
        );
        all
    });
    let elapsed = started.elapsed();
    for stop in stops {
        let _ = stop.send(());
    }
    for server in servers {
        let _ = rt.block_on(server);
    }
    let (workers, total_kib, max_kib) = *peak_rss.lock().unwrap();
    drop(peak_rss);
    let _ = sampler.join();
    let mut sorted = overheads.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let iterations = sessions * turns;
    println!(
        "{nodes} node(s), {sessions} sessions × {turns} turns concurrently (1 block, 2 model requests per turn) in {:.1} s: {:.0} turns/s, {:.0} model requests/s",
        elapsed.as_secs_f64(),
        iterations as f64 / elapsed.as_secs_f64(),
        2.0 * iterations as f64 / elapsed.as_secs_f64()
    );
    println!(
        "gateway overhead per iteration after the first turn (turn time minus model and block, at the client, 2 cores shared by {sessions} sessions): p50 {:.2} ms, p99 {:.2} ms",
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99)
    );
    println!(
        "peak memory (PSS): {:.1} MiB per live worker ({} processes for {sessions} workers: launcher, init, interpreter; the largest process {:.1} MiB), {:.0} MiB in all",
        total_kib as f64 / sessions.max(1) as f64 / 1024.0,
        workers,
        max_kib as f64 / 1024.0,
        total_kib as f64 / 1024.0
    );
}
