//! The agent loop against the fake provider on loopback: whole turns for both providers,
//! provider failures, wrong calls, prefix stability, catalog updates, request health.

use serde_json::Value;
use vis::protocol::{Event, TurnStatus};
use vis::providers::ProviderKind;
use vis::store::Store;

use crate::support::chat::{
    answer, calls, events, messages, new_session, raw_call, settings, turn, usage, KINDS,
};
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::vistest;

vistest!(a_turn_with_two_tool_calls_for_each_provider, |env| {
    let rt = events();
    for kind in KINDS {
        let fake = FakeProvider::start();
        fake.push(calls(kind, "a", &["x = 20", "print(x + 1)"]));
        fake.push(calls(kind, "b", &["print(x * 2)"]));
        fake.push(answer(kind, "x is 20; doubled it is 40."));
        let id = format!("two-{}", kind.as_str());
        let mut session = new_session(&env, settings(&env, &fake, kind), &id);
        let (end, events) = turn(&rt, &mut session, "compute things");
        assert_eq!(end.status, TurnStatus::Done, "{kind}: {events:?}");
        assert_eq!(end.text, "x is 20; doubled it is 40.");
        let finished: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| match e {
                Event::BlockFinished { status, output, .. } => {
                    Some((status.to_string(), output.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            finished,
            [
                ("ok".to_string(), "(no output)".to_string()),
                ("ok".to_string(), "21\n".to_string()),
                ("ok".to_string(), "40\n".to_string())
            ]
        );
        // Three requests; the third carries both earlier results.
        let reqs = fake.requests();
        assert_eq!(reqs.len(), 3);
        let third = reqs[2].body_str();
        assert!(
            third.contains("21\\n") && third.contains("40\\n"),
            "{third}"
        );
        match kind {
            ProviderKind::OpenAi => {
                let body = reqs[0].json();
                assert_eq!(body["prompt_cache_key"], id.as_str());
                assert_eq!(body["stream_options"]["include_usage"], true);
                assert_eq!(body["tools"][0]["function"]["name"], "python_execution");
                assert_eq!(reqs[0].header("authorization"), Some("Bearer test-key"));
            }
            ProviderKind::Anthropic => {
                let body = reqs[2].json();
                assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
                let msgs = body["messages"].as_array().unwrap();
                assert!(msgs.last().unwrap().to_string().contains("cache_control"));
                // Roles alternate and every tool use has its result right after it.
                for pair in msgs.windows(2) {
                    assert_ne!(pair[0]["role"], pair[1]["role"]);
                }
                assert_eq!(reqs[0].header("x-api-key"), Some("test-key"));
            }
        }
        // Everything is in the store: turn, three iterations, three request records.
        let store = Store::open(&env.db()).unwrap();
        let its: Vec<_> = store
            .iterations(&id)
            .unwrap()
            .into_iter()
            .map(|i| (i.turn, i.iteration, i.status.as_str()))
            .collect();
        assert_eq!(its, [(1, 1, "ok"), (1, 2, "ok"), (1, 3, "ok")]);
        let health = store.requests(&id).unwrap();
        assert_eq!(health.len(), 3);
        assert_eq!(health[0].input_tokens, Some(1000));
        assert_eq!(health[0].cached_tokens, Some(800));
        assert!(health[0].estimate_tokens > 500, "{:?}", health[0]);
        assert_eq!(store.turns(&id).unwrap()[0].status, "done");
        rt.block_on(session.shutdown());
    }
});

vistest!(rate_limited_then_success_is_retried_and_counted, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    fake.push(Reply::status(
        429,
        &[("retry-after", "0")],
        "{\"error\":{\"message\":\"slow down\"}}",
    ));
    fake.push(answer(ProviderKind::OpenAi, "done"));
    let mut session = new_session(&env, settings(&env, &fake, ProviderKind::OpenAi), "r429");
    let (end, events) = turn(&rt, &mut session, "hi");
    assert_eq!(end.status, TurnStatus::Done);
    assert!(events.iter().any(|e| matches!(e, Event::Retrying { .. })));
    let health = Store::open(&env.db()).unwrap().requests("r429").unwrap();
    assert_eq!(health.len(), 1);
    assert_eq!(health[0].retries, 1);
    assert_eq!(health[0].error, None);
});

vistest!(an_auth_error_ends_the_turn_and_loses_nothing, |env| {
    let rt = events();
    for kind in KINDS {
        let fake = FakeProvider::start();
        fake.push(calls(kind, "a", &["kept = 'yes'"]));
        fake.push(answer(kind, "ok"));
        fake.push(Reply::error(
            401,
            "authentication_error",
            "invalid x-api-key",
        ));
        let id = format!("auth-{}", kind.as_str());
        let mut session = new_session(&env, settings(&env, &fake, kind), &id);
        assert_eq!(turn(&rt, &mut session, "first").0.status, TurnStatus::Done);
        let (end, events) = turn(&rt, &mut session, "second");
        assert_eq!(end.status, TurnStatus::Failed);
        let (kind_name, message) = end.error.clone().unwrap();
        assert_eq!(kind_name, "auth");
        let env_var = match kind {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        };
        assert!(message.contains(env_var), "{message}");
        assert_eq!(message.lines().count(), 1, "{message}");
        assert!(events.iter().any(|e| matches!(e, Event::Error { .. })));
        let store = Store::open(&env.db()).unwrap();
        assert_eq!(store.iterations(&id).unwrap().len(), 1);
        let turns = store.turns(&id).unwrap();
        assert_eq!(
            (turns[0].status.as_str(), turns[1].status.as_str()),
            ("done", "failed")
        );
        let health = store.requests(&id).unwrap();
        assert_eq!(health.last().unwrap().error_kind.as_deref(), Some("auth"));
        // The session goes on: the next turn works and still has the variable.
        fake.push(calls(kind, "c", &["print(kept)"]));
        fake.push(answer(kind, "still there"));
        let (end, events) = turn(&rt, &mut session, "third");
        assert_eq!(end.status, TurnStatus::Done);
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::BlockFinished { output, .. } if output == "yes\n")));
        rt.block_on(session.shutdown());
    }
});

vistest!(malformed_and_truncated_streams_record_nothing_half, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let mut s = settings(&env, &fake, ProviderKind::OpenAi);
    s.provider.max_retries = 0;
    let mut session = new_session(&env, s, "broken");
    fake.push(Reply::fixture("openai-truncated-in-tool-call.sse"));
    let (end, _) = turn(&rt, &mut session, "one");
    assert_eq!(end.status, TurnStatus::Failed);
    assert_eq!(end.error.as_ref().unwrap().0, "truncated");
    fake.push(Reply::raw_sse("data: {not json\n\n"));
    let (end, _) = turn(&rt, &mut session, "two");
    assert_eq!(end.status, TurnStatus::Failed);
    assert_eq!(
        end.error.as_ref().unwrap().0,
        "malformed",
        "{:?}",
        end.error
    );
    let store = Store::open(&env.db()).unwrap();
    // No block ran, and no partial answer entered the conversation.
    assert!(store.iterations("broken").unwrap().is_empty());
    let kinds: Vec<_> = store
        .history("broken")
        .unwrap()
        .into_iter()
        .map(|h| format!("{:?}", h.kind))
        .collect();
    assert_eq!(kinds, ["User", "User"]);
});

vistest!(a_provider_without_usage_is_recorded_as_unavailable, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    fake.push(Reply::fixture("openai-compatible-no-usage-no-done.sse"));
    let mut session = new_session(&env, settings(&env, &fake, ProviderKind::OpenAi), "nousage");
    let (end, events) = turn(&rt, &mut session, "hello");
    assert_eq!(end.status, TurnStatus::Done);
    let usage = events
        .iter()
        .find_map(|e| match e {
            Event::ResponseFinished {
                usage,
                estimate_tokens,
                ..
            } => Some((*usage, *estimate_tokens)),
            _ => None,
        })
        .unwrap();
    assert_eq!(usage.0.input_tokens, None);
    assert!(usage.1 > 0);
    let health = Store::open(&env.db()).unwrap().requests("nousage").unwrap();
    assert_eq!(
        (health[0].input_tokens, health[0].output_tokens),
        (None, None)
    );
    let show = env.vis(&["sessions", "show", "nousage"]);
    assert!(show.stdout.contains("n/a"), "{}", show.stdout);
});

vistest!(unknown_tools_and_bad_arguments_get_corrections, |env| {
    let rt = events();
    for kind in KINDS {
        let fake = FakeProvider::start();
        fake.push(raw_call(kind, "c1", "bash", r#"{"command": "ls"}"#));
        fake.push(raw_call(kind, "c2", "python_execution", r#"{"cmd": "ls"}"#));
        if kind == ProviderKind::OpenAi {
            // Only OpenAI-style arguments can be malformed JSON text.
            fake.push(raw_call(
                kind,
                "c3",
                "python_execution",
                r#"{"code": "print(1)"#,
            ));
        }
        fake.push(raw_call(
            kind,
            "c4",
            "python_execution",
            r#"{"code": "   "}"#,
        ));
        fake.push(answer(kind, "understood"));
        let id = format!("wrong-{}", kind.as_str());
        let mut session = new_session(&env, settings(&env, &fake, kind), &id);
        let (end, events) = turn(&rt, &mut session, "go");
        assert_eq!(end.status, TurnStatus::Done, "{events:?}");
        let outputs: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                Event::BlockFinished { status, output, .. } => {
                    assert_eq!(*status, "rejected");
                    Some(output.clone())
                }
                _ => None,
            })
            .collect();
        assert!(
            outputs[0].contains("there is no tool 'bash'"),
            "{outputs:?}"
        );
        assert!(
            outputs[1].contains("takes one argument, \"code\""),
            "{outputs:?}"
        );
        if kind == ProviderKind::OpenAi {
            assert!(outputs[2].contains("not valid JSON"), "{outputs:?}");
        }
        assert!(
            outputs.last().unwrap().contains("the block is empty"),
            "{outputs:?}"
        );
        for o in &outputs {
            assert_eq!(o.lines().count(), 1, "{o}");
        }
        // The requests after each correction stayed valid for the provider (the fake
        // decoded them as JSON) and carried the correction as that call's result.
        let last = fake.requests().last().unwrap().body_str();
        assert!(last.contains("there is no tool"), "{last}");
        rt.block_on(session.shutdown());
    }
});

vistest!(the_prefix_is_byte_stable_over_twenty_turns, |env| {
    let rt = events();
    for kind in KINDS {
        let fake = FakeProvider::start();
        let id = format!("stable-{}", kind.as_str());
        let mut session = new_session(&env, settings(&env, &fake, kind), &id);
        for t in 0..20 {
            if t % 3 == 0 {
                fake.push(calls(
                    kind,
                    &format!("t{t}"),
                    &[&format!("v{t} = {t}"), "print('x' * 3)"],
                ));
            }
            fake.push(answer(kind, &format!("answer {t}")));
            let (end, _) = turn(&rt, &mut session, &format!("message {t}"));
            assert_eq!(end.status, TurnStatus::Done);
        }
        let reqs = fake.requests();
        assert!(reqs.len() >= 27);
        for pair in reqs.windows(2) {
            let (a, b) = (&pair[0].body, &pair[1].body);
            match kind {
                ProviderKind::OpenAi => {
                    // Byte for byte: request N without its closing `]}` starts request N+1.
                    assert!(b.starts_with(&a[..a.len() - 2]), "request bytes diverged");
                }
                ProviderKind::Anthropic => {
                    let (ma, mb) = (messages(a), messages(b));
                    assert_eq!(&mb[..ma.len()], &ma[..]);
                    let head = |body: &[u8]| -> Value {
                        let mut v: Value = serde_json::from_slice(body).unwrap();
                        v.as_object_mut().unwrap().remove("messages");
                        v
                    };
                    assert_eq!(head(a), head(b));
                }
            }
        }
        rt.block_on(session.shutdown());
    }
});

vistest!(a_catalog_change_is_appended_not_rewritten, |env| {
    let rt = events();
    for kind in KINDS {
        let fake = FakeProvider::start();
        let id = format!("catalog-{}", kind.as_str());
        let mut session = new_session(&env, settings(&env, &fake, kind), &id);
        let define = format!(
            "def shout_{k}(s):\n    \"\"\"Upper-case s.\"\"\"\n    return s.upper()\npromote('shout_{k}')",
            k = kind.as_str()
        );
        fake.push(calls(kind, "p", &[&define]));
        fake.push(answer(kind, "promoted"));
        assert_eq!(
            turn(&rt, &mut session, "make a helper").0.status,
            TurnStatus::Done
        );
        fake.push(answer(kind, "ok"));
        assert_eq!(turn(&rt, &mut session, "next").0.status, TurnStatus::Done);
        let reqs = fake.requests();
        // The update goes into the first request after the block that changed the catalog.
        let before = &reqs[0];
        let after = &reqs[1];
        let name = format!("shout_{}", kind.as_str());
        // The prefix (system, tools) is unchanged; the update comes after the history.
        let head = |body: &[u8]| -> Value {
            let mut v: Value = serde_json::from_slice(body).unwrap();
            v.as_object_mut().unwrap().remove("messages");
            match kind {
                ProviderKind::OpenAi => {
                    v["system"] =
                        serde_json::from_slice::<Value>(body).unwrap()["messages"][0].clone()
                }
                ProviderKind::Anthropic => {}
            }
            v
        };
        assert_eq!(head(&before.body), head(&after.body));
        assert!(!head(&after.body).to_string().contains(&name));
        let after_msgs = messages(&after.body);
        let before_msgs = messages(&before.body);
        assert_eq!(&after_msgs[..before_msgs.len()], &before_msgs[..]);
        let tail = serde_json::to_string(&after_msgs[before_msgs.len()..]).unwrap();
        assert!(
            tail.contains("Catalog update") && tail.contains(&name),
            "{tail}"
        );
        // Sent once: later requests keep it where it was and add nothing.
        let last = messages(&reqs[2].body);
        assert_eq!(&last[..after_msgs.len()], &after_msgs[..]);
        assert!(!serde_json::to_string(&last[after_msgs.len()..])
            .unwrap()
            .contains("Catalog update"));
        std::fs::remove_dir_all(env.workspace().join(".vis")).unwrap();
        rt.block_on(session.shutdown());
    }
});

vistest!(the_iteration_cap_ends_the_turn_with_a_note, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let mut s = settings(&env, &fake, ProviderKind::OpenAi);
    s.max_iterations = 3;
    let mut session = new_session(&env, s, "cap");
    fake.push(calls(ProviderKind::OpenAi, "a", &["1", "2"]));
    fake.push(calls(ProviderKind::OpenAi, "b", &["3", "4"]));
    let (end, events) = turn(&rt, &mut session, "loop");
    assert_eq!(end.status, TurnStatus::IterationLimit);
    assert!(end.text.contains("limit"), "{}", end.text);
    let statuses: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::BlockFinished { status, .. } => Some(status.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, ["ok", "ok", "ok", "rejected"]);
    assert_eq!(fake.requests().len(), 2);
    // The next message continues with the cap's note in the history.
    fake.push(answer(ProviderKind::OpenAi, "fine"));
    assert_eq!(turn(&rt, &mut session, "go on").0.status, TurnStatus::Done);
    assert!(fake.requests()[2]
        .body_str()
        .contains("reached its limit of 3 iterations"));
});

vistest!(
    usage_from_every_provider_is_normalized_in_health_records,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        fake.push(Reply::fixture("anthropic-thinking-text-tool-use.sse"));
        fake.push(answer(ProviderKind::Anthropic, "done"));
        let mut session = new_session(&env, settings(&env, &fake, ProviderKind::Anthropic), "norm");
        let (end, _) = turn(&rt, &mut session, "read it");
        assert_eq!(end.status, TurnStatus::Done);
        let health = Store::open(&env.db()).unwrap().requests("norm").unwrap();
        assert_eq!(health[0].input_tokens, Some(410 + 1800));
        assert_eq!(health[0].cached_tokens, Some(1800));
        assert_eq!(health[1].input_tokens, Some(1200));
        let _ = usage(0, 0, 0);
    }
);

vistest!(agents_md_is_in_the_prefix_and_changes_are_appended, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    std::fs::write(
        env.workspace().join("AGENTS.md"),
        "Always run the tests with -q.\n",
    )
    .unwrap();
    let mut session = new_session(&env, settings(&env, &fake, ProviderKind::OpenAi), "agents");
    fake.push(answer(ProviderKind::OpenAi, "ok"));
    turn(&rt, &mut session, "one");
    std::fs::write(
        env.workspace().join("AGENTS.md"),
        "Use tabs, never spaces.\n",
    )
    .unwrap();
    fake.push(answer(ProviderKind::OpenAi, "ok"));
    turn(&rt, &mut session, "two");
    fake.push(answer(ProviderKind::OpenAi, "ok"));
    turn(&rt, &mut session, "three");
    let reqs = fake.requests();
    let system = |i: usize| {
        reqs[i].json()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(system(0).contains(
        "Project instructions (AGENTS.md in the workspace):\nAlways run the tests with -q."
    ));
    // The prefix never changes; the new instructions come once, after the history.
    assert_eq!(system(0), system(2));
    let second = messages(&reqs[1].body);
    let all = serde_json::to_string(&second).unwrap();
    assert!(
        all.contains("AGENTS.md changed") && all.contains("Use tabs, never spaces."),
        "{all}"
    );
    let third = serde_json::to_string(&messages(&reqs[2].body)).unwrap();
    assert_eq!(third.matches("AGENTS.md changed").count(), 1);
    rt.block_on(session.shutdown());
});
