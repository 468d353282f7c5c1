//! Folds priced with the prompt cache (issue 24 §2): the receipt's re-cache cost, saving per
//! request and break-even from the formula; hints that name settled work as one batch, once
//! it is large while the cache is warm and at once when it is cold (an idle gap, a resume);
//! folds batched before one request; and bad input still refused with nothing folded.

use serde_json::{json, Value};
use vis::gateway::ChatSession;
use vis::protocol::{Event, TurnStatus};
use vis::providers::ProviderKind;
use vis::store::Store;

use crate::support::chat::{events, new_session, settings, turn, usage};
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::support::TestEnv;
use crate::vistest;

const KIND: ProviderKind = ProviderKind::Anthropic;
/// Anthropic's prices (the session's `cache_prices`): read 0.1×, write 1.25×.
const READ: f64 = 0.1;
const WRITE: f64 = 1.25;

fn block(id: &str, code: &str) -> Reply {
    let args = json!({ "code": code }).to_string();
    Reply::anthropic()
        .tool_call(id, "python_execution", &args)
        .usage(usage(2000, 1800, 5))
        .build()
}

fn done() -> Reply {
    Reply::anthropic()
        .text("done")
        .usage(usage(2000, 1800, 5))
        .build()
}

fn outputs(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BlockFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect()
}

/// Three settled turns of about a thousand tokens each.
fn three_turns(rt: &tokio::runtime::Runtime, fake: &FakeProvider, session: &mut ChatSession) {
    for (t, word) in ["ONE", "TWO", "THREE"].iter().enumerate() {
        fake.push(block(
            &format!("c{t}"),
            &format!("print(' '.join(f'MARKER-{word}-{{i}}' for i in range(150)))"),
        ));
        fake.push(done());
        assert_eq!(turn(rt, session, word).0.status, TurnStatus::Done);
    }
}

/// Runs a turn whose one block is `code`; returns that block's output.
fn one_block(
    rt: &tokio::runtime::Runtime,
    fake: &FakeProvider,
    session: &mut ChatSession,
    code: &str,
) -> String {
    fake.push(block("q", code));
    fake.push(done());
    let (end, events) = turn(rt, session, "next");
    assert_eq!(end.status, TurnStatus::Done);
    outputs(&events).remove(0)
}

/// The JSON lines a block printed.
fn json_lines(output: &str) -> Vec<Value> {
    output
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

const PRINT_HINT: &str = "import json\nprint(json.dumps(session['utilization']['fold_hint']))";

/// Tokens of the first `items` stored items of `turn`.
fn tokens_of_turn(env: &TestEnv, id: &str, turn: i64, items: usize) -> u64 {
    let store = Store::open(&env.db()).unwrap();
    let rows = store.history(id).unwrap();
    rows.iter()
        .filter(|r| r.turn == turn)
        .take(items)
        .map(|r| r.tokens as u64)
        .sum()
}

vistest!(a_receipt_prices_the_fold_from_the_formula, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "receipt");
    three_turns(&rt, &fake, &mut session);
    let removed_t3 = tokens_of_turn(&env, "receipt", 3, usize::MAX);
    let out = one_block(
        &rt,
        &fake,
        &mut session,
        "import json\nr = fold_session('t3', 'turn three printed markers')\nprint(json.dumps(dict(r)))\nprint(r)",
    );
    let r = &json_lines(&out)[0];
    let removed = r["tokens_removed"].as_u64().unwrap();
    assert_eq!(removed, removed_t3, "{r}");
    let net = r["estimated_net_tokens"].as_i64().unwrap();
    let gist_item = removed - net as u64;
    // Behind t3 come the gist's item and what turn 4 holds so far (its message, the call).
    let tail = gist_item + tokens_of_turn(&env, "receipt", 4, 2);
    assert_eq!(r["recache_tokens"].as_u64().unwrap(), tail, "{r}");
    let cost = tail as f64 * (WRITE - READ);
    let saving = net as f64 * READ;
    assert_eq!(r["recache_cost"], json!(cost.round() as u64), "{r}");
    assert_eq!(r["saving_per_request"], json!(saving.round() as u64), "{r}");
    assert_eq!(
        r["break_even_requests"],
        json!((cost / saving - 1e-9).ceil() as u64),
        "{r}"
    );
    assert!(
        r["recache_note"]
            .as_str()
            .unwrap()
            .contains("tokens from t3 on to the cache again"),
        "{r}"
    );
    // The printed receipt says the same in words.
    assert!(
        out.contains(&format!(
            "re-caching costs {}, saves {} a request, paid back after",
            cost.round() as u64,
            saving.round() as u64
        )),
        "{out}"
    );
    rt.block_on(session.shutdown());
});

vistest!(
    the_warm_hint_names_settled_work_as_one_batch_once_it_is_large,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let mut session = new_session(&env, settings(&env, &fake, KIND), "warm");
        three_turns(&rt, &fake, &mut session);
        // The provider counts 20,000 input tokens: the request keeps far more than twice the
        // 3,000 settled ones, so no batch yet, and no hint line.
        let code = PRINT_HINT;
        fake.push(
            Reply::anthropic()
                .tool_call(
                    "big",
                    "python_execution",
                    &json!({ "code": code }).to_string(),
                )
                .usage(usage(20_000, 18_000, 5))
                .build(),
        );
        fake.push(done());
        let (end, events) = turn(&rt, &mut session, "next");
        assert_eq!(end.status, TurnStatus::Done);
        let out = outputs(&events).remove(0);
        let hint = &json_lines(&out)[0];
        assert_eq!(hint["cache"], "warm", "{hint}");
        assert_eq!(hint["candidates"], json!([]), "{hint}");
        assert!(!out.contains("[vis] fold hint"), "{out}");
        // 2,000 tokens: the settled turns are the bulk of the request, one batch.
        let out = one_block(&rt, &fake, &mut session, PRINT_HINT);
        let hint = &json_lines(&out)[0];
        let candidates = hint["candidates"].as_array().unwrap();
        assert_eq!(candidates.len(), 1, "{hint}");
        let batch = &candidates[0];
        assert_eq!(batch["key"], "t1,t2,t3,t4", "{hint}");
        let expected = batch["saving_per_request"].as_i64().unwrap()
            * hint["expected_requests"].as_i64().unwrap()
            - batch["recache_cost"].as_i64().unwrap();
        assert_eq!(batch["value"].as_i64().unwrap(), expected, "{batch}");
        assert!(
            out.contains("[vis] fold hint: fold the settled work in one batch, t1,t2,t3,t4 ("),
            "{out}"
        );
        // Following it makes one fold with one gist over one range.
        let out = one_block(
            &rt,
            &fake,
            &mut session,
            "import json\nkey = session['utilization']['fold_hint']['candidates'][0]['key']\nprint(json.dumps(dict(fold_session(key, 'turns 1-5 printed markers'))))",
        );
        let receipt = &json_lines(&out)[0];
        assert_eq!(receipt["selected"], json!(["t1-t5"]), "{receipt}");
        assert_eq!(session.folds().len(), 1);
        let text = fake.requests().last().unwrap().body_str();
        assert_eq!(text.matches("[vis] fold 1 replaces").count(), 1, "{text}");
        assert!(!text.contains("MARKER-TWO"), "{text}");
        rt.block_on(session.shutdown());
    }
);

vistest!(
    after_an_idle_gap_the_cold_cache_makes_old_folds_free,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let mut session = new_session(&env, settings(&env, &fake, KIND), "idle");
        three_turns(&rt, &fake, &mut session);
        let warm = session.utilization().fold_hint.unwrap();
        assert_eq!(
            (warm.cache.as_str(), warm.candidates[0].key.as_str()),
            ("warm", "t1,t2,t3")
        );
        // Past the cache lifetime (300 s for Anthropic) since the last request.
        session.advance_clock(301);
        let hint = session.utilization().fold_hint.unwrap();
        assert_eq!(hint.cache, "cold", "{hint:?}");
        assert_eq!(
            hint.cache_note.as_deref(),
            Some("5 min since the last request, past the cache lifetime of 5 min")
        );
        let keys: Vec<&str> = hint.candidates.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["t1,t2,t3"], "{hint:?}");
        assert!(hint.candidates.iter().all(|c| c.recache_cost == 0));
        assert!(
        hint.text.as_deref().unwrap().starts_with(
            "the prompt cache is cold (5 min since the last request, past the cache lifetime of 5 min), so folding settled work re-caches nothing extra now: fold t1,t2,t3 ("
        ),
        "{hint:?}"
    );
        // A fold now (the person's /fold between turns) re-caches nothing.
        let receipt = session.fold("t1", "turn one printed markers").unwrap();
        assert_eq!(
            (receipt.recache_cost, receipt.break_even_requests),
            (0, Some(0))
        );
        assert!(
            receipt.recache_note.starts_with("the prompt cache is cold"),
            "{receipt:?}"
        );
        assert!(receipt.saving_per_request > 0);
        // The next request writes the prefix again: the model's next block finds it warm.
        let out = one_block(&rt, &fake, &mut session, PRINT_HINT);
        assert_eq!(json_lines(&out)[0]["cache"], "warm", "{out}");
        rt.block_on(session.shutdown());
    }
);

vistest!(
    a_block_that_outlives_the_cache_lifetime_folds_for_free,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        // A lifetime of 0 s: every block outlives it (a long test run would, with 300 s).
        let mut s = settings(&env, &fake, KIND);
        s.cache_prices.lifetime_secs = 0;
        let mut session = new_session(&env, s, "long-block");
        three_turns(&rt, &fake, &mut session);
        let out = one_block(
        &rt,
        &fake,
        &mut session,
        &format!("{PRINT_HINT}\nr = fold_session('t1', 'turn one printed markers')\nprint(json.dumps(dict(r)))"),
    );
        let lines = json_lines(&out);
        let (hint, receipt) = (&lines[0], &lines[1]);
        assert_eq!(hint["cache"], "cold", "{hint}");
        assert_eq!(hint["candidates"][0]["key"], "t1,t2,t3", "{hint}");
        assert_eq!(receipt["recache_cost"], 0, "{receipt}");
        rt.block_on(session.shutdown());
    }
);

vistest!(a_session_resumed_past_the_cache_lifetime_is_cold, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "resume");
    three_turns(&rt, &fake, &mut session);
    rt.block_on(session.shutdown());
    drop(session);
    // Resumed at once: the provider still holds the identical prefix.
    let open = |lifetime_secs: u64| {
        let mut s = settings(&env, &fake, KIND);
        s.cache_prices.lifetime_secs = lifetime_secs;
        ChatSession::open(Store::open(&env.db()).unwrap(), &env.db(), "resume", s)
            .unwrap()
            .0
    };
    let mut resumed = open(300);
    let hint = resumed.utilization().fold_hint.unwrap();
    assert_eq!(hint.cache, "warm", "{hint:?}");
    rt.block_on(resumed.shutdown());
    drop(resumed);
    // A lifetime shorter than the time since the stored request: cold, and the hint says why.
    let mut resumed = open(0);
    let hint = resumed.utilization().fold_hint.unwrap();
    assert_eq!(hint.cache, "cold", "{hint:?}");
    assert!(
        hint.cache_note
            .as_deref()
            .unwrap()
            .starts_with("resumed session, "),
        "{hint:?}"
    );
    assert_eq!(hint.candidates[0].key, "t1,t2,t3", "{hint:?}");
    let receipt = resumed.fold("t2", "turn two printed markers").unwrap();
    assert_eq!(receipt.recache_cost, 0, "{receipt:?}");
    rt.block_on(resumed.shutdown());
});

vistest!(folds_before_one_request_share_its_cache_reset, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "batch");
    three_turns(&rt, &fake, &mut session);
    let out = one_block(
        &rt,
        &fake,
        &mut session,
        "import json\nfor key in ('t2', 't3', 't1'):\n    print(json.dumps(dict(fold_session(key, key + ' printed markers'))))",
    );
    let r = json_lines(&out);
    let (t2, t3, t1) = (&r[0], &r[1], &r[2]);
    assert!(t2["recache_cost"].as_u64().unwrap() > 0, "{t2}");
    // t3 lies behind t2's position: the next request re-caches it anyway.
    assert_eq!(t3["recache_cost"], 0, "{t3}");
    assert_eq!(t3["fold_count"], 2, "{t3}");
    assert!(
        t3["recache_note"]
            .as_str()
            .unwrap()
            .contains("already makes the next one re-cache from t2 on"),
        "{t3}"
    );
    // t1 adds only its own gist item before t2's position.
    let gist_item =
        t1["tokens_removed"].as_u64().unwrap() - t1["estimated_net_tokens"].as_u64().unwrap();
    assert_eq!(
        t1["recache_cost"],
        json!((gist_item as f64 * (WRITE - READ)).round() as u64),
        "{t1}"
    );
    rt.block_on(session.shutdown());
});

vistest!(the_hint_suggests_batching_after_a_fold, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "suggest");
    three_turns(&rt, &fake, &mut session);
    let out = one_block(
        &rt,
        &fake,
        &mut session,
        "fold_session('t2', 'turn two printed markers')\nprint('folded')",
    );
    // t3 lies behind the fold's position: folding it before the next request is free.
    assert!(
        out.contains(
            "[vis] fold hint: the next request re-caches from t2 on anyway, so folding t3 ("
        ),
        "{out}"
    );
    assert!(out.contains("now costs nothing extra"), "{out}");
    rt.block_on(session.shutdown());
});

vistest!(bad_fold_input_is_refused_and_prices_nothing, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "bad");
    three_turns(&rt, &fake, &mut session);
    let out = one_block(
        &rt,
        &fake,
        &mut session,
        "for key, gist in (('t9', 'x'), ('t2/x4', 'x'), ('t1', '  ')):\n    try:\n        fold_session(key, gist)\n    except RuntimeError as e:\n        print('refused:', e)\nprint(len(session['utilization']['fold_hint']['candidates']))",
    );
    assert!(out.contains("refused:") && out.contains("t9"), "{out}");
    assert!(
        out.contains("expected 'i' and an iteration number"),
        "{out}"
    );
    assert!(out.contains("the gist is empty"), "{out}");
    assert!(session.folds().is_empty());
    // Nothing was folded, so the next request re-caches nothing: no pending reset.
    let hint = session.utilization().fold_hint.unwrap();
    assert_eq!(hint.cache_note, None, "{hint:?}");
    rt.block_on(session.shutdown());
});
