//! The web view at `/` in a real headless Chromium (WebDriver: fantoccini with Debian's
//! chromedriver) against the in-process server and the fake provider: logging in (the token
//! form, the one-time login link, a used link), the session list, a turn streaming in with its block, collapsed output, untrusted text staying
//! text, a fold with its receipt and measurement, the chart, interrupting, and following a
//! turn started by another client. Screenshots of the main views go to
//! `target/web-screenshots/`.

#[path = "support/browser.rs"]
pub mod browser;

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::support::chat::{events, usage};
use crate::support::fake_provider::{FakeProvider, Piece, Reply};
use crate::support::serve::{read_events, ServerConfig, TestServer};
use crate::support::TestEnv;
use crate::vistest;
use browser::Browser;

/// Another client of the server (a script, `curl`), with the server's token.
pub(crate) struct Api {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    pub(crate) token: String,
}

impl Api {
    pub(crate) fn new(server: &TestServer) -> Api {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Api {
            http: reqwest::Client::new(),
            url: server.url.clone(),
            token: server.token.clone(),
        }
    }

    pub(crate) fn post(&self, path: &str, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {}", self.token))
            .body(body.to_string())
    }

    pub(crate) async fn create(&self, env: &TestEnv) -> String {
        let resp = self
            .post("/api/sessions", json!({"workspace": env.workspace()}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
        let v: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        v["id"].as_str().unwrap().to_string()
    }
}

/// A reply that says `text` and runs `code`, with the given input and cached tokens.
pub(crate) fn block(tag: &str, text: &str, code: &str, input: u64, cached: u64) -> Reply {
    Reply::openai()
        .text(text)
        .tool_call(
            &format!("call_{tag}"),
            "python_execution",
            &json!({ "code": code }).to_string(),
        )
        .usage(usage(input, cached, 30))
        .build()
}

pub(crate) fn final_answer(text: &str, input: u64, cached: u64) -> Reply {
    Reply::openai()
        .text(text)
        .usage(usage(input, cached, 40))
        .build()
}

/// `reply` with a pause of `pause` after its first `events` server-sent events, so the page
/// shows the text streamed so far while the rest is still coming.
fn paused(reply: Reply, events: usize, pause: Duration) -> Reply {
    let body = reply.body_bytes();
    let mut cut = 0;
    for _ in 0..events {
        match body[cut..].windows(2).position(|w| w == b"\n\n") {
            Some(p) => cut += p + 2,
            None => break,
        }
    }
    Reply::pieces(vec![
        Piece::Bytes(Bytes::copy_from_slice(&body[..cut])),
        Piece::Pause(pause),
        Piece::Bytes(Bytes::copy_from_slice(&body[cut..])),
    ])
}

const ANSWER: &str = "## Result\n\nIt is **42**, computed with `6 * 7`.\n\n\
```python\ndef double(x):\n    return x * 2  # twice\n```\n\n\
- first point\n- second point\n\n\
Untrusted: <img src=x onerror=alert(1)> <script>alert(2)</script> \
[bad link](javascript:alert(3)) and [good link](https://example.com/docs).\n\nTHE END.";

vistest!(
    the_web_view_streams_turns_and_shows_blocks_folds_and_the_chart,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let server = TestServer::start(&env, &fake, ServerConfig::default());
        rt.block_on(async {
            let api = Api::new(&server);
            let other = api.create(&env).await;
            let id = api.create(&env).await;
            // Turn 1: a block that runs a while and prints 13 lines, then an answer that
            // pauses mid-stream.
            fake.push(block(
                "a",
                "Let me compute that.",
                "import time\nprint(6 * 7)\ntime.sleep(1.2)\nfor i in range(1, 13):\n    print(f'line {i}')",
                1200,
                0,
            ));
            fake.push(paused(
                final_answer(ANSWER, 1600, 1100),
                4,
                Duration::from_millis(1200),
            ));
            // Turn 2: fold turn 1.
            fake.push(block(
                "b",
                "Folding the settled turn.",
                "r = fold_session('t1', 'GIST TEXT: computed 6 * 7 = 42')\nprint(r['fold'], r['measurement'])",
                2100,
                1500,
            ));
            fake.push(final_answer("Folded turn 1.", 900, 600));
            // Turn 3: a block that would sleep long, interrupted from the page.
            fake.push(block(
                "c",
                "Sleeping.",
                "import time\nprint('sleeping', flush=True)\ntime.sleep(60)",
                1000,
                800,
            ));

            let b = Browser::start().await;
            // Not logged in: the API answers 401 and the page asks to log in.
            b.goto(&server.url).await;
            b.wait_js(
                "the login form",
                "return !document.querySelector('#login').hidden;",
            )
            .await;
            assert!(b.text("#login").await.contains("one-time login link"));
            b.screenshot("login").await;
            b.type_into("#token-input", "wrong").await;
            b.click("#login button[type=submit]").await;
            b.wait_text("#login-message", "did not accept").await;
            // The token form: the token buys a cookie the page cannot read, and is not kept.
            b.type_into("#token-input", &server.token).await;
            b.click("#login button[type=submit]").await;
            b.wait_js(
                "the login form to close",
                "return document.querySelector('#login').hidden;",
            )
            .await;
            let list = b.wait_text("#session-list", &other).await;
            assert!(list.contains(&id), "{list}");
            assert!(list.contains("parked"), "{list}");
            assert!(list.contains("in 0"), "{list}");
            let kept = b
                .js(
                    "return [document.cookie, sessionStorage.length, localStorage.length];",
                    vec![],
                )
                .await;
            assert_eq!(kept, json!(["", 0, 0]));

            // Open the session and send a message.
            b.click(&format!("a.session[data-id='{id}']")).await;
            b.wait_text("#session-head", &id).await;
            // A session without jobs has no jobs line (not a stray "null").
            let head = b.text("#session-head").await;
            assert!(!head.contains("null"), "{head}");
            assert_eq!(b.count("#session-head .jobs").await, 0);
            b.wait_text("#transcript", "No turns yet").await;
            b.wait_text("#chart", "No model requests yet").await;
            b.type_into("#message", "compute 6 * 7").await;
            b.click("#send").await;
            // Live: the block runs, the interrupt button shows.
            b.wait_text(".live .block", "running").await;
            b.screenshot("streaming").await;
            let live = b.text(".live").await;
            assert!(live.contains("compute 6 * 7"), "{live}");
            assert!(live.contains("Let me compute that."), "{live}");
            assert!(live.contains("print(6 * 7)"), "{live}");
            b.wait_js(
                "the interrupt button",
                "return !document.querySelector('#interrupt').hidden && document.querySelector('#send').disabled;",
            )
            .await;
            // The streamed answer arrives in parts: the first words before the rest.
            b.wait_text(".live .block", "show all 13 lines").await;
            let partial = b.wait_text(".live", "Resu").await;
            assert!(!partial.contains("THE END"), "{partial}");
            b.wait_text("#turn-status", "finished: done").await;
            let t = b.wait_text("#transcript", "THE END").await;
            assert!(!t.contains("Turn …"), "the live view was replaced: {t}");
            assert!(t.contains("Turn 1"), "{t}");
            b.wait_js(
                "the send button back",
                "return document.querySelector('#interrupt').hidden && !document.querySelector('#send').disabled;",
            )
            .await;

            // Markdown: heading, bold, inline code, highlighted fenced Python, a list.
            let html = |css: &str| format!("return document.querySelectorAll({css:?}).length;");
            for (css, what) in [
                ("#transcript .msg.assistant h4", "a heading"),
                ("#transcript .msg.assistant strong", "bold"),
                ("#transcript .msg.assistant p code", "inline code"),
                ("#transcript .msg.assistant pre .tok-kw", "a highlighted keyword"),
                ("#transcript .msg.assistant pre .tok-com", "a highlighted comment"),
                ("#transcript .msg.assistant li", "list items"),
                ("#transcript .block pre.code .tok-kw", "the block's highlighted code"),
                ("#transcript .block pre.code .tok-num", "the block's numbers"),
            ] {
                assert!(b.js(&html(css), vec![]).await.as_u64().unwrap() > 0, "no {what}");
            }
            assert_eq!(b.text("#transcript .msg.assistant h4").await, "Result");
            // Untrusted text stays text: no element, no script link; the good link works.
            assert_eq!(b.count("#transcript img, #transcript script").await, 0);
            assert!(t.contains("<img src=x onerror=alert(1)>"), "{t}");
            assert!(t.contains("<script>alert(2)</script>"), "{t}");
            assert_eq!(b.count("#transcript a[href^='javascript']").await, 0);
            let links = b
                .js(
                    "return [...document.querySelectorAll('#transcript a')].map(a => a.href + ' ' + a.textContent);",
                    vec![],
                )
                .await;
            assert_eq!(links, json!(["https://example.com/docs good link"]));
            assert!(t.contains("bad link"), "{t}");
            let alerted = b.js("return typeof window.alert;", vec![]).await;
            assert_eq!(alerted, json!("function"));

            // The block's output is collapsed beyond 8 lines; a click shows it all.
            let out = b.text("#transcript .block .output").await;
            assert!(out.contains("line 7"), "{out}");
            assert!(!out.contains("line 12"), "{out}");
            assert!(out.contains("show all 13 lines"), "{out}");
            b.click("#transcript .block .output-toggle").await;
            let out = b.wait_text("#transcript .block .output", "line 12").await;
            assert!(out.contains("collapse"), "{out}");
            let head = b.text("#transcript .block .block-head").await;
            assert!(head.contains("t1/i1") && head.contains("ok"), "{head}");
            b.screenshot("transcript").await;

            // Turn 2 folds turn 1: its gist shows, collapsed, in place of the turn.
            b.type_into("#message", "fold the first turn").await;
            b.click("#send").await;
            b.wait_text("#turn-status", "turn 2 finished: done").await;
            let fold = b.wait_text("#transcript details.fold", "GIST TEXT").await;
            assert!(fold.contains("fold 1"), "{fold}");
            assert!(fold.contains("measured"), "{fold}");
            assert!(!fold.contains("tokens removed"), "collapsed: {fold}");
            let t = b.text("#transcript").await;
            assert!(!t.contains("THE END"), "turn 1 is folded away: {t}");
            assert!(t.contains("Folded turn 1."), "{t}");
            // Expanded: the receipt's fields and the measurement.
            b.click("#transcript details.fold > summary").await;
            let fold = b
                .wait_text("#transcript details.fold", "tokens removed")
                .await;
            for field in [
                "selected",
                "t1",
                "gist tokens",
                "estimated net saving",
                "re-cached next request",
                "folds in this group",
                "Measurement",
                "input before the fold",
                "2,100",
                "input after the fold",
                "900",
                "net reduction",
                "1,200 tokens",
            ] {
                let shown = fold.to_lowercase();
                assert!(shown.contains(&field.to_lowercase()), "{field} missing in {fold}");
            }
            b.js(
                "document.querySelector('#transcript details.fold').scrollIntoView({block: 'start'});",
                vec![],
            )
            .await;
            b.screenshot("fold").await;

            // The chart: a bar per request, cached parts, the fold before request 4.
            assert_eq!(b.count("#chart svg .bar").await, 4);
            assert_eq!(b.count("#chart svg .bar rect.cached").await, 3);
            assert_eq!(b.count("#chart svg .fold-mark").await, 1);
            let mark = b
                .js(
                    "const m = document.querySelector('#chart .fold-mark'); return [m.dataset.folds, m.textContent];",
                    vec![],
                )
                .await;
            assert_eq!(mark[0], json!("1"));
            assert!(mark[1].as_str().unwrap().contains("before request 4"), "{mark}");
            let chart = b.text("#chart").await;
            assert!(chart.contains("4 requests"), "{chart}");
            assert!(chart.contains("peak 2,100"), "{chart}");
            // The list shows the totals.
            let list = b
                .wait_text(&format!("a.session[data-id='{id}']"), "5,800")
                .await;
            assert!(list.contains("idle"), "{list}");
            assert!(list.contains("cached 3,200"), "{list}");
            assert!(list.contains("out 140"), "{list}");
            b.js("window.scrollTo(0, 0);", vec![]).await;
            b.screenshot("sessions").await;

            // Turn 3: interrupted from the page.
            b.type_into("#message", "sleep").await;
            b.click("#send").await;
            b.wait_text(".live .block", "sleeping").await;
            b.click("#interrupt").await;
            b.wait_text("#turn-status", "finished: interrupted").await;
            let t = b
                .wait_text("#transcript", "interrupted")
                .await;
            assert!(t.contains("Turn 3"), "{t}");
            let last = b
                .js(
                    "const all = document.querySelectorAll('#transcript .block .status'); return all[all.length - 1].textContent;",
                    vec![],
                )
                .await;
            assert_eq!(last, json!("interrupted"));
            b.close().await;
        });
    }
);

vistest!(the_web_view_follows_a_turn_another_client_started, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let api = Api::new(&server);
        let id = api.create(&env).await;
        let b = Browser::start().await;
        // The one-time link vis serve prints: the browser is logged in and lands on the page
        // (the session in the fragment stays), with nothing left in the address.
        let login = server.login_url();
        b.goto(&format!("{login}#{id}")).await;
        b.wait_text("#session-head", &id).await;
        let hidden = b
            .js("return document.querySelector('#login').hidden;", vec![])
            .await;
        assert_eq!(hidden, json!(true));
        let url = b.client().current_url().await.unwrap();
        assert_eq!(url.path(), "/");
        assert_eq!(url.query(), None, "{url}");
        assert_eq!(url.fragment(), Some(id.as_str()));
        assert_eq!(b.js("return document.cookie;", vec![]).await, json!(""));
        fake.push(block(
            "a",
            "Working elsewhere.",
            "import time\nprint('from another client', flush=True)\ntime.sleep(5)\nprint('done')",
            1000,
            0,
        ));
        fake.push(final_answer("Finished **elsewhere**.", 1300, 900));
        let resp = api
            .post(
                &format!("/api/sessions/{id}/turns"),
                json!({"message": "run it from curl"}),
            )
            .send()
            .await
            .unwrap();
        let reader = tokio::spawn(read_events(resp, 1000));
        // The page notices the running session and follows its events live.
        let live = b.wait_text(".live .block", "running").await;
        assert!(live.contains("print('from another client'"), "{live}");
        assert!(b.text(".live").await.contains("run it from curl"));
        assert!(b.text("#session-head").await.contains("running"));
        reader.await.unwrap();
        b.wait_text("#transcript", "Finished elsewhere.").await;
        let t = b.text("#transcript").await;
        assert!(t.contains("from another client\ndone"), "{t}");
        assert_eq!(b.count(".live").await, 0);
        assert_eq!(b.count("#chart svg .bar").await, 2);
        // Logging out; the link, used once, does not log in again.
        b.click("#logout").await;
        b.wait_js(
            "the login form after logging out",
            "return !document.querySelector('#login').hidden;",
        )
        .await;
        b.goto(&login).await;
        b.wait_text("#login-message", "used up or unknown").await;
        let url = b.client().current_url().await.unwrap();
        assert_eq!(url.query(), None, "{url}");
        assert_eq!(b.count("a.session").await, 0);
        b.screenshot("login-expired").await;
        b.close().await;
    });
});

vistest!(the_web_view_shows_every_page_of_a_long_session, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let api = Api::new(&server);
        let id = api.create(&env).await;
        // More turns than one page of GET /api/sessions/{id} holds (50 by default).
        for i in 1..=53 {
            let resp = api
                .post(
                    &format!("/api/sessions/{id}/exec"),
                    json!({"code": format!("print('output of turn {i}')")}),
                )
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
        }
        let b = Browser::start().await;
        b.goto(&format!("{}#{id}", server.login_url())).await;
        let t = b.wait_text("#transcript", "output of turn 53").await;
        for i in [1, 2, 50, 51, 52] {
            assert!(
                t.contains(&format!("output of turn {i}\n")),
                "turn {i} missing"
            );
        }
        assert_eq!(b.count("#transcript .block").await, 53);
    });
});

/// Inputs that made the page's renderer super-linear, a megabyte each, as JavaScript
/// expressions (built in the page; `MB` is 2^20).
const PATHOLOGICAL: &[(&str, &str)] = &[
    // 3,000 of these took 15 s in the page: the code-span pattern backtracked in cubic time.
    ("a backtick run in text", "'x ' + '`'.repeat(MB)"),
    (
        "backtick runs of every length",
        "Array.from({length: 1400}, (_, k) => '`'.repeat(k + 1)).join(' x ')",
    ),
    ("stars", "'*'.repeat(MB)"),
    ("unclosed emphasis", "'*a'.repeat(MB / 2)"),
    ("underscores", "' _a'.repeat(MB / 3)"),
    ("strike marks", "'~~a'.repeat(MB / 3)"),
    ("brackets", "'['.repeat(MB)"),
    (
        "link labels without an end",
        "'[a'.repeat(MB / 4) + '](' + 'x'.repeat(MB / 2)",
    ),
    ("angle brackets", "'<'.repeat(MB)"),
    ("autolinks without an end", "'<http://'.repeat(MB / 8)"),
    ("nested quotes", "'> '.repeat(MB / 2) + 'deep'"),
    ("nested list items", "'- '.repeat(MB / 2) + 'deep'"),
    (
        "a list indented deeper each line",
        "Array.from({length: 1000}, (_, k) => ' '.repeat(2 * k) + '- x').join('\\n')",
    ),
    ("a heading with a long gap", "'# a' + ' '.repeat(MB) + 'x'"),
    ("an almost rule", "'- '.repeat(MB / 2) + 'x'"),
    (
        "an almost table rule",
        "'a|b\\n' + '|-'.repeat(MB / 2) + 'x'",
    ),
    (
        "unclosed Python strings",
        "'```python\\n' + '\"\\\\'.repeat(MB / 2)",
    ),
];

/// `b.js(script)`, failing the test when the page has not answered after `limit`: a renderer
/// that does not finish keeps the page busy, and WebDriver itself may then never answer.
async fn bounded(b: &Browser, what: &str, limit: Duration, script: &str) -> Value {
    match tokio::time::timeout(limit, b.js(script, vec![])).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: the page was still busy after {limit:?}"),
    }
}

vistest!(
    the_web_views_markdown_renders_a_megabyte_of_pathological_input,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let server = TestServer::start(&env, &fake, ServerConfig::default());
        rt.block_on(async {
            let api = Api::new(&server);
            let id = api.create(&env).await;
            let b = Browser::start().await;
            // A renderer that does not finish is stopped after 30 s, which fails the test.
            b.client()
                .update_timeouts(fantoccini::wd::TimeoutConfiguration::new(
                    Some(Duration::from_secs(30)),
                    Some(Duration::from_secs(60)),
                    Some(Duration::ZERO),
                ))
                .await
                .unwrap();
            b.goto(&format!("{}#{id}", server.login_url())).await;
            b.wait_text("#session-head", &id).await;
            // Each renderer function on each input.
            for (what, input) in PATHOLOGICAL {
                let script = format!(
                    "const MB = 1 << 20; const text = {input}; const r = window.visRender;
                     const started = performance.now();
                     const box = document.createElement('div');
                     box.append(r.markdown(text));
                     const spans = r.inline(text).length;
                     const code = r.highlight(text).textContent.length;
                     const ms = Math.round(performance.now() - started);
                     return [text.length, box.childNodes.length, spans, code, ms];"
                );
                let v = bounded(&b, what, Duration::from_secs(45), &script).await;
                let n = |i: usize| v[i].as_u64().unwrap_or_else(|| panic!("{what}: {v}"));
                assert!(n(0) > 900_000, "{what}: a megabyte: {v}");
                assert!(n(1) > 0 && n(2) > 0, "{what}: rendered: {v}");
                assert_eq!(
                    n(3),
                    n(0),
                    "{what}: highlighting keeps every character: {v}"
                );
                // For people reading the log; not a claim the test makes.
                println!("{what}: markdown, inline and highlight in {} ms", n(4));
            }
            // A backtick run is text, all of it; the code span after it still pairs up.
            let v = bounded(
                &b,
                "a run before a code span",
                Duration::from_secs(45),
                "const text = 'x ' + '`'.repeat(1 << 20) + ' and `code` done';
                 const box = document.createElement('div');
                 box.append(window.visRender.markdown(text));
                 return [box.textContent === text.replace('`code`', 'code'),
                         box.querySelectorAll('code').length];",
            )
            .await;
            assert_eq!(v, json!([true, 1]));

            // Streamed through the real path: a megabyte of backticks in 4 KB deltas.
            let answer = format!("Look: {} done.\n\nafter the run", "`".repeat(1 << 20));
            fake.push(
                Reply::openai()
                    .text(&answer)
                    .fragment(4096)
                    .usage(usage(1000, 0, 40))
                    .build(),
            );
            b.type_into("#message", "print a long run").await;
            b.click("#send").await;
            let streamed = async {
                b.wait_text("#turn-status", "finished: done").await;
                b.wait_text("#transcript", "after the run").await
            };
            let t = tokio::time::timeout(Duration::from_secs(60), streamed)
                .await
                .expect("the streamed megabyte was still being rendered after 60 s");
            assert!(
                t.contains("Look: ```"),
                "{}",
                t.chars().take(200).collect::<String>()
            );
            b.close().await;
        });
    }
);
