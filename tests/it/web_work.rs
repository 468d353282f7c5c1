//! The web view and the work a session runs beside its turns (issue 27), in a real headless
//! Chromium: background jobs (their starts and ends live from the turn's events, between turns,
//! and after a reload), images a block showed (served by the image route with the page's login,
//! refused to other sessions and to requests without it; in the real `vis serve`, the note a
//! model without image input read instead, shown under the block after a reload), and
//! sub-sessions (a link that opens the child). Job commands, captions and a child's answer
//! carry markup that must stay text.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::chat::events;
use crate::support::fake_provider::{FakeProvider, Gate, Reply};
use crate::support::serve::{ServerConfig, TestServer};
use crate::vistest;
use crate::web::browser::Browser;
use crate::web::{block, final_answer, Api};

/// Markup that would run if the page ever parsed untrusted text as HTML.
fn trap(n: u32) -> String {
    format!("<img src=x onerror=window.pwned={n}>")
}

/// Python that waits until the test creates `file` (no sleeps the test's timing depends on).
fn wait_for_file(file: &Path) -> String {
    format!(
        "import os, time\nwhile not os.path.exists({:?}):\n    time.sleep(0.05)\n",
        file.display().to_string()
    )
}

/// A shell loop that waits for `file`, for a job's command.
fn shell_wait(file: &Path) -> String {
    format!("while [ ! -e {} ]; do sleep 0.05; done", file.display())
}

/// Asserts nothing in the page ran markup from untrusted text.
async fn nothing_ran(b: &Browser) {
    assert_eq!(
        b.js("return window.pwned === undefined;", vec![]).await,
        json!(true)
    );
    assert_eq!(
        b.count("img:not(.shown-image), script:not([src]), iframe")
            .await,
        0
    );
}

vistest!(
    the_web_view_shows_jobs_live_between_turns_and_after_a_reload,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let server = TestServer::start(&env, &fake, ServerConfig::default());
        let ws = env.workspace();
        let (job1_go, release, job2_go) =
            (ws.join("job1-go"), ws.join("release"), ws.join("job2-go"));
        let job1 = format!("{}; echo '{}'", shell_wait(&job1_go), trap(1));
        let job2 = format!("{}; echo 'job2 {}'", shell_wait(&job2_go), trap(2));
        // Turn 1: a block starts job 1; the next block waits (the job ends meanwhile, unseen
        // by any block, so the next request announces it).
        fake.push(block(
            "a",
            "Starting the job.",
            &format!("j = sh.background({job1:?})\nprint('started', j.id)"),
            1000,
            0,
        ));
        fake.push(block("b", "Waiting.", &wait_for_file(&release), 1100, 900));
        fake.push(final_answer("The job is done.", 1300, 1000));
        // Turn 2: job 2 outlives its turn.
        fake.push(block(
            "c",
            "Starting another.",
            &format!("j = sh.background({job2:?})\nprint('started', j.id)"),
            1400,
            1200,
        ));
        fake.push(final_answer("Job 2 runs on.", 1500, 1300));
        rt.block_on(async {
            let api = Api::new(&server);
            let id = api.create(&env).await;
            let b = Browser::start().await;
            b.goto(&format!("{}#{id}", server.login_url())).await;
            b.wait_text("#session-head", &id).await;
            b.type_into("#message", "run the job").await;
            b.click("#send").await;

            // Live, from the turn's events: the start, in the conversation and the head.
            let live = b.wait_text(".live", "job 1 started").await;
            assert!(live.contains(&job1), "the command as text: {live}");
            let head = b.wait_text("#session-head .jobs", "1 running").await;
            assert!(head.contains("job 1 running"), "{head}");
            assert!(head.contains(&trap(1)), "{head}");
            std::fs::write(&job1_go, "").unwrap();
            // Its end, while the second block still runs.
            let live = b.wait_text(".live", "job 1 finished: exit 0").await;
            assert!(live.contains("1 line"), "{live}");
            assert_eq!(
                b.count(".live .block[data-status='running']").await,
                1,
                "the second block still runs: {live}"
            );
            b.wait_text("#session-head .jobs", "job 1 exit 0").await;
            nothing_ran(&b).await;
            std::fs::write(&release, "").unwrap();
            b.wait_text("#turn-status", "turn 1 finished: done").await;

            // After a reload: the stored announcement and the job in the head.
            b.js("location.reload();", vec![]).await;
            let t = b.wait_text("#transcript", "The job is done.").await;
            assert!(t.contains("[vis] job 1 finished: exit 0, 1 line"), "{t}");
            assert!(t.contains("started 1"), "{t}");
            let head = b.wait_text("#session-head .jobs", "job 1 exit 0").await;
            assert!(head.contains(&trap(1)), "{head}");
            assert_eq!(
                b.count("#session-head .job[data-state='finished']").await,
                1
            );
            nothing_ran(&b).await;

            // Turn 2 ends with job 2 running: the head says so, after a reload too.
            b.type_into("#message", "start another").await;
            b.click("#send").await;
            b.wait_text("#turn-status", "turn 2 finished: done").await;
            let head = b.wait_text("#session-head .jobs", "job 2 running").await;
            assert!(head.contains("1 running"), "{head}");
            b.js("location.reload();", vec![]).await;
            b.wait_text("#transcript", "Job 2 runs on.").await;
            let head = b.wait_text("#session-head .jobs", "job 2 running").await;
            assert!(head.contains(&format!("job2 {}", trap(2))), "{head}");
            // It ends between turns: the page sees it without a turn or a reload.
            std::fs::write(&job2_go, "").unwrap();
            let head = b.wait_text("#session-head .jobs", "job 2 exit 0").await;
            assert!(!head.contains("running"), "{head}");
            b.screenshot("jobs").await;
            nothing_ran(&b).await;
            b.close().await;
        });
    }
);

/// The `#transcript` image elements' sources and natural widths.
async fn shown_images(b: &Browser) -> Value {
    b.js(
        "return [...document.querySelectorAll('#transcript img.shown-image')].map(i => [i.getAttribute('src'), i.complete ? i.naturalWidth : -1, i.alt]);",
        vec![],
    )
    .await
}

vistest!(the_web_view_shows_images_and_links_sub_sessions, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    let png = crate::images::image_bytes(120, 80, image::ImageFormat::Png);
    std::fs::write(env.workspace().join("plot.png"), &png).unwrap();
    let hash = blake3::hash(&png).to_hex().to_string();
    fake.push(block(
        "a",
        "Here is the plot.",
        &format!("show('plot.png', caption={:?})\nprint('shown')", trap(3)),
        1000,
        0,
    ));
    fake.push(final_answer("The plot is above.", 1200, 900));
    // Turn 2 hands a sub-task to a child, whose answer carries markup.
    // The child's answer is held until the page has shown its start (the fake answers at
    // once otherwise, and the turn's live part can give way before a poll sees it).
    let child_gate = Gate::new(2);
    fake.conversation(
        "CHILD-W",
        vec![Reply::gated(
            &child_gate,
            final_answer(&format!("{} child answer", trap(4)), 500, 0),
        )],
    );
    fake.push(block(
        "b",
        "Asking a sub-session.",
        "print('child said:', spawn('CHILD-W: look at the plot').wait())",
        1300,
        1100,
    ));
    fake.push(final_answer("The child answered.", 1400, 1200));
    rt.block_on(async {
            let api = Api::new(&server);
            let other = api.create(&env).await;
            let id = api.create(&env).await;
            let b = Browser::start().await;
            b.goto(&format!("{}#{id}", server.login_url())).await;
            b.wait_text("#session-head", &id).await;

            b.type_into("#message", "plot it").await;
            b.click("#send").await;
            b.wait_text("#turn-status", "turn 1 finished: done").await;
            b.wait_text("#transcript", "The plot is above.").await;
            // The image, loaded through the image route with the page's login (a cookie).
            let src = format!("/api/sessions/{id}/images/{hash}");
            b.wait_js(
                "the image to load",
                "const i = document.querySelector('#transcript img.shown-image'); return i && i.complete && i.naturalWidth > 0;",
            )
            .await;
            assert_eq!(shown_images(&b).await, json!([[src, 120, trap(3)]]));
            let caption = b.text("#transcript figure.shown figcaption").await;
            assert!(caption.contains("120×80 PNG"), "{caption}");
            assert!(caption.contains(&trap(3)), "the caption as text: {caption}");
            nothing_ran(&b).await;
            b.screenshot("image").await;
            // The route serves the session's own image; not another session's, not without
            // the login.
            let fetch = "return fetch(arguments[0]).then(async r => [r.status, r.headers.get('content-type'), (await r.arrayBuffer()).byteLength]);";
            let own = b.js(fetch, vec![json!(src)]).await;
            assert_eq!(own[0], json!(200));
            assert_eq!(own[1], json!("image/png"));
            let foreign = b
                .js(fetch, vec![json!(format!("/api/sessions/{other}/images/{hash}"))])
                .await;
            assert_eq!(foreign[0], json!(404), "{foreign}");
            let url = format!("{}{src}", server.url);
            let anonymous = api.http.get(&url).send().await.unwrap();
            assert_eq!(anonymous.status(), 401);
            let wrong = api
                .http
                .get(&url)
                .header("authorization", "Bearer not-the-token")
                .send()
                .await
                .unwrap();
            assert_eq!(wrong.status(), 401);
            let with_token = api
                .http
                .get(&url)
                .header("authorization", format!("Bearer {}", api.token))
                .send()
                .await
                .unwrap();
            assert_eq!(with_token.status(), 200);
            assert_eq!(with_token.bytes().await.unwrap().as_ref(), png.as_slice());

            // Turn 2: the child's start and end show live, each with a link to it.
            b.type_into("#message", "ask a child").await;
            b.click("#send").await;
            // The model's text says "sub-session" too: wait for the start line itself.
            let live = b.wait_text(".live", "started (t2/i1)").await;
            assert!(live.contains("started (t2/i1): CHILD-W: look at the plot"), "{live}");
            let child = b
                .wait_js(
                    "the child's link",
                    "const a = document.querySelector('.live .notice.child a.child-link'); return a && a.textContent;",
                )
                .await
                .as_str()
                .unwrap()
                .to_string();
            assert!(!child.is_empty() && child != id, "{child}");
            child_gate.release();
            // The child's end is not awaited in `.live`: the fake answers at once, so the turn can
            // end (and its live part give way to the transcript) before a poll sees it; the
            // stored card and head below show the answer.
            b.wait_text("#turn-status", "turn 2 finished: done").await;
            let t = b.wait_text("#transcript", "The child answered.").await;
            assert!(t.contains(&format!("child said: {} child answer", trap(4))), "{t}");
            // Stored: the block's card and the head link the child, its answer as text. The
            // card is the stored one once the page has re-read the session after the turn (the
            // final answer can show before that): wait for it.
            let card = b.wait_text("#transcript .block .children", &child).await;
            assert!(card.contains(&format!("done — {} child answer", trap(4))), "{card}");
            b.wait_text("#session-head .children", &child).await;
            nothing_ran(&b).await;
            // The link opens the child: its head says whose sub-session it is.
            b.click("#transcript .block .children a.child-link").await;
            let head = b.wait_text("#session-head", "sub-session of").await;
            assert!(head.contains(&child) && head.contains(&id), "{head}");
            b.wait_text("#transcript", "child answer").await;
            let url = b.client().current_url().await.unwrap();
            assert_eq!(url.fragment(), Some(child.as_str()));
            // And the parent link leads back.
            b.click("#session-head .parent a.sid").await;
            b.wait_text("#transcript", "The child answered.").await;
            nothing_ran(&b).await;
            b.close().await;
        });
});

/// The real `vis serve` with `[provider] images = IMAGES`: one turn (through the API) whose
/// block showed a PNG with markup in its caption. Then the page, opened afresh, builds the
/// session from the store: what its transcript shows, the image elements, the notices, the
/// API's image record and the request the model got after the block.
struct StoredImage {
    transcript: String,
    images: usize,
    notices: Vec<String>,
    api_image: Value,
    sent: String,
}

fn stored_image_turn(env: &crate::support::TestEnv, images: bool) -> StoredImage {
    use crate::serve::{Client, OPENAI};
    use crate::support::serve::ServeProcess;
    let fake = FakeProvider::start();
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        format!(
            "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\nmax_retries = 0\nimages = {images}\n",
            fake.base_url(OPENAI)
        ),
    )
    .unwrap();
    let png = crate::images::image_bytes(120, 80, image::ImageFormat::Png);
    std::fs::write(env.workspace().join("plot.png"), &png).unwrap();
    fake.push(block(
        "a",
        "Here is the plot.",
        &format!("show('plot.png', caption={:?})\nprint('shown')", trap(5)),
        1000,
        0,
    ));
    fake.push(final_answer("The plot is above.", 1200, 900));
    let server = ServeProcess::start(env.command(&["serve"]));
    let token = std::fs::read_to_string(vis::config::serve_token_path(&env.db())).unwrap();
    events().block_on(async {
        let c = Client::at(&server.url, Some(token.trim()));
        let id = c.create(env).await;
        let evs = crate::support::serve::read_events(c.turn(&id, "plot it").await, 1000).await;
        assert_eq!(evs.last().unwrap().data["status"], "done", "{evs:?}");
        let (status, page) = c
            .json(reqwest::Method::GET, &format!("/api/sessions/{id}"), None)
            .await;
        assert_eq!(status, 200, "{page}");
        let api_image = page["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["kind"] == "tool_result")
            .map(|h| h["images"][0].clone())
            .unwrap();
        let b = Browser::start().await;
        b.goto(&format!("{}#{id}", server.login_url)).await;
        let transcript = b.wait_text("#transcript", "The plot is above.").await;
        b.wait_js(
            "the image to load",
            "const i = document.querySelector('#transcript img.shown-image'); return i && i.complete && i.naturalWidth > 0;",
        )
        .await;
        let shown = b.count("#transcript img.shown-image").await;
        let notices = b
            .js(
                "return [...document.querySelectorAll('#transcript .block + .notice')].map(n => n.textContent);",
                vec![],
            )
            .await;
        nothing_ran(&b).await;
        b.screenshot(if images { "stored-image-sent" } else { "stored-image-not-sent" })
            .await;
        b.close().await;
        StoredImage {
            transcript,
            images: shown,
            notices: serde_json::from_value(notices).unwrap(),
            api_image,
            sent: fake.requests()[1].body_str(),
        }
    })
}

vistest!(
    the_stored_web_view_says_when_an_image_was_not_sent_to_the_model,
    |env| {
        let stored = stored_image_turn(&env, false);
        let note = format!(
            "[vis] image not sent: fake-model does not accept images (PNG 120×80, {})",
            trap(5)
        );
        // The request after the block carried the note in place of the image ...
        assert!(stored.sent.contains(&note), "{}", stored.sent);
        assert!(!stored.sent.contains("image_url"), "{}", stored.sent);
        // ... the store kept it with the result, and the page built from the store shows it
        // under the block, as text, once; the person still sees the image itself.
        assert_eq!(
            stored.api_image["not_sent"],
            json!(note),
            "{}",
            stored.api_image
        );
        assert_eq!(stored.notices, vec![note.clone()], "{}", stored.transcript);
        assert_eq!(stored.transcript.matches("image not sent").count(), 1);
        assert_eq!(stored.images, 1);
    }
);

vistest!(
    the_stored_web_view_of_a_model_that_takes_images_shows_no_note,
    |env| {
        let stored = stored_image_turn(&env, true);
        assert!(stored.sent.contains("image_url"), "{}", stored.sent);
        assert!(!stored.sent.contains("image not sent"));
        assert!(
            stored.api_image.get("not_sent").is_none(),
            "{}",
            stored.api_image
        );
        assert_eq!(stored.images, 1);
        assert!(stored.notices.is_empty(), "{:?}", stored.notices);
        assert!(
            !stored.transcript.contains("image not sent"),
            "{}",
            stored.transcript
        );
    }
);
