//! Sub-sessions (`spawn()`, issue 27 §3): fan-out with parallel requests, the parent's context
//! kept free of the children's work, the depth and concurrency caps, an interrupt cancelling
//! children, a kill -9 mid-fan-out and the resume, the records, and bad inputs. The children
//! are scripted per conversation at the fake provider (routed by a marker in their task).

use std::process::Stdio;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use vis::gateway::SpawnSettings;
use vis::protocol::TurnStatus;
use vis::providers::ProviderKind;
use vis::store::Store;

use crate::support::chat::{answer, calls, events, new_session, settings, turn};
use crate::support::fake_provider::{FakeProvider, Gate, Reply};
use crate::support::{wait_until, worker_pids_in};
use crate::vistest;

const KIND: ProviderKind = ProviderKind::OpenAi;

/// The text of every request body of `requests`, joined.
fn bodies(requests: &[crate::support::fake_provider::RecordedRequest]) -> String {
    requests.iter().map(|r| r.body_str()).collect()
}

vistest!(
    fan_out_of_four_runs_in_parallel_and_returns_the_answers,
    |env| {
        for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
            let fake = FakeProvider::start();
            // The children's first requests are answered only once all four are in flight.
            let gate = Gate::new(4);
            for k in 0..4 {
                fake.conversation(
                    &format!("CHILD-{k}"),
                    vec![
                        Reply::gated(
                            &gate,
                            calls(
                                kind,
                                &format!("c{k}"),
                                &[&format!("print('WORK-OF-CHILD-{k}')")],
                            ),
                        ),
                        answer(kind, &format!("answer {k}: no bugs")),
                    ],
                );
            }
            fake.push(calls(
            kind,
            "p",
            &["subs = [spawn(f'CHILD-{k}: review file{k}.py') for k in range(4)]\nprint(subs[0].status in ('queued', 'running'))\nprint([s.wait() for s in subs])"],
        ));
            fake.push(answer(kind, "all four reviewed"));
            let rt = events();
            let mut session = new_session(
                &env,
                settings(&env, &fake, kind),
                &format!("p-{}", kind.as_str()),
            );
            let (end, events) = turn(&rt, &mut session, "review the four files");
            assert_eq!(end.status, TurnStatus::Done, "{end:?}");
            assert_eq!(end.text, "all four reviewed");
            // Every child's first request reached the gate together.
            assert_eq!(gate.arrived(), 4);
            let parent = fake.requests_of("review the four files");
            assert_eq!(parent.len(), 2);
            let parent_text = bodies(&parent);
            for k in 0..4 {
                assert!(
                    parent_text.contains(&format!("answer {k}: no bugs")),
                    "{parent_text}"
                );
                // The parent's context holds only what its block printed, never a child's work.
                assert!(
                    !parent_text.contains(&format!("WORK-OF-CHILD-{k}")),
                    "{parent_text}"
                );
                let child = fake.requests_of(&format!("CHILD-{k}"));
                assert_eq!(child.len(), 2, "child {k}");
                assert!(child[1].body_str().contains(&format!("WORK-OF-CHILD-{k}")));
                // A child starts from the parent's system prompt and catalog.
                assert!(child[0].body_str().contains("python_execution"));
            }
            // The children are stored sessions linked to the parent's turn and iteration.
            let store = Store::open(&env.db()).unwrap();
            let children = store.children_of(session.id()).unwrap();
            assert_eq!(children.len(), 4);
            for row in &children {
                assert_eq!((row.link.turn, row.link.iteration), (1, 1));
                assert_eq!(row.status, "done");
                assert!(row.answer.as_deref().unwrap().contains("no bugs"));
                assert_eq!(row.requests, 2);
            }
            // The turn's events report each child's start and end.
            let started = events
                .iter()
                .filter(|e| e.kind() == "child_started")
                .count();
            let finished = events
                .iter()
                .filter(|e| e.kind() == "child_finished")
                .count();
            assert_eq!((started, finished), (4, 4));
            rt.block_on(session.shutdown());
            // No worker outlives its session, the children's included.
            assert!(wait_until(Duration::from_secs(10), || worker_pids_in(
                &env.workspace()
            )
            .is_empty()));
        }
    }
);

vistest!(a_child_cannot_spawn_beyond_the_depth_cap, |env| {
    let fake = FakeProvider::start();
    fake.conversation(
        "CHILD-D",
        vec![
            calls(KIND, "d", &["try:\n    spawn('GRANDCHILD: too deep')\nexcept RuntimeError as e:\n    print('REFUSED', e)"]),
            answer(KIND, "could not go deeper"),
        ],
    );
    fake.push(calls(
        KIND,
        "p",
        &["print(spawn('CHILD-D: delegate further').wait())"],
    ));
    fake.push(answer(KIND, "done"));
    let rt = events();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "depth");
    session.set_spawn(SpawnSettings {
        max_depth: 1,
        ..SpawnSettings::default()
    });
    let (end, _) = turn(&rt, &mut session, "go");
    assert_eq!(end.status, TurnStatus::Done, "{end:?}");
    let child = fake.requests_of("CHILD-D");
    let seen = child[1].body_str();
    assert!(
        seen.contains("REFUSED spawn: this session is at depth 1 and [spawn] max_depth = 1 allows no deeper sub-sessions"),
        "{seen}"
    );
    assert!(fake.requests_of("GRANDCHILD").is_empty());
    let store = Store::open(&env.db()).unwrap();
    let child_id = &store.children_of("depth").unwrap()[0].link.child;
    assert!(store.children_of(child_id).unwrap().is_empty());
    rt.block_on(session.shutdown());
});

vistest!(children_over_the_parallel_cap_wait_in_the_queue, |env| {
    let fake = FakeProvider::start();
    // Two children hold their first request until the parent's next request arrives: while
    // they do, the third is queued.
    let gate = Gate::new(3);
    for k in 0..3 {
        fake.conversation(
            &format!("CHILD-Q{k}"),
            vec![Reply::gated(&gate, answer(KIND, &format!("q{k} done")))],
        );
    }
    fake.push(calls(
        KIND,
        "p",
        &["import time\nsubs = [spawn(f'CHILD-Q{k}: part {k}') for k in range(3)]\nwhile sum(s.status == 'running' for s in subs) < 2:\n    time.sleep(0.01)\nprint('STATES', sorted(s.status for s in subs))"],
    ));
    fake.push(Reply::gated(
        &gate,
        calls(KIND, "p2", &["print([s.wait() for s in subs])"]),
    ));
    fake.push(answer(KIND, "all parts"));
    let rt = events();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "cap");
    session.set_spawn(SpawnSettings {
        max_parallel: 2,
        ..SpawnSettings::default()
    });
    let (end, _) = turn(&rt, &mut session, "three parts");
    assert_eq!(end.status, TurnStatus::Done, "{end:?}");
    let reqs = fake.requests();
    let parent: Vec<_> = reqs
        .iter()
        .filter(|r| {
            crate::support::fake_provider::first_user_text(&r.body)
                .unwrap()
                .contains("three parts")
        })
        .collect();
    assert_eq!(parent.len(), 3);
    let second = parent[1].body_str();
    assert!(
        second.contains("STATES ['queued', 'running', 'running']"),
        "{second}"
    );
    let third = parent[2].body_str();
    assert!(
        third.contains("['q0 done', 'q1 done', 'q2 done']"),
        "{third}"
    );
    rt.block_on(session.shutdown());
});

vistest!(interrupting_the_parent_block_cancels_its_children, |env| {
    let fake = FakeProvider::start();
    // The children's requests never get an answer (the gate wants more than come).
    let gate = Gate::new(99);
    for k in 0..2 {
        fake.conversation(
            &format!("CHILD-I{k}"),
            vec![Reply::gated(&gate, answer(KIND, "never"))],
        );
    }
    fake.push(calls(
        KIND,
        "p",
        &["subs = [spawn(f'CHILD-I{k}: slow work') for k in range(2)]\nprint([s.wait() for s in subs])"],
    ));
    let rt = events();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "intr");
    let stop = CancellationToken::new();
    let end = rt.block_on(async {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let stopper = stop.clone();
        let gate_seen = gate.clone();
        tokio::spawn(async move {
            while gate_seen.arrived() < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stopper.cancel(); // what Ctrl-C in chat and POST …/interrupt in serve do
        });
        session
            .run_turn("two slow parts", &tx, &stop)
            .await
            .unwrap()
    });
    assert_eq!(end.status, TurnStatus::Interrupted, "{end:?}");
    let store = Store::open(&env.db()).unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || store
            .children_of("intr")
            .unwrap()
            .iter()
            .all(|c| c.status == "cancelled")),
        "{:?}",
        store.children_of("intr").unwrap()
    );
    // The children's turns ended as interrupted, and their workers are gone.
    for child in store.children_of("intr").unwrap() {
        let turns = store.turns(&child.link.child).unwrap();
        assert_eq!(turns[0].status, TurnStatus::Interrupted, "{turns:?}");
    }
    rt.block_on(session.shutdown());
    assert!(wait_until(Duration::from_secs(10), || worker_pids_in(
        &env.workspace()
    )
    .is_empty()));
});

vistest!(bad_spawn_inputs_are_refused_with_what_to_do, |env| {
    let fake = FakeProvider::start();
    let code = r#"
for label, call in [
    ("empty", lambda: spawn("   ")),
    ("zero", lambda: spawn("CHILD-X", max_iterations=0)),
    ("model", lambda: spawn("CHILD-X", model="no-such-model")),
    ("tools", lambda: spawn("CHILD-X", tools=["cat", "no_such_tool"])),
    ("tools-type", lambda: spawn("CHILD-X", tools="some")),
    ("wait", lambda: Sub({"id": "s-nothere", "status": "running"}).wait()),
]:
    try:
        call()
        print(label, "ACCEPTED")
    except Exception as e:
        print(label, type(e).__name__, e)
"#;
    fake.push(calls(KIND, "p", &[code]));
    fake.push(answer(KIND, "checked"));
    let rt = events();
    let mut session = new_session(&env, settings(&env, &fake, KIND), "bad");
    let (end, _) = turn(&rt, &mut session, "try bad calls");
    assert_eq!(end.status, TurnStatus::Done, "{end:?}");
    let seen = fake.requests()[1].body_str();
    for needle in [
        "empty ValueError spawn: the task is empty; say what the sub-session should do",
        "zero ValueError spawn: max_iterations must be between 1 and 1000, got 0",
        "model RuntimeError spawn: model \\\"no-such-model\\\" is not configured for sub-sessions; use the session's model (openai/fake-model) with model=None, or list the model in [spawn] models in config.toml",
        "tools ValueError spawn: tools names 'no_such_tool', not a public name here",
        "tools-type ValueError spawn(tools=...): \\\"all\\\", or a list of public names",
        "wait RuntimeError no sub-session \\\"s-nothere\\\" of this session; subs() lists them",
    ] {
        assert!(seen.contains(needle), "missing {needle:?} in\n{seen}");
    }
    assert!(!seen.contains("ACCEPTED\\n"), "{seen}");
    // Nothing was started or stored.
    assert!(fake.requests_of("CHILD-X").is_empty());
    let store = Store::open(&env.db()).unwrap();
    assert!(store.children_of("bad").unwrap().is_empty());
    assert_eq!(store.list_sessions().unwrap().len(), 1);
    rt.block_on(session.shutdown());
});

vistest!(
    a_child_restricted_to_some_tools_cannot_call_the_rest,
    |env| {
        let fake = FakeProvider::start();
        fake.conversation(
        "CHILD-T",
        vec![
            calls(KIND, "t", &["print('cat' in dir(), 'sh' in dir(), 'grep' in dir())\ntry:\n    sh('true')\nexcept NameError as e:\n    print('NO SH', e)"]),
            answer(KIND, "restricted"),
        ],
    );
        fake.push(calls(
            KIND,
            "p",
            &["print(spawn('CHILD-T: read only', tools=['cat']).wait())"],
        ));
        fake.push(answer(KIND, "ok"));
        let rt = events();
        let mut session = new_session(&env, settings(&env, &fake, KIND), "tools");
        let (end, _) = turn(&rt, &mut session, "restricted child");
        assert_eq!(end.status, TurnStatus::Done, "{end:?}");
        let child = fake.requests_of("CHILD-T");
        let seen = child[1].body_str();
        assert!(seen.contains("True False False"), "{seen}");
        assert!(seen.contains("NO SH name 'sh' is not defined"), "{seen}");
        rt.block_on(session.shutdown());
    }
);

vistest!(
    a_child_with_fewer_tools_asks_before_its_worker_is_up,
    |env| {
        // An extension whose import waits while `hold` exists: a worker started meanwhile
        // is not up until the test removes it (after the child's first request came).
        let hold = env.workspace().join("hold");
        let extensions = env.config_dir().join("extensions");
        std::fs::create_dir_all(&extensions).unwrap();
        std::fs::write(
            extensions.join("holdup.py"),
            format!(
                "import os, time\nfrom vis.extension import register\n\n_until = time.time() + 60\nwhile os.path.exists({hold:?}) and time.time() < _until:\n    time.sleep(0.01)\n\n\n@register\ndef ping() -> str:\n    \"\"\"Answers pong.\"\"\"\n    return 'pong'\n"
            ),
        )
        .unwrap();
        let fake = FakeProvider::start();
        fake.conversation(
            "CHILD-L",
            vec![
                calls(
                    KIND,
                    "l",
                    &["print(holdup.ping(), 'sh' in dir(), 'cat' in dir())"],
                ),
                answer(KIND, "lazy child done"),
            ],
        );
        fake.push(calls(
            KIND,
            "p",
            &[&format!(
                "open({hold:?}, 'w').close()\nprint(spawn('CHILD-L: ping', tools=['cat', 'holdup']).wait())"
            )],
        ));
        fake.push(answer(KIND, "ok"));
        let rt = events();
        let mut session = new_session(&env, settings(&env, &fake, KIND), "lazy");
        let (end, came) = std::thread::scope(|scope| {
            let watcher = scope.spawn(|| {
                let came = wait_until(Duration::from_secs(30), || {
                    !fake.requests_of("CHILD-L").is_empty()
                });
                // Released in any case, so that a failure does not hang the test.
                let _ = std::fs::remove_file(&hold);
                came
            });
            let (end, _) = turn(&rt, &mut session, "a child with two tools");
            (end, watcher.join().unwrap())
        });
        assert_eq!(end.status, TurnStatus::Done, "{end:?}");
        assert!(came, "the child's first request waited for its worker");
        let child = fake.requests_of("CHILD-L");
        assert_eq!(child.len(), 2);
        // Its catalog was rendered without the names it leaves out, exactly as its worker
        // then reported it: no catalog update follows.
        let first = child[0].body_str();
        assert!(first.contains("holdup"), "{first}");
        let second = child[1].body_str();
        assert!(second.contains("pong False True"), "{second}");
        assert!(!second.contains("Catalog update"), "{second}");
        let parent = fake.requests_of("a child with two tools");
        assert!(parent[1].body_str().contains("lazy child done"));
        rt.block_on(session.shutdown());
    }
);

vistest!(
    sessions_show_lists_the_children_and_list_marks_them,
    |env| {
        let fake = FakeProvider::start();
        fake.conversation("CHILD-R", vec![answer(KIND, "the answer\nsecond line")]);
        fake.push(calls(
            KIND,
            "p",
            &["print(spawn('CHILD-R: one job').wait())"],
        ));
        fake.push(answer(KIND, "done"));
        let rt = events();
        let mut session = new_session(&env, settings(&env, &fake, KIND), "rec");
        let (end, _) = turn(&rt, &mut session, "records");
        assert_eq!(end.status, TurnStatus::Done, "{end:?}");
        rt.block_on(session.shutdown());
        let store = Store::open(&env.db()).unwrap();
        let child = store.children_of("rec").unwrap()[0].link.child.clone();
        let show = env.vis(&["sessions", "show", "rec"]);
        assert_eq!(show.code, 0, "{}", show.stderr);
        assert!(show.stdout.contains("sub-sessions:"), "{}", show.stdout);
        assert!(show.stdout.contains(&child), "{}", show.stdout);
        assert!(show.stdout.contains("t1/i1  done"), "{}", show.stdout);
        // One line per child: its answer's first line only.
        let line = show
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with(child.as_str()))
            .unwrap();
        assert!(line.contains("t1/i1  done"), "{line}");
        assert!(line.ends_with("the answer"), "{line}");
        assert!(
            show.stdout.contains("children: 1 sub-session"),
            "{}",
            show.stdout
        );
        let shown_child = env.vis(&["sessions", "show", &child]);
        assert!(
            shown_child.stdout.contains("sub-session of rec (t1/i1)"),
            "{}",
            shown_child.stdout
        );
        let list = env.vis(&["sessions", "list"]);
        let line = list
            .stdout
            .lines()
            .find(|l| l.starts_with(&child))
            .unwrap()
            .to_string();
        assert!(line.contains("↳ rec"), "{line}");
    }
);

vistest!(kill_9_mid_fan_out_then_resume_repairs_the_children, |env| {
    let fake = FakeProvider::start();
    let gate = Gate::new(99);
    for k in 0..2 {
        fake.conversation(
            &format!("CHILD-K{k}"),
            vec![Reply::gated(&gate, answer(KIND, "never"))],
        );
    }
    fake.push(calls(
        KIND,
        "p",
        &["subs = [spawn(f'CHILD-K{k}: long job') for k in range(2)]\nprint([s.wait() for s in subs])"],
    ));
    let base = [
        "chat",
        "--provider",
        "openai",
        "--base-url",
        &fake.base_url(KIND),
        "--model",
        "fake-model",
    ];
    let mut args = base.to_vec();
    args.extend(["-m", "fan out"]);
    let mut gateway = env
        .command(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(60), || gate.arrived() >= 2));
    gateway.kill().unwrap(); // SIGKILL, mid-fan-out
    gateway.wait().unwrap();
    let ws = env.workspace();
    assert!(
        wait_until(Duration::from_secs(10), || worker_pids_in(&ws).is_empty()),
        "a worker survived the gateway"
    );
    fake.push(calls(
        KIND,
        "q",
        &["for s in subs():\n    print('SUB', s.id, s.status)"],
    ));
    fake.push(answer(KIND, "resumed"));
    let mut args = base.to_vec();
    args.extend(["--resume", "-m", "what happened"]);
    let run = env.vis(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("was interrupted when the gateway stopped"),
        "{}",
        run.stderr
    );
    let store = Store::open(&env.db()).unwrap();
    let parent = store
        .list_sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.parent_session.is_none())
        .unwrap()
        .id;
    let children = store.children_of(&parent).unwrap();
    assert_eq!(children.len(), 2);
    for child in &children {
        assert_eq!(child.status, "interrupted");
        let turns = store.turns(&child.link.child).unwrap();
        assert_eq!(turns[0].status, TurnStatus::Interrupted, "{turns:?}");
        assert!(
            run.stdout
                .contains(&format!("SUB {} interrupted", child.link.child)),
            "{}",
            run.stdout
        );
    }
    assert!(wait_until(Duration::from_secs(10), || worker_pids_in(&ws).is_empty()));
});

vistest!(
    a_childs_stale_edit_is_refused_whole_with_the_current_lines,
    |env| {
        std::fs::write(env.workspace().join("shared.txt"), "alpha\nbeta\n").unwrap();
        let fake = FakeProvider::start();
        // The child reads the file; another writer changes it; the child's patch with the old
        // address is refused and nothing is written.
        let code = "import re\naddr = re.search(r'^(\\d+:[a-z]+)\\|', str(cat('shared.txt')), re.M).group(1)\nopen('shared.txt', 'w').write('ALPHA from another session\\nbeta\\n')\ntry:\n    patch('shared.txt', [(addr, 'child edit')])\nexcept PatchError as e:\n    print('STALE', e)";
        fake.conversation(
            "CHILD-E",
            vec![
                calls(KIND, "e", &[code]),
                answer(KIND, "the file changed under me"),
            ],
        );
        fake.push(calls(
            KIND,
            "p",
            &["print(spawn('CHILD-E: edit shared.txt').wait())"],
        ));
        fake.push(answer(KIND, "ok"));
        let rt = events();
        let mut session = new_session(&env, settings(&env, &fake, KIND), "stale");
        let (end, _) = turn(&rt, &mut session, "edit");
        assert_eq!(end.status, TurnStatus::Done, "{end:?}");
        let seen = fake.requests_of("CHILD-E")[1].body_str();
        assert!(seen.contains("STALE"), "{seen}");
        assert!(seen.contains("ALPHA from another session"), "{seen}");
        let text = std::fs::read_to_string(env.workspace().join("shared.txt")).unwrap();
        assert_eq!(text, "ALPHA from another session\nbeta\n");
        rt.block_on(session.shutdown());
    }
);
