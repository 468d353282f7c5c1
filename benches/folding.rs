//! Folding benchmarks (issue 8), run by `scripts/bench.sh` or `cargo bench --bench folding`:
//!
//! 1. the fold receipt for a ~100k-token range, through `ChatSession::fold` (select, apply,
//!    estimates, the store write) (target ≤ 20 ms);
//! 2. request assembly for 1,000 iterations with 50 folds, per request after the first, and
//!    the first request after a new fold (target ≤ 10 ms);
//! 3. token economy with a prompt cache (issue 24): a scripted coding session on a generated
//!    Python project (read, grep, edit by address, run pytest) played through the real gateway
//!    and the fake provider, whose cached-token report follows a content-keyed prefix cache
//!    with a lifetime (`folding/cache_model.rs`), under four fold policies (`folding/replay.rs`:
//!    no folds, the taught one following the hints, fold previous turn, fold oldest when
//!    hinted) on three sessions (30 turns; 100 turns over a small input limit; 30 turns resumed
//!    after an idle gap past the cache lifetime), beside a classic multi-tool agent doing the
//!    same work (`folding/classic.rs`). Prints raw and cache-weighted input (Anthropic and gpt-5
//!    prices), the cache share, the peak request, and PASS/FAIL per goal of issue 24.
//!
//! `-- --economy` runs only 3; `-- --quick` only its 30-turn session; `-- --sweep` only its
//! taught policy, without the goals (to try the hint's settings).

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

#[path = "folding/cache_model.rs"]
mod cache_model;
#[path = "folding/classic.rs"]
mod classic;
#[path = "../tests/it/support/fake_provider.rs"]
mod fake_provider;
#[path = "folding/replay.rs"]
mod replay;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cache_model::Usage;
use fake_provider::{FakeProvider, Reply};
use replay::{Policy, Scenario};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use vis::gateway::assemble::{Assembler, Wire};
use vis::gateway::fold;
use vis::gateway::history::{estimate_item, Entry};
use vis::gateway::{ChatSession, ChatSettings};
use vis::protocol::FoldSpan as Span;
use vis::protocol::{AssistantMessage, ContentBlock, HistoryItem, ToolCall};
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
        images: Default::default(),
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
        images: Vec::new(),
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

struct Summary {
    raw: u64,
    anthropic: f64,
    gpt5: f64,
    share: f64,
    /// Cached tokens ÷ the tokens repeated from the previous request.
    hit: f64,
    peak: u64,
    requests: usize,
}

fn summarize(usages: &[Usage], skip: impl Fn(usize) -> bool) -> Summary {
    let (mut cached, mut input, mut repeated) = (0u64, 0u64, 0u64);
    for (k, u) in usages.iter().enumerate().skip(1) {
        if !skip(k) {
            cached += u.cached;
            input += u.input;
            repeated += u.repeated;
        }
    }
    Summary {
        raw: usages.iter().map(|u| u.input).sum(),
        anthropic: usages
            .iter()
            .map(|u| u.weighted(&cache_model::ANTHROPIC))
            .sum(),
        gpt5: usages.iter().map(|u| u.weighted(&cache_model::GPT5)).sum(),
        share: cached as f64 * 100.0 / input.max(1) as f64,
        hit: cached as f64 * 100.0 / repeated.max(1) as f64,
        peak: usages.iter().map(|u| u.input).max().unwrap_or(0),
        requests: usages.len(),
    }
}

fn row(name: &str, s: &Summary, folds: &str) {
    println!(
        "   | {name} | {} | {} | {} | {:.1}% ({:.1}%) | {} | {folds} |",
        s.raw,
        s.anthropic.round(),
        s.gpt5.round(),
        s.share,
        s.hit,
        s.peak
    );
}

/// Per-request figures of one replay as CSV (`VIS_ECONOMY_DUMP=dir`), for looking closer.
fn dump(dir: &str, scenario: usize, policy: Policy, run: &replay::Run) {
    let mut csv = String::from("request,input,cached,repeated,after_fold,after_gap\n");
    for (k, u) in run.usages.iter().enumerate() {
        csv.push_str(&format!(
            "{k},{},{},{},{},{}\n",
            u.input, u.cached, u.repeated, run.after_fold[k], run.after_gap[k]
        ));
    }
    let name = format!("{dir}/{scenario}-{policy:?}.csv");
    std::fs::write(&name, csv).unwrap();
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// `sweep`: only the taught policy, without the goals (for trying the hint's settings).
fn bench_economy(rt: &tokio::runtime::Runtime, quick: bool, sweep: bool) {
    let scenarios = [
        Scenario {
            name: "30-turn session",
            turns: 30,
            limits: None,
            resume_after: None,
        },
        Scenario {
            name: "100-turn session, input limit 40,000 (folding required above 34,000)",
            turns: 100,
            limits: Some((40_000, 34_000)),
            resume_after: None,
        },
        Scenario {
            name: "30-turn session resumed after turn 15 and a 10-minute idle gap",
            turns: 30,
            limits: None,
            resume_after: Some(15),
        },
    ];
    let (classic_usages, classic_prefix) = classic::replay(rt, 30);
    let classic = summarize(&classic_usages, |_| false);
    println!("3. token economy (cache model: a prefix cache keyed by content, 5-minute lifetime, {} s per request; weighted = cached × 0.1 + the rest × 1.25 (Anthropic) or × 1.0 (gpt-5)):", cache_model::SECONDS_PER_REQUEST);
    println!(
        "   classic agent, 30 turns ({} requests; tool catalog + system prompt {classic_prefix} tokens):",
        classic.requests
    );
    println!("   | policy | raw input | weighted (Anthropic) | weighted (gpt-5) | cache share (of what the previous request repeated) | peak request | folds |");
    println!("   |---|---|---|---|---|---|---|");
    row("classic agent", &classic, "—");
    let mut goals: Vec<(String, bool)> = Vec::new();
    for (n, scenario) in scenarios.iter().enumerate() {
        if quick && n > 0 {
            break;
        }
        println!("   {} ({} turns):", scenario.name, scenario.turns);
        println!("   | policy | raw input | weighted (Anthropic) | weighted (gpt-5) | cache share outside the requests right after a fold (of what the previous request repeated) | peak request | folds (automatic) |");
        println!("   |---|---|---|---|---|---|---|");
        let mut results = Vec::new();
        let policies: &[Policy] = if sweep {
            &[Policy::Taught]
        } else {
            &Policy::ALL
        };
        for &policy in policies {
            let run = replay::replay(rt, scenario, policy);
            if let Ok(dir) = std::env::var("VIS_ECONOMY_DUMP") {
                dump(&dir, n, policy, &run);
            }
            let s = summarize(&run.usages, |k| run.after_fold[k] || run.after_gap[k]);
            row(
                policy.name(),
                &s,
                &format!("{} ({})", run.folds, run.automatic_folds),
            );
            results.push((policy, s));
        }
        if sweep {
            continue;
        }
        let get = |p: Policy| &results.iter().find(|(q, _)| *q == p).unwrap().1;
        let (taught, none) = (get(Policy::Taught), get(Policy::NoFolds));
        goals.push((
            format!(
                "{}: taught ≤ no folds, cache-weighted (Anthropic {:.2}×, gpt-5 {:.2}×)",
                scenario.name,
                taught.anthropic / none.anthropic,
                taught.gpt5 / none.gpt5
            ),
            taught.anthropic <= none.anthropic && taught.gpt5 <= none.gpt5,
        ));
        goals.push((
            format!(
                "{}: cache share outside the requests right after a fold ≥ 97% ({:.1}%)",
                scenario.name, taught.share
            ),
            taught.share >= 97.0,
        ));
        if n == 0 {
            goals.push((
                format!(
                    "{}: taught ≤ 0.15× the classic agent, cache-weighted (Anthropic {:.3}×, gpt-5 {:.3}×)",
                    scenario.name,
                    taught.anthropic / classic.anthropic,
                    taught.gpt5 / classic.gpt5
                ),
                taught.anthropic <= 0.15 * classic.anthropic && taught.gpt5 <= 0.15 * classic.gpt5,
            ));
        }
        if scenario.turns == 100 {
            goals.push((
                format!(
                    "{}: taught ≤ 0.6× no folds (Anthropic {:.2}×, gpt-5 {:.2}×)",
                    scenario.name,
                    taught.anthropic / none.anthropic,
                    taught.gpt5 / none.gpt5
                ),
                taught.anthropic <= 0.6 * none.anthropic && taught.gpt5 <= 0.6 * none.gpt5,
            ));
        }
    }
    println!("   goals:");
    for (goal, ok) in goals {
        println!("   {} {goal}", verdict(ok));
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = runtime();
    let args: Vec<String> = std::env::args().collect();
    let economy_only = args.iter().any(|a| a == "--economy");
    if !economy_only {
        bench_receipt(&rt);
        bench_assembly_with_folds();
    }
    bench_economy(
        &rt,
        args.iter().any(|a| a == "--quick"),
        args.iter().any(|a| a == "--sweep"),
    );
}
