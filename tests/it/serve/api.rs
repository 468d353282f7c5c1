//! Every endpoint (bad input included), turns as SSE and their resumption, interrupts,
//! graceful shutdown and restart, worker parking, metrics and OpenAPI.

use std::time::Duration;

use serde_json::{json, Value};

use super::{Client, OPENAI};
use crate::support::chat::{answer, calls, events};
use crate::support::fake_provider::FakeProvider;
use crate::support::serve::{read_events, ServerConfig, TestServer};
use crate::support::wait_until;
use crate::vistest;

vistest!(a_turn_streams_as_server_sent_events, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        fake.push(calls(OPENAI, "a", &["print(6 * 7)"]));
        fake.push(answer(OPENAI, "It is 42."));
        let resp = c.turn(&id, "compute").await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let evs = read_events(resp, 1000).await;
        let kinds: Vec<&str> = evs.iter().map(|e| e.event.as_str()).collect();
        for k in [
            "turn_started",
            "request_started",
            "text_delta",
            "response_finished",
            "block_started",
            "block_finished",
            "turn_finished",
        ] {
            assert!(kinds.contains(&k), "{k} missing in {kinds:?}");
        }
        let block = evs.iter().find(|e| e.event == "block_finished").unwrap();
        assert_eq!(block.data["output"], "42\n");
        assert_eq!(block.data["status"], "ok");
        assert!(block.data["wall_ms"].is_u64());
        let started = evs.iter().find(|e| e.event == "block_started").unwrap();
        assert_eq!(started.data["code"], "print(6 * 7)");
        let usage = evs.iter().find(|e| e.event == "response_finished").unwrap();
        assert_eq!(usage.data["usage"]["input_tokens"], 1000);
        assert_eq!(evs.last().unwrap().data["status"], "done");
        assert_eq!(evs.last().unwrap().data["text"], "It is 42.");
        // Ids are unique and increasing.
        let ns: Vec<u64> = evs
            .iter()
            .map(|e| e.id.rsplit('-').next().unwrap().parse().unwrap())
            .collect();
        assert!(ns.windows(2).all(|w| w[1] == w[0] + 1), "{ns:?}");
        // The session now shows it.
        let (_, s) = c
            .json(reqwest::Method::GET, &format!("/api/sessions/{id}"), None)
            .await;
        assert_eq!(s["turns"].as_array().unwrap().len(), 1);
        assert_eq!(s["requests"].as_array().unwrap().len(), 2);
        assert_eq!(s["iterations"][0]["output"], "42\n");
        let (_, list) = c.json(reqwest::Method::GET, "/api/sessions", None).await;
        assert_eq!(list[0]["input_tokens"], 2200);
        assert_eq!(list[0]["status"], "idle");
        // The next request, as `vis context` shows it.
        let (status, ctx) = c
            .json(
                reqwest::Method::GET,
                &format!("/api/sessions/{id}/context"),
                None,
            )
            .await;
        assert_eq!(status, 200);
        assert!(
            ctx["body"]["messages"].as_array().unwrap().len() >= 4,
            "{ctx}"
        );
    });
});

vistest!(a_reconnecting_client_gets_what_it_missed, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        fake.push(calls(
            OPENAI,
            "a",
            &["import time\ntime.sleep(0.5)\nprint('slow')"],
        ));
        fake.push(answer(OPENAI, "done"));
        // Read three events, then drop the connection mid-turn.
        let first = read_events(c.turn(&id, "go").await, 3).await;
        assert_eq!(first.len(), 3);
        let last = first.last().unwrap().id.clone();
        let resp = c
            .req(reqwest::Method::GET, &format!("/api/sessions/{id}/events"))
            .header("last-event-id", &last)
            .send()
            .await
            .unwrap();
        let rest = read_events(resp, 1000).await;
        let n = |e: &crate::support::serve::Sse| -> u64 {
            e.id.rsplit('-').next().unwrap().parse().unwrap()
        };
        assert_eq!(
            n(&rest[0]),
            n(first.last().unwrap()) + 1,
            "a gap or a repeat"
        );
        assert!(rest.windows(2).all(|w| n(&w[1]) == n(&w[0]) + 1));
        assert_eq!(rest.last().unwrap().event, "turn_finished");
        assert!(rest
            .iter()
            .any(|e| e.event == "block_finished" && e.data["output"] == "slow\n"));
        // After the turn, the same request replays and ends.
        let resp = c
            .req(
                reqwest::Method::GET,
                &format!("/api/sessions/{id}/events?after={last}"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(read_events(resp, 1000).await.len(), rest.len());
    });
});

vistest!(bad_requests_get_json_errors_with_stable_codes, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let get = reqwest::Method::GET;
        let post = reqwest::Method::POST;
        let del = reqwest::Method::DELETE;
        let cases: Vec<(reqwest::Method, &str, Option<Value>, u16, &str)> = vec![
            (get.clone(), "/api/sessions/nope", None, 404, "not_found"),
            (
                get.clone(),
                "/api/sessions/bad%20id",
                None,
                400,
                "bad_request",
            ),
            (
                post.clone(),
                "/api/sessions/nope/turns",
                Some(json!({"message": "x"})),
                404,
                "not_found",
            ),
            (
                post.clone(),
                "/api/sessions/nope/interrupt",
                None,
                404,
                "not_found",
            ),
            (del.clone(), "/api/sessions/nope", None, 404, "not_found"),
            (
                post.clone(),
                "/api/sessions",
                Some(json!({"workspace": "/no/such/dir"})),
                400,
                "bad_request",
            ),
            (
                post.clone(),
                "/api/sessions",
                Some(json!({"wrong": 1})),
                400,
                "bad_request",
            ),
            (get.clone(), "/no/route", None, 404, "not_found"),
        ];
        for (m, path, body, status, code) in cases {
            let (s, v) = c.json(m, path, body).await;
            assert_eq!(
                (s, v["code"].as_str().unwrap()),
                (status, code),
                "{path}: {v}"
            );
            assert!(v["message"].as_str().unwrap().len() > 10, "{v}");
        }
        let id = c.create(&env).await;
        let raw = c
            .req(post.clone(), &format!("/api/sessions/{id}/turns"))
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(raw.status(), 400);
        let (s, v) = c
            .json(
                post.clone(),
                &format!("/api/sessions/{id}/turns"),
                Some(json!({"message": "  "})),
            )
            .await;
        assert_eq!((s, v["code"].as_str().unwrap()), (400, "bad_request"));
        let (s, v) = c
            .json(
                post.clone(),
                &format!("/api/sessions/{id}/exec"),
                Some(json!({"code": ""})),
            )
            .await;
        assert_eq!(
            (s, v["code"].as_str().unwrap()),
            (400, "bad_request"),
            "{v}"
        );
        let (s, v) = c
            .json(
                del.clone(),
                &format!("/api/sessions/{id}?history=maybe"),
                None,
            )
            .await;
        assert_eq!((s, v["code"].as_str().unwrap()), (400, "bad_request"));
        let (s, v) = c
            .json(post.clone(), &format!("/api/sessions/{id}/interrupt"), None)
            .await;
        assert_eq!((s, v["code"].as_str().unwrap()), (409, "idle"));
        // Nothing was recorded by any of them.
        let (_, list) = c.json(get, "/api/sessions", None).await;
        assert_eq!(list.as_array().unwrap().len(), 1);
        assert_eq!(list[0]["turns"], 0);
        assert_eq!(fake.request_count(), 0);
    });
});

vistest!(a_busy_session_answers_409_and_can_be_interrupted, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        fake.push(calls(
            OPENAI,
            "a",
            &["import time\nopen('started', 'w').close()\ntime.sleep(60)"],
        ));
        let resp = c.turn(&id, "sleep").await;
        let reader = tokio::spawn(read_events(resp, 1000));
        let started = env.workspace().join("started");
        assert!(wait_until(Duration::from_secs(30), || started.exists()));
        let (s, v) = c
            .json(
                reqwest::Method::POST,
                &format!("/api/sessions/{id}/turns"),
                Some(json!({"message": "again"})),
            )
            .await;
        assert_eq!((s, v["code"].as_str().unwrap()), (409, "busy"), "{v}");
        assert!(v["message"].as_str().unwrap().contains("interrupt"), "{v}");
        let (s, _) = c.exec(&id, "1").await;
        assert_eq!(s, 409);
        let (s, v) = c
            .json(
                reqwest::Method::DELETE,
                &format!("/api/sessions/{id}"),
                None,
            )
            .await;
        assert_eq!((s, v["code"].as_str().unwrap()), (409, "busy"));
        let (_, list) = c.json(reqwest::Method::GET, "/api/sessions", None).await;
        assert_eq!(list[0]["status"], "running");
        let (s, _) = c
            .json(
                reqwest::Method::POST,
                &format!("/api/sessions/{id}/interrupt"),
                None,
            )
            .await;
        assert_eq!(s, 200);
        let evs = reader.await.unwrap();
        let block = evs.iter().find(|e| e.event == "block_finished").unwrap();
        assert_eq!(block.data["status"], "interrupted");
        assert_eq!(evs.last().unwrap().data["status"], "interrupted");
        // The session is usable again.
        let (s, v) = c.exec(&id, "print('back')").await;
        assert_eq!((s, v["output"].as_str().unwrap()), (200, "back\n"), "{v}");
    });
});

vistest!(openapi_describes_every_route, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let (s, doc) = c.json(reqwest::Method::GET, "/openapi.json", None).await;
        assert_eq!(s, 200);
        let paths = doc["paths"].as_object().unwrap();
        for p in [
            "/api/sessions",
            "/api/sessions/{id}",
            "/api/sessions/{id}/turns",
            "/api/sessions/{id}/events",
            "/api/sessions/{id}/interrupt",
            "/api/sessions/{id}/exec",
            "/api/sessions/{id}/context",
            "/api/providers",
            "/api/login",
            "/api/logout",
        ] {
            assert!(paths.contains_key(p), "{p} missing");
        }
        assert!(paths["/api/sessions/{id}"].get("delete").is_some());
        assert!(doc["components"]["schemas"].get("ApiError").is_some());
        // A client can name a provider, never a model or URL.
        let create = &doc["components"]["schemas"]["CreateSession"]["properties"];
        assert!(create.get("provider").is_some(), "{create}");
        assert!(
            create.get("base_url").is_none() && create.get("model").is_none(),
            "{create}"
        );
    });
});

vistest!(metrics_count_workers_tokens_and_errors, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        fake.push(calls(OPENAI, "a", &["1"]));
        fake.push(answer(OPENAI, "ok"));
        read_events(c.turn(&id, "one").await, 1000).await;
        fake.push(vis_fake_error());
        read_events(c.turn(&id, "two").await, 1000).await;
        let text = c.metrics().await;
        for line in [
            "vis_live_workers 1".to_string(),
            "vis_input_tokens_total 2200".to_string(),
            "vis_cached_tokens_total 1800".to_string(),
            "vis_requests_in_flight 0".to_string(),
            "vis_blocks_running 0".to_string(),
            "vis_errors_total 1".to_string(),
            format!("vis_session_input_tokens_total{{session=\"{id}\"}} 2200"),
            format!("vis_session_iterations_total{{session=\"{id}\"}} 1"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(
            text.contains(&format!(
                "vis_session_errors_total{{session=\"{id}\",kind=\"auth\"}} 1"
            )),
            "{text}"
        );
    });
});

fn vis_fake_error() -> crate::support::fake_provider::Reply {
    crate::support::fake_provider::Reply::error(401, "invalid_api_key", "bad key")
}

vistest!(
    idle_workers_are_parked_and_come_back_with_their_definitions,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let server = TestServer::start(
            &env,
            &fake,
            ServerConfig {
                max_live_workers: 1,
                idle_park_after: Duration::from_millis(400),
                ..Default::default()
            },
        );
        rt.block_on(async {
        let c = Client::new(&server);
        let a = c.create(&env).await;
        let b = c.create(&env).await;
        let exec = |id: String, code: &'static str| {
            let c = &c;
            async move {
                let (s, v) = c.exec(&id, code).await;
                assert_eq!(s, 200, "{v}");
                v["output"].as_str().unwrap().to_string()
            }
        };
        exec(a.clone(), "def f():\n    return 'from f'").await;
        // B needs a worker: A (least recently used, idle) is parked to stay within the cap.
        exec(b.clone(), "print('b')").await;
        let (_, list) = c.json(reqwest::Method::GET, "/api/sessions", None).await;
        let status = |id: &str| list.as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()["status"].clone();
        assert_eq!((status(&a), status(&b)), (json!("parked"), json!("idle")));
        let out = exec(a.clone(), "print(f())").await;
        assert!(out.starts_with("[vis] new worker (after the session was parked while idle): restored 1 definition: f"), "{out}");
        assert!(out.ends_with("from f\n"), "{out}");
        // Idle for longer than the limit: parked by the sweep.
        let registry = server.registry.clone();
        assert!(wait_until(Duration::from_secs(10), || {
            registry.slots().iter().all(|s| !s.live.load(std::sync::atomic::Ordering::SeqCst))
        }));
        let mut text = String::new();
        for _ in 0..100 {
            text = c.metrics().await;
            if text.lines().any(|l| l == "vis_live_workers 0") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(text.lines().any(|l| l == "vis_live_workers 0"), "{text}");
    });
    }
);

vistest!(
    shutdown_lets_blocks_finish_then_interrupts_and_a_restart_resumes,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let mut server = TestServer::start(
            &env,
            &fake,
            ServerConfig {
                grace: Duration::from_secs(20),
                ..Default::default()
            },
        );
        let id = rt.block_on(async {
            let c = Client::new(&server);
            let id = c.create(&env).await;
            // A block that takes a moment: it finishes within the grace period, and the turn stops
            // before its next request.
            fake.push(calls(
                OPENAI,
                "a",
                &["import time\nopen('started', 'w').close()\ntime.sleep(1)\nprint('finished')"],
            ));
            let resp = c.turn(&id, "work").await;
            tokio::spawn(read_events(resp, 1000));
            let started = env.workspace().join("started");
            assert!(wait_until(Duration::from_secs(30), || started.exists()));
            id
        });
        server.stop();
        let store = vis::store::Store::open(&env.db()).unwrap();
        let its = store.iterations(&id).unwrap();
        assert_eq!(
            its[0].status, "ok",
            "the running block was allowed to finish"
        );
        assert!(its[0].output.contains("finished"));
        assert_eq!(store.turns(&id).unwrap()[0].status, "interrupted");
        assert_eq!(fake.request_count(), 1, "no request after shutdown began");
        // A block that would outlast the grace period is interrupted and recorded.
        let _ = std::fs::remove_file(env.workspace().join("started"));
        let mut server = TestServer::start(
            &env,
            &fake,
            ServerConfig {
                grace: Duration::from_millis(300),
                ..Default::default()
            },
        );
        rt.block_on(async {
            let c = Client::new(&server);
            fake.push(calls(
                OPENAI,
                "b",
                &["import time\nopen('started', 'w').close()\ntime.sleep(60)"],
            ));
            let resp = c.turn(&id, "long").await;
            tokio::spawn(read_events(resp, 1000));
            let started = env.workspace().join("started");
            assert!(wait_until(Duration::from_secs(30), || started.exists()));
        });
        server.stop();
        let store = vis::store::Store::open(&env.db()).unwrap();
        let its = store.iterations(&id).unwrap();
        assert_eq!(its.last().unwrap().status, "interrupted");
        assert!(store
            .turns(&id)
            .unwrap()
            .iter()
            .all(|t| t.status != "running"));
        // A restarted server resumes the session.
        let server = TestServer::start(&env, &fake, ServerConfig::default());
        rt.block_on(async {
            let c = Client::new(&server);
            fake.push(calls(OPENAI, "c", &["print('resumed')"]));
            fake.push(answer(OPENAI, "back"));
            let evs = read_events(c.turn(&id, "again").await, 1000).await;
            assert_eq!(evs.last().unwrap().data["status"], "done", "{evs:?}");
            let (_, s) = c
                .json(reqwest::Method::GET, &format!("/api/sessions/{id}"), None)
                .await;
            assert_eq!(s["turns"].as_array().unwrap().len(), 3);
        });
    }
);

vistest!(delete_ends_the_worker_and_keeps_or_removes_history, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let keep = c.create(&env).await;
        let gone = c.create(&env).await;
        for id in [&keep, &gone] {
            let (s, _) = c.exec(id, "x = 1").await;
            assert_eq!(s, 200);
        }
        let (s, v) = c
            .json(
                reqwest::Method::DELETE,
                &format!("/api/sessions/{keep}"),
                None,
            )
            .await;
        assert_eq!((s, v["history"].as_str().unwrap()), (200, "kept"));
        let (s, v) = c
            .json(
                reqwest::Method::DELETE,
                &format!("/api/sessions/{gone}?history=delete"),
                None,
            )
            .await;
        assert_eq!((s, v["history"].as_str().unwrap()), (200, "deleted"));
        let (_, list) = c.json(reqwest::Method::GET, "/api/sessions", None).await;
        let ids: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [keep.as_str()]);
        let (s, _) = c
            .json(reqwest::Method::GET, &format!("/api/sessions/{gone}"), None)
            .await;
        assert_eq!(s, 404);
        // The kept session runs again (a new worker).
        let (s, v) = c.exec(&keep, "print(1)").await;
        assert_eq!((s, v["status"].as_str().unwrap()), (200, "ok"));
    });
});
