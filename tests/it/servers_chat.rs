//! Real OpenAI-compatible servers through `vis chat` (issue 23 §1): the llama-cpp-python
//! captures replayed through the fake provider end to end, a session broken by a request
//! shape resumed, answers cut at the output limit and empty ones, `stream = false` with a tool
//! call and Ctrl-C, the health records, the context window of an unknown model, and bad
//! settings — in `-m` mode and piped. `servers_views` shows the same in tmux, the web view and
//! `vis serve`.

use std::io::Read;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use vis::providers::ProviderKind;

use crate::servers::completion;
use crate::support::chat::answer;
use crate::support::fake_provider::{FakeProvider, RecordedRequest, Reply};
use crate::support::tmux::DEADLINE;
use crate::support::{wait_until, Run, TestEnv};
use crate::vistest;

const OPENAI: ProviderKind = ProviderKind::OpenAi;

pub(crate) fn capture(name: &str) -> Reply {
    Reply::capture(&format!("llama-cpp-python/{name}"))
}

pub(crate) fn chat_args(fake: &FakeProvider, kind: ProviderKind, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "chat".into(),
        "--provider".into(),
        kind.as_str().into(),
        "--base-url".into(),
        fake.base_url(kind),
        "--model".into(),
        "fake-model".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn chat(env: &TestEnv, fake: &FakeProvider, kind: ProviderKind, extra: &[&str]) -> Run {
    let args = chat_args(fake, kind, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.vis(&args)
}

pub(crate) fn config(env: &TestEnv, text: &str) {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(env.config_dir().join("config.toml"), text).unwrap();
}

/// The session id `vis chat` announced on standard error.
fn session_id(stderr: &str) -> String {
    let at = stderr.find("new session ").expect(stderr) + "new session ".len();
    stderr[at..].split_whitespace().next().unwrap().to_string()
}

fn show(env: &TestEnv, id: &str) -> String {
    let run = env.vis(&["sessions", "show", id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

/// The model-request rows of `vis sessions show` (after the header row).
fn request_rows(shown: &str) -> Vec<String> {
    shown
        .lines()
        .skip_while(|l| !l.starts_with("model requests:"))
        .skip(2)
        .take_while(|l| l.starts_with("  ") && !l.starts_with("  ("))
        .map(str::to_string)
        .collect()
}

/// `vis chat ARGS` running, with its standard output collected as it comes.
fn spawn(env: &TestEnv, args: &[String]) -> (Child, Arc<Mutex<String>>) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Arc::new(Mutex::new(String::new()));
    let mut stdout = child.stdout.take().unwrap();
    let sink = out.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (child, out)
}

fn interrupt(child: &Child) {
    // SAFETY: signalling the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
}

/// The assistant messages of a recorded OpenAI request.
fn assistants(req: &RecordedRequest) -> Vec<Value> {
    req.json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .cloned()
        .collect()
}

/// What llama-cpp-python does with a request: an assistant message whose `content` is not a
/// string gets its HTTP 500 (as captured); any other request gets `reply`.
fn like_llama_cpp_python(req: &RecordedRequest, reply: Reply) -> Reply {
    if assistants(req).iter().all(|m| m["content"].is_string()) {
        reply
    } else {
        capture("http-500-content-null.http")
    }
}

vistest!(
    a_llama_cpp_python_session_runs_its_call_and_sends_content_as_a_string,
    |env| {
        let fake = FakeProvider::start();
        fake.push(capture("tool-call-with-pings.http"));
        fake.push_fn(|req| {
            like_llama_cpp_python(req, answer(OPENAI, "The block failed: `{` is not Python."))
        });
        let run = chat(&env, &fake, OPENAI, &["-m", "run something"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        // The call decoded into one block, which ran (the model's code is `{`).
        assert!(
            run.stdout.contains("── t1/i1 python ──\n{\n"),
            "{}",
            run.stdout
        );
        assert!(run.stdout.contains("SyntaxError"), "{}", run.stdout);
        assert!(!run.stdout.contains("t1/i2"), "{}", run.stdout);
        assert!(run.stdout.contains("`{` is not Python"), "{}", run.stdout);
        assert!(run.stdout.contains("── turn 1 done ──"), "{}", run.stdout);
        let second = &fake.requests()[1];
        let sent = assistants(second);
        assert_eq!(sent[0]["content"], json!(""), "{sent:?}");
        assert_eq!(
            sent[0]["tool_calls"][0]["id"],
            "call__0_python_execution_cmpl-684eb2d9-2fdf-4893-a736-689c439a1e91"
        );
    }
);

vistest!(
    a_session_broken_by_the_servers_500_resumes_once_vis_sends_a_string,
    |env| {
        // The first run: a tool call, then the server refuses the next request with its 500
        // (as it did when Vis sent `"content": null`). The turn fails at once, naming the
        // field, and nothing is lost.
        let fake = FakeProvider::start();
        fake.push(capture("tool-call-with-pings.http"));
        fake.push(capture("http-500-content-null.http"));
        let run = chat(&env, &fake, OPENAI, &["-m", "run something"]);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert!(
            run.stdout.contains("[vis] error: the server rejected the request as invalid (HTTP 500: body -> messages -> 2 -> content: Input should be a valid string"),
            "{}",
            run.stdout
        );
        assert!(!run.stdout.contains("overloaded"), "{}", run.stdout);
        assert_eq!(fake.request_count(), 2, "the 500 was not retried");
        let id = session_id(&run.stderr);
        // The stored history is data (the message's blocks), not request bytes.
        let export = env.vis(&["sessions", "export", &id]);
        let export: Value = serde_json::from_str(&export.stdout).unwrap();
        let stored = export["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["kind"] == "assistant")
            .unwrap()["body"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            stored.contains("\"blocks\"") && !stored.contains("\"content\""),
            "{stored}"
        );
        // `vis context` shows the repaired request, and resuming works.
        let context = env.vis(&[
            "context",
            &id,
            "--json",
            "--provider",
            "openai",
            "--base-url",
            &fake.base_url(OPENAI),
        ]);
        assert_eq!(context.code, 0, "{}", context.stderr);
        let body: Value = serde_json::from_str(&context.stdout).unwrap();
        let assistant = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "assistant")
            .unwrap();
        assert_eq!(assistant["content"], json!(""), "{assistant}");
        fake.push_fn(|req| like_llama_cpp_python(req, answer(OPENAI, "Back on track.")));
        let run = chat(&env, &fake, OPENAI, &["--resume", &id, "-m", "go on"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("Back on track."), "{}", run.stdout);
        let resumed = &fake.requests()[2];
        assert_eq!(assistants(resumed)[0]["content"], json!(""));
    }
);

vistest!(
    an_answer_cut_at_the_output_limit_ends_the_turn_visibly,
    |env| {
        let fake = FakeProvider::start();
        fake.push(capture("finish-length.http"));
        let run = chat(&env, &fake, OPENAI, &["-m", "write hello.py"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("Hello.py is a"), "{}", run.stdout);
        assert!(
            run.stdout.contains(
                "[vis] the answer was cut at the output limit (finish_reason \"length\")"
            ),
            "{}",
            run.stdout
        );
        assert!(
            run.stdout.contains("── turn 1 output_limit ──"),
            "{}",
            run.stdout
        );
        let id = session_id(&run.stderr);
        let shown = show(&env, &id);
        assert!(shown.contains("turn 1 (chat) [output_limit]"), "{shown}");
        let rows = request_rows(&shown);
        assert!(rows[0].contains(" length "), "{rows:?}");

        // Anthropic: `max_tokens`; a call in the cut answer does not run, and the model is told.
        let fake = FakeProvider::start();
        let kind = ProviderKind::Anthropic;
        fake.push(
            Reply::anthropic()
                .text("Writing it.")
                .tool_call(
                    "toolu_1",
                    "python_execution",
                    "{\"code\": \"open('cut.txt', 'w')",
                )
                .stop_reason("max_tokens")
                .build(),
        );
        fake.push(answer(kind, "Sorry, shorter now."));
        let run = chat(&env, &fake, kind, &["-m", "write it", "-m", "again"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(
        run.stdout.contains("cut at the output limit (stop_reason \"max_tokens\"); raise [provider] max_output_tokens (now 16000)"),
        "{}",
        run.stdout
    );
        assert!(run.stdout.contains("── rejected · "), "{}", run.stdout);
        assert!(!env.workspace().join("cut.txt").exists());
        let second = fake.requests()[1].json();
        let results = second["messages"][2]["content"].to_string();
        assert!(
            results.contains("not run: the answer was cut at the output limit"),
            "{results}"
        );
    }
);

vistest!(an_empty_answer_is_shown_as_empty, |env| {
    let fake = FakeProvider::start();
    fake.push(Reply::openai().build());
    let run = chat(&env, &fake, OPENAI, &["-m", "say nothing"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("[vis] (empty answer: the model sent no text and no tool call)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("── turn 1 done ──"), "{}", run.stdout);
});

vistest!(an_empty_200_names_stream_false_and_is_not_retried, |env| {
    config(&env, "[provider]\ntool_choice = \"auto\"\n");
    let fake = FakeProvider::start();
    for _ in 0..3 {
        fake.push(capture("empty-body-streaming-tool-choice-auto.http"));
    }
    let run = chat(&env, &fake, OPENAI, &["-m", "hi"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("[vis] error: the server answered with an empty stream"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("try [provider] stream = false"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("ended early"), "{}", run.stdout);
    assert_eq!(fake.request_count(), 1);
    assert_eq!(fake.requests()[0].json()["tool_choice"], "auto");
    let shown = show(&env, &session_id(&run.stderr));
    assert!(
        request_rows(&shown)[0].contains("empty_response"),
        "{shown}"
    );
});

vistest!(
    a_session_that_does_not_stream_runs_a_call_and_stops_on_ctrl_c,
    |env| {
        config(&env, "[provider]\nstream = false\ntool_choice = \"auto\"\n");
        let fake = FakeProvider::start();
        fake.push(completion(
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "python_execution", "arguments": "{\"code\": \"print(6 * 7)\"}"}}]}),
        "tool_calls",
    ));
        fake.push(completion(
            json!({"role": "assistant", "content": "It is 42."}),
            "stop",
        ));
        let run = chat(&env, &fake, OPENAI, &["-m", "six times seven"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        for needle in [
            "print(6 * 7)",
            "── ok · ",
            "42\n",
            "It is 42.",
            "── turn 1 done ──",
        ] {
            assert!(
                run.stdout.contains(needle),
                "missing {needle:?} in\n{}",
                run.stdout
            );
        }
        for req in fake.requests() {
            let body = req.json();
            assert_eq!(
                (&body["stream"], &body["tool_choice"]),
                (&json!(false), &json!("auto"))
            );
            assert!(body.get("stream_options").is_none(), "{body}");
            assert_eq!(req.header("accept"), Some("application/json"));
        }
        let id = session_id(&run.stderr);
        for row in request_rows(&show(&env, &id)) {
            // A whole answer has no time to first token.
            assert!(row.contains(" n/a "), "{row}");
        }

        // Ctrl-C while the whole answer is awaited drops the request; the turn ends interrupted.
        fake.push(Reply::delay(
            Duration::from_secs(60),
            completion(json!({"role": "assistant", "content": "too late"}), "stop"),
        ));
        let args = chat_args(&fake, OPENAI, &["--resume", &id, "-m", "slow"]);
        let (child, out) = spawn(&env, &args);
        assert!(wait_until(DEADLINE, || fake.request_count() == 3));
        interrupt(&child);
        let status = child.wait_with_output().unwrap().status;
        let out = out.lock().unwrap().clone();
        assert_eq!(status.code(), Some(130), "{out}");
        assert!(out.contains("── turn 2 interrupted ──"), "{out}");
        let rows = request_rows(&show(&env, &id));
        assert!(rows[2].contains("interrupted"), "{rows:?}");
    }
);

vistest!(
    health_records_count_retries_and_time_an_interrupted_stream,
    |env| {
        config(&env, "[provider]\nmax_retries = 2\n");
        let fake = FakeProvider::start();
        for _ in 0..3 {
            fake.push(Reply::error(503, "overloaded_error", "busy"));
        }
        let run = chat(&env, &fake, OPENAI, &["-m", "hi"]);
        assert_eq!(run.code, 1, "{}", run.stdout);
        assert!(
            run.stdout.contains("gave up after 3 attempts"),
            "{}",
            run.stdout
        );
        let id = session_id(&run.stderr);
        let export: Value =
            serde_json::from_str(&env.vis(&["sessions", "export", &id]).stdout).unwrap();
        assert_eq!(export["requests"][0]["retries"], 2);
        assert_eq!(export["requests"][0]["error_kind"], "server");

        // A stream that sent text, then went quiet: interrupted, its first token still timed.
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": "partial answer"}}]});
        fake.push(Reply::stall(
            format!("data: {chunk}\n\n"),
            Duration::from_secs(60),
        ));
        let args = chat_args(&fake, OPENAI, &["--resume", &id, "-m", "again"]);
        let (child, out) = spawn(&env, &args);
        assert!(wait_until(DEADLINE, || out
            .lock()
            .unwrap()
            .contains("partial answer")));
        interrupt(&child);
        assert_eq!(child.wait_with_output().unwrap().status.code(), Some(130));
        let export: Value =
            serde_json::from_str(&env.vis(&["sessions", "export", &id]).stdout).unwrap();
        let last = &export["requests"][1];
        assert_eq!(last["error_kind"], "interrupted", "{last}");
        assert!(last["ttft_ms"].is_u64(), "{last}");
        assert_eq!(last["retries"], 0);
        assert_eq!(export["requests"][0]["finish_reason"], Value::Null);
    }
);

vistest!(
    an_unknown_models_window_is_a_guess_and_a_servers_own_is_used,
    |env| {
        use std::io::Write;
        let fake = FakeProvider::start();
        fake.push(answer(OPENAI, "Hello."));
        let args = chat_args(&fake, OPENAI, &[]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = env
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"hi\n/status\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        // The status line and /status say the window is a guess, and what to set.
        assert!(
            stdout.contains("(window guessed: unknown model)"),
            "{stdout}"
        );
        assert!(
        stdout.contains("the model's hard limit is 112,000: default for an unknown model; set [folding] input_limit"),
        "{stdout}"
    );
        let id = session_id(&String::from_utf8_lossy(&out.stderr));
        assert!(
        show(&env, &id).contains(
            "context   input limit 112,000 tokens (default for an unknown model; set [folding] input_limit)"
        ),
        "{}",
        show(&env, &id)
    );

        // A llama.cpp server tells its window: it is used, recorded with its origin, and asked
        // once per session start (not per turn).
        let fake = FakeProvider::start();
        fake.route(
            "GET",
            "/props",
            Reply::status(
                200,
                &[("content-type", "application/json")],
                json!({"default_generation_settings": {"n_ctx": 8192}}).to_string(),
            ),
        );
        fake.push(answer(OPENAI, "One."));
        fake.push(answer(OPENAI, "Two."));
        let run = chat(&env, &fake, OPENAI, &["-m", "one", "-m", "two"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let props = fake.probes().iter().filter(|p| p.path == "/props").count();
        assert_eq!(props, 1);
        let shown = show(&env, &session_id(&run.stderr));
        assert!(
        shown.contains("input limit 6,144 tokens (the server's window of 8,192 tokens (llama.cpp /props n_ctx))"),
        "{shown}"
    );
        // [folding] input_limit wins, and nothing is asked.
        config(&env, "[folding]\ninput_limit = 50000\n");
        let fake = FakeProvider::start();
        fake.push(answer(OPENAI, "Three."));
        let run = chat(&env, &fake, OPENAI, &["-m", "three"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(fake.probes().is_empty());
        let shown = show(&env, &session_id(&run.stderr));
        assert!(
            shown.contains("input limit 50,000 tokens (set in [folding])"),
            "{shown}"
        );
    }
);

vistest!(
    bad_provider_settings_are_clear_errors_and_nothing_is_sent,
    |env| {
        let fake = FakeProvider::start();
        let refused = |text: &str, needles: &[&str]| {
            config(&env, text);
            let run = chat(&env, &fake, ProviderKind::Anthropic, &["-m", "hi"]);
            assert_eq!(run.code, 2, "{text}: {}\n{}", run.stdout, run.stderr);
            assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
            for needle in needles {
                assert!(
                    run.stderr.contains(needle),
                    "{needle:?} missing: {}",
                    run.stderr
                );
            }
        };
        refused(
            "[provider]\ntool_choice = \"sometimes\"\n",
            &[
                "line 2",
                "tool_choice",
                "\"auto\", \"required\", \"none\"",
                "python_execution",
                "sometimes",
            ],
        );
        refused(
            "[provider]\nstream = \"no\"\n",
            &["line 2", "stream", "expected true or false"],
        );
        refused(
            "[serve.providers.local]\nprovider = \"openai\"\ntool_choice = \"any_tool\"\n",
            &["line 3", "tool_choice", "any_tool"],
        );
        // Config errors stop everything before the database is opened.
        assert!(!env.db().exists());
        refused(
            "[provider]\ntool_choice = \"required\"\nthinking_budget = 2000\n",
            &["tool_choice forces a tool call", "thinking_budget"],
        );
        assert_eq!(fake.request_count(), 0);
        assert!(fake.probes().is_empty());
        let list = env.vis(&["sessions", "list"]);
        assert!(list.stdout.contains("no sessions yet"), "{}", list.stdout);
    }
);
