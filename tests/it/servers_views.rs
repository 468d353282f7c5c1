//! Real OpenAI-compatible servers as a person sees them (issue 23 §1): the interactive
//! `vis chat` in tmux (a cut answer, an empty one, a guessed window, the spinner while a whole
//! answer is awaited), the web view's transcript, and a `vis serve` turn with whole answers.

use std::time::Duration;

use serde_json::{json, Value};
use vis::providers::ProviderKind;

use crate::servers::completion;
use crate::servers_chat::{capture, chat_args, config};
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::support::tmux::{Tmux, DEADLINE};
use crate::support::{vis_bin, wait_until, TestEnv};
use crate::vistest;

const OPENAI: ProviderKind = ProviderKind::OpenAi;

// ---- the interactive program ---------------------------------------------------------------

fn tui(env: &TestEnv, fake: &FakeProvider) -> Tmux {
    let args: Vec<String> = [
        vec!["--db".to_string(), env.db().to_string_lossy().into_owned()],
        chat_args(fake, OPENAI, &[]),
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
    tmux
}

vistest!(
    the_tui_shows_a_cut_answer_an_empty_one_and_a_guessed_window,
    |env| {
        let fake = FakeProvider::start();
        fake.push(capture("finish-length.http"));
        fake.push(Reply::openai().build());
        let tmux = tui(&env, &fake);
        tmux.send_line("write hello.py");
        let screen = tmux.wait_count("· util ", 1);
        assert!(screen.contains("Hello.py is a"), "{screen}");
        assert!(
            screen.contains("[vis] the answer was cut at the output limit"),
            "{screen}"
        );
        assert!(
            screen.contains("turn 1 ended at the output limit"),
            "{screen}"
        );
        assert!(
            screen.contains("(window guessed: unknown model)"),
            "{screen}"
        );
        tmux.send_line("and?");
        let screen = tmux.wait_count("· util ", 2);
        assert!(screen.contains("[vis] (empty answer"), "{screen}");
        tmux.send_line("/status");
        let screen = tmux.wait_text("default for an unknown model; set [folding]");
        assert!(screen.contains("finished: stop"), "{screen}");
    }
);

vistest!(
    the_spinner_keeps_going_while_a_whole_answer_is_awaited,
    |env| {
        config(&env, "[provider]\nstream = false\n");
        let fake = FakeProvider::start();
        fake.push(Reply::delay(
            Duration::from_secs(60),
            completion(json!({"role": "assistant", "content": "too late"}), "stop"),
        ));
        let tmux = tui(&env, &fake);
        tmux.send_line("slow one");
        // No byte arrives, yet the spinner's clock goes on (it is redrawn on its own tick).
        tmux.wait_for("the spinner past a second", |s| {
            s.contains("thinking 1.") && s.contains("Ctrl-C interrupts")
        });
        assert!(wait_until(DEADLINE, || fake.request_count() == 1));
        tmux.keys(&["C-c"]);
        let screen = tmux.wait_count("· util ", 1);
        assert!(screen.contains("⏹ turn 1 interrupted"), "{screen}");
        assert!(!tmux.dead());
    }
);

// ---- the web view --------------------------------------------------------------------------

vistest!(the_web_view_shows_a_cut_answer_and_an_empty_one, |env| {
    use crate::support::serve::{read_events, ServerConfig, TestServer};
    use crate::web::browser::Browser;
    let rt = crate::support::chat::events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        let post = |path: String, body: Value| {
            http.post(format!("{}{path}", server.url))
                .header("content-type", "application/json")
                .header("authorization", format!("Bearer {}", server.token))
                .body(body.to_string())
                .send()
        };
        let created = post(
            "/api/sessions".into(),
            json!({"workspace": env.workspace()}),
        )
        .await
        .unwrap();
        let created: Value = serde_json::from_str(&created.text().await.unwrap()).unwrap();
        let id = created["id"].as_str().unwrap().to_string();
        let b = Browser::start().await;
        b.goto(&format!("{}#{id}", server.login_url())).await;
        b.wait_text("#session-head", &id).await;
        fake.push(capture("finish-length.http"));
        fake.push(Reply::openai().build());
        for message in ["write hello.py", "and?"] {
            let resp = post(
                format!("/api/sessions/{id}/turns"),
                json!({ "message": message }),
            )
            .await
            .unwrap();
            read_events(resp, 1000).await;
        }
        // The transcript as stored: the cut turn says so after its answer, with its status,
        // and the empty answer is shown as empty.
        b.goto(&format!("{}/#{id}", server.url)).await;
        let t = b.wait_text("#transcript", "(empty answer").await;
        let cut = t.find("the answer was cut at the output limit").expect(&t);
        assert!(t.find("Hello.py is a").unwrap() < cut, "{t}");
        assert!(t.contains("output_limit"), "{t}");
        // The chart's bars name why each answer ended.
        let titles = b
            .js(
                "return [...document.querySelectorAll('#chart svg .bar title')].map(t => t.textContent);",
                vec![],
            )
            .await;
        let titles = titles.to_string();
        assert!(
            titles.contains("finished: length") && titles.contains("finished: stop"),
            "{titles}"
        );
        b.close().await;
    });
});

vistest!(
    vis_serve_runs_a_turn_with_whole_answers_and_vis_exec_is_unaffected,
    |env| {
        use crate::support::serve::{read_events, ServerConfig, TestServer};
        use std::sync::Arc;
        let rt = crate::support::chat::events();
        let fake = FakeProvider::start();
        let server_config = ServerConfig {
            tweak: Some(Arc::new(|s: &mut vis::gateway::ChatSettings| {
                s.provider.stream = false;
                s.provider.tool_choice = Some(vis::providers::ToolChoice::Auto);
            })),
            ..ServerConfig::default()
        };
        let server = TestServer::start(&env, &fake, server_config);
        fake.push(completion(
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "python_execution", "arguments": "{\"code\": \"print(6 * 7)\"}"}}]}),
        "tool_calls",
    ));
        fake.push(completion(
            json!({"role": "assistant", "content": "It is 42."}),
            "stop",
        ));
        let events = rt.block_on(async {
            let _ = rustls::crypto::ring::default_provider().install_default();
            let http = reqwest::Client::new();
            let post = |path: String, body: Value| {
                http.post(format!("{}{path}", server.url))
                    .header("content-type", "application/json")
                    .header("authorization", format!("Bearer {}", server.token))
                    .body(body.to_string())
                    .send()
            };
            let created = post(
                "/api/sessions".into(),
                json!({"workspace": env.workspace()}),
            )
            .await
            .unwrap();
            let created: Value = serde_json::from_str(&created.text().await.unwrap()).unwrap();
            let id = created["id"].as_str().unwrap().to_string();
            let resp = post(
                format!("/api/sessions/{id}/turns"),
                json!({"message": "6 * 7?"}),
            )
            .await
            .unwrap();
            read_events(resp, 1000).await
        });
        let of = |name: &str| -> Vec<&Value> {
            events
                .iter()
                .filter(|e| e.event == name)
                .map(|e| &e.data)
                .collect()
        };
        let finished = of("response_finished");
        assert_eq!(finished.len(), 2, "{events:?}");
        assert!(
            finished.iter().all(|f| f["ttft_ms"].is_null()),
            "{finished:?}"
        );
        assert!(of("block_finished")[0]["output"]
            .as_str()
            .unwrap()
            .contains("42"));
        assert_eq!(of("turn_finished")[0]["status"], "done");
        assert_eq!(of("text_delta")[0]["text"], "It is 42.");
        for req in fake.requests() {
            assert_eq!(req.json()["stream"], false);
        }
        // `vis exec` talks to no model: the same config changes nothing for it.
        config(&env, "[provider]\nstream = false\ntool_choice = \"auto\"\n");
        let run = env.exec("s-exec", "print(6 * 7)");
        assert_eq!((run.code, run.stdout.trim()), (0, "42"), "{}", run.stderr);
    }
);
