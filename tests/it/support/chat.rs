//! Helpers for gateway tests: a chat session wired to the fake provider, scripted replies,
//! and a turn run to completion with its events collected.

use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use vis::gateway::{ChatSession, ChatSettings, TurnEnd};
use vis::protocol::{Event, Usage};
use vis::providers::ProviderKind;
use vis::runtime::WorkerOptions;
use vis::store::Store;

use super::fake_provider::{FakeProvider, Reply};
use super::{worker_bin, TestEnv};

pub const KINDS: [ProviderKind; 2] = [ProviderKind::OpenAi, ProviderKind::Anthropic];

pub fn settings(env: &TestEnv, fake: &FakeProvider, kind: ProviderKind) -> ChatSettings {
    let mut worker = WorkerOptions::new(worker_bin());
    worker.workspace = Some(env.workspace());
    worker.config_dir = Some(env.config_dir());
    worker.trusted = true;
    ChatSettings {
        provider: fake.settings(kind),
        worker,
        max_iterations: 100,
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

/// A new chat session `id` in `env`'s database and workspace.
pub fn new_session(env: &TestEnv, settings: ChatSettings, id: &str) -> ChatSession {
    let store = Store::open(&env.db()).unwrap();
    let roots = vec![env.workspace().to_string_lossy().into_owned()];
    ChatSession::create(store, &env.db(), id, roots, settings).unwrap()
}

pub fn events() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs a turn; returns how it ended and every event it reported.
pub fn turn(
    rt: &tokio::runtime::Runtime,
    session: &mut ChatSession,
    text: &str,
) -> (TurnEnd, Vec<Event>) {
    rt.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let end = session
            .run_turn(text, &tx, &CancellationToken::new())
            .await
            .unwrap();
        drop(tx);
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            events.push(e);
        }
        (end, events)
    })
}

pub fn usage(input: u64, cached: u64, output: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        cached_tokens: Some(cached),
        cache_creation_tokens: None,
        output_tokens: Some(output),
    }
}

/// A reply that calls `python_execution` once per block in `codes`.
pub fn calls(kind: ProviderKind, tag: &str, codes: &[&str]) -> Reply {
    match kind {
        ProviderKind::OpenAi => {
            let mut r = Reply::openai().text("Working on it.");
            for (i, code) in codes.iter().enumerate() {
                r = r.tool_call(
                    &format!("call_{tag}_{i}"),
                    "python_execution",
                    &json!({"code": code}).to_string(),
                );
            }
            r.usage(usage(1000, 800, 20)).build()
        }
        ProviderKind::Anthropic => {
            let mut r = Reply::anthropic().text("Working on it.");
            for (i, code) in codes.iter().enumerate() {
                r = r.tool_call(
                    &format!("toolu_{tag}_{i}"),
                    "python_execution",
                    &json!({"code": code}).to_string(),
                );
            }
            r.usage(usage(1000, 800, 20)).build()
        }
    }
}

/// A reply with a raw tool call (any name, any arguments text).
pub fn raw_call(kind: ProviderKind, id: &str, name: &str, arguments: &str) -> Reply {
    match kind {
        ProviderKind::OpenAi => Reply::openai().tool_call(id, name, arguments).build(),
        ProviderKind::Anthropic => Reply::anthropic().tool_call(id, name, arguments).build(),
    }
}

/// A final answer.
pub fn answer(kind: ProviderKind, text: &str) -> Reply {
    match kind {
        ProviderKind::OpenAi => Reply::openai()
            .text(text)
            .usage(usage(1200, 1000, 10))
            .build(),
        ProviderKind::Anthropic => Reply::anthropic()
            .text(text)
            .usage(usage(1200, 1000, 10))
            .build(),
    }
}

/// The `messages` of a recorded request body, with Anthropic's cache breakpoints removed
/// (they mark where a cached prefix ends; they are not content).
pub fn messages(body: &[u8]) -> Vec<serde_json::Value> {
    let mut v: serde_json::Value = serde_json::from_slice(body).unwrap();
    let mut messages = v["messages"].take().as_array().cloned().unwrap();
    for m in &mut messages {
        if let Some(blocks) = m["content"].as_array_mut() {
            for b in blocks {
                if let Some(o) = b.as_object_mut() {
                    o.remove("cache_control");
                }
            }
        }
    }
    messages
}
