//! Gateway benchmarks (issue 7), run by `scripts/bench.sh` or `cargo bench --bench gateway`:
//!
//! 1. request assembly for a session of 1,000 iterations (~200k o200k tokens), both providers:
//!    the first request, then each request after one more iteration (target ≤ 10 ms);
//! 2. gateway overhead per iteration against the fake provider on loopback, excluding the model
//!    (request start to response) and the block (block start to result) (target ≤ 2 ms);
//! 3. resume of a 1,000-iteration session up to its first request arriving at the provider,
//!    in process and as a whole `vis chat --resume -m` process (target ≤ 300 ms).

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
use std::time::{Duration, Instant};

use fake_provider::{FakeProvider, Reply};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use vis::gateway::assemble::{Assembler, Wire};
use vis::gateway::history::{estimate_item, Entry};
use vis::gateway::{ChatSession, ChatSettings};
use vis::protocol::{AssistantMessage, ContentBlock, Event, HistoryItem, ToolCall, Usage};
use vis::providers::{anthropic_request, openai_request, ProviderKind};
use vis::runtime::WorkerOptions;
use vis::store::Store;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn max(xs: &[f64]) -> f64 {
    xs.iter().cloned().fold(0.0, f64::max)
}

/// ~200 tokens of tool output that looks like code and test output.
fn output(i: usize) -> String {
    let mut s = String::new();
    for k in 0..8 {
        s.push_str(&format!(
            "{}:{}|    result_{i}_{k} = compute(items[{k}], limit={i}) # check the edge case\n",
            40 + k,
            ["kodu", "mexa", "bate", "lino"][k % 4]
        ));
    }
    s
}

fn iteration(i: usize) -> [Entry; 2] {
    let call = HistoryItem::Assistant(AssistantMessage {
        blocks: vec![
            ContentBlock::Text {
                text: format!("Step {i}: read the next part."),
            },
            ContentBlock::ToolCall(ToolCall {
                id: format!("call_{i}"),
                name: "python_execution".into(),
                arguments: json!({"code": format!("cat('src/module_{i}.py', {i}, {})", i + 40)})
                    .to_string(),
            }),
        ],
        reasoning: None,
    });
    let result = HistoryItem::ToolResult {
        call_id: format!("call_{i}"),
        output: output(i),
        is_error: false,
        images: Vec::new(),
    };
    let entry = |seq: usize, item: HistoryItem| Entry {
        seq: seq as i64,
        turn: 1 + (i / 100) as i64,
        iteration: None,
        tokens: estimate_item(&item),
        item,
        meta: None,
    };
    [entry(2 * i + 1, call), entry(2 * i + 2, result)]
}

fn bench_assembly() {
    let tool = vis::protocol::tool_spec();
    let system = "x ".repeat(1500);
    let mut entries = vec![Entry {
        seq: 0,
        turn: 1,
        iteration: None,
        item: HistoryItem::User {
            text: "Fix the failing tests.".into(),
        },
        tokens: 10,
        meta: None,
    }];
    for i in 0..1000 {
        entries.extend(iteration(i));
    }
    let tokens: u64 = entries.iter().map(|e| e.tokens).sum();
    println!("1. request assembly, 1,000 iterations, {tokens} o200k tokens of history:");
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let mut assembler = match kind {
            ProviderKind::OpenAi => Assembler::new(
                Wire::OpenAi,
                openai_request::header(&openai_request::OpenAiRequest {
                    model: "m",
                    session_id: "s-bench",
                    system: &system,
                    tool: &tool,
                    max_tokens: None,
                    stream: true,
                    tool_choice: None,
                }),
            ),
            ProviderKind::Anthropic => Assembler::new(
                Wire::Anthropic {
                    keep_thinking: false,
                },
                anthropic_request::header(&anthropic_request::AnthropicRequest {
                    model: "m",
                    system: &system,
                    tool: &tool,
                    max_tokens: 1000,
                    thinking_budget: None,
                    stream: true,
                    tool_choice: None,
                }),
            ),
        };
        let mut all = entries.clone();
        let start = Instant::now();
        let first = assembler.body(&all);
        let first_ms = start.elapsed().as_secs_f64() * 1000.0;
        let mut times = Vec::new();
        for i in 1000..1100 {
            all.extend(iteration(i));
            let start = Instant::now();
            let body = assembler.body(&all);
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(body);
        }
        println!(
            "   {kind:<9} first {first_ms:.2} ms ({} KB), then median {:.2} ms, max {:.2} ms per request (target ≤ 10 ms)",
            first.len() / 1024,
            median(times.clone()),
            max(&times)
        );
    }
}

fn settings(dir: &Path, fake: &FakeProvider, kind: ProviderKind) -> ChatSettings {
    let mut worker = WorkerOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_vis-worker")));
    worker.workspace = Some(dir.join("ws"));
    worker.config_dir = Some(dir.join("config"));
    let mut provider = fake.settings(kind);
    provider.request_timeout = Duration::from_secs(60);
    ChatSettings {
        provider,
        worker,
        max_iterations: 10_000,
        max_output_tokens: 1000,
        thinking_budget: None,
        block_timeout: Duration::from_secs(60),
        output_limit: 20_000,
        catalog_budget: 2000,
        folding: Default::default(),
        cache_prices: vis::providers::pricing::CachePrices::builtin(kind, "fake-model"),
        checkpoints: Default::default(),
        images: Default::default(),
    }
}

/// The fake provider answers `n` tool calls (block `code`), then a final answer, forever.
fn script(fake: &FakeProvider, n: usize, code: &'static str) {
    let count = Arc::new(Mutex::new(0usize));
    fake.respond_with(move |_| {
        let mut c = count.lock().unwrap();
        *c += 1;
        let usage = Usage {
            input_tokens: Some(1000),
            cached_tokens: Some(900),
            cache_creation_tokens: None,
            output_tokens: Some(10),
        };
        if *c % (n + 1) == 0 {
            Reply::openai().text("done").usage(usage).build()
        } else {
            Reply::openai()
                .tool_call(
                    &format!("c{c}"),
                    "python_execution",
                    &json!({"code": code}).to_string(),
                )
                .usage(usage)
                .build()
        }
    });
}

fn bench_overhead(rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let fake = FakeProvider::start();
    let n = 300;
    script(&fake, n, "1");
    let db = dir.path().join("vis.db");
    let store = Store::open(&db).unwrap();
    let roots = vec![dir.path().join("ws").to_string_lossy().into_owned()];
    let mut session = ChatSession::create(
        store,
        &db,
        "s-overhead",
        roots,
        settings(dir.path(), &fake, ProviderKind::OpenAi),
    )
    .unwrap();
    let (total, model, blocks) = rt.block_on(async {
        // Warm the worker and the encoder outside the measurement.
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        script(&fake, 1, "1");
        session
            .run_turn("warm up", &tx, &CancellationToken::new())
            .await
            .unwrap();
        script(&fake, n, "1");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        let stamps = tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some(e) = rx.recv().await {
                out.push((Instant::now(), e));
            }
            out
        });
        let start = Instant::now();
        session
            .run_turn("go", &tx, &CancellationToken::new())
            .await
            .unwrap();
        let total = start.elapsed();
        drop(tx);
        let stamps = stamps.await.unwrap();
        let (mut model, mut blocks) = (Duration::ZERO, Duration::ZERO);
        let mut open: Option<Instant> = None;
        for (at, e) in &stamps {
            match e {
                Event::RequestStarted { .. } | Event::BlockStarted { .. } => open = Some(*at),
                Event::ResponseFinished { .. } => model += *at - open.take().unwrap_or(*at),
                Event::BlockFinished { .. } => blocks += *at - open.take().unwrap_or(*at),
                _ => {}
            }
        }
        session.shutdown().await;
        (total, model, blocks)
    });
    let overhead = total.saturating_sub(model + blocks);
    println!(
        "2. gateway overhead per iteration ({n} iterations, fake provider on loopback): {:.3} ms (target ≤ 2 ms); per iteration the model took {:.2} ms and the block {:.2} ms",
        overhead.as_secs_f64() * 1000.0 / n as f64,
        model.as_secs_f64() * 1000.0 / (n + 1) as f64,
        blocks.as_secs_f64() * 1000.0 / n as f64,
    );
}

fn bench_resume(rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let fake = FakeProvider::start();
    let db = dir.path().join("vis.db");
    let id = "s-resume";
    {
        // 10 turns of 100 iterations, each printing ~200 tokens.
        script(&fake, 100, "print('\\n'.join(f'{i}: value = compute(items[{i}], limit=40) # edge case' for i in range(8)))");
        let store = Store::open(&db).unwrap();
        let roots = vec![dir.path().join("ws").to_string_lossy().into_owned()];
        let mut session = ChatSession::create(
            store,
            &db,
            id,
            roots,
            settings(dir.path(), &fake, ProviderKind::OpenAi),
        )
        .unwrap();
        rt.block_on(async {
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            for t in 0..10 {
                session
                    .run_turn(&format!("turn {t}"), &tx, &CancellationToken::new())
                    .await
                    .unwrap();
            }
            session.shutdown().await;
        });
    }
    let iterations = Store::open(&db).unwrap().iterations(id).unwrap().len();
    // The first request of each resume is recorded with the time it arrived.
    let arrived: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let mut in_process = Vec::new();
    let mut whole = Vec::new();
    for _ in 0..5 {
        let mark = arrived.clone();
        fake.push_fn(move |_| {
            *mark.lock().unwrap() = Some(Instant::now());
            Reply::openai().text("resumed").build()
        });
        let start = Instant::now();
        rt.block_on(async {
            let store = Store::open(&db).unwrap();
            let (mut session, _) = ChatSession::open(
                store,
                &db,
                id,
                settings(dir.path(), &fake, ProviderKind::OpenAi),
            )
            .unwrap();
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            session
                .run_turn("and now?", &tx, &CancellationToken::new())
                .await
                .unwrap();
            session.shutdown().await;
        });
        let at = arrived.lock().unwrap().take().unwrap();
        in_process.push((at - start).as_secs_f64() * 1000.0);

        let mark = arrived.clone();
        fake.push_fn(move |_| {
            *mark.lock().unwrap() = Some(Instant::now());
            Reply::openai().text("resumed").build()
        });
        let start = Instant::now();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_vis"))
            .arg("--db")
            .arg(&db)
            .args([
                "chat",
                "--resume",
                id,
                "--provider",
                "openai",
                "--model",
                "fake-model",
                "--base-url",
            ])
            .arg(fake.base_url(ProviderKind::OpenAi))
            .args(["-m", "and now?"])
            .env("VIS_CONFIG_DIR", dir.path().join("config"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        let at = arrived.lock().unwrap().take().unwrap();
        whole.push((at - start).as_secs_f64() * 1000.0);
    }
    println!(
        "3. resume of a {iterations}-iteration session to its first request: median {:.1} ms in process, {:.1} ms as a whole `vis chat --resume -m` process (target ≤ 300 ms)",
        median(in_process),
        median(whole)
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    bench_assembly();
    bench_overhead(&rt);
    bench_resume(&rt);
}
