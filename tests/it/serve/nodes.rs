//! Several `vis serve` nodes over one store (three real processes on loopback sharing one
//! SQLite file): a session is run by the node holding its lease, requests to other nodes are
//! proxied to it (SSE included), a killed node's sessions are taken over once its leases
//! expire (the running turn repaired, definitions restored, the next request as the dead node
//! would have sent it), takeovers race safely, a node that cannot renew stops its worker, no
//! worker outlives its node, and bad node settings are refused.

use std::collections::HashSet;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use vis::store::{LeaseClaim, LeaseNode};

use super::Client;
use crate::support::chat::events;
use crate::support::fake_provider::{FakeProvider, Reply};
pub(super) use crate::support::procs::{descendants, still_runs};
use crate::support::serve::{read_events, ServeProcess, Sse};
use crate::support::{wait_until, TestEnv};
use crate::vistest;

/// The lease ttl of the tests' nodes (the shortest allowed).
const TTL: &str = "5";

/// The model of these tests: a user message is the code of one block, run once; after the
/// block, the answer is "Done.". Sessions never cross: each request carries its own history.
/// One three-node test at a time: each runs three servers and their workers (the load test
/// 200 sessions), and two at once on 2 cores can starve a node's lease renewal, after which
/// the node rightly gives the session up mid-block.
pub(super) static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The test twice: nodes over one SQLite file (one machine) and over one PostgreSQL database
/// (the tests' cluster), as `NAME::sqlite` and `NAME::postgres`.
macro_rules! on_both_stores {
    ($name:ident, |$env:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn sqlite() {
                let _serial = super::ONE_AT_A_TIME
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let $env = crate::support::TestEnv::new();
                $body
            }

            #[test]
            fn postgres() {
                let _serial = super::ONE_AT_A_TIME
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let $env = crate::support::TestEnv::new();
                $env.use_postgres();
                $body
            }
        }
    };
}
pub(super) use on_both_stores;

pub(super) fn script(fake: &FakeProvider) {
    fake.respond_with(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
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
            let code = last["content"].as_str().unwrap_or("").to_string();
            Reply::openai()
                .tool_call(
                    "c",
                    "python_execution",
                    &json!({ "code": code }).to_string(),
                )
                .usage(usage)
                .build()
        }
    });
}

pub(super) fn configure(env: &TestEnv, fake: &FakeProvider) {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        format!(
            "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\nmax_retries = 0\n\n[serve]\nlease_ttl = {TTL}\nmax_live_workers = 300\n",
            fake.base_url(super::OPENAI)
        ),
    )
    .unwrap();
}

/// A node: the real `vis serve` on the env's database.
pub(super) fn node(env: &TestEnv) -> ServeProcess {
    ServeProcess::start(env.command(&["serve"]))
}

pub(super) fn token(env: &TestEnv) -> String {
    std::fs::read_to_string(env.store_dir().join("serve-token"))
        .unwrap()
        .trim()
        .to_string()
}

fn kill9(node: &mut ServeProcess) {
    node.child.kill().unwrap();
    node.child.wait().unwrap();
}

pub(super) fn lease_of(env: &TestEnv, id: &str) -> Option<vis::store::LeaseHolder> {
    vis::store::Store::open(&env.db())
        .unwrap()
        .lease_holder(id)
        .unwrap()
}

/// Another instance takes session `id`'s lease, as if its holder's renewals had not reached
/// the store.
pub(super) fn steal_lease(env: &TestEnv, id: &str) {
    let store = vis::store::Store::open(&env.db()).unwrap();
    let held = store.lease_holder(id).unwrap().unwrap();
    let thief = LeaseNode {
        node_id: "thief",
        instance: "thief-1",
        address: "http://127.0.0.1:9",
    };
    assert!(matches!(
        store
            .acquire_lease(id, &thief, Duration::from_secs(600), Some(held.epoch))
            .unwrap(),
        LeaseClaim::Granted { .. }
    ));
}

pub(super) async fn turn(c: &Client, id: &str, message: &str) -> Vec<Sse> {
    read_events(c.turn(id, message).await, 10_000).await
}

pub(super) fn finished(evs: &[Sse]) -> &str {
    evs.iter()
        .rev()
        .find(|e| e.event == "turn_finished")
        .and_then(|e| e.data["status"].as_str())
        .unwrap_or("none")
}

pub(super) fn outputs(evs: &[Sse]) -> Vec<String> {
    evs.iter()
        .filter(|e| e.event == "block_finished")
        .map(|e| e.data["output"].as_str().unwrap_or("").to_string())
        .collect()
}

on_both_stores!(
    a_session_made_on_one_node_is_driven_through_another,
    |env| {
        let fake = FakeProvider::start();
        script(&fake);
        configure(&env, &fake);
        let a = node(&env);
        let b = node(&env);
        let c = node(&env);
        let token = token(&env);
        let rt = events();
        rt.block_on(async {
            let on_a = Client::at(&a.url, Some(&token));
            let on_b = Client::at(&b.url, Some(&token));
            let on_c = Client::at(&c.url, Some(&token));
            let id = on_a.create(&env).await;
            // A variable lives only in the worker that made it: reading it through B proves the
            // block ran in A's worker.
            let (s, v) = on_a.exec(&id, "x = 41").await;
            assert_eq!(s, 200, "{v}");
            let holder = lease_of(&env, &id).expect("A holds the lease while its worker lives");
            assert_eq!(holder.address, a.url);
            let evs = turn(&on_b, &id, "print(x + 1)").await;
            assert_eq!(finished(&evs), "done", "{evs:?}");
            assert_eq!(outputs(&evs), ["42\n"], "{evs:?}");
            // The events came through B as A numbered them; resuming through B after the first
            // few gives exactly the rest.
            let ids: Vec<&str> = evs.iter().map(|e| e.id.as_str()).collect();
            let cut = 2;
            let resumed = on_b
                .req(Method::GET, &format!("/api/sessions/{id}/events"))
                .header("last-event-id", ids[cut - 1])
                .send()
                .await
                .unwrap();
            assert_eq!(resumed.status(), 200);
            let rest = read_events(resumed, 10_000).await;
            let rest_ids: Vec<&str> = rest.iter().map(|e| e.id.as_str()).collect();
            assert_eq!(rest_ids, ids[cut..], "{rest:?}");
            // Details, context and exec work through C too; every node lists the session.
            let (s, detail) = on_c
                .json(Method::GET, &format!("/api/sessions/{id}"), None)
                .await;
            assert_eq!(s, 200, "{detail}");
            assert_eq!(detail["status"], "idle", "A's worker is alive: {detail}");
            let (s, v) = on_c.exec(&id, "print(x)").await;
            assert_eq!((s, v["output"].as_str().unwrap()), (200, "41\n"), "{v}");
            for client in [&on_a, &on_b, &on_c] {
                let (s, list) = client.json(Method::GET, "/api/sessions", None).await;
                assert_eq!(s, 200);
                assert!(list
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x["id"] == id.as_str()));
            }
            // A session made on C runs wherever it is first used (no lease until then).
            let other = on_c.create(&env).await;
            let evs = turn(&on_b, &other, "print('on b')").await;
            assert_eq!(outputs(&evs), ["on b\n"]);
            assert_eq!(lease_of(&env, &other).unwrap().address, b.url);
            // The metrics of every node carry its node label; B proxied requests.
            let (_, text) = on_b.json(Method::GET, "/metrics", None).await;
            let text = text.as_str().unwrap().to_string();
            let port = b.url.rsplit(':').next().unwrap();
            let proxied = text
                .lines()
                .find(|l| l.starts_with("vis_requests_proxied_total{"))
                .unwrap_or_else(|| panic!("{text}"));
            assert!(proxied.contains(&format!(":{port}\"")), "{proxied}");
            assert!(!proxied.ends_with(" 0"), "{proxied}");
            assert!(
                text.lines()
                    .filter(|l| !l.starts_with('#') && !l.is_empty())
                    .all(|l| l.starts_with("vis_") && l.contains("{node=\"")),
                "{text}"
            );
            // A bad token on B is refused by B itself, not passed on.
            let (s, _) = Client::at(&b.url, Some("wrong-token-wrong-token"))
                .exec(&id, "print(1)")
                .await;
            assert_eq!(s, 401);
        });
    }
);

on_both_stores!(
    a_killed_node_s_sessions_are_taken_over_and_none_of_its_workers_survive,
    |env| {
        let fake = FakeProvider::start();
        script(&fake);
        configure(&env, &fake);
        let mut a = node(&env);
        let b = node(&env);
        let token = token(&env);
        let rt = events();
        let id = rt.block_on(async {
            let on_a = Client::at(&a.url, Some(&token));
            let id = on_a.create(&env).await;
            let evs = turn(&on_a, &id, "def f():\n    return 7\nprint('defined')").await;
            assert_eq!(finished(&evs), "done", "{evs:?}");
            // A block that is still running when its node dies.
            let resp = on_a
                .turn(
                    &id,
                    "import time\nopen('started', 'w').close()\ntime.sleep(120)",
                )
                .await;
            tokio::spawn(read_events(resp, 10_000));
            id
        });
        assert!(wait_until(Duration::from_secs(60), || env
            .workspace()
            .join("started")
            .exists()));
        let workers = descendants(a.child.id() as i32);
        assert!(!workers.is_empty(), "A runs a worker");
        let last_of_a = fake.requests().last().unwrap().json();
        kill9(&mut a);
        // No process A started outlives it.
        assert!(
            wait_until(Duration::from_secs(30), || workers
                .iter()
                .all(|(p, start)| !still_runs(*p, start))),
            "workers of the killed node survive: {workers:?}"
        );
        rt.block_on(async {
            let on_b = Client::at(&b.url, Some(&token));
            // The next request through B waits out A's lease, then B takes the session over as a
            // restarted server would: what B will send next is what A would have sent.
            let (s, context) = on_b
                .json(Method::GET, &format!("/api/sessions/{id}/context"), None)
                .await;
            assert_eq!(s, 200, "{context}");
            let before = context["body"]["messages"].as_array().unwrap().clone();
            let sent_by_a = last_of_a["messages"].as_array().unwrap();
            assert_eq!(
                before[..sent_by_a.len()],
                sent_by_a[..],
                "B's history starts as A's last request"
            );
            let evs = turn(&on_b, &id, "print(f())").await;
            assert_eq!(finished(&evs), "done", "{evs:?}");
            assert_eq!(
                outputs(&evs),
                ["[vis] new worker: restored 1 definition: f\n7\n"],
                "definitions restored: {evs:?}"
            );
            let requests = fake.requests();
            let first_of_b = requests[requests.len() - 2].json();
            let mut expected = context["body"].clone();
            let mut messages = before.clone();
            messages.push(json!({"role": "user", "content": "print(f())"}));
            expected["messages"] = Value::Array(messages);
            assert_eq!(
                first_of_b, expected,
                "B's request is the one A's history leads to"
            );
            assert_eq!(lease_of(&env, &id).unwrap().address, b.url);
        });
        let store = vis::store::Store::open(&env.db()).unwrap();
        let its = store.iterations(&id).unwrap();
        let statuses: Vec<(i64, &str)> = its.iter().map(|i| (i.turn, i.status.as_str())).collect();
        assert_eq!(
            statuses,
            [(1, "ok"), (2, "interrupted"), (3, "ok")],
            "{its:?}"
        );
        let turns = store.turns(&id).unwrap();
        assert_eq!(turns[1].status, "interrupted");
    }
);

on_both_stores!(
    racing_takeovers_leave_the_session_to_exactly_one_node,
    |env| {
        let fake = FakeProvider::start();
        script(&fake);
        configure(&env, &fake);
        let nodes = [node(&env), node(&env), node(&env)];
        let token = token(&env);
        let rt = events();
        let id = rt.block_on(async { Client::at(&nodes[0].url, Some(&token)).create(&env).await });
        // The lease of a node that is gone: it expires at once.
        let store = vis::store::Store::open(&env.db()).unwrap();
        let ghost = LeaseNode {
            node_id: "ghost",
            instance: "ghost-1",
            address: "http://127.0.0.1:9",
        };
        assert_eq!(
            store
                .acquire_lease(&id, &ghost, Duration::from_millis(1), None)
                .unwrap(),
            LeaseClaim::Granted { epoch: 1 }
        );
        std::thread::sleep(Duration::from_millis(5));
        let statuses = rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..24 {
                let c = Client::at(&nodes[i % 3].url, Some(&token));
                let id = id.clone();
                tasks.push(tokio::spawn(async move {
                    c.exec(&id, "import os\nprint('ran')").await
                }));
            }
            let mut statuses = Vec::new();
            for t in tasks {
                let (s, v) = t.await.unwrap();
                if s == 200 {
                    assert_eq!(v["output"], "ran\n");
                } else {
                    assert_eq!((s, v["code"].as_str().unwrap()), (409, "busy"), "{v}");
                }
                statuses.push(s);
            }
            statuses
        });
        assert!(statuses.contains(&200));
        // Exactly one node ran the session: one takeover (epoch 2), and every block's turn was
        // run by one and the same process.
        let holder = store.lease_holder(&id).unwrap().unwrap();
        assert_eq!(holder.epoch, 2, "{holder:?}");
        let owners: HashSet<Option<String>> = store
            .turn_owners(&id)
            .unwrap()
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        assert_eq!(owners.len(), 1, "{owners:?}");
        let winner = nodes.iter().find(|n| n.url == holder.address).unwrap();
        let owner = owners.into_iter().next().unwrap().unwrap();
        assert!(
            owner.starts_with(&format!("{}:", winner.child.id())),
            "{owner}"
        );
    }
);

on_both_stores!(a_node_that_cannot_keep_its_lease_stops_the_worker, |env| {
    let fake = FakeProvider::start();
    script(&fake);
    configure(&env, &fake);
    let a = node(&env);
    let token = token(&env);
    let rt = events();
    let id = rt.block_on(async {
        let c = Client::at(&a.url, Some(&token));
        let id = c.create(&env).await;
        let (s, _) = c.exec(&id, "x = 1").await;
        assert_eq!(s, 200);
        id
    });
    let workers = descendants(a.child.id() as i32);
    assert!(!workers.is_empty());
    // Another instance takes the lease (as if A's renewals had not reached the store).
    steal_lease(&env, &id);
    assert!(
        wait_until(Duration::from_secs(30), || workers
            .iter()
            .all(|(p, start)| !still_runs(*p, start))),
        "A still runs the worker of a session it lost"
    );
    rt.block_on(async {
        let c = Client::at(&a.url, Some(&token));
        let (_, text) = c.json(Method::GET, "/metrics", None).await;
        let text = text.as_str().unwrap().to_string();
        assert!(
            text.lines()
                .any(|l| l.starts_with("vis_leases_lost_total{") && l.ends_with(" 1")),
            "{text}"
        );
        // The node drops the session after its worker is gone: shown parked once it has.
        let mut list = Value::Null;
        for _ in 0..100 {
            list = c.json(Method::GET, "/api/sessions", None).await.1;
            if list[0]["status"] == "parked" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(list[0]["status"], "parked", "{list}");
    });
});

vistest!(bad_node_settings_are_refused_with_the_fix, |env| {
    for (setting, says) in [
        ("node_id = \"gw 1\"", "`serve.node_id`"),
        ("node_id = \"\"", "1 to 64 characters"),
        (
            "advertise = \"ftp://10.0.0.5:21\"",
            "scheme must be http or https",
        ),
        ("advertise = \"http://10.0.0.5\"", "names no port"),
        ("advertise = \"http://10.0.0.5:7878/vis\"", "without a path"),
        ("advertise = \"10.0.0.5:7878\"", "`serve.advertise`"),
        ("lease_ttl = 1", "between 5 and 3600 seconds"),
        ("lease_ttl = \"long\"", "lease_ttl"),
    ] {
        std::fs::create_dir_all(env.config_dir()).unwrap();
        std::fs::write(
            env.config_dir().join("config.toml"),
            format!("[serve]\n{setting}\n"),
        )
        .unwrap();
        let out = env
            .command(&["serve", "--listen", "127.0.0.1:0"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{setting}: {stderr}");
        assert!(stderr.contains(says), "{setting}: {stderr}");
        assert!(!env.db().exists(), "nothing written for {setting}");
    }
});

/// Sessions, turns per session, and requests in flight of the load test.
const LOAD_SESSIONS: usize = 200;
const LOAD_TURNS: usize = 2;
const LOAD_IN_FLIGHT: usize = 16;

on_both_stores!(
    two_hundred_sessions_on_three_nodes_lose_nothing_when_a_node_dies_twice,
    |env| {
        use std::sync::{Arc, Mutex};
        let fake = FakeProvider::start();
        script(&fake);
        configure(&env, &fake);
        let nodes: Arc<Mutex<Vec<ServeProcess>>> =
            Arc::new(Mutex::new(vec![node(&env), node(&env), node(&env)]));
        let urls = || -> Vec<String> {
            nodes
                .lock()
                .unwrap()
                .iter()
                .map(|n| n.url.clone())
                .collect()
        };
        let token = token(&env);
        let rt = events();
        let ids: Vec<String> = rt.block_on(async {
            let mut ids = Vec::new();
            let us = urls();
            for i in 0..LOAD_SESSIONS {
                ids.push(Client::at(&us[i % 3], Some(&token)).create(&env).await);
            }
            ids
        });
        // What the clients saw finish: (session, turn, output).
        let seen: Arc<Mutex<Vec<(String, i64, String)>>> = Arc::new(Mutex::new(Vec::new()));
        // How often each block was sent (a turn cut short by a node's death is sent again).
        let sent: Arc<Mutex<std::collections::HashMap<(String, String), usize>>> =
            Arc::new(Mutex::new(Default::default()));
        let current: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(urls()));
        let work = {
            let (ids, token, seen, sent, current) = (
                ids.clone(),
                token.clone(),
                seen.clone(),
                sent.clone(),
                current.clone(),
            );
            std::thread::spawn(move || {
                events().block_on(async move {
                    let gate = Arc::new(tokio::sync::Semaphore::new(LOAD_IN_FLIGHT));
                    let mut tasks = Vec::new();
                    for (i, id) in ids.into_iter().enumerate() {
                        let (token, seen, sent, current, gate) = (
                            token.clone(),
                            seen.clone(),
                            sent.clone(),
                            current.clone(),
                            gate.clone(),
                        );
                        tasks.push(tokio::spawn(async move {
                            let _permit = gate.acquire_owned().await.unwrap();
                            for t in 0..LOAD_TURNS {
                                let code = format!("print('{id} {t}')");
                                for attempt in 0.. {
                                    assert!(attempt < 20, "{id} turn {t} never completed");
                                    // Through another node than the one that made it.
                                    let url =
                                        current.lock().unwrap()[(i + 1 + attempt) % 3].clone();
                                    *sent
                                        .lock()
                                        .unwrap()
                                        .entry((id.clone(), code.clone()))
                                        .or_default() += 1;
                                    let c = Client::at(&url, Some(&token));
                                    let Ok(resp) = c
                                        .req(Method::POST, &format!("/api/sessions/{id}/turns"))
                                        .header("content-type", "application/json")
                                        .body(json!({ "message": code }).to_string())
                                        .send()
                                        .await
                                    else {
                                        tokio::time::sleep(Duration::from_millis(200)).await;
                                        continue;
                                    };
                                    let evs = read_events(resp, 10_000).await;
                                    for e in evs.iter().filter(|e| e.event == "block_finished") {
                                        if e.data["status"] == "ok" {
                                            seen.lock().unwrap().push((
                                                id.clone(),
                                                e.data["turn"].as_i64().unwrap_or(-1),
                                                e.data["output"].as_str().unwrap_or("").to_string(),
                                            ));
                                        }
                                    }
                                    if finished(&evs) == "done" {
                                        break;
                                    }
                                    tokio::time::sleep(Duration::from_millis(200)).await;
                                }
                            }
                        }));
                    }
                    for t in tasks {
                        t.await.unwrap();
                    }
                })
            })
        };
        // Twice: kill a node with -9 while turns run, then start it again.
        for round in 0..2 {
            let total = LOAD_SESSIONS * LOAD_TURNS;
            let target = total * (round + 1) / 3;
            assert!(wait_until(Duration::from_secs(300), || seen
                .lock()
                .unwrap()
                .len()
                >= target
                || work.is_finished()));
            let mut list = nodes.lock().unwrap();
            kill9(&mut list[round]);
            let fresh = node(&env);
            current.lock().unwrap()[round] = fresh.url.clone();
            let dead = std::mem::replace(&mut list[round], fresh);
            std::mem::forget(dead);
        }
        work.join().unwrap();
        // Nothing lost: every block a client saw finish is stored once, as it was seen; nothing
        // duplicated: no block ran more often than it was sent, none under another session.
        let store = vis::store::Store::open(&env.db()).unwrap();
        let sent = sent.lock().unwrap().clone();
        let mut stored_ok = 0;
        for id in &ids {
            let its = store.iterations(id).unwrap();
            for t in 0..LOAD_TURNS {
                let code = format!("print('{id} {t}')");
                let runs = its
                    .iter()
                    .filter(|i| i.code == code && i.status == "ok")
                    .count();
                assert!(runs >= 1, "{id}: turn {t} is not stored");
                assert!(
                    runs <= sent[&(id.clone(), code.clone())],
                    "{id}: {code} ran more often than sent"
                );
            }
            assert!(
                its.iter().all(|i| i.code.contains(id.as_str())),
                "{id}: {its:?}"
            );
            stored_ok += its.iter().filter(|i| i.status == "ok").count();
        }
        for (id, turn, output) in seen.lock().unwrap().iter() {
            let its = store.iterations(id).unwrap();
            assert_eq!(
                its.iter()
                    .filter(|i| i.turn == *turn && i.status == "ok" && &i.output == output)
                    .count(),
                1,
                "{id} t{turn}: {output:?} seen but stored {its:?}"
            );
        }
        assert!(stored_ok >= LOAD_SESSIONS * LOAD_TURNS);
        // Every session still answers, through any node. An answer that says to retry (503
        // `lease_lost` or `moved`: a node that could not renew in time under this load gives
        // its sessions up) is retried as the API says, a few times; nothing else is.
        let us = urls();
        rt.block_on(async {
            for (i, id) in ids.iter().enumerate() {
                let mut answers = Vec::new();
                for _ in 0..5 {
                    let (s, v) = Client::at(&us[i % 3], Some(&token))
                        .exec(id, "print('still here')")
                        .await;
                    let retry =
                        s == 503 && matches!(v["code"].as_str(), Some("lease_lost" | "moved"));
                    answers.push((s, v));
                    if !retry {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                let (s, v) = answers.last().unwrap();
                assert_eq!(
                    (*s, v["output"].as_str().unwrap_or("")),
                    (200, "still here\n"),
                    "{id}: {answers:?}"
                );
            }
        });
        // Turns cut short by a node's death were repaired by the node that took over.
        for id in &ids {
            let turns = store.turns(id).unwrap();
            assert!(
                turns.iter().all(|t| t.status != "running"),
                "{id}: {turns:?}"
            );
        }
    }
);
