//! What `vis chat` shows of a conversation, in tmux as a person sees it: the recap of a
//! resumed session, and Markdown streamed in small deltas (the block still being written is
//! redrawn in place; what settles is drawn once, as the whole answer would be).

use std::time::Duration;

use bytes::Bytes;

use crate::chat_tui::{start, wait_turns, KIND};
use crate::support::chat::{answer, calls, usage};
use crate::support::fake_provider::{FakeProvider, Piece, Reply};
use crate::support::{wait_until, TestEnv};
use crate::vistest;

/// `vis chat` flags for the fake provider, as a piped run uses them.
fn chat_args(fake: &FakeProvider) -> Vec<String> {
    [
        "chat",
        "--provider",
        KIND.as_str(),
        "--base-url",
        &fake.base_url(KIND),
        "--model",
        "fake-model",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Runs `vis chat` with `input` piped to it; returns its standard output.
fn piped(env: &TestEnv, fake: &FakeProvider, extra: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut args = chat_args(fake);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
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
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

vistest!(resume_shows_the_last_turns_compactly, |env| {
    let fake = FakeProvider::start();
    // Turn 1: a block. Turn 2: a long answer. Then the person folds turn 1. Turn 3: a call
    // that is rejected. Turn 4: a block whose code holds an escape sequence, and an answer
    // that holds more.
    fake.push(calls(KIND, "a", &["print(1)"]));
    fake.push(answer(KIND, "One."));
    let items: String = (1..=20).map(|i| format!("- item {i}\n")).collect();
    fake.push(answer(
        KIND,
        &format!("# Report\n\n{items}\nThe end of the report.\n"),
    ));
    fake.push(
        Reply::openai()
            .tool_call("call_r", "bash", r#"{"command": "ls"}"#)
            .usage(usage(1000, 800, 20))
            .build(),
    );
    fake.push(answer(KIND, "Rejected, fine."));
    fake.push(calls(
        KIND,
        "d",
        &["x = '\u{1b}]0;pwned\u{7}'\nprint(len(x))"],
    ));
    fake.push(answer(KIND, "Look: \u{1b}]0;title\u{7} done."));
    let input = "first\nsecond\n/fold t1 The first turn printed one number.\nthird\nfourth\n";
    let out = piped(&env, &fake, &[], input);
    assert!(out.contains("fold 1 replaces t1"), "{out}");

    let tmux = start(&env, &fake, &["--resume"]);
    let screen = tmux.wait_text("vis chat · openai/fake-model");
    let id = screen
        .split("resuming session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session id in\n{screen}"))
        .to_string();
    for needle in [
        format!("── the last 3 of 4 turns (vis sessions show {id} shows them all) ──\n"),
        "  ⤷ fold 1 replaced t1 with a gist (".into(),
        "› second\n".into(),
        "Report\n".into(),
        "• item 1\n".into(),
        "rows of this answer left out".into(),
        "The end of the report.\n".into(),
        "› third\n".into(),
        "  ● block 2 · t3/i1 · rejected · {\"command\": \"ls\"} · ".into(),
        "Rejected, fine.\n".into(),
        "› fourth\n".into(),
        "  ● block 3 · t4/i1 · ok · ".into(),
        "x = '\\x1b]0;pwned\\x07' … · 1 line out\n".into(),
        "Look: \\x1b]0;title\\x07 done.\n".into(),
        format!("{id} · turn 4 · last in 1,200 (83% cached)"),
    ] {
        assert!(screen.contains(&needle), "missing {needle:?} in\n{screen}");
    }
    // Only the last three turns, and the middle of the long answer left out.
    for absent in ["› first", "One.", "• item 10\n"] {
        assert!(!screen.contains(absent), "{absent:?} in\n{screen}");
    }
    // The recap comes before the prompt's header, and nothing in it drove the terminal.
    let recap = screen.find("── the last 3").unwrap();
    assert!(recap < screen.find("vis chat · openai/fake-model").unwrap());
    let title = tmux.pane("#{pane_title}");
    assert!(
        !title.contains("pwned") && !title.contains("title"),
        "{title}"
    );
    // The conversation goes on from there.
    fake.push(answer(KIND, "Continuing."));
    tmux.send_line("go on");
    let screen = wait_turns(&tmux, 2);
    assert!(screen.contains("Continuing."), "{screen}");
    tmux.send_line("/exit");
    assert_eq!(tmux.wait_exit(), 0);

    // Piped input with --resume is for scripts: no recap.
    fake.push(answer(KIND, "Piped."));
    let out = piped(&env, &fake, &["--resume"], "more\n");
    assert!(out.starts_with("> more\n"), "{out}");
    assert!(!out.contains("── the last"), "{out}");
});

/// An answer with a table and a fence, as the provider streams it: 3-byte deltas, with a
/// pause of a minute after `pause_after` when it is set.
fn streamed(text: &str, pause_after: Option<&str>) -> Reply {
    let body = Reply::openai()
        .text(text)
        .fragment(3)
        .usage(usage(1200, 1000, 10))
        .body();
    let cut = pause_after.map(|marker| {
        let end = text.find(marker).unwrap() + marker.len();
        // The event whose delta ends the marker: count the text sent up to it.
        let mut sent = 0;
        let mut at = 0;
        for event in body.split_inclusive("\n\n") {
            at += event.len();
            let value: serde_json::Value = match event.strip_prefix("data: ") {
                Some(json) => serde_json::from_str(json.trim()).unwrap_or_default(),
                None => continue,
            };
            sent += value["choices"][0]["delta"]["content"]
                .as_str()
                .map_or(0, str::len);
            if sent >= end {
                break;
            }
        }
        at
    });
    match cut {
        None => Reply::raw_sse(body),
        Some(at) => Reply::pieces(vec![
            Piece::Bytes(Bytes::copy_from_slice(&body.as_bytes()[..at])),
            Piece::Pause(Duration::from_secs(60)),
            Piece::Bytes(Bytes::copy_from_slice(&body.as_bytes()[at..])),
        ]),
    }
}

vistest!(
    a_streamed_table_and_fence_render_as_the_whole_answer,
    |env| {
        let text = "Here is the table:\n\n| file | lines |\n|:-----|------:|\n| `main.rs` | 1,204 |\n| `lib.rs` | 88 |\n\nAnd the code:\n\n```python\ndef total(rows):\n    return sum(r.lines for r in rows)\n```\nDone.\n";
        let fake = FakeProvider::start();
        fake.push(streamed(text, Some("def total(rows):\n")));
        fake.push(streamed(text, None));
        let tmux = start(&env, &fake, &[]);
        let rows = [
            "file    │ lines\n".to_string(),
            "────────┼──────\n".to_string(),
            "main.rs │ 1,204\n".to_string(),
            "lib.rs  │    88\n".to_string(),
        ];
        let code = [
            "  ┄ python (not run)\n",
            "  ┆ def total(rows):\n",
            "  ┆     return sum(r.lines for r in rows)\n",
        ];
        tmux.send_line("show me");
        // Mid-stream: the table is aligned, the open fence is drawn live below it (with the
        // spinner under both), and nothing raw shows.
        let screen = tmux.wait_for("the open fence", |s| {
            s.contains(code[1]) && s.contains("thinking")
        });
        let table = rows.concat();
        assert!(screen.contains(&table), "{screen}");
        assert!(
            screen.contains(&format!(
                "Here is the table:\n\n{table}\nAnd the code:\n\n{}",
                code[..2].concat()
            )),
            "{screen}"
        );
        for raw in ["| ", "```", "`main.rs`"] {
            assert!(!screen.contains(raw), "{raw:?} in\n{screen}");
        }
        assert!(wait_until(Duration::from_secs(30), || fake.request_count() == 1));
        tmux.keys(&["C-c"]);
        let screen = wait_turns(&tmux, 1);
        // What was live is drawn once, where it was.
        assert_eq!(screen.matches(code[1]).count(), 1, "{screen}");
        assert_eq!(screen.matches(code[0]).count(), 1, "{screen}");
        assert_eq!(screen.matches(rows[2].as_str()).count(), 1, "{screen}");
        assert!(screen.contains("⏹ turn 1 interrupted"), "{screen}");
        // The whole answer in 3-byte deltas: every row as rendering it whole gives.
        tmux.send_line("again");
        let screen = wait_turns(&tmux, 2);
        let turn2 = &screen[screen.find("› again").unwrap()..];
        let expected = format!(
            "Here is the table:\n\n{table}\nAnd the code:\n\n{}Done.\n",
            code.concat()
        );
        assert!(turn2.contains(&expected), "{turn2}");
        for raw in ["| ", "```", "`main.rs`"] {
            assert!(!turn2.contains(raw), "{raw:?} in\n{turn2}");
        }
    }
);
