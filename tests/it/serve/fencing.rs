//! Fencing and losing a lease mid-work, on real `vis serve` nodes over one store: a node
//! frozen past its lease (SIGSTOP) that wakes after another node took the session over
//! writes nothing into it, a block cut short by a lost lease answers `503 lease_lost`, a
//! database restart during a turn leaves nothing half-written, and a node that lost a
//! session's lease writes nothing into the sub-sessions it ran for it.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::nodes::{
    configure, descendants, finished, lease_of, node, on_both_stores, outputs, script, steal_lease,
    still_runs, token, turn, ONE_AT_A_TIME,
};
use super::Client;
use crate::support::chat::events;
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::support::serve::{read_events, Sse};
use crate::support::{wait_until, TestEnv};

/// Sends `signal` (`STOP`, `CONT`) to the process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

on_both_stores!(
    a_frozen_node_that_wakes_after_losing_its_lease_writes_nothing,
    |env| {
        let fake = FakeProvider::start();
        script(&fake);
        configure(&env, &fake);
        let a = node(&env);
        let b = node(&env);
        let token = token(&env);
        let rt = events();
        let (id, late) = rt.block_on(async {
            let on_a = Client::at(&a.url, Some(&token));
            let id = on_a.create(&env).await;
            let evs = turn(&on_a, &id, "def f():\n    return 7\nprint('defined')").await;
            assert_eq!(finished(&evs), "done", "{evs:?}");
            // A block whose result reaches A only while A is frozen.
            let resp = on_a
                .turn(
                    &id,
                    "import time\nopen('started', 'w').close()\ntime.sleep(2)\nprint('late')",
                )
                .await;
            (id, tokio::spawn(read_events(resp, 10_000)))
        });
        assert!(wait_until(Duration::from_secs(60), || env
            .workspace()
            .join("started")
            .exists()));
        let a_pid = a.child.id();
        signal(a_pid, "STOP");
        let workers = descendants(a_pid as i32);
        // A's lease runs out while it is frozen; B takes the session over and runs a turn.
        assert!(
            wait_until(Duration::from_secs(30), || lease_of(&env, &id).is_none()),
            "A's lease never expired"
        );
        rt.block_on(async {
            let on_b = Client::at(&b.url, Some(&token));
            let evs = turn(&on_b, &id, "print('on b')").await;
            assert_eq!(finished(&evs), "done", "{evs:?}");
            assert_eq!(
                outputs(&evs),
                ["[vis] new worker: restored 1 definition: f\non b\n"]
            );
        });
        let holder = lease_of(&env, &id).unwrap();
        assert_eq!(holder.address, b.url);
        // A wakes: its late writes are refused, it says why on the turn's stream, drops the
        // session and stops the worker.
        signal(a_pid, "CONT");
        let evs = rt.block_on(late).unwrap();
        let lost = evs
            .iter()
            .find(|e| e.event == "error")
            .unwrap_or_else(|| panic!("no error on A's stream: {evs:?}"));
        assert_eq!(lost.data["kind"], "lease_lost", "{evs:?}");
        let message = lost.data["message"].as_str().unwrap();
        assert!(
            message.contains("moved to another node") && message.contains("send the request again"),
            "{message}"
        );
        assert!(
            wait_until(Duration::from_secs(30), || workers
                .iter()
                .all(|(p, start)| !still_runs(*p, start))),
            "A still runs the worker of a session it lost"
        );
        // The store holds B's history, row by row: A's block as B's takeover recorded it
        // (interrupted), nothing of A's after it, B's turn whole.
        let store = vis::store::Store::open(&env.db()).unwrap();
        let its: Vec<(i64, i64, String, String)> = store
            .iterations(&id)
            .unwrap()
            .into_iter()
            .map(|i| (i.turn, i.iteration, i.status.as_str().to_string(), i.output))
            .collect();
        assert_eq!(its.len(), 3, "{its:?}");
        assert_eq!((its[0].0, its[0].1, its[0].2.as_str()), (1, 1, "ok"));
        assert_eq!(
            (its[1].0, its[1].1, its[1].2.as_str()),
            (2, 1, "interrupted")
        );
        assert!(
            !its[1].3.contains("late"),
            "A's result was written: {its:?}"
        );
        assert_eq!(
            (its[2].0, its[2].1, its[2].2.as_str(), its[2].3.as_str()),
            (
                3,
                1,
                "ok",
                "[vis] new worker: restored 1 definition: f\non b\n"
            )
        );
        let turns: Vec<(i64, String)> = store
            .turns(&id)
            .unwrap()
            .into_iter()
            .map(|t| (t.turn, t.status.as_str().to_string()))
            .collect();
        assert_eq!(
            turns,
            [
                (1, "done".to_string()),
                (2, "interrupted".to_string()),
                (3, "done".to_string())
            ]
        );
        // The conversation: turns in order (nothing of turn 2 after turn 3 began), one answer
        // per call.
        let history = store.history(&id).unwrap();
        let order: Vec<(i64, &str)> = history.iter().map(|h| (h.turn, h.kind.as_str())).collect();
        assert_eq!(
            order,
            [
                (1, "user"),
                (1, "assistant"),
                (1, "tool_result"),
                (1, "assistant"),
                (2, "user"),
                (2, "assistant"),
                (2, "tool_result"),
                (3, "user"),
                (3, "assistant"),
                (3, "tool_result"),
                (3, "assistant"),
            ],
            "{history:?}"
        );
        let request_turns: Vec<i64> = store
            .requests(&id)
            .unwrap()
            .iter()
            .map(|r| r.turn)
            .collect();
        assert_eq!(request_turns, [1, 1, 2, 3, 3], "{request_turns:?}");
        assert_eq!(lease_of(&env, &id).unwrap().epoch, holder.epoch);
        // B goes on as if A had never woken.
        rt.block_on(async {
            let on_b = Client::at(&b.url, Some(&token));
            let evs = turn(&on_b, &id, "print(f())").await;
            assert_eq!(outputs(&evs), ["7\n"], "{evs:?}");
        });
    }
);

on_both_stores!(
    a_block_cut_short_by_a_lost_lease_answers_503_lease_lost,
    |env| {
        let fake = FakeProvider::start();
        script(&fake);
        configure(&env, &fake);
        let a = node(&env);
        let token = token(&env);
        let rt = events();
        let c = Client::at(&a.url, Some(&token));
        let id = rt.block_on(c.create(&env));
        let running = {
            let (c, id) = (Client::at(&a.url, Some(&token)), id.clone());
            rt.spawn(async move {
                c.req(Method::POST, &format!("/api/sessions/{id}/exec"))
                    .header("content-type", "application/json")
                    .body(
                        json!({"code": "import time\nopen('started', 'w').close()\ntime.sleep(60)"})
                            .to_string(),
                    )
                    .send()
                    .await
                    .unwrap()
            })
        };
        assert!(wait_until(Duration::from_secs(60), || env
            .workspace()
            .join("started")
            .exists()));
        // Another instance takes the lease (as if A's renewals had not reached the store).
        steal_lease(&env, &id);
        rt.block_on(async {
            let resp = running.await.unwrap();
            assert_eq!(resp.status(), 503);
            assert_eq!(
                resp.headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok()),
                Some("1")
            );
            let body: Value = resp.json().await.unwrap();
            assert_eq!(body["code"], "lease_lost", "{body}");
            let message = body["message"].as_str().unwrap();
            assert!(
                message.contains(&id)
                    && message.contains("lost its lease")
                    && message.contains("send the request again"),
                "{message}"
            );
        });
        // Nothing of the cut block was written after the lease was lost: its iteration is as
        // begun (running), for the holder to repair.
        let store = vis::store::Store::open(&env.db()).unwrap();
        let its = store.iterations(&id).unwrap();
        assert_eq!(its.len(), 1, "{its:?}");
        assert_eq!(its[0].status.as_str(), "running", "{its:?}");
    }
);

#[test]
fn a_database_restart_during_a_turn_ends_it_cleanly_and_the_node_goes_on() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A cluster of this test's own: the restart must not disturb the others.
    let cluster = crate::support::postgres::private_cluster("serve-restart");
    let env = TestEnv::new();
    env.use_postgres_at(cluster.database());
    let fake = FakeProvider::start();
    script(&fake);
    configure(&env, &fake);
    let a = node(&env);
    let token = token(&env);
    let rt = events();
    let c = Client::at(&a.url, Some(&token));
    let (id, running) = rt.block_on(async {
        let id = c.create(&env).await;
        let evs = turn(&c, &id, "x = 1").await;
        assert_eq!(finished(&evs), "done", "{evs:?}");
        let resp = c
            .turn(
                &id,
                "import time\nopen('started', 'w').close()\ntime.sleep(3)\nprint('after', x)",
            )
            .await;
        (id, tokio::spawn(read_events(resp, 10_000)))
    });
    assert!(wait_until(Duration::from_secs(60), || env
        .workspace()
        .join("started")
        .exists()));
    cluster.restart();
    let evs = rt.block_on(running).unwrap();
    // The turn completes (the pool reconnects), or ends with one clear error.
    let errors: Vec<&Sse> = evs.iter().filter(|e| e.event == "error").collect();
    match finished(&evs) {
        "done" => {
            assert!(errors.is_empty(), "{evs:?}");
            assert_eq!(outputs(&evs), ["after 1\n"], "{evs:?}");
        }
        "failed" => {
            assert_eq!(errors.len(), 1, "{evs:?}");
            let message = errors[0].data["message"].as_str().unwrap_or("");
            assert!(
                message.contains("PostgreSQL") || errors[0].data["kind"] == "lease_lost",
                "{message}"
            );
        }
        other => panic!("turn ended {other}: {evs:?}"),
    }
    // The node goes on without a restart.
    rt.block_on(async {
        let evs = turn(&c, &id, "print('next')").await;
        assert_eq!(finished(&evs), "done", "{evs:?}");
        assert!(outputs(&evs).last().unwrap().ends_with("next\n"), "{evs:?}");
    });
    // Nothing half-written: once the node loaded the session again, no turn or iteration is
    // left running, and every tool result points at a stored iteration.
    let store = vis::store::Store::open(&env.db()).unwrap();
    let turns = store.turns(&id).unwrap();
    assert!(
        turns.iter().all(|t| t.status.as_str() != "running"),
        "{turns:?}"
    );
    let its = store.iterations(&id).unwrap();
    assert!(
        its.iter().all(|i| i.status.as_str() != "running"),
        "{its:?}"
    );
    for h in store.history(&id).unwrap() {
        if h.kind.as_str() == "tool_result" {
            let at = h.iteration.unwrap();
            assert!(
                its.iter().any(|i| i.turn == h.turn && i.iteration == at),
                "{h:?} {its:?}"
            );
        }
    }
    drop(a);
}

on_both_stores!(
    a_node_that_lost_the_lease_writes_nothing_into_the_sub_sessions_it_ran,
    |env| {
        let fake = FakeProvider::start();
        // As `script`, except that a sub-session's first request is answered only after a
        // long while: the child is waiting on its model when its parent's lease is taken.
        fake.respond_with(|req| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            let last = messages.last().cloned().unwrap_or(Value::Null);
            if last["role"] == "tool" {
                return Reply::openai().text("Done.").build();
            }
            if last.to_string().contains("You are a sub-session") {
                let reply = Reply::openai()
                    .tool_call("c", "python_execution", r#"{"code": "print('child')"}"#)
                    .build();
                return Reply::delay(Duration::from_secs(120), reply);
            }
            let code = last["content"].as_str().unwrap_or("").to_string();
            Reply::openai()
                .tool_call(
                    "c",
                    "python_execution",
                    &json!({ "code": code }).to_string(),
                )
                .build()
        });
        configure(&env, &fake);
        let a = node(&env);
        let token = token(&env);
        let rt = events();
        let c = Client::at(&a.url, Some(&token));
        let id = rt.block_on(async {
            let id = c.create(&env).await;
            let evs = turn(&c, &id, "print('ready')").await;
            assert_eq!(finished(&evs), "done", "{evs:?}");
            id
        });
        // The parent's worker: once it is gone, A has shut the session down, its children
        // (and their last writes) first.
        let parent_worker = descendants(a.child.id() as i32);
        assert!(!parent_worker.is_empty(), "A runs the parent's worker");
        let running = {
            let resp = rt.block_on(c.turn(
                &id,
                "s = spawn('CHILD-F: wait for the model')\nprint(s.wait())",
            ));
            rt.spawn(read_events(resp, 10_000))
        };
        let store = vis::store::Store::open(&env.db()).unwrap();
        assert!(
            wait_until(Duration::from_secs(60), || fake
                .requests()
                .iter()
                .any(|r| r.body_str().contains("You are a sub-session"))),
            "the child never asked its model"
        );
        let child_id = store.children_of(&id).unwrap()[0].link.child.clone();
        // The child's records as they stand while it waits on its model.
        let snapshot = |store: &vis::store::Store| {
            let row = store.child(&child_id).unwrap().unwrap();
            let turns: Vec<(i64, String)> = store
                .turns(&child_id)
                .unwrap()
                .into_iter()
                .map(|t| (t.turn, t.status.as_str().to_string()))
                .collect();
            let history: Vec<(i64, String)> = store
                .history(&child_id)
                .unwrap()
                .into_iter()
                .map(|h| (h.turn, h.kind.as_str().to_string()))
                .collect();
            (
                row.status,
                row.answer,
                turns,
                history,
                store.iterations(&child_id).unwrap().len(),
                store.requests(&child_id).unwrap().len(),
            )
        };
        let before = snapshot(&*store);
        assert_eq!(before.0, "running", "{before:?}");
        assert_eq!(before.2, [(1, "running".to_string())], "{before:?}");
        // Another instance takes the parent's lease: A finds it lost, interrupts the block,
        // which cancels the child; the child's ending (its turn closed, its state) is a write
        // A may no longer make.
        steal_lease(&env, &id);
        let evs = rt.block_on(running).unwrap();
        assert!(
            evs.iter()
                .any(|e| e.event == "error" && e.data["kind"] == "lease_lost"),
            "{evs:?}"
        );
        assert!(
            wait_until(Duration::from_secs(60), || parent_worker
                .iter()
                .all(|(p, start)| !still_runs(*p, start))),
            "A still runs the parent's worker"
        );
        let after = snapshot(&*store);
        assert_eq!(
            after, before,
            "A wrote into the child after losing the lease"
        );
    }
);
