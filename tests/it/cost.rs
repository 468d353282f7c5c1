//! The cost model (issue 24 §1) through the real binary and the fake provider: each request's
//! input split by price and weighed for both wire protocols, prices from `[pricing]` (a bad
//! value refused with its line), a request that should have hit the cache and did not
//! flagged, and the figures in `vis sessions show`, `/status`, `/metrics`, the session API
//! and the web view's chart.

use serde_json::{json, Value};
use vis::protocol::Usage;
use vis::providers::ProviderKind;
use vis::store::{RequestRecord, Store};

use crate::serve::Client;
use crate::servers_chat::{chat_args, config};
use crate::support::chat::{events, KINDS};
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::support::serve::{read_events, ServerConfig, TestServer};
use crate::support::tmux::Tmux;
use crate::support::{vis_bin, Run, TestEnv};
use crate::vistest;

fn usage(input: u64, read: u64, write: Option<u64>) -> Usage {
    Usage {
        input_tokens: Some(input),
        cached_tokens: Some(read),
        cache_creation_tokens: write,
        output_tokens: Some(12),
    }
}

/// A reply running `code`, with `usage`.
fn call(kind: ProviderKind, code: &str, usage: Usage) -> Reply {
    let args = json!({ "code": code }).to_string();
    match kind {
        ProviderKind::OpenAi => Reply::openai()
            .tool_call("call_1", "python_execution", &args)
            .usage(usage)
            .build(),
        ProviderKind::Anthropic => Reply::anthropic()
            .tool_call("toolu_1", "python_execution", &args)
            .usage(usage)
            .build(),
    }
}

/// A final answer with `usage`.
fn answer(kind: ProviderKind, text: &str, usage: Usage) -> Reply {
    match kind {
        ProviderKind::OpenAi => Reply::openai().text(text).usage(usage).build(),
        ProviderKind::Anthropic => Reply::anthropic().text(text).usage(usage).build(),
    }
}

fn chat(env: &TestEnv, fake: &FakeProvider, kind: ProviderKind, extra: &[&str]) -> Run {
    let args = chat_args(fake, kind, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.vis(&args)
}

fn only_session(env: &TestEnv) -> String {
    let store = Store::open(&env.db()).unwrap();
    let sessions = store.list_sessions().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions[0].id.clone()
}

/// The session id `vis chat` announced on standard error.
fn session_id(stderr: &str) -> String {
    let at = stderr.find("new session ").expect(stderr) + "new session ".len();
    stderr[at..].split_whitespace().next().unwrap().to_string()
}

fn records(env: &TestEnv, id: &str) -> Vec<RequestRecord> {
    Store::open(&env.db()).unwrap().requests(id).unwrap()
}

fn show(env: &TestEnv, id: &str) -> String {
    let run = env.vis(&["sessions", "show", id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

vistest!(
    the_weighted_input_follows_each_wire_protocol_at_the_configured_prices,
    |env| {
        // OpenAI-compatible: 10,000 input of which 4,096 cached, no writes; Anthropic: 2,000
        // written, 4,000 read, 4,000 uncached (the fake sends `input_tokens` 4,000 apart).
        config(
            &env,
            "[pricing]\ncache_write = 2\n[pricing.models.\"fake-*\"]\ncache_read = 0.25\n",
        );
        for (kind, usage, split, weighted) in [
            (
                ProviderKind::OpenAi,
                usage(10_000, 4_096, None),
                (5_904, 4_096, 0),
                // 5,904 × 1 + 4,096 × 0.25; OpenAI reports no writes, so none are charged.
                6_928.0,
            ),
            (
                ProviderKind::Anthropic,
                usage(10_000, 4_000, Some(2_000)),
                (4_000, 4_000, 2_000),
                // 4,000 × 1 + 4,000 × 0.25 + 2,000 × 2.
                9_000.0,
            ),
        ] {
            let fake = FakeProvider::start();
            fake.push(answer(kind, "hello", usage));
            let run = chat(&env, &fake, kind, &["-m", "hi"]);
            assert_eq!(run.code, 0, "{kind}: {}\n{}", run.stdout, run.stderr);
            let id = session_id(&run.stderr);
            let r = &records(&env, &id)[0];
            assert_eq!(
                (
                    r.uncached_tokens,
                    r.cached_tokens,
                    r.cache_write_tokens,
                    r.weighted_tokens
                ),
                (Some(split.0), Some(split.1), Some(split.2), Some(weighted)),
                "{kind}"
            );
            // The first request of a process has nothing to compare with: no estimate, no flag.
            assert_eq!((r.expected_cached_tokens, r.cache_miss), (None, None));
            let out = show(&env, &id);
            let line = format!(
                "cost: weighted {} (uncached {}, cache read {}, cache write {})",
                vis::protocol::group_thousands(weighted as usize),
                vis::protocol::group_thousands(split.0 as usize),
                vis::protocol::group_thousands(split.1 as usize),
                vis::protocol::group_thousands(split.2 as usize),
            );
            assert!(out.contains(&line), "{kind}: {line:?} missing in\n{out}");
            assert!(out.contains(&format!("{weighted:.0}")), "{out}");
        }
    }
);

vistest!(
    a_provider_without_cache_figures_leaves_the_cost_unavailable,
    |env| {
        let fake = FakeProvider::start();
        fake.push(
            Reply::openai()
                .text("hello")
                .usage(Usage {
                    input_tokens: Some(5000),
                    output_tokens: Some(3),
                    ..Usage::default()
                })
                .build(),
        );
        let run = chat(&env, &fake, ProviderKind::OpenAi, &["-m", "hi"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let id = only_session(&env);
        let r = &records(&env, &id)[0];
        assert_eq!(
            (r.uncached_tokens, r.cache_write_tokens, r.weighted_tokens),
            (None, None, None)
        );
        let out = show(&env, &id);
        assert!(
            out.contains("cost: weighted n/a (the provider reported no cache figures)"),
            "{out}"
        );
    }
);

vistest!(a_bad_pricing_value_is_refused_with_its_line, |env| {
    let text = "[provider]\nmax_retries = 1\n[pricing.models.\"gpt-5*\"]\ncache_read = 5\n";
    config(&env, text);
    let fake = FakeProvider::start();
    fake.push(answer(ProviderKind::OpenAi, "never", usage(10, 0, None)));
    let run = chat(&env, &fake, ProviderKind::OpenAi, &["-m", "hi"]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stderr.contains(
            "line 4: `pricing.models.\"gpt-5*\".cache_read` must be a price between 0 and 1"
        ) && run.stderr.contains("config.toml"),
        "{}",
        run.stderr
    );
    // Nothing ran, nothing was written: no request, no session, the file as it was.
    assert_eq!(fake.request_count(), 0);
    if env.db().exists() {
        let store = Store::open(&env.db()).unwrap();
        assert!(store.list_sessions().unwrap().is_empty());
    }
    assert_eq!(
        std::fs::read_to_string(env.config_dir().join("config.toml")).unwrap(),
        text
    );
});

/// Two turns of `kind`: the first request runs a block, the second (sharing the first's whole
/// prefix) reports no cache reads, the third (the next turn) reads most of its input.
fn a_miss_then_a_hit(fake: &FakeProvider, kind: ProviderKind) {
    let write = |n| (kind == ProviderKind::Anthropic).then_some(n);
    fake.push(call(kind, "print(6 * 7)", usage(20_000, 0, write(20_000))));
    fake.push(answer(kind, "It is 42.", usage(20_500, 0, write(0))));
    fake.push(answer(kind, "Still 42.", usage(21_000, 20_000, write(500))));
}

vistest!(
    a_request_that_should_have_hit_the_cache_and_did_not_is_flagged,
    |env| {
        for kind in KINDS {
            let fake = FakeProvider::start();
            a_miss_then_a_hit(&fake, kind);
            let run = chat(&env, &fake, kind, &["-m", "compute", "-m", "again"]);
            assert_eq!(run.code, 0, "{kind}: {}\n{}", run.stdout, run.stderr);
            let id = session_id(&run.stderr);
            let r = records(&env, &id);
            assert_eq!(r.len(), 3, "{kind}");
            assert_eq!((r[0].expected_cached_tokens, r[0].cache_miss), (None, None));
            // The second request repeats the first's bytes up to the new messages: most of
            // its 20,500 tokens were expected from the cache, none came.
            let expected = r[1].expected_cached_tokens.unwrap();
            assert!(expected > 10_000 && expected < 20_500, "{kind}: {expected}");
            assert_eq!(r[1].cache_miss, Some(true), "{kind}");
            let expected = r[2].expected_cached_tokens.unwrap();
            assert!(expected > 10_000 && expected < 21_000, "{kind}: {expected}");
            assert_eq!(r[2].cache_miss, Some(false), "{kind}");
            let out = show(&env, &id);
            assert_eq!(out.matches("CACHE MISS: 0 cached of ~").count(), 1, "{out}");
            assert!(
                out.contains("1 cache miss (cache reads under half the expected: a prefix bug?)"),
                "{out}"
            );
        }
    }
);

vistest!(status_in_the_tui_shows_the_cost_and_the_miss, |env| {
    let fake = FakeProvider::start();
    a_miss_then_a_hit(&fake, ProviderKind::OpenAi);
    let args: Vec<String> = [
        vec!["--db".to_string(), env.db().to_string_lossy().into_owned()],
        chat_args(&fake, ProviderKind::OpenAi, &[]),
    ]
    .concat();
    let vars = [
        (
            "VIS_HOME",
            env.path().join("home").to_string_lossy().into_owned(),
        ),
        (
            "VIS_CONFIG_DIR",
            env.config_dir().to_string_lossy().into_owned(),
        ),
        ("NO_COLOR", String::new()),
    ];
    let tmux = Tmux::start(&env.workspace(), &vars, &vis_bin(), &args);
    tmux.wait_text("› ");
    tmux.send_line("compute");
    tmux.wait_count("· util ", 1);
    tmux.send_line("/status");
    let screen = tmux.wait_text("cache miss (cache reads under half");
    for needle in [
        // The last request (the miss) with its figures; the session's totals and prices.
        "weighted 20,500, cache write 0, expected cached",
        "CACHE MISS",
        "weighted 40,500 (uncached 40,500, cache read 0, cache write 0)",
        "cache share 0% measured",
        "prices: cache read 0.5×, cache write 1×, lifetime 300 s",
    ] {
        assert!(screen.contains(needle), "{needle:?} missing in\n{screen}");
    }
});

/// A `vis serve` session that ran [`a_miss_then_a_hit`] (OpenAI-compatible).
async fn served_session(env: &TestEnv, fake: &FakeProvider, c: &Client) -> String {
    let id = c.create(env).await;
    a_miss_then_a_hit(fake, ProviderKind::OpenAi);
    for message in ["compute", "again"] {
        read_events(c.turn(&id, message).await, 1000).await;
    }
    id
}

vistest!(metrics_and_the_session_api_carry_the_cost, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = served_session(&env, &fake, &c).await;
        let text = c.metrics().await;
        // Uncached: 20,000 + 20,500 + 1,000; weighted adds 20,000 reads at 0.5 (the built-in
        // price of an unknown OpenAI-compatible model).
        for line in [
            "vis_uncached_tokens_total 41500".to_string(),
            "vis_cached_tokens_total 20000".to_string(),
            "vis_cache_write_tokens_total 0".to_string(),
            "vis_weighted_input_tokens_total 51500.0".to_string(),
            "vis_cache_misses_total 1".to_string(),
            format!("vis_session_cache_misses_total{{session=\"{id}\"}} 1"),
            format!("vis_session_weighted_input_tokens_total{{session=\"{id}\"}} 51500.0"),
            format!("vis_session_uncached_tokens_total{{session=\"{id}\"}} 41500"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        let (status, page) = c
            .json(reqwest::Method::GET, &format!("/api/sessions/{id}"), None)
            .await;
        assert_eq!(status, 200, "{page}");
        let requests = page["requests"].as_array().unwrap();
        assert_eq!(requests[1]["cache_miss"], true, "{page}");
        assert_eq!(requests[2]["weighted_tokens"], 11_000.0, "{page}");
        assert!(requests[0]["expected_cached_tokens"].is_null(), "{page}");
        let cost = &page["cost"];
        assert_eq!(cost["cache_misses"], 1, "{cost}");
        assert_eq!(cost["weighted_tokens"], 51_500.0, "{cost}");
        let measured = cost["measured_share"].as_f64().unwrap();
        assert!((measured - 20_000.0 / 61_500.0).abs() < 1e-9, "{cost}");
        assert!(cost["expected_share"].as_f64().unwrap() > 0.5, "{cost}");
        let (_, list) = c.json(reqwest::Method::GET, "/api/sessions", None).await;
        let listed = list
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id.as_str())
            .unwrap();
        assert_eq!(
            (&listed["weighted_tokens"], &listed["cache_misses"]),
            (&json!(51_500.0), &json!(1))
        );
    });
});

vistest!(the_web_chart_shows_the_weighted_input_and_the_miss, |env| {
    use crate::web::browser::Browser;
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = served_session(&env, &fake, &c).await;
        let b = Browser::start().await;
        b.goto(&format!("{}#{id}", server.login_url())).await;
        let summary = b
            .wait_text("#chart .cost-summary", "1 cache miss (a prefix bug?)")
            .await;
        assert!(
            summary.contains("weighted input 51,500") && summary.contains("cache share 33% measured"),
            "{summary}"
        );
        let titles: Value = b
            .js(
                "return [...document.querySelectorAll('#chart svg .bar title')].map(t => t.textContent);",
                vec![],
            )
            .await;
        let titles: Vec<String> = serde_json::from_value(titles).unwrap();
        assert_eq!(titles.len(), 3, "{titles:?}");
        assert!(titles[1].contains("weighted 20,500") && titles[1].contains("CACHE MISS"), "{titles:?}");
        assert!(titles[2].contains("weighted 11,000") && !titles[2].contains("CACHE MISS"), "{titles:?}");
        assert_eq!(b.count("#chart svg .bar.cache-miss").await, 1);
        assert_eq!(b.count("#chart svg .weighted-point").await, 3);
        assert_eq!(b.count("#chart svg polyline.weighted").await, 1);
        b.close().await;
    });
});

vistest!(vis_serve_prices_each_session_by_the_model_it_chose, |env| {
    use crate::support::serve::ServeProcess;
    let fake = FakeProvider::start();
    let second = FakeProvider::start();
    config(
            &env,
            &format!(
                "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\nmax_retries = 0\n\
                 [serve.providers.second]\nprovider = \"openai\"\nmodel = \"second-model\"\nbase_url = \"{}\"\n\
                 [pricing.models.\"second-*\"]\ncache_read = 0.2\n",
                fake.base_url(ProviderKind::OpenAi),
                second.base_url(ProviderKind::OpenAi)
            ),
        );
    let mut cmd = env.command(&["serve"]);
    cmd.env("OPENAI_API_KEY", "sk-test");
    let server = ServeProcess::start(cmd);
    let token = std::fs::read_to_string(vis::config::serve_token_path(&env.db())).unwrap();
    let rt = events();
    rt.block_on(async {
        let c = Client::at(&server.url, Some(token.trim()));
        // 2,000 uncached + 8,000 read: at 0.5 (the built-in price of an unknown model)
        // and at 0.2 (the second provider's model, from [pricing]).
        for (name, provider, weighted) in
            [("default", &fake, 6_000.0), ("second", &second, 3_600.0)]
        {
            let (s, v) = c
                .json(
                    reqwest::Method::POST,
                    "/api/sessions",
                    Some(json!({"workspace": env.workspace(), "provider": name})),
                )
                .await;
            assert_eq!(s, 201, "{v}");
            let id = v["id"].as_str().unwrap().to_string();
            provider.push(answer(
                ProviderKind::OpenAi,
                "hello",
                usage(10_000, 8_000, None),
            ));
            let evs = read_events(c.turn(&id, "hi").await, 1000).await;
            assert_eq!(evs.last().unwrap().data["status"], "done", "{evs:?}");
            let (_, page) = c
                .json(reqwest::Method::GET, &format!("/api/sessions/{id}"), None)
                .await;
            assert_eq!(
                page["requests"][0]["weighted_tokens"], weighted,
                "{name}: {page}"
            );
        }
    });
});
