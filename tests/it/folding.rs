//! Folding through the real loop (issue 8): fold_session from blocks, what requests carry
//! afterwards for both providers, measurements against the fake provider's usage, hints,
//! the automatic fold, read_session, and resume.

use serde_json::{json, Value};
use vis::gateway::ChatSettings;
use vis::protocol::{Event, TurnStatus, Usage};
use vis::providers::ProviderKind;
use vis::store::Store;

use crate::support::chat::{events, messages, new_session, settings, turn, KINDS};
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::support::TestEnv;
use crate::vistest;

fn usage(input: u64) -> Usage {
    Usage {
        input_tokens: Some(input),
        cached_tokens: Some(0),
        cache_creation_tokens: None,
        output_tokens: Some(5),
    }
}

/// One block call with scripted usage.
fn block(kind: ProviderKind, id: &str, code: &str, input: u64) -> Reply {
    let args = json!({ "code": code }).to_string();
    match kind {
        ProviderKind::OpenAi => Reply::openai()
            .tool_call(id, "python_execution", &args)
            .usage(usage(input))
            .build(),
        ProviderKind::Anthropic => Reply::anthropic()
            .tool_call(id, "python_execution", &args)
            .usage(usage(input))
            .build(),
    }
}

fn done(kind: ProviderKind, input: u64) -> Reply {
    match kind {
        ProviderKind::OpenAi => Reply::openai().text("done").usage(usage(input)).build(),
        ProviderKind::Anthropic => Reply::anthropic().text("done").usage(usage(input)).build(),
    }
}

/// The outputs of the blocks a turn ran.
fn outputs(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BlockFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect()
}

/// Two settled turns whose outputs carry unique markers.
fn two_turns(
    rt: &tokio::runtime::Runtime,
    fake: &FakeProvider,
    session: &mut vis::gateway::ChatSession,
    kind: ProviderKind,
) {
    fake.push(block(kind, "a1", "print('MARKER-ONE ' * 50)", 1000));
    fake.push(done(kind, 1500));
    assert_eq!(turn(rt, session, "first").0.status, TurnStatus::Done);
    fake.push(block(kind, "b1", "print('MARKER-TWO ' * 50)", 2000));
    fake.push(block(kind, "b2", "print('MARKER-THREE')", 2500));
    fake.push(done(kind, 3000));
    assert_eq!(turn(rt, session, "second").0.status, TurnStatus::Done);
}

vistest!(
    a_fold_removes_the_content_from_requests_for_both_providers,
    |env| {
        let rt = events();
        for kind in KINDS {
            let fake = FakeProvider::start();
            let id = format!("fold-{}", kind.as_str());
            let mut session = new_session(&env, settings(&env, &fake, kind), &id);
            two_turns(&rt, &fake, &mut session, kind);
            fake.push(block(kind, "c1", "r = fold_session('t1,t2/i1', 'Turn 1 printed marker one; t2/i1 printed marker two.')\nprint(r)\nprint(r['tokens_removed'] > 0, r['measurement'], r['fold_count'])", 3200));
            fake.push(done(kind, 1200));
            let (end, events) = turn(&rt, &mut session, "fold it");
            assert_eq!(end.status, TurnStatus::Done, "{events:?}");
            let out = outputs(&events).remove(0);
            assert!(out.contains("fold 1 replaces t1, t2/i1"), "{out}");
            assert!(out.contains("True pending 1"), "{out}");
            let reqs = fake.requests();
            let after = reqs.last().unwrap();
            let body = after.body_str();
            assert!(body.contains("Turn 1 printed marker one"), "{body}");
            for gone in ["MARKER-ONE", "MARKER-TWO", "\"first\""] {
                assert!(
                    !body.contains(gone),
                    "{gone} still in the request after the fold"
                );
            }
            assert!(body.contains("MARKER-THREE"), "t2/i2 was not folded");
            // Still valid: every call has its result, roles alternate (Anthropic).
            let msgs = messages(&after.body);
            if kind == ProviderKind::Anthropic {
                for pair in msgs.windows(2) {
                    assert_ne!(pair[0]["role"], pair[1]["role"], "{msgs:?}");
                }
            }
            let text = serde_json::to_string(&msgs).unwrap();
            for call in ["b2", "c1"] {
                assert_eq!(
                    text.matches(&format!("\"{call}\"")).count(),
                    2,
                    "{call}: {text}"
                );
            }
            // The originals are still stored.
            let store = Store::open(&env.db()).unwrap();
            assert!(store.iterations(&id).unwrap()[0]
                .output
                .contains("MARKER-ONE"));
            assert_eq!(store.counts(&id).unwrap().folds, 1);
            rt.block_on(session.shutdown());
        }
    }
);

vistest!(bad_keys_and_the_running_iteration_fold_nothing, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    let mut session = new_session(&env, settings(&env, &fake, kind), "badkeys");
    two_turns(&rt, &fake, &mut session, kind);
    let cases = [
        ("t2/x", "bad fold key"),
        ("", "the key is empty"),
        ("t9", "unknown turn t9"),
        ("t2/i9", "unknown iteration t2/i9"),
        ("t2/i2-i1", "is reversed"),
        ("t3", "the turn now running"),
        ("t3/i1", "the iteration now running"),
        ("-t3", "includes the turn now running"),
    ];
    let code: String = cases
        .iter()
        .map(|(key, _)| format!("try:\n    fold_session({key:?}, 'g')\nexcept RuntimeError as e:\n    print('ERR', e)\n"))
        .collect::<String>()
        + "try:\n    fold_session('t1', '   ')\nexcept RuntimeError as e:\n    print('ERR', e)\nprint(session['counts']['folds'])";
    fake.push(block(kind, "x", &code, 3000));
    fake.push(done(kind, 3100));
    let (_, events) = turn(&rt, &mut session, "try bad keys");
    let out = outputs(&events).remove(0);
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("ERR")).collect();
    assert_eq!(errors.len(), cases.len() + 1, "{out}");
    for ((_, expected), line) in cases.iter().zip(&errors) {
        assert!(line.contains(expected), "{line} (expected {expected})");
    }
    assert!(
        errors.last().unwrap().contains("the gist is empty"),
        "{out}"
    );
    // The fold count, then possibly the hint naming a fold worth making (none was made).
    let last = out.lines().rfind(|l| !l.starts_with("[vis] fold hint:"));
    assert_eq!(last, Some("0"), "{out}");
    assert_eq!(
        Store::open(&env.db())
            .unwrap()
            .folds("badkeys")
            .unwrap()
            .len(),
        0
    );
    // The next request still carries everything.
    assert!(fake
        .requests()
        .last()
        .unwrap()
        .body_str()
        .contains("MARKER-ONE"));
    rt.block_on(session.shutdown());
});

vistest!(an_overlapping_fold_absorbs_the_old_one, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let kind = ProviderKind::Anthropic;
    let mut session = new_session(&env, settings(&env, &fake, kind), "overlap");
    two_turns(&rt, &fake, &mut session, kind);
    fake.push(block(
        kind,
        "c1",
        "print(fold_session('t2/i1', 'OLD-GIST'))",
        3000,
    ));
    fake.push(block(kind, "c2", "r = fold_session('t2', 'NEW-GIST covers all of turn 2')\nprint(r['absorbed'], r['selected'])", 2500));
    fake.push(done(kind, 2000));
    let (_, events) = turn(&rt, &mut session, "fold twice");
    let out = outputs(&events);
    assert!(out[1].contains("[1] ['t2']"), "{out:?}");
    let body = fake.requests().last().unwrap().body_str();
    assert!(body.contains("fold 2 replaces t2: NEW-GIST"), "{body}");
    assert!(!body.contains("replaces t2/i1: OLD-GIST"), "{body}");
    let folds = Store::open(&env.db()).unwrap().folds("overlap").unwrap();
    assert_eq!(folds[0].absorbed_by, Some(2));
    rt.block_on(session.shutdown());
});

vistest!(the_measurement_equals_what_the_provider_reported, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    let mut session = new_session(&env, settings(&env, &fake, kind), "measure");
    two_turns(&rt, &fake, &mut session, kind);
    // Two folds in one block share one measurement; the request before them reported 5000
    // input tokens, the one after 3200.
    fake.push(block(kind, "c1", "a = fold_session('t1', 'one')\nb = fold_session('t2/i1', 'two')\nprint(a['fold_count'], b['fold_count'])", 5000));
    fake.push(block(
        kind,
        "c2",
        "print(session['utilization']['fold_measurement'])",
        3200,
    ));
    fake.push(done(kind, 3300));
    let (_, events) = turn(&rt, &mut session, "measure it");
    let out = outputs(&events);
    assert_eq!(out[0], "1 2\n");
    let m: Value = serde_json::from_str(
        &out[1]
            .replace('\'', "\"")
            .replace("True", "true")
            .replace("False", "false"),
    )
    .unwrap();
    assert_eq!(m["status"], "measured");
    assert_eq!(m["fold_count"], 2);
    assert_eq!(m["before_input_tokens"], 5000);
    assert_eq!(m["after_input_tokens"], 3200);
    assert_eq!(m["net_reduction_tokens"], 1800);
    let store = Store::open(&env.db()).unwrap();
    let health = store.requests("measure").unwrap();
    let with: Vec<_> = health
        .iter()
        .filter_map(|r| r.fold_measurement.clone())
        .collect();
    assert_eq!(with.len(), 1);
    assert!(
        with[0].contains("\"net_reduction_tokens\":1800"),
        "{}",
        with[0]
    );
    for f in store.folds("measure").unwrap() {
        assert!(
            matches!(f.measurement, vis::protocol::Measurement::Measured { .. }),
            "{:?}",
            f.measurement
        );
    }
    let show = env.vis(&["sessions", "show", "measure"]);
    assert!(
        show.stdout.contains("fold measurement:") && show.stdout.contains("1800"),
        "{}",
        show.stdout
    );
    assert!(
        show.stdout
            .contains("fold 2 (t3/i1) t2/i1  — measured: 5000 → 3200 input tokens (net 1800)"),
        "{}",
        show.stdout
    );
    rt.block_on(session.shutdown());
});

vistest!(each_unavailable_reason, |env| {
    let rt = events();
    let kind = ProviderKind::OpenAi;
    // No input usage in the response after the fold.
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, kind), "nouse");
    two_turns(&rt, &fake, &mut session, kind);
    fake.push(block(kind, "c1", "fold_session('t1', 'g')", 3000));
    fake.push(
        Reply::openai()
            .tool_call(
                "c2",
                "python_execution",
                r#"{"code": "print(session['utilization']['fold_measurement']['reason'])"}"#,
            )
            .build(),
    );
    fake.push(done(kind, 10));
    let (_, events) = turn(&rt, &mut session, "x");
    assert!(
        outputs(&events)[1].contains("no input usage"),
        "{:?}",
        outputs(&events)
    );
    rt.block_on(session.shutdown());

    // The model changed between the requests.
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, kind), "changed");
    two_turns(&rt, &fake, &mut session, kind);
    fake.push(block(kind, "c1", "fold_session('t1', 'g')", 3000));
    fake.push(
        Reply::openai()
            .model("another-model")
            .tool_call(
                "c2",
                "python_execution",
                r#"{"code": "print(session['utilization']['fold_measurement']['reason'])"}"#,
            )
            .usage(usage(1000))
            .build(),
    );
    fake.push(done(kind, 10));
    let (_, events) = turn(&rt, &mut session, "x");
    assert!(
        outputs(&events)[1].contains("provider or model changed"),
        "{:?}",
        outputs(&events)
    );
    rt.block_on(session.shutdown());

    // A turn change: the person folds between turns.
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, kind), "turnchange");
    two_turns(&rt, &fake, &mut session, kind);
    let receipt = session.fold("t1", "the person's gist").unwrap();
    assert_eq!(receipt.measurement, "pending");
    fake.push(block(
        kind,
        "c1",
        "print(session['utilization']['fold_measurement']['reason'])",
        1000,
    ));
    fake.push(done(kind, 10));
    let (_, events) = turn(&rt, &mut session, "x");
    assert!(
        outputs(&events)[0].contains("a new turn started"),
        "{:?}",
        outputs(&events)
    );
    rt.block_on(session.shutdown());
});

fn small_limits(env: &TestEnv, fake: &FakeProvider, auto: u64, limit: u64) -> ChatSettings {
    let mut s = settings(env, fake, ProviderKind::OpenAi);
    s.folding.auto_compress_above = Some(auto);
    s.folding.input_limit = Some(limit);
    s
}

vistest!(hints_at_75_90_and_100_percent, |env| {
    let rt = events();
    let kind = ProviderKind::OpenAi;
    let fake = FakeProvider::start();
    let mut session = new_session(&env, small_limits(&env, &fake, 100_000, 1_000_000), "hints");
    fake.push(block(
        kind,
        "a",
        "print(session['utilization']['level'])",
        50_000,
    ));
    fake.push(block(
        kind,
        "b",
        "print(session['utilization']['level'])",
        76_000,
    ));
    fake.push(block(
        kind,
        "c",
        "print(session['utilization']['level'])",
        91_000,
    ));
    fake.push(block(
        kind,
        "d",
        "print(session['utilization']['level'])",
        101_000,
    ));
    fake.push(block(kind, "e", "print('again')", 102_000));
    fake.push(done(kind, 1000));
    let (_, events) = turn(&rt, &mut session, "grow");
    let out = outputs(&events);
    assert_eq!(out[0], "normal\n");
    assert!(
        out[1].starts_with("hint\n[vis] context hint: 76,000 of 100,000 tokens (76%)"),
        "{}",
        out[1]
    );
    assert!(
        out[2].starts_with("urgent\n[vis] context urgent: 91,000"),
        "{}",
        out[2]
    );
    assert!(
        out[3].starts_with("required\n[vis] context over the limit: 101,000"),
        "{}",
        out[3]
    );
    // It repeats while usage stays high, and names what to fold.
    assert!(
        out[4].contains("[vis] context over the limit: 102,000"),
        "{}",
        out[4]
    );
    assert!(
        out[4].contains("largest settled first: t1/i1-i"),
        "{}",
        out[4]
    );
    let u = session.utilization();
    assert_eq!(u.input_limit, Some(1_000_000));
    assert_eq!(u.auto_compress_above, 100_000);
    rt.block_on(session.shutdown());
});

vistest!(the_gateway_folds_by_itself_at_the_hard_limit, |env| {
    let rt = events();
    let kind = ProviderKind::OpenAi;
    let fake = FakeProvider::start();
    let mut session = new_session(&env, small_limits(&env, &fake, 3_000, 6_000), "auto");
    for t in 0..3 {
        fake.push(block(kind, &format!("r{t}"), &format!("x = open('f{t}.txt', 'w').write('a' * 10)\nprint(cat('f{t}.txt'))\nprint('FILLER-{t} ' * 400)"), 1_000 + 1_000 * t));
        // The last turn's answer reports more input than the model takes.
        fake.push(done(kind, if t == 2 { 6_500 } else { 1_500 + 1_500 * t }));
        assert_eq!(
            turn(&rt, &mut session, &format!("turn {t}")).0.status,
            TurnStatus::Done
        );
    }
    fake.push(done(kind, 2_000));
    let (end, events) = turn(&rt, &mut session, "and now");
    assert_eq!(end.status, TurnStatus::Done, "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Notice { text } if text.contains("(automatic)"))),
        "{events:?}"
    );
    let body = fake.requests().last().unwrap().body_str();
    assert!(
        body.contains("(automatic fold: the context reached the model's input limit) t1:"),
        "{body}"
    );
    assert!(
        body.contains("read f0.txt") || body.contains("f0.txt"),
        "{body}"
    );
    assert!(!body.contains("FILLER-0"), "the oldest turn is still sent");
    let folds = Store::open(&env.db()).unwrap().folds("auto").unwrap();
    assert!(folds[0].automatic);
    rt.block_on(session.shutdown());
});

vistest!(read_session_with_the_toggle_on_and_off, |env| {
    let rt = events();
    let kind = ProviderKind::OpenAi;
    for introspection in [false, true] {
        let fake = FakeProvider::start();
        let mut s = settings(&env, &fake, kind);
        s.folding.introspection = introspection;
        let id = format!("read-{introspection}");
        let mut session = new_session(&env, s, &id);
        two_turns(&rt, &fake, &mut session, kind);
        fake.push(block(
            kind,
            "c1",
            "fold_session('t1', 'g')\nprint(read_session('t1'))",
            3000,
        ));
        fake.push(done(kind, 10));
        let (_, events) = turn(&rt, &mut session, "read");
        let out = outputs(&events).remove(0);
        if introspection {
            assert!(
                out.contains("== t1 ==")
                    && out.contains("MARKER-ONE")
                    && out.contains("[t1 user]\nfirst"),
                "{out}"
            );
        } else {
            assert!(
                out.starts_with("read_session is off for this session"),
                "{out}"
            );
            assert!(!out.contains("MARKER"), "{out}");
        }
        rt.block_on(session.shutdown());
    }
});

vistest!(folds_survive_a_restart_with_the_same_bytes, |env| {
    let rt = events();
    for kind in KINDS {
        let fake = FakeProvider::start();
        let id = format!("resume-{}", kind.as_str());
        let mut session = new_session(&env, settings(&env, &fake, kind), &id);
        two_turns(&rt, &fake, &mut session, kind);
        fake.push(block(
            kind,
            "c1",
            "fold_session('t1', 'PERSISTED-GIST')",
            3000,
        ));
        fake.push(done(kind, 1000));
        turn(&rt, &mut session, "fold");
        let before = session.next_request_body().unwrap();
        rt.block_on(session.shutdown());
        drop(session);
        let store = Store::open(&env.db()).unwrap();
        let (mut resumed, _) =
            vis::gateway::ChatSession::open(store, &env.db(), &id, settings(&env, &fake, kind))
                .unwrap();
        assert_eq!(resumed.next_request_body().unwrap(), before);
        let text = String::from_utf8(before).unwrap();
        assert!(text.contains("PERSISTED-GIST") && !text.contains("MARKER-ONE"));
        assert_eq!(resumed.folds().len(), 1);
    }
});

vistest!(a_block_looping_on_fold_session_is_bounded, |env| {
    // The review's finding: folds in a loop took minutes of host CPU and hundreds of MB (every
    // fold rewrote the measurement of every fold before it).
    let rt = events();
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    let mut session = new_session(&env, settings(&env, &fake, kind), "loop");
    two_turns(&rt, &fake, &mut session, kind);
    let attempt = |times: usize, body: &str| {
        format!("ok, errors = 0, []\nfor i in range({times}):\n    try:\n        {body}\n        ok += 1\n    except RuntimeError as e:\n        errors.append(str(e))\nprint(ok, len(errors), errors[-1] if errors else '')")
    };
    let cap = vis::gateway::MAX_FOLDS_PER_REQUEST;
    fake.push(block(
        kind,
        "c1",
        &attempt(100, "fold_session('t2', f'gist {i}')"),
        3000,
    ));
    fake.push(block(
        kind,
        "c2",
        "print(fold_session('t1', 'after the request')['fold'])",
        3000,
    ));
    fake.push(block(
        kind,
        "c3",
        &attempt(1000, "fold_session('t9', 'g')"),
        3000,
    ));
    fake.push(block(
        kind,
        "c4",
        "fold_session('t1', 'x' * 1_000_000)",
        3000,
    ));
    fake.push(done(kind, 2000));
    let (_, evs) = turn(&rt, &mut session, "fold in loops");
    let out = outputs(&evs);
    // Folds until the next request measures them: the cap, then a clear refusal.
    assert!(
        out[0].starts_with(&format!(
            "{cap} {} fold_session has folded {cap} times since the last model request",
            100 - cap
        )),
        "{out:?}"
    );
    assert!(out[0].contains("nothing was folded"), "{out:?}");
    // After a model request, folding works again.
    assert_eq!(out[1].trim(), format!("{}", cap + 1));
    // Calls past the block's budget stop the block (the turn goes on).
    assert!(
        out[2].contains(&format!(
            "the block was stopped: it called fold_session/read_session {} times",
            vis::gateway::MAX_GATEWAY_CALLS_PER_BLOCK + 1
        )),
        "{out:?}"
    );
    let finished: Vec<String> = evs
        .iter()
        .filter_map(|e| match e {
            Event::BlockFinished { status, .. } => Some(status.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(finished[2], "interrupted");
    // A huge gist is refused before its tokens are counted.
    assert!(
        out[3].contains("the gist is 1,000,000 bytes, far over the cap"),
        "{out:?}"
    );
    let folds = Store::open(&env.db()).unwrap().folds("loop").unwrap();
    assert_eq!(folds.len(), cap + 1);
    assert_eq!(
        evs.iter()
            .filter(|e| matches!(e, Event::TurnFinished { .. }))
            .count(),
        1
    );
    rt.block_on(session.shutdown());
});
