//! `vis chat` as a program: `-m` end to end, exit codes, Ctrl-C, and resume after `kill -9`.

use std::process::Stdio;
use std::time::Duration;

use vis::providers::ProviderKind;

use crate::support::chat::{answer, calls, messages};
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::support::{pids_with, wait_until, worker_pids_in, TestEnv};
use crate::vistest;

/// `vis chat` flags pointing at the fake provider.
fn chat_args(fake: &FakeProvider, kind: ProviderKind) -> Vec<String> {
    vec![
        "chat".into(),
        "--provider".into(),
        kind.as_str().into(),
        "--base-url".into(),
        fake.base_url(kind),
        "--model".into(),
        "fake-model".into(),
    ]
}

fn chat(
    env: &TestEnv,
    fake: &FakeProvider,
    kind: ProviderKind,
    extra: &[&str],
) -> crate::support::Run {
    let mut args = chat_args(fake, kind);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    env.vis(&args)
}

vistest!(
    chat_with_messages_runs_turns_and_prints_the_transcript,
    |env| {
        let fake = FakeProvider::start();
        let kind = ProviderKind::OpenAi;
        fake.push(calls(
            kind,
            "a",
            &["def square(n):\n    return n * n\nprint(square(7))"],
        ));
        fake.push(answer(kind, "7 squared is 49."));
        fake.push(calls(kind, "b", &["print(square(8))"]));
        fake.push(answer(kind, "And 8 squared is 64."));
        let run = chat(&env, &fake, kind, &["-m", "square 7", "-m", "now 8"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let out = &run.stdout;
        for needle in [
            "> square 7",
            "── t1/i1 python ──",
            "print(square(7))",
            "── ok · ",
            "49\n",
            "7 squared is 49.",
            "── turn 1 done ──",
            "> now 8",
            "64\n",
            "── turn 2 done ──",
        ] {
            assert!(out.contains(needle), "missing {needle:?} in\n{out}");
        }
        assert!(run.stderr.contains("vis: new session s-"), "{}", run.stderr);
        // The session is listed and shows its requests.
        let id = env.newest_session();
        let show = env.vis(&["sessions", "show", &id]);
        assert!(show.stdout.contains("model requests:"), "{}", show.stdout);
        assert!(show.stdout.contains("openai/gpt-fake"), "{}", show.stdout);
        // `vis context` prints the next request: readable, and as the provider's body.
        let ctx = env.vis(&["context", &id]);
        assert_eq!(ctx.code, 0, "{}", ctx.stderr);
        assert!(
            ctx.stdout.contains("== system") && ctx.stdout.contains("[tool result t2/i1]"),
            "{}",
            ctx.stdout
        );
        let ctx_json = env.vis(&["context", &id, "--json"]);
        let body: serde_json::Value = serde_json::from_str(&ctx_json.stdout).unwrap();
        // What `vis context --json` prints is the last request plus the final answer.
        let last = fake.requests().last().unwrap().json();
        let n = last["messages"].as_array().unwrap().len();
        assert_eq!(
            body["messages"].as_array().unwrap()[..n],
            last["messages"].as_array().unwrap()[..]
        );
    }
);

vistest!(a_provider_error_makes_chat_exit_1, |env| {
    let fake = FakeProvider::start();
    fake.push(Reply::error(404, "not_found_error", "model: fake-model"));
    let run = chat(&env, &fake, ProviderKind::Anthropic, &["-m", "hi"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("[vis] error:") && run.stdout.contains("--model"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("── turn 1 failed ──"), "{}", run.stdout);
});

vistest!(chat_flag_errors_are_one_line_usage_errors, |env| {
    let fake = FakeProvider::start();
    let bad = env.vis(&["chat", "--provider", "gemini", "-m", "x"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("unknown provider 'gemini'"),
        "{}",
        bad.stderr
    );
    let bad = chat(&env, &fake, ProviderKind::OpenAi, &["--resume", "-m", "x"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("no chat session for the workspace"),
        "{}",
        bad.stderr
    );
    let bad = chat(
        &env,
        &fake,
        ProviderKind::OpenAi,
        &["--resume", "no/such", "-m", "x"],
    );
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("invalid session id"), "{}", bad.stderr);
    let bad = chat(
        &env,
        &fake,
        ProviderKind::OpenAi,
        &["--resume", "nosuch", "-m", "x"],
    );
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("no session 'nosuch'"), "{}", bad.stderr);
    let bad = env.vis(&["context", "nosuch"]);
    assert_eq!(bad.code, 2);
    assert_eq!(bad.stderr.lines().count(), 1, "{}", bad.stderr);
    assert_eq!(fake.request_count(), 0);
});

vistest!(ctrl_c_during_a_block_interrupts_the_turn, |env| {
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    fake.push(calls(
        kind,
        "a",
        &["import time\nopen('started', 'w').close()\ntime.sleep(60)"],
    ));
    let args = chat_args(&fake, kind);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["-m", "sleep"]);
    let child = env
        .command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(30), || env
        .workspace()
        .join("started")
        .exists()));
    // SAFETY: signalling the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert!(stdout.contains("── interrupted ·"), "{stdout}");
    assert!(stdout.contains("KeyboardInterrupt"), "{stdout}");
    assert!(stdout.contains("── turn 1 interrupted ──"), "{stdout}");
    // No request was made after the interrupt.
    assert_eq!(fake.request_count(), 1);
});

vistest!(resume_after_kill_9_mid_block_for_each_provider, |env| {
    for kind in [ProviderKind::OpenAi, ProviderKind::Anthropic] {
        let _ = std::fs::remove_file(env.workspace().join("started"));
        let fake = FakeProvider::start();
        fake.push(calls(kind, "a", &["def helper():\n    return 41"]));
        fake.push(answer(kind, "defined"));
        fake.push(calls(
            kind,
            "b",
            &["import time, subprocess\nsubprocess.Popen(['sleep', '2718.28'], start_new_session=True)\nopen('started', 'w').close()\ntime.sleep(600)", "print('never')"],
        ));
        let args = chat_args(&fake, kind);
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend(["-m", "define it", "-m", "now sleep"]);
        let mut gateway = env
            .command(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_until(Duration::from_secs(30), || env
            .workspace()
            .join("started")
            .exists()));
        gateway.kill().unwrap(); // SIGKILL, mid-block
        gateway.wait().unwrap();
        let ws = env.workspace();
        assert!(
            wait_until(Duration::from_secs(5), || worker_pids_in(&ws).is_empty()
                && pids_with("2718.28").is_empty()),
            "a worker or its child survived the gateway"
        );
        let before_kill = fake.requests().last().unwrap().body.clone();

        fake.push(calls(kind, "c", &["print(helper() + 1)"]));
        fake.push(answer(kind, "42, after the restart."));
        let run = chat(&env, &fake, kind, &["--resume", "-m", "continue"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("resuming session"), "{}", run.stderr);
        assert!(
            run.stderr.contains("interrupted by a restart"),
            "{}",
            run.stderr
        );
        // The worker came back with the definition.
        assert!(
            run.stdout.contains("restored 1 definition: helper"),
            "{}",
            run.stdout
        );
        assert!(run.stdout.contains("42\n"), "{}", run.stdout);

        // The first request after the restart continues the last one before it exactly, then
        // the interrupted calls' results (the model is told), then the new message.
        let reqs = fake.requests();
        let resumed = &reqs[reqs.len() - 2].body;
        if kind == ProviderKind::OpenAi {
            assert!(resumed.starts_with(&before_kill[..before_kill.len() - 2]));
        }
        let (a, b) = (messages(&before_kill), messages(resumed));
        assert_eq!(&b[..a.len()], &a[..]);
        let tail = serde_json::to_string(&b[a.len()..]).unwrap();
        assert!(
            tail.contains("interrupted by a restart of the gateway"),
            "{tail}"
        );
        assert!(
            tail.contains("not run: the gateway stopped before this call ran"),
            "{tail}"
        );
        assert!(tail.contains("continue"), "{tail}");

        let id = env.newest_session();
        let show = env.vis(&["sessions", "show", &id]);
        assert!(
            show.stdout.contains("t2/i1  interrupted"),
            "{}",
            show.stdout
        );
        assert!(
            show.stdout.contains("turn 2 (chat) [interrupted]"),
            "{}",
            show.stdout
        );
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", env.db().display()));
        }
    }
});

vistest!(
    a_damaged_conversation_is_a_store_failure_not_a_usage_error,
    |env| {
        let fake = FakeProvider::start();
        let kind = ProviderKind::OpenAi;
        fake.push(answer(kind, "Hello."));
        let run = chat(&env, &fake, kind, &["-m", "hi"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let id = run
            .stderr
            .split("new session ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_string();
        {
            let conn = rusqlite::Connection::open(env.db()).unwrap();
            let changed = conn
            .execute(
                "UPDATE history SET body = '{not json' WHERE session_id = ?1 AND kind = 'assistant'",
                [&id],
            )
            .unwrap();
            assert_eq!(changed, 1);
        }
        let before = std::fs::read(env.db()).unwrap();
        let ctx = env.vis(&["context", &id]);
        assert_eq!(ctx.code, 3, "{}", ctx.stderr);
        assert!(
            ctx.stderr
                .contains("the stored conversation is damaged at item"),
            "{}",
            ctx.stderr
        );
        assert_eq!(ctx.stderr.lines().count(), 1, "{}", ctx.stderr);
        assert_eq!(std::fs::read(env.db()).unwrap(), before);
        let resumed = chat(&env, &fake, kind, &["--resume", &id, "-m", "again"]);
        assert_eq!(resumed.code, 3, "{}", resumed.stderr);
        assert!(resumed.stderr.contains("damaged"), "{}", resumed.stderr);
        // Nothing was asked of the model, and the damaged row is left for the person to export.
        assert_eq!(fake.request_count(), 1);
        let conn = rusqlite::Connection::open(env.db()).unwrap();
        let body: String = conn
            .query_row(
                "SELECT body FROM history WHERE session_id = ?1 AND kind = 'assistant'",
                [&id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(body, "{not json");
    }
);

/// `vis chat ARGS` (with `stdin` on its standard input) against a model that streams more
/// text than a pipe holds and then runs a block that sleeps; the reader of its standard
/// output reads a little and goes away while the block runs. The turn is interrupted and
/// recorded, the worker stops, and the program ends as SIGPIPE would end it.
fn reader_goes_away_mid_turn(env: &TestEnv, extra: &[&str], stdin: &str) {
    use std::io::{Read, Write};
    use std::os::unix::process::ExitStatusExt;
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    let code = "import time\nopen('started', 'w').close()\ntime.sleep(60)";
    fake.push(
        Reply::openai()
            .text(&"Many words. ".repeat(20_000))
            .fragment(4096)
            .tool_call(
                "call_a",
                "python_execution",
                &serde_json::json!({ "code": code }).to_string(),
            )
            .build(),
    );
    let args = chat_args(&fake, kind);
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(extra);
    let mut child = env
        .command(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let mut reader = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    reader.read_exact(&mut first).unwrap();
    assert!(wait_until(Duration::from_secs(30), || env
        .workspace()
        .join("started")
        .exists()));
    // The transcript fills the pipe; its reader leaves while the block runs.
    drop(reader);
    let ended = wait_until(Duration::from_secs(30), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !ended {
        let _ = child.kill();
        panic!("vis chat {extra:?} went on after its reader went away");
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    // No request after the interrupt; the turn and its block are recorded as interrupted.
    assert_eq!(fake.request_count(), 1);
    let id = stderr
        .split("new session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session id in {stderr}"));
    let show = env.vis(&["sessions", "show", id]).stdout;
    assert!(show.contains("turn 1 (chat) [interrupted]"), "{show}");
    assert!(show.contains("t1/i1  interrupted"), "{show}");
    // The worker dies with its host (its pipe closes, its launcher gets the parent-death
    // signal); that may take a moment after the host's own exit.
    assert!(
        wait_until(Duration::from_secs(10), || crate::support::pids_with(
            &env.workspace().to_string_lossy()
        )
        .is_empty()),
        "a worker was left running"
    );
}

vistest!(chat_m_ends_its_turn_when_its_reader_goes_away, |env| {
    reader_goes_away_mid_turn(&env, &["-m", "talk"], "");
});

vistest!(piped_chat_ends_its_turn_when_its_reader_goes_away, |env| {
    reader_goes_away_mid_turn(&env, &[], "talk\n");
});

vistest!(
    chat_m_shows_rejected_calls_and_ends_each_turn_with_the_status_line,
    |env| {
        let fake = FakeProvider::start();
        let kind = ProviderKind::OpenAi;
        // Two calls the gateway rejects: another tool, and arguments without `code` (holding
        // an escape sequence, which must be shown, not sent).
        fake.push(
            Reply::openai()
                .tool_call("call_1", "bash", r#"{"command": "ls"}"#)
                .tool_call(
                    "call_2",
                    "python_execution",
                    "{\"cod\": \"print('\u{1b}]0;pwned\u{7}')\"}",
                )
                .usage(crate::support::chat::usage(1000, 800, 20))
                .build(),
        );
        fake.push(answer(kind, "Sorry, done now."));
        let run = chat(&env, &fake, kind, &["-m", "try things"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let out = &run.stdout;
        for needle in [
            "> try things\n",
            "── t1/i1 python ──\n{\"command\": \"ls\"}\n── rejected · 0.0 s ──\n",
            "── t1/i2 python ──\n{\"cod\": \"print('\\x1b]0;pwned\\x07')\"}\n── rejected · 0.0 s ──\n",
            "Sorry, done now.",
            "── turn 1 done ──\n",
        ] {
            assert!(out.contains(needle), "missing {needle:?} in\n{out}");
        }
        assert!(!out.contains('\u{1b}'), "{out:?}");
        // The status line ends the transcript, as on piped stdin.
        let last = out.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("s-") && last.contains(" · turn 1 · last in 1,200 (83% cached)"),
            "{out}"
        );
        assert!(last.contains("· util "), "{last}");
        // `-m --resume` prints the turns it runs, not the ones before (scripts read it).
        fake.push(answer(kind, "Again."));
        let resumed = chat(&env, &fake, kind, &["--resume", "-m", "once more"]);
        assert_eq!(resumed.code, 0, "{}", resumed.stderr);
        assert!(
            resumed.stdout.starts_with("> once more\n"),
            "{}",
            resumed.stdout
        );
        assert!(!resumed.stdout.contains("try things"), "{}", resumed.stdout);
        assert!(
            resumed.stdout.contains("turn 2 · last in"),
            "{}",
            resumed.stdout
        );
    }
);
