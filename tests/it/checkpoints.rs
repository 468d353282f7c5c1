//! Checkpoints through the real binary (issue 25 §1–2): every kind of write recorded and
//! rewound, `vis diff`, `vis rewind` and its refusals, atomicity on a full disk, a gateway
//! killed mid-block, ignored files, the size budget, and bad input.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::{wait_until, TestEnv};
use crate::vistest;

fn ok(run: &crate::support::Run) {
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

fn turns(env: &TestEnv, id: &str) -> i64 {
    let store = vis::store::open(&env.db()).unwrap();
    store.counts(id).unwrap().turns
}

fn write_config(env: &TestEnv, text: &str) {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(env.config_dir().join("config.toml"), text).unwrap();
}

vistest!(every_kind_of_write_is_recorded_and_rewound, |env| {
    let ws = env.workspace();
    std::fs::write(ws.join("p.py"), "x = 1\n").unwrap();
    std::fs::write(ws.join("io.txt"), "io0\n").unwrap();
    std::fs::write(ws.join("sed.txt"), "sed0\n").unwrap();
    std::fs::write(ws.join("gone.txt"), "gone\n").unwrap();
    std::fs::write(ws.join("old_name.txt"), "moved\n").unwrap();
    std::fs::write(ws.join("run.sh"), "echo hi\n").unwrap();
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();

    // t1: a block that writes nothing (the baseline is taken before it).
    ok(&env.exec("k", "print('start')"));
    // t2: patch; t3: Python file I/O; t4: sh("sed -i …"); t5: a subprocess.
    ok(&env.exec(
        "k",
        "a = cat('p.py').lines[0][1]\npatch('p.py', [(a, 'x = 2')])",
    ));
    ok(&env.exec("k", "open('io.txt', 'w').write('io1\\n')"));
    ok(&env.exec("k", "print(sh('sed -i s/sed0/sed1/ sed.txt'))"));
    ok(&env.exec(
        "k",
        "import subprocess\nsubprocess.run(['sh', '-c', 'echo made > sub.txt'], check=True)",
    ));
    // t6: a delete, a rename, a mode change and a symlink.
    ok(&env.exec(
        "k",
        "import os\nos.remove('gone.txt')\nos.rename('old_name.txt', 'new_name.txt')\nos.chmod('run.sh', 0o755)\nos.symlink('io.txt', 'link.txt')",
    ));
    assert_eq!(read(&ws.join("p.py")), "x = 2\n");
    assert_eq!(read(&ws.join("sed.txt")), "sed1\n");
    assert_eq!(mode(&ws.join("run.sh")), 0o755);

    // Each turn's diff shows its own change.
    let d4 = env.vis(&["diff", "k", "t4"]);
    ok(&d4);
    assert!(d4.stdout.contains("-sed0\n+sed1\n"), "{}", d4.stdout);
    assert!(!d4.stdout.contains("io.txt"), "{}", d4.stdout);
    let d2 = env.vis(&["diff", "k", "t2/i1"]);
    assert!(d2.stdout.contains("-x = 1\n+x = 2\n"), "{}", d2.stdout);
    let d6 = env.vis(&["diff", "k", "t6"]);
    for needle in [
        "deleted file mode",
        "a/gone.txt",
        "b/new_name.txt",
        "old mode 100644\nnew mode 100755",
        "symlink to io.txt",
    ] {
        assert!(
            d6.stdout.contains(needle),
            "missing {needle:?} in\n{}",
            d6.stdout
        );
    }
    let whole = env.vis(&["diff", "k"]);
    for needle in ["p.py", "io.txt", "sed.txt", "sub.txt", "gone.txt", "run.sh"] {
        assert!(
            whole.stdout.contains(needle),
            "missing {needle} in\n{}",
            whole.stdout
        );
    }

    // Rewind to before turn 2: every file as it was.
    let rewound = env.vis(&["rewind", "k", "t2"]);
    ok(&rewound);
    assert_eq!(read(&ws.join("p.py")), "x = 1\n");
    assert_eq!(read(&ws.join("io.txt")), "io0\n");
    assert_eq!(read(&ws.join("sed.txt")), "sed0\n");
    assert!(!ws.join("sub.txt").exists());
    assert_eq!(read(&ws.join("gone.txt")), "gone\n");
    assert_eq!(read(&ws.join("old_name.txt")), "moved\n");
    assert!(!ws.join("new_name.txt").exists());
    assert!(ws.join("link.txt").symlink_metadata().is_err());
    assert_eq!(mode(&ws.join("run.sh")), 0o644);
    // The conversation was cut: turn 1 remains, and the next block is turn 2 again.
    assert_eq!(turns(&env, "k"), 1);
    ok(&env.exec("k", "open('io.txt', 'w').write('again\\n')"));
    assert_eq!(turns(&env, "k"), 2);
    let again = env.vis(&["diff", "k", "t2"]);
    assert!(again.stdout.contains("+again"), "{}", again.stdout);
    assert!(!again.stdout.contains("x = 2"), "{}", again.stdout);
    // Nothing of the rewind's own temp files is left beside the targets.
    for entry in std::fs::read_dir(&ws).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with(".vis-rewind"), "{name} left behind");
    }
});

vistest!(
    code_only_rewind_keeps_the_conversation_and_tells_the_model,
    |env| {
        let ws = env.workspace();
        std::fs::write(ws.join("f.txt"), "one\n").unwrap();
        ok(&env.exec("c", "open('f.txt', 'w').write('two\\n')"));
        ok(&env.exec("c", "open('f.txt', 'w').write('three\\n')"));
        ok(&env.vis(&["rewind", "c", "t2", "--code-only"]));
        assert_eq!(read(&ws.join("f.txt")), "two\n");
        assert_eq!(turns(&env, "c"), 2);
        let store = vis::store::open(&env.db()).unwrap();
        let history = store.history("c").unwrap();
        let last = history.last().unwrap();
        assert_eq!(last.kind, vis::store::HistoryKind::Notice);
        assert!(
            last.body
                .contains("rewound the workspace files to their state before turn 2"),
            "{}",
            last.body
        );
    }
);

vistest!(
    rewind_refuses_a_file_changed_outside_vis_and_force_takes_it,
    |env| {
        let ws = env.workspace();
        std::fs::write(ws.join("mine.txt"), "base\n").unwrap();
        std::fs::write(ws.join("other.txt"), "o0\n").unwrap();
        ok(&env.exec("o", "print(1)"));
        ok(&env.exec(
        "o",
        "open('mine.txt', 'w').write('vis wrote\\n')\nopen('other.txt', 'w').write('o1\\n')\nopen('made.txt', 'w').write('new\\n')",
    ));
        // The person edits two files after the session did.
        std::fs::write(ws.join("mine.txt"), "person wrote\n").unwrap();
        std::fs::write(ws.join("made.txt"), "person kept this\n").unwrap();
        let refused = env.vis(&["rewind", "o", "t2"]);
        assert_eq!(refused.code, 1, "{}", refused.stderr);
        for needle in [
            "changed outside Vis",
            "mine.txt",
            "before turn 2:",
            "Vis last wrote:",
            "there now:",
            "+person wrote",
            "--force",
        ] {
            assert!(
                refused.stderr.contains(needle),
                "missing {needle:?} in\n{}",
                refused.stderr
            );
        }
        // Nothing changed: files and conversation.
        assert_eq!(read(&ws.join("mine.txt")), "person wrote\n");
        assert_eq!(read(&ws.join("other.txt")), "o1\n");
        assert_eq!(turns(&env, "o"), 2);

        let forced = env.vis(&["rewind", "o", "t2", "--force"]);
        ok(&forced);
        assert_eq!(read(&ws.join("mine.txt")), "base\n");
        assert_eq!(read(&ws.join("other.txt")), "o0\n");
        // The session created made.txt, but the person changed it since: it is not deleted.
        assert_eq!(read(&ws.join("made.txt")), "person kept this\n");
        assert!(forced.stdout.contains("kept     "), "{}", forced.stdout);
        assert_eq!(turns(&env, "o"), 1);
    }
);

vistest!(rewind_is_all_or_nothing_when_the_disk_fills, |env| {
    let ws = env.workspace();
    std::fs::write(ws.join("a_small.txt"), "small0\n").unwrap();
    std::fs::write(ws.join("b_big.bin"), vec![b'x'; 3 * 1024 * 1024]).unwrap();
    ok(&env.exec("d", "print(1)"));
    ok(&env.exec(
        "d",
        "open('a_small.txt', 'w').write('small1\\n')\nopen('b_big.bin', 'wb').write(b'y' * 10)",
    ));
    // A file-size limit of 1 MiB: the small file's new version is staged, the big one's
    // is not (the disk "fills" halfway). SIGXFSZ is ignored so the write fails instead.
    let cmd = env.command(&["rewind", "d", "t2"]);
    let program = cmd.get_program().to_owned();
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect();
    let script = format!(
        "trap '' XFSZ; ulimit -f 2048; exec '{}' {}",
        program.to_string_lossy(),
        args.join(" ")
    );
    let mut shell = std::process::Command::new("bash");
    shell.arg("-c").arg(&script).current_dir(&ws);
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            shell.env(k, v);
        }
    }
    let run: crate::support::Run = shell.stdin(Stdio::null()).output().unwrap().into();
    assert_ne!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("b_big.bin"), "{}", run.stderr);
    assert!(run.stderr.contains("nothing was changed"), "{}", run.stderr);
    assert_eq!(read(&ws.join("a_small.txt")), "small1\n");
    assert_eq!(std::fs::read(ws.join("b_big.bin")).unwrap(), b"yyyyyyyyyy");
    assert_eq!(turns(&env, "d"), 2);
    for entry in std::fs::read_dir(&ws).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with(".vis-rewind"), "{name} left behind");
    }
    // With room again, the same rewind goes through.
    ok(&env.vis(&["rewind", "d", "t2"]));
    assert_eq!(read(&ws.join("a_small.txt")), "small0\n");
    assert_eq!(
        std::fs::read(ws.join("b_big.bin")).unwrap().len(),
        3 * 1024 * 1024
    );
});

vistest!(
    a_gateway_killed_mid_block_has_its_changes_recorded_at_resume,
    |env| {
        let ws = env.workspace();
        std::fs::write(ws.join("f.txt"), "before\n").unwrap();
        ok(&env.exec("x", "print(1)"));
        let mut child = env
            .command(&[
                "exec",
                "--session",
                "x",
                "open('f.txt', 'w').write('during\\n')\nimport time\ntime.sleep(600)",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_until(Duration::from_secs(60), || {
            std::fs::read_to_string(ws.join("f.txt")).is_ok_and(|t| t == "during\n")
        }));
        // kill -9 of the gateway.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        // The session resumes with another block.
        ok(&env.exec("x", "print(2)"));
        let diff = env.vis(&["diff", "x", "t2"]);
        ok(&diff);
        assert!(
            diff.stdout.contains("-before\n+during\n"),
            "{}",
            diff.stdout
        );
        // And it can be rewound.
        ok(&env.vis(&["rewind", "x", "t2"]));
        assert_eq!(read(&ws.join("f.txt")), "before\n");
    }
);

vistest!(
    ignored_files_are_left_out_unless_the_config_includes_them,
    |env| {
        let ws = env.workspace();
        std::fs::write(ws.join(".gitignore"), "build/\n").unwrap();
        ok(&env.exec("i", "print(1)"));
        ok(&env.exec(
        "i",
        "import os\nos.makedirs('build', exist_ok=True)\nopen('build/out.o', 'w').write('obj\\n')\nopen('src.txt', 'w').write('src\\n')",
    ));
        let diff = env.vis(&["diff", "i", "t2"]);
        assert!(diff.stdout.contains("src.txt"), "{}", diff.stdout);
        assert!(!diff.stdout.contains("out.o"), "{}", diff.stdout);

        write_config(&env, "[checkpoints]\ninclude_ignored = true\n");
        ok(&env.exec("j", "print(1)"));
        ok(&env.exec("j", "open('build/out.o', 'w').write('obj2\\n')"));
        let diff = env.vis(&["diff", "j", "t2"]);
        assert!(diff.stdout.contains("+obj2"), "{}", diff.stdout);
    }
);

vistest!(a_change_over_the_budget_is_recorded_as_not_kept, |env| {
    write_config(&env, "[checkpoints]\nbudget_mb = 1\n");
    ok(&env.exec("b", "print(1)"));
    ok(&env.exec("b", "open('big.bin', 'wb').write(b'z' * (2 * 1024 * 1024))"));
    let diff = env.vis(&["diff", "b", "t2"]);
    ok(&diff);
    assert!(diff.stdout.contains("big.bin"), "{}", diff.stdout);
    assert!(diff.stdout.contains("not kept"), "{}", diff.stdout);
    assert!(diff.stdout.contains("budget_mb"), "{}", diff.stdout);
});

vistest!(
    bad_input_is_refused_with_a_clear_error_and_changes_nothing,
    |env| {
        let ws = env.workspace();
        ok(&env.exec("s", "open('f.txt', 'w').write('one\\n')"));
        ok(&env.exec("s", "open('f.txt', 'w').write('two\\n')"));
        for (args, needle) in [
            (vec!["rewind", "nope", "t1"], "no session 'nope'"),
            (vec!["rewind", "s", "t0"], "numbers start at 1"),
            (vec!["rewind", "s", "x3"], "must start with t"),
            (
                vec!["rewind", "s", "t1/i1"],
                "a rewind or fork point is a turn",
            ),
            (vec!["rewind", "s", "t9"], "has no turn 9 (it has 2)"),
            (vec!["diff", "s", "t9"], "has no turn 9"),
            (vec!["diff", "s", "t1/x"], "must start with i"),
            (vec!["diff", "nope"], "no session 'nope'"),
        ] {
            let run = env.vis(&args);
            assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
            assert!(
                run.stderr.contains(needle),
                "{args:?}: missing {needle:?} in {}",
                run.stderr
            );
        }
        assert_eq!(read(&ws.join("f.txt")), "two\n");
        assert_eq!(turns(&env, "s"), 2);
    }
);

vistest!(file_contents_are_escaped_for_the_terminal, |env| {
    ok(&env.exec("e", "print(1)"));
    ok(&env.exec(
        "e",
        "open('evil.txt', 'w').write('\\x1b]0;pwned\\x07hi\\n')",
    ));
    let diff = env.vis(&["diff", "e"]);
    ok(&diff);
    assert!(!diff.stdout.contains('\x1b'), "{:?}", diff.stdout);
    assert!(diff.stdout.contains("\\x1b]0;pwned"), "{}", diff.stdout);
});

vistest!(
    rewind_in_chat_restores_files_and_the_next_request_is_byte_identical,
    |env| {
        use crate::chat_tui::{start, wait_turns, KIND};
        use crate::support::chat::{answer, calls};
        use crate::support::fake_provider::FakeProvider;
        let ws = env.workspace();
        std::fs::write(ws.join("f.txt"), "zero\n").unwrap();
        let fake = FakeProvider::start();
        fake.push(calls(KIND, "a", &["open('f.txt', 'w').write('one\\n')"]));
        fake.push(answer(KIND, "Wrote one."));
        fake.push(calls(KIND, "b", &["open('f.txt', 'w').write('two\\n')"]));
        fake.push(answer(KIND, "Wrote two."));
        let tmux = start(&env, &fake, &[]);
        tmux.send_line("first");
        wait_turns(&tmux, 1);
        tmux.send_line("second");
        wait_turns(&tmux, 2);
        assert_eq!(read(&ws.join("f.txt")), "two\n");
        let second_turn_request = fake.requests()[2].body.clone();

        tmux.send_line("/rewind t9");
        tmux.wait_text("has no turn 9 (it has 2)");
        assert_eq!(read(&ws.join("f.txt")), "two\n");
        tmux.send_line("/rewind t2");
        tmux.wait_text("restored f.txt");
        assert_eq!(read(&ws.join("f.txt")), "one\n");
        // The same message again: the request is the one turn 2 sent, byte for byte.
        fake.push(answer(KIND, "Again."));
        tmux.send_line("second");
        tmux.wait_text("Again.");
        let again = fake.requests().last().unwrap().body.clone();
        assert_eq!(
            String::from_utf8_lossy(&again),
            String::from_utf8_lossy(&second_turn_request)
        );
    }
);

vistest!(diff_fork_and_replay_from_vis_chat, |env| {
    use crate::chat_tui::{start, wait_turns, KIND};
    use crate::support::chat::{answer, calls};
    use crate::support::fake_provider::FakeProvider;
    let ws = env.workspace();
    std::fs::write(ws.join("f.txt"), "zero\n").unwrap();
    let fake = FakeProvider::start();
    fake.push(calls(KIND, "a", &["open('f.txt', 'w').write('one\\n')"]));
    fake.push(answer(KIND, "Wrote one."));
    fake.push(calls(
        KIND,
        "b",
        &["open('f.txt', 'w').write('two\\n'); print('wrote two')"],
    ));
    fake.push(answer(KIND, "Wrote two."));
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("first");
    wait_turns(&tmux, 1);
    tmux.send_line("second");
    wait_turns(&tmux, 2);
    // /diff: the session's change, then one turn's, as vis diff prints them.
    tmux.send_line("/diff");
    tmux.wait_text("+two");
    tmux.send_line("/diff t1");
    tmux.wait_text("+one");
    tmux.send_line("/diff x1");
    tmux.wait_text("must start with t");
    // /fork: a new session through turn 1; this chat keeps its own.
    tmux.send_line("/fork t9");
    tmux.wait_text("has no turn 9");
    tmux.send_line("/fork t1");
    tmux.wait_text("this chat goes on in its own session");
    // Two sessions now: this chat's and the fork, which names where it came from.
    let sessions = vis::store::Store::open(&env.db())
        .unwrap()
        .list_sessions()
        .unwrap();
    assert_eq!(sessions.len(), 2);
    let forks: Vec<String> = sessions
        .iter()
        .map(|s| {
            let out = env.command(&["sessions", "show", &s.id]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .filter(|shown| shown.contains("forked from"))
        .collect();
    assert_eq!(forks.len(), 1, "{forks:?}");
    assert!(forks[0].contains("at t1"), "{}", forks[0]);
    // /replay: both blocks again in a scratch copy; the workspace is left as it is.
    tmux.send_line("/replay");
    tmux.wait_text("2 same, 0 different output, 0 different status");
    assert_eq!(read(&ws.join("f.txt")), "two\n");
});

vistest!(the_serve_rewind_route_needs_the_token_and_rewinds, |env| {
    use crate::serve::Client;
    use crate::support::chat::events;
    use crate::support::fake_provider::FakeProvider;
    use crate::support::serve::{ServerConfig, TestServer};
    use serde_json::json;
    let ws = env.workspace();
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        let (s, _) = c.exec(&id, "open('f.txt', 'w').write('one\\n')").await;
        assert_eq!(s, 200);
        let (s, _) = c.exec(&id, "open('f.txt', 'w').write('two\\n')").await;
        assert_eq!(s, 200);
        let path = format!("/api/sessions/{id}/rewind");
        let post = reqwest::Method::POST;
        // Without the token: refused, nothing changed.
        let anonymous = Client::anonymous(&server);
        let (s, _) = anonymous
            .json(post.clone(), &path, Some(json!({"turn": "t2"})))
            .await;
        assert_eq!(s, 401);
        assert_eq!(read(&ws.join("f.txt")), "two\n");
        // Bad keys and turns: 400, nothing changed.
        for (turn, needle) in [("x3", "must start with t"), ("t9", "has no turn 9")] {
            let (s, v) = c
                .json(post.clone(), &path, Some(json!({"turn": turn})))
                .await;
            assert_eq!(s, 400, "{v}");
            assert!(v["message"].as_str().unwrap().contains(needle), "{v}");
        }
        assert_eq!(read(&ws.join("f.txt")), "two\n");
        // An outside change: 409 with the versions, then --force.
        std::fs::write(ws.join("f.txt"), "person\n").unwrap();
        let (s, v) = c
            .json(post.clone(), &path, Some(json!({"turn": "t2"})))
            .await;
        assert_eq!((s, v["code"].as_str()), (409, Some("conflict")), "{v}");
        assert!(v["message"].as_str().unwrap().contains("there now:"), "{v}");
        assert_eq!(read(&ws.join("f.txt")), "person\n");
        let (s, v) = c
            .json(
                post.clone(),
                &path,
                Some(json!({"turn": "t2", "force": true})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["restored"], json!(["f.txt"]));
        assert_eq!(v["truncated"], true);
        assert_eq!(read(&ws.join("f.txt")), "one\n");
        let (_, session) = c
            .json(reqwest::Method::GET, &format!("/api/sessions/{id}"), None)
            .await;
        assert_eq!(session["turns"].as_array().unwrap().len(), 1, "{session}");
        // Deleting the session's history removes its checkpoints.
        let dir = env.path().join("checkpoints").join(&id);
        assert!(dir.exists());
        let (s, _) = c
            .json(
                reqwest::Method::DELETE,
                &format!("/api/sessions/{id}?history=delete"),
                None,
            )
            .await;
        assert_eq!(s, 200);
        assert!(!dir.exists());
    });
});

vistest!(
    a_change_made_once_a_served_block_returned_counts_as_made_outside_vis,
    |env| {
        use crate::serve::Client;
        use crate::support::chat::events;
        use crate::support::chat::{answer, calls};
        use crate::support::fake_provider::FakeProvider;
        use crate::support::serve::{read_events, ServerConfig, TestServer};
        use serde_json::json;
        // A tree walked in full after every block (no change feed), so the block's scan
        // takes milliseconds: the person's write lands while it would still run, were the
        // reply sent before the scan was done.
        let ws = env.workspace();
        for d in 0..40 {
            let dir = ws.join(format!("d{d}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..50 {
                std::fs::write(dir.join(format!("f{f}.txt")), format!("{d} {f}\n")).unwrap();
            }
        }
        let fake = FakeProvider::start();
        let config = ServerConfig {
            tweak: Some(std::sync::Arc::new(|s: &mut vis::gateway::ChatSettings| {
                s.checkpoints.max_watched_dirs = 0;
            })),
            ..ServerConfig::default()
        };
        let server = TestServer::start(&env, &fake, config);
        events().block_on(async {
            let c = Client::new(&server);
            let id = c.create(&env).await;
            // Rounds 1-5: a served exec; 6-8: a model's turn, whose end comes after its last
            // block's scan.
            for round in 1..=8 {
                let code = format!("open('d39/f49.txt', 'w').write('block {round}\\n')");
                if round <= 5 {
                    let (s, v) = c.exec(&id, &code).await;
                    assert_eq!(s, 200, "{v}");
                } else {
                    fake.push(calls(crate::serve::OPENAI, "w", &[code.as_str()]));
                    fake.push(answer(crate::serve::OPENAI, "Written."));
                    let events = read_events(c.turn(&id, "write it").await, 10_000).await;
                    let end = events.iter().rev().find(|e| e.event == "turn_finished");
                    assert_eq!(
                        end.map(|e| e.data["status"].clone()),
                        Some(json!("done")),
                        "{events:?}"
                    );
                }
                // Once told the block is done, the person edits the same file.
                std::fs::write(ws.join("d39/f49.txt"), format!("person {round}\n")).unwrap();
                let (s, v) = c
                    .json(
                        reqwest::Method::POST,
                        &format!("/api/sessions/{id}/rewind"),
                        Some(json!({"turn": format!("t{round}")})),
                    )
                    .await;
                assert_eq!((s, v["code"].as_str()), (409, Some("conflict")), "{v}");
                assert_eq!(read(&ws.join("d39/f49.txt")), format!("person {round}\n"));
            }
        });
    }
);

vistest!(
    what_an_mcp_client_changes_between_its_calls_counts_as_made_outside_vis,
    |env| {
        // The client (an agent with its own editing tools) writes the file right after one
        // call returns and before the next: those are its changes, not the blocks'.
        let ws = env.workspace();
        std::fs::write(ws.join("f.txt"), "zero\n").unwrap();
        std::fs::write(ws.join("g.txt"), "g0\n").unwrap();
        let f = ws.join("f.txt");
        let v = crate::support::mcp::drive(
            &env,
            &["--session", "m"],
            &format!(
                r#"
out("one", await call("open('f.txt', 'w').write('block\\n')"))
open({f:?}, "w").write("client\n")
out("two", await call("open('g.txt', 'w').write('g1\\n')"))
"#,
                f = f.to_str().unwrap()
            ),
        );
        assert!(
            v["one"]["text"].as_str().unwrap().contains("status: ok"),
            "{v}"
        );
        assert!(
            v["two"]["text"].as_str().unwrap().contains("status: ok"),
            "{v}"
        );
        assert_eq!(read(&ws.join("f.txt")), "client\n");
        // The connection was turn 1: its rewind refuses to overwrite the client's edit.
        let refused = env.vis(&["rewind", "m", "t1"]);
        assert_eq!(refused.code, 1, "{}{}", refused.stdout, refused.stderr);
        let said = format!("{}{}", refused.stdout, refused.stderr);
        assert!(
            said.contains("changed outside Vis") && said.contains("f.txt"),
            "{said}"
        );
        assert_eq!(read(&ws.join("f.txt")), "client\n");
        assert_eq!(read(&ws.join("g.txt")), "g1\n");
        // With --force it goes back, the client's edit included.
        ok(&env.vis(&["rewind", "m", "t1", "--force"]));
        assert_eq!(read(&ws.join("f.txt")), "zero\n");
        assert_eq!(read(&ws.join("g.txt")), "g0\n");
    }
);

vistest!(
    blocks_cannot_see_the_checkpoints_nor_are_they_recorded,
    |env| {
        // The database inside the workspace: its checkpoints are beneath a root, where blocks
        // could read them and the scan would find them, were they not hidden and left out.
        let ws = env.workspace();
        let db = ws.join("state/vis.db");
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        let (db, ws_arg) = (db.to_str().unwrap(), ws.to_str().unwrap());
        let exec = |code: &str| {
            env.vis_raw(&[
                "--db",
                db,
                "exec",
                "--session",
                "h",
                "--workspace",
                ws_arg,
                code,
            ])
        };
        // The first block already: the directory is made before its worker starts.
        let log = ws.join("state/checkpoints/h/log.jsonl");
        let probe = format!(
        "import os\nopen('secret.txt', 'w').write('kept outside\\n')\nprint(os.path.exists({:?}), os.listdir({:?}))",
        log.to_str().unwrap(),
        ws.join("state/checkpoints").to_str().unwrap()
    );
        let run = exec(&probe);
        ok(&run);
        assert!(run.stdout.contains("False []"), "{}", run.stdout);
        assert!(log.exists());
        let diff = env.vis_raw(&["--db", db, "diff", "h"]);
        ok(&diff);
        assert!(diff.stdout.contains("secret.txt"), "{}", diff.stdout);
        assert!(!diff.stdout.contains("state/"), "{}", diff.stdout);
    }
);

vistest!(binary_files_are_named_not_dumped, |env| {
    ok(&env.exec("bin", "print(1)"));
    ok(&env.exec("bin", "open('blob.bin', 'wb').write(bytes(range(256)))"));
    let diff = env.vis(&["diff", "bin", "t2"]);
    ok(&diff);
    assert!(
        diff.stdout
            .contains("Binary file blob.bin changed (absent → binary, 256 bytes)"),
        "{}",
        diff.stdout
    );
});
