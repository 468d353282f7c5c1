//! The interactive `vis chat`, driven in tmux as a person would: typing, keys, and what the
//! screen shows.

use vis::providers::ProviderKind;

use crate::support::chat::{answer, calls, usage};
use crate::support::fake_provider::{FakeProvider, Reply};
use crate::support::tmux::{Tmux, DEADLINE};
use crate::support::{vis_bin, wait_until, TestEnv};
use crate::vistest;

pub(crate) const KIND: ProviderKind = ProviderKind::OpenAi;
const PROMPT: &str = "› ";

/// `vis chat` against `fake` in a tmux pane, with the env's database, home and config.
pub(crate) fn start(env: &TestEnv, fake: &FakeProvider, extra: &[&str]) -> Tmux {
    let tmux = launch(env, fake, extra);
    tmux.wait_text(PROMPT);
    tmux
}

/// `start` without waiting for the input prompt.
fn launch(env: &TestEnv, fake: &FakeProvider, extra: &[&str]) -> Tmux {
    let mut args: Vec<String> = vec![
        "--db".into(),
        env.db().to_string_lossy().into_owned(),
        "chat".into(),
        "--provider".into(),
        KIND.as_str().into(),
        "--base-url".into(),
        fake.base_url(KIND),
        "--model".into(),
        "fake-model".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let vars = [
        (
            "VIS_HOME",
            env.path().join("home").to_string_lossy().into_owned(),
        ),
        (
            "VIS_CONFIG_DIR",
            env.config_dir().to_string_lossy().into_owned(),
        ),
        // A NO_COLOR of the person running the tests must not reach the program (empty = unset).
        ("NO_COLOR", String::new()),
    ];
    Tmux::start(&env.workspace(), &vars, &vis_bin(), &args)
}

/// The screen after the n-th status line (a turn's end) appears.
pub(crate) fn wait_turns(tmux: &Tmux, n: usize) -> String {
    tmux.wait_count("· util ", n)
}

vistest!(
    a_turn_shows_markdown_a_highlighted_block_and_the_status,
    |env| {
        let fake = FakeProvider::start();
        let code = "def square(n):\n    return n * n\nfor i in range(10):\n    print(i, square(i))";
        fake.push(calls(KIND, "a", &[code]));
        fake.push(
        Reply::openai()
            .text("# Squares\n\nThe **last** one is `81`:\n\n- one\n- two\n\n```python\nx = square(9)\n```\nDone.\n")
            .usage(usage(1200, 1000, 10))
            .build(),
    );
        let tmux = start(&env, &fake, &[]);
        assert!(tmux
            .screen()
            .contains("vis chat · openai/fake-model · workspace"));
        assert!(tmux.screen().contains("vis: new session s-"));
        tmux.send_line("square some numbers");
        let screen = wait_turns(&tmux, 1);
        for needle in [
            "› square some numbers",
            "Working on it.",
            "● python t1/i1 · block 1",
            "  │ def square(n):",
            "  ⎿ ok · ",
            "    0 0\n",
            "    5 25\n",
            "    … 4 more lines (/expand 1 or Ctrl-O)",
            "Squares\n",
            "The last one is 81:",
            "• one\n• two",
            "  ┄ python (not run)\n  ┆ x = square(9)\n",
            "Done.",
            "turn 1 · last in 1,200 (83% cached) out 10 · session in 2,200 out 30",
        ] {
            assert!(screen.contains(needle), "missing {needle:?} in\n{screen}");
        }
        assert!(
            !screen.contains("9 81"),
            "collapsed output shows too much:\n{screen}"
        );
        assert!(
            !screen.contains("**last**") && !screen.contains("```"),
            "{screen}"
        );
        // The code is highlighted: colors on the code line (the keyword `def` is painted).
        let styled = tmux.screen_styled();
        let line = styled.lines().find(|l| l.contains("def")).unwrap();
        assert!(line.contains("\u{1b}["), "no colors in {line:?}");
    }
);

vistest!(expand_shows_the_whole_output_of_a_long_block, |env| {
    let fake = FakeProvider::start();
    fake.push(calls(
        KIND,
        "a",
        &["for i in range(1, 31):\n    print(f'row {i:02}')"],
    ));
    fake.push(answer(KIND, "Thirty rows."));
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("print rows");
    let screen = wait_turns(&tmux, 1);
    assert!(screen.contains("    row 06\n"), "{screen}");
    assert!(!screen.contains("row 07"), "{screen}");
    assert!(
        screen.contains("… 24 more lines (/expand 1 or Ctrl-O)"),
        "{screen}"
    );
    tmux.send_line("/expand 1");
    let screen = tmux.wait_text("row 30");
    for i in 7..=30 {
        assert!(
            screen.contains(&format!("    row {i:02}\n")),
            "row {i} in\n{screen}"
        );
    }
    // Ctrl-O shows the last block too, and what was typed stays on the prompt.
    tmux.type_text("half-typed");
    tmux.keys(&["C-o"]);
    tmux.wait_count("row 30", 2);
    tmux.keys(&["C-a", "C-k"]);
    tmux.send_line("/expand 9");
    tmux.wait_text("usage: /expand [K] with K from 1 to 1");
});

vistest!(slash_commands_show_the_session, |env| {
    let fake = FakeProvider::start();
    fake.push(calls(
        KIND,
        "a",
        &["def helper(x):\n    \"Doubles x.\"\n    return 2 * x\nprint(helper(21))"],
    ));
    fake.push(answer(KIND, "Defined helper."));
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("/context");
    tmux.wait_text("no model request yet");
    tmux.send_line("define a helper");
    wait_turns(&tmux, 1);
    tmux.send_line("/help");
    let screen = tmux.wait_text("/expand [K]");
    assert!(screen.contains("Alt-Enter"), "{screen}");
    // Tab completes the command's name.
    tmux.type_text("/sta");
    tmux.keys(&["Tab"]);
    tmux.wait_text("› /status ");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_text("worker ");
    for needle in [
        "session         s-",
        "model           openai/fake-model at http://127.0.0.1:",
        "turns           1 turn, 1 iteration, 1 definition, 0 folds",
        "last request    in 1,200, cached 1,000 (83% cached), out 10",
        "session tokens  in 2,200, cached 1,800 (82% cached), out 30 over 2 requests",
        "utilization     1.3% of 95k (folding is required above 95,200 input tokens; the model's hard limit is 112,000: default for an unknown model; set [folding] input_limit)",
        "worker          running",
    ] {
        assert!(screen.contains(needle), "missing {needle:?} in\n{screen}");
    }
    tmux.send_line("/defs");
    // Not "Doubles x.": the block above already shows it, so the listing may not be there yet.
    let screen = tmux.wait_text("(restored after restarts)");
    assert!(
        screen.contains("1 definition (restored after restarts):\n  def helper(x)  — Doubles x."),
        "{screen}"
    );
    tmux.send_line("/sessions");
    let screen = tmux.wait_text("* this session");
    assert!(screen.contains("* s-"), "{screen}");
    tmux.send_line("/context");
    let screen = tmux.wait_text("== pending catalog update ==");
    assert!(screen.contains("== system ("), "{screen}");
    assert!(screen.contains("[tool result t1/i1]\n42"), "{screen}");
    tmux.send_line("/nope");
    tmux.wait_text("unknown command /nope; /help lists the commands");
    tmux.send_line("/stauts");
    tmux.wait_text("(did you mean /status?)");
    tmux.send_line("/exit");
    assert_eq!(tmux.wait_exit(), 0);
    assert_eq!(fake.request_count(), 2);
});

vistest!(ctrl_c_interrupts_a_block_and_the_program_goes_on, |env| {
    let fake = FakeProvider::start();
    fake.push(calls(
        KIND,
        "a",
        &["import time\nprint('sleeping')\nopen('started', 'w').close()\ntime.sleep(60)"],
    ));
    fake.push(answer(KIND, "Still here."));
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("sleep a minute");
    // The spinner says what runs, with its time.
    tmux.wait_for("the spinner", |s| {
        s.contains("running t1/i1 ") && s.contains(" s · Ctrl-C interrupts")
    });
    let started = env.workspace().join("started");
    assert!(
        wait_until(DEADLINE, || started.exists()),
        "the block did not start"
    );
    tmux.keys(&["C-c"]);
    let screen = wait_turns(&tmux, 1);
    assert!(screen.contains("  ⎿ interrupted · "), "{screen}");
    assert!(screen.contains("KeyboardInterrupt"), "{screen}");
    assert!(screen.contains("⏹ turn 1 interrupted"), "{screen}");
    assert_eq!(fake.request_count(), 1);
    tmux.send_line("are you there?");
    let screen = wait_turns(&tmux, 2);
    assert!(screen.contains("Still here."), "{screen}");
    assert!(!tmux.dead());
});

vistest!(ctrl_c_twice_at_the_prompt_exits, |env| {
    let fake = FakeProvider::start();
    let tmux = start(&env, &fake, &[]);
    tmux.type_text("some draft");
    tmux.wait_text("› some draft");
    // The first Ctrl-C clears the line and says how to exit; the next one exits.
    tmux.keys(&["C-c"]);
    tmux.wait_text("› some draft\n(Ctrl-C again to exit, or Ctrl-D)\n› ");
    assert!(!tmux.dead());
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.wait_exit(), 0);
    let screen = tmux.screen();
    assert!(screen.contains("vis chat --resume s-"), "{screen}");
    assert_eq!(fake.request_count(), 0);
});

vistest!(ctrl_c_interrupts_a_request_and_errors_are_one_line, |env| {
    let fake = FakeProvider::start();
    fake.push(Reply::delay(
        std::time::Duration::from_secs(60),
        answer(KIND, "too late"),
    ));
    fake.push(Reply::error(
        401,
        "authentication_error",
        "invalid x-api-key",
    ));
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("slow one");
    tmux.wait_for("the spinner", |s| {
        s.contains("thinking ") && s.contains(" s · Ctrl-C interrupts")
    });
    // The slow reply must be the one being waited for, not left queued for the next turn.
    assert!(wait_until(DEADLINE, || fake.request_count() == 1));
    tmux.keys(&["C-c"]);
    let screen = wait_turns(&tmux, 1);
    assert!(screen.contains("⏹ turn 1 interrupted"), "{screen}");
    assert!(screen.contains("no answered request yet"), "{screen}");
    tmux.send_line("and now?");
    let screen = wait_turns(&tmux, 2);
    assert!(screen.contains("✗ error: "), "{screen}");
    assert!(screen.contains("turn 2 failed"), "{screen}");
    assert!(!tmux.dead());
});

vistest!(ctrl_d_at_the_prompt_exits, |env| {
    let fake = FakeProvider::start();
    let tmux = start(&env, &fake, &[]);
    tmux.keys(&["C-d"]);
    assert_eq!(tmux.wait_exit(), 0);
});

vistest!(
    escape_sequences_from_blocks_and_the_model_are_shown_not_run,
    |env| {
        let fake = FakeProvider::start();
        fake.push(calls(
            KIND,
            "a",
            &["print('\\x1b]0;pwned\\x07\\x1b[2J')\nprint('if x != \"user\\u202e \\u2066// admin\\u2069\\u200b\"')"],
        ));
        fake.push(answer(
            KIND,
            "Look: \u{1b}]0;title\u{7} and \u{1b}[2J done; \u{202e}reversed\u{202c} \u{feff}hidden\u{e0041}",
        ));
        let tmux = start(&env, &fake, &[]);
        tmux.send_line("print escapes");
        let screen = wait_turns(&tmux, 1);
        assert!(
            screen.contains("    \\x1b]0;pwned\\x07\\x1b[2J\n"),
            "{screen}"
        );
        assert!(
            screen.contains("Look: \\x1b]0;title\\x07 and \\x1b[2J done"),
            "{screen}"
        );
        // Bidi controls and invisible characters are shown as escapes too, in the block's
        // code and output and in the answer.
        for shown in [
            "    if x != \"user\\u{202e} \\u{2066}// admin\\u{2069}\\u{200b}\"\n",
            "done; \\u{202e}reversed\\u{202c} \\u{feff}hidden\\u{e0041}",
        ] {
            assert!(screen.contains(shown), "{shown} not in\n{screen}");
        }
        for raw in ['\u{202e}', '\u{2066}', '\u{200b}', '\u{feff}', '\u{e0041}'] {
            assert!(
                !screen.contains(raw),
                "{raw:?} reached the terminal:\n{screen}"
            );
        }
        // The screen was not cleared and the title not set.
        assert!(
            tmux.visible().contains("vis chat · openai/fake-model"),
            "{}",
            tmux.visible()
        );
        let title = tmux.pane("#{pane_title}");
        assert!(
            !title.contains("pwned") && !title.contains("title"),
            "{title}"
        );
    }
);

vistest!(a_megabyte_of_pathological_markdown_streams_through, |env| {
    // A megabyte of backticks in 64-byte deltas (before, every delta searched the held
    // line again and every spinner frame escaped all of it: minutes), then lines that
    // nest deeply or never close.
    let fake = FakeProvider::start();
    let mut text = format!("Look: {} done.\n", "`".repeat(1 << 20));
    for line in [
        "> ".repeat(5_000) + "deep quote",
        "- ".repeat(5_000) + "deep list",
        "*".repeat(20_000) + "a",
        "_a ".repeat(5_000),
        "[".repeat(20_000),
        "![".repeat(5_000) + "x" + &"](u)".repeat(5_000),
        "<".repeat(20_000),
    ] {
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str("after the runs\n");
    fake.push(
        Reply::openai()
            .text(&text)
            .fragment(64)
            .usage(usage(1200, 1000, 10))
            .build(),
    );
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("write long runs");
    let screen = wait_turns(&tmux, 1);
    assert!(screen.contains("Look: ````"), "the run is shown");
    assert!(
        screen.contains("after the runs"),
        "the lines after the runs are shown"
    );
});

vistest!(multi_line_input_is_one_message, |env| {
    let fake = FakeProvider::start();
    fake.push(answer(KIND, "Three lines received."));
    let tmux = start(&env, &fake, &[]);
    tmux.type_text("first line");
    tmux.keys(&["M-Enter"]);
    tmux.type_text("second line\\");
    tmux.keys(&["Enter"]);
    tmux.wait_text("· second line\\\n· ");
    tmux.type_text("third line");
    tmux.keys(&["Enter"]);
    wait_turns(&tmux, 1);
    let body = fake.requests().last().unwrap().json();
    let messages = body["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    assert_eq!(
        user["content"], "first line\nsecond line\nthird line",
        "{user}"
    );
    // History: Up brings the whole message back, and it is in the file beside the database.
    tmux.keys(&["Up"]);
    tmux.wait_count("third line", 2);
    let history = std::fs::read_to_string(env.path().join("chat_history")).unwrap();
    assert!(history.contains("first line"), "{history}");
});

vistest!(a_retry_voids_the_partial_answer, |env| {
    let fake = FakeProvider::start();
    let chunk = |content: &str| {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
        )
    };
    let failing = format!(
        "{}{}data: {}\n\n",
        chunk("Draft paragraph one\n\nDraft two\n"),
        chunk("Draft thr"),
        serde_json::json!({"error": {"message": "the server had an error", "type": "server_error"}})
    );
    fake.push(Reply::raw_sse(failing));
    fake.push(answer(KIND, "Whole answer."));
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("hello");
    let screen = wait_turns(&tmux, 1);
    assert!(
        screen.contains("✗ the partial answer above is void"),
        "{screen}"
    );
    assert!(screen.contains("↻ retrying (attempt 2, in "), "{screen}");
    assert!(screen.contains("Whole answer."), "{screen}");
    assert!(!screen.contains("Draft two"), "{screen}");
});

vistest!(piped_input_runs_lines_as_turns, |env| {
    use std::io::Write;
    let fake = FakeProvider::start();
    fake.push(calls(KIND, "a", &["print(6 * 7)"]));
    fake.push(answer(KIND, "It is **42**."));
    let base_url = fake.base_url(KIND);
    let args = [
        "chat",
        "--provider",
        KIND.as_str(),
        "--base-url",
        &base_url,
        "--model",
        "fake-model",
    ];
    let mut child = env
        .command(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"what is\\\nsix times seven?\n/defs\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for needle in [
        "> what is\n> six times seven?\n",
        "── t1/i1 python ──\nprint(6 * 7)\n",
        "── ok · ",
        "42\n",
        "It is **42**.",
        "── turn 1 done ──",
        "· util ",
        "no definitions yet",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in\n{stdout}");
    }
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
});

vistest!(a_resumed_session_numbers_its_blocks_on, |env| {
    let fake = FakeProvider::start();
    fake.push(calls(KIND, "a", &["print('from the first run')"]));
    fake.push(answer(KIND, "First run done."));
    let base_url = fake.base_url(KIND);
    let first = env.vis(&[
        "chat",
        "--provider",
        KIND.as_str(),
        "--base-url",
        &base_url,
        "--model",
        "fake-model",
        "-m",
        "first",
    ]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    fake.push(calls(KIND, "b", &["print('from the second run')"]));
    fake.push(answer(KIND, "Second run done."));
    let tmux = start(&env, &fake, &["--resume"]);
    assert!(
        tmux.screen().contains("vis: resuming session s-"),
        "{}",
        tmux.screen()
    );
    tmux.send_line("/expand");
    tmux.wait_text("    from the first run");
    tmux.send_line("again");
    // The recap's status line is the first.
    let screen = wait_turns(&tmux, 2);
    assert!(screen.contains("● python t2/i1 · block 2"), "{screen}");
    assert!(screen.contains("turn 2 · last in 1,200"), "{screen}");
    assert!(screen.contains("session in 4,400 out 60"), "{screen}");
});

vistest!(
    the_person_folds_with_slash_fold_and_sees_it_in_context,
    |env| {
        let fake = FakeProvider::start();
        fake.push(calls(KIND, "a", &["print('LONG-OUTPUT ' * 20)"]));
        fake.push(answer(KIND, "Read it."));
        fake.push(answer(KIND, "Continuing."));
        let tmux = start(&env, &fake, &[]);
        tmux.send_line("read something");
        wait_turns(&tmux, 1);
        tmux.send_line("/fold");
        tmux.wait_text("usage: /fold KEY GIST");
        tmux.send_line("/fold t9 nothing");
        tmux.wait_text("not folded: unknown turn t9");
        tmux.send_line("/fold t1 The first turn printed a long line; nothing else.");
        let screen = tmux.wait_text("fold 1 replaces t1:");
        assert!(screen.contains("measurement pending"), "{screen}");
        tmux.send_line("/context");
        let screen = tmux.wait_text("== pending catalog update ==");
        assert!(
            screen.contains("[vis] fold 1 replaces t1: The first turn printed a long line"),
            "{screen}"
        );
        tmux.send_line("go on");
        let screen = wait_turns(&tmux, 2);
        // The person's fold is followed by a new message: the measurement cannot be attributed.
        assert!(
            screen.contains("fold measurement n/a (a new turn started"),
            "{screen}"
        );
        let last = fake.requests().last().unwrap().body_str();
        assert!(!last.contains("LONG-OUTPUT"), "{last}");
        tmux.send_line("/exit");
        assert_eq!(tmux.wait_exit(), 0);
    }
);

#[test]
fn an_untrusted_workspace_with_code_asks_before_any_of_it_loads() {
    for (answer_key, trusted) in [("n", false), ("y", true)] {
        let env = TestEnv::untrusted();
        let ext = env.workspace().join(".vis/extensions");
        std::fs::create_dir_all(&ext).unwrap();
        std::fs::write(ext.join("greet.py"), "from vis.extension import register\n\n@register\ndef hi() -> str:\n    \"\"\"Say hello.\"\"\"\n    return 'hello from greet'\n")
            .unwrap();
        let fake = FakeProvider::start();
        fake.push(calls(
            KIND,
            "a",
            &["try:\n    print(greet.hi())\nexcept NameError:\n    print('no greet here')"],
        ));
        fake.push(answer(KIND, "Checked."));
        let tmux = launch(&env, &fake, &[]);
        let screen = tmux.wait_text("[y/N]");
        assert!(
            screen
                .contains("This workspace is not trusted. It carries: .vis/extensions (greet.py)."),
            "{screen}"
        );
        // What trusting enables, the one list `vis trust` shows too.
        for item in vis::trust::TRUST_ENABLES {
            assert!(
                screen.contains(&format!("  - {item}\n")),
                "{item}: {screen}"
            );
        }
        tmux.send_line(answer_key);
        tmux.wait_text(PROMPT);
        tmux.send_line("is greet there?");
        let screen = wait_turns(&tmux, 1);
        let expected = if trusted {
            "hello from greet"
        } else {
            "no greet here"
        };
        assert!(screen.contains(expected), "{screen}");
        let listed = env.vis(&["trust", "--list"]).stdout;
        let ws = env.workspace().canonicalize().unwrap();
        assert_eq!(listed.contains(&*ws.to_string_lossy()), trusted, "{listed}");
    }
}
