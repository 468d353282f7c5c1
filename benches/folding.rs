//! Folding benchmarks (issue 8), run by `scripts/bench.sh` or `cargo bench --bench folding`:
//!
//! 1. the fold receipt for a ~100k-token range, through `ChatSession::fold` (select, apply,
//!    estimates, the store write) (target ≤ 20 ms);
//! 2. request assembly for 1,000 iterations with 50 folds, per request after the first, and
//!    the first request after a new fold (target ≤ 10 ms);
//! 3. token economy: a scripted 30-turn coding session on a generated Python project (read,
//!    grep, edit by address, run pytest) replayed through the fake provider twice, without
//!    folds and with the model folding each settled turn as the system prompt teaches. The
//!    fake provider reports input tokens (o200k of the body) and cached tokens (o200k of the
//!    bytes shared with the previous request). Goal: ≥ 40% fewer input tokens with folds, and
//!    a cache share over 80% outside the requests right after a fold.

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

use fake_provider::{shared_prefix_len, FakeProvider, Reply};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use vis::catalog::count_tokens;
use vis::gateway::assemble::{Assembler, Wire};
use vis::gateway::fold;
use vis::gateway::history::{estimate_item, Entry};
use vis::gateway::{ChatSession, ChatSettings};
use vis::protocol::FoldSpan as Span;
use vis::protocol::{AssistantMessage, ContentBlock, HistoryItem, ToolCall, Usage};
use vis::providers::{openai_request, ProviderKind};
use vis::runtime::WorkerOptions;
use vis::store::Store;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[xs.len() / 2]
}

fn settings(dir: &Path, fake: &FakeProvider) -> ChatSettings {
    let mut worker = WorkerOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_vis-worker")));
    worker.workspace = Some(dir.join("ws"));
    worker.config_dir = Some(dir.join("config"));
    let mut provider = fake.settings(ProviderKind::OpenAi);
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
        cache_prices: vis::providers::pricing::CachePrices::builtin(
            ProviderKind::OpenAi,
            "fake-model",
        ),
        checkpoints: Default::default(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn bench_receipt(rt: &tokio::runtime::Runtime) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    let fake = FakeProvider::start();
    let calls = Arc::new(Mutex::new(0usize));
    let per_turn = 850;
    let c = calls.clone();
    fake.respond_with(move |_| {
        let mut n = c.lock().unwrap();
        *n += 1;
        if *n % (per_turn + 1) == 0 {
            Reply::openai().text("done").build()
        } else {
            let code = "print('\\n'.join(f'{i}: total = compute(items[{i}], limit=40)  # the edge case' for i in range(14)))";
            Reply::openai().tool_call(&format!("c{n}"), "python_execution", &json!({"code": code}).to_string()).build()
        }
    });
    let db = dir.path().join("vis.db");
    let store = Store::open(&db).unwrap();
    let roots = vec![dir.path().join("ws").to_string_lossy().into_owned()];
    let mut s = settings(dir.path(), &fake);
    // Large limits: this measures a fold the model asks for, not the automatic one.
    s.folding.input_limit = Some(10_000_000);
    s.folding.auto_compress_above = Some(10_000_000);
    let mut session = ChatSession::create(store, &db, "s-receipt", roots, s).unwrap();
    let mut times = Vec::new();
    let mut removed = Vec::new();
    rt.block_on(async {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        for t in 1..=3 {
            let end = session
                .run_turn(&format!("turn {t}"), &tx, &CancellationToken::new())
                .await
                .unwrap();
            assert_eq!(end.status, vis::protocol::TurnStatus::Done, "{end:?}");
        }
        session.shutdown().await;
    });
    for t in 1..=3 {
        let start = Instant::now();
        let receipt = session
            .fold(
                &format!("t{t}"),
                "what that turn found, in a sentence or two",
            )
            .unwrap();
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        removed.push(receipt.tokens_removed);
    }
    println!(
        "1. fold receipt for a {}-token range ({per_turn} iterations), store write included: median {:.2} ms (target ≤ 20 ms)",
        removed[0],
        median(times)
    );
}

fn iteration(i: usize) -> [Entry; 2] {
    let call = HistoryItem::Assistant(AssistantMessage {
        blocks: vec![ContentBlock::ToolCall(ToolCall {
            id: format!("call_{i}"),
            name: "python_execution".into(),
            arguments: json!({"code": format!("cat('src/m{i}.py', 1, 40)")}).to_string(),
        })],
        reasoning: None,
    });
    let output: String = (0..8)
        .map(|k| {
            format!(
                "{}:kodu|    value_{i}_{k} = compute(items[{k}], limit={i})  # edge\n",
                k + 1
            )
        })
        .collect();
    let result = HistoryItem::ToolResult {
        call_id: format!("call_{i}"),
        output,
        is_error: false,
    };
    let e = |seq: usize, item: HistoryItem| Entry {
        seq: seq as i64,
        turn: 1,
        iteration: Some(i as i64 + 1),
        tokens: estimate_item(&item),
        item,
        meta: None,
    };
    [e(2 * i + 1, call), e(2 * i + 2, result)]
}

fn bench_assembly_with_folds() {
    let tool = vis::protocol::tool_spec();
    let system = "x ".repeat(1500);
    let header = openai_request::header(&openai_request::OpenAiRequest {
        model: "m",
        session_id: "s",
        system: &system,
        tool: &tool,
        max_tokens: None,
        stream: true,
        tool_choice: None,
    });
    let mut view: Vec<Entry> = vec![Entry {
        seq: 0,
        turn: 1,
        iteration: None,
        item: HistoryItem::User { text: "go".into() },
        tokens: 5,
        meta: None,
    }];
    for i in 0..1000 {
        view.extend(iteration(i));
    }
    // 50 folds of 10 iterations each, spread over the first 1,000 iterations.
    for f in 0..50i64 {
        let first = 1 + f * 20 * 2;
        let span = Span {
            first_seq: first,
            last_seq: first + 19,
            label: format!("t1/i{}-i{}", f * 20 + 1, f * 20 + 10),
            text: format!(
                "[vis] fold {} replaces t1/i{}-i{}: read ten modules, nothing to change there.",
                f + 1,
                f * 20 + 1,
                f * 20 + 10
            ),
        };
        fold::apply(&mut view, f + 1, &[span]);
    }
    let mut assembler = Assembler::new(Wire::OpenAi, header);
    let start = Instant::now();
    std::hint::black_box(assembler.body(&view));
    let first = start.elapsed().as_secs_f64() * 1000.0;
    let mut times = Vec::new();
    for i in 1000..1100 {
        view.extend(iteration(i));
        let start = Instant::now();
        std::hint::black_box(assembler.body(&view));
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    // A new fold near the start: everything after it is encoded again.
    let span = Span {
        first_seq: 29,
        last_seq: 30,
        label: "t1/i15".into(),
        text: "[vis] fold 51 replaces t1/i15: nothing".into(),
    };
    let changed = fold::apply(&mut view, 51, &[span]).unwrap();
    assembler.invalidate_from(changed);
    let start = Instant::now();
    std::hint::black_box(assembler.body(&view));
    let after_fold = start.elapsed().as_secs_f64() * 1000.0;
    println!(
        "2. assembly, 1,000+ iterations with 50 folds: first {first:.2} ms, then median {:.3} ms per request (target ≤ 10 ms); the request right after a new early fold {after_fold:.2} ms",
        median(times)
    );
}

/// A small Python project with tests: eight modules, one test file each.
fn make_project(ws: &Path) {
    std::fs::create_dir_all(ws.join("pkg")).unwrap();
    std::fs::create_dir_all(ws.join("tests")).unwrap();
    std::fs::write(ws.join("pkg/__init__.py"), "").unwrap();
    for m in 0..8 {
        let mut src = format!("\"\"\"Module {m}: arithmetic helpers.\"\"\"\n\n");
        for f in 0..12 {
            src.push_str(&format!(
                "def f{m}_{f}(items, limit={f}):\n    \"\"\"Sum the first {f} items above the limit.\"\"\"\n    total = 0\n    for item in items[:{f}]:\n        if item > limit:\n            total += item\n    return total + {m}\n\n"
            ));
        }
        std::fs::write(ws.join(format!("pkg/m{m}.py")), src).unwrap();
        let mut test = format!("from pkg.m{m} import *\n\n");
        for f in 0..12 {
            test.push_str(&format!(
                "def test_f{m}_{f}():\n    assert f{m}_{f}([100] * 20) == 100 * {f} + {m}\n\n"
            ));
        }
        std::fs::write(ws.join(format!("tests/test_m{m}.py")), test).unwrap();
    }
}

/// The blocks of turn `t` (1-based): read a module, grep, edit by address, run its tests.
fn turn_blocks(t: usize, fold: bool) -> Vec<String> {
    let m = (t - 1) % 8;
    let mut read = format!("print(cat('pkg/m{m}.py'))");
    if fold && t >= 2 {
        read = format!(
            "fold_session('t{}', 'Turn {} renamed the total variable in f{}_{} of pkg/m{}.py to acc; its tests pass.')\n{read}",
            t - 1,
            t - 1,
            (t - 2) % 8,
            (t - 2) % 12,
            (t - 2) % 8
        );
    }
    vec![
        read,
        format!("r = grep(r'total', 'pkg/m{m}.py')\nprint(r)"),
        format!(
            "r = grep(r'^    total = 0$', 'pkg/m{m}.py')\nm = r.matches[0]\nprint(patch('pkg/m{m}.py', [(m.address, '    total = 0  # accumulator')]))"
        ),
        format!("print(sh('python3 -m pytest -q tests/test_m{m}.py'))"),
    ]
}

/// Per request: input tokens, cached tokens, whether it came right after a fold.
type Stats = (Vec<u64>, Vec<u64>, Vec<bool>);

struct Replay {
    inputs: Vec<u64>,
    cached: Vec<u64>,
    after_fold: Vec<bool>,
    measured: Vec<i64>,
}

fn replay(rt: &tokio::runtime::Runtime, fold: bool) -> Replay {
    let dir = tempfile::tempdir().unwrap();
    make_project(&dir.path().join("ws"));
    let fake = FakeProvider::start();
    let turns = 30;
    let script: Vec<Vec<String>> = (1..=turns).map(|t| turn_blocks(t, fold)).collect();
    let counter = Arc::new(Mutex::new((0usize, 0usize))); // (turn index, block index)
    let prev: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
    let stats: Arc<Mutex<Stats>> = Arc::new(Mutex::new(Default::default()));
    let (c, p, s) = (counter.clone(), prev.clone(), stats.clone());
    fake.respond_with(move |req| {
        let body = req.body.to_vec();
        let mut prev = p.lock().unwrap();
        let shared = shared_prefix_len(&prev, &body);
        let input = count_tokens(&String::from_utf8_lossy(&body)).unwrap() as u64;
        let cached = count_tokens(&String::from_utf8_lossy(&body[..shared])).unwrap() as u64;
        *prev = body;
        let mut st = s.lock().unwrap();
        let mut ctr = c.lock().unwrap();
        let (t, b) = *ctr;
        // The request right after a block that folded.
        st.2.push(fold && b == 1 && t >= 1);
        st.0.push(input);
        st.1.push(cached);
        let usage = Usage {
            input_tokens: Some(input),
            cached_tokens: Some(cached),
            cache_creation_tokens: None,
            output_tokens: Some(40),
        };
        let blocks = &script[t];
        if b < blocks.len() {
            ctr.1 += 1;
            Reply::openai()
                .text(&format!("Step {}.", b + 1))
                .tool_call(
                    &format!("call_{t}_{b}"),
                    "python_execution",
                    &json!({"code": blocks[b]}).to_string(),
                )
                .usage(usage)
                .build()
        } else {
            *ctr = (t + 1, 0);
            Reply::openai()
                .text("Done: the change is in and the tests pass.")
                .usage(usage)
                .build()
        }
    });
    let db = dir.path().join("vis.db");
    let store = Store::open(&db).unwrap();
    let roots = vec![dir.path().join("ws").to_string_lossy().into_owned()];
    let mut session =
        ChatSession::create(store, &db, "s-economy", roots, settings(dir.path(), &fake)).unwrap();
    rt.block_on(async {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        for t in 1..=turns {
            let end = session
                .run_turn(
                    &format!("Rename the accumulator in the next function (turn {t})."),
                    &tx,
                    &CancellationToken::new(),
                )
                .await
                .unwrap();
            assert_eq!(end.status, vis::protocol::TurnStatus::Done, "{end:?}");
        }
        session.shutdown().await;
    });
    let store = Store::open(&db).unwrap();
    let measured: Vec<i64> = store
        .folds("s-economy")
        .unwrap()
        .iter()
        .filter_map(|f| match f.measurement {
            vis::protocol::Measurement::Measured {
                net_reduction_tokens,
                ..
            } => Some(net_reduction_tokens),
            _ => None,
        })
        .collect();
    let (inputs, cached, after_fold) = std::mem::take(&mut *stats.lock().unwrap());
    Replay {
        inputs,
        cached,
        after_fold,
        measured,
    }
}

fn bench_economy(rt: &tokio::runtime::Runtime) {
    let plain = replay(rt, false);
    let folded = replay(rt, true);
    let total = |r: &Replay| r.inputs.iter().sum::<u64>();
    let share = |r: &Replay, skip_after_fold: bool| {
        let (mut c, mut i) = (0u64, 0u64);
        for (k, (&input, &cached)) in r.inputs.iter().zip(&r.cached).enumerate().skip(1) {
            if skip_after_fold && r.after_fold[k] {
                continue;
            }
            c += cached;
            i += input;
        }
        c as f64 * 100.0 / i.max(1) as f64
    };
    let (a, b) = (total(&plain), total(&folded));
    println!(
        "3. token economy, 30-turn coding session ({} requests each):",
        plain.inputs.len()
    );
    println!(
        "   without folds: {a} input tokens, cache share {:.1}%, peak request {} tokens",
        share(&plain, false),
        plain.inputs.iter().max().unwrap()
    );
    println!(
        "   with folds:    {b} input tokens ({:.1}% fewer; goal ≥ 40%), cache share {:.1}% outside the requests right after a fold ({:.1}% overall; goal > 80%), peak request {} tokens",
        (a as f64 - b as f64) * 100.0 / a as f64,
        share(&folded, true),
        share(&folded, false),
        folded.inputs.iter().max().unwrap()
    );
    println!(
        "   each fold's measured net reduction (tokens): {:?}",
        folded.measured
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = runtime();
    bench_receipt(&rt);
    bench_assembly_with_folds();
    bench_economy(&rt);
}
