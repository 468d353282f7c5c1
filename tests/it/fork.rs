//! `vis sessions fork ID --at tN [--workspace DIR]`: a new session with the conversation,
//! folds and definitions through turn N, optionally in a copy of the workspace as it was then;
//! both sessions go on independently.

use std::path::Path;

use vis::providers::ProviderKind;

use crate::support::chat::{answer, calls};
use crate::support::fake_provider::FakeProvider;
use crate::support::{Run, TestEnv};
use crate::vistest;

/// The new session's id, from the fork's first line.
fn forked_id(run: &Run) -> String {
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    run.stdout
        .split(" into ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap()
        .to_string()
}

/// `vis exec` in session `id`, in the workspace the session has.
fn exec_in(env: &TestEnv, id: &str, code: &str) -> Run {
    env.vis(&["exec", "--session", id, code])
}

vistest!(
    fork_then_both_sessions_run_with_their_own_workspace_and_definitions,
    |env| {
        env.exec(
            "s",
            "def version():\n    return 'one'\nopen('state.txt', 'w').write('one')",
        );
        env.exec(
            "s",
            "def version():\n    return 'two'\ndef extra(): pass\nopen('state.txt', 'w').write('two')",
        );
        let dir = env.path().join("forked");
        let fork = env.vis(&[
            "sessions",
            "fork",
            "s",
            "--at",
            "t1",
            "--workspace",
            dir.to_str().unwrap(),
        ]);
        let id = forked_id(&fork);
        assert!(
            fork.stdout
                .contains(": 1 turns, 1 iterations, 0 folds, 1 definitions\n"),
            "{}",
            fork.stdout
        );
        // The copy is the workspace as it was at the end of t1.
        assert_eq!(
            std::fs::read_to_string(dir.join("state.txt")).unwrap(),
            "one"
        );
        let show = env.vis(&["sessions", "show", &id]);
        assert!(
            show.stdout.contains("  forked from s at t1\n"),
            "{}",
            show.stdout
        );

        // Each session sees its own definitions and workspace, and writes only its own.
        let in_fork = exec_in(
            &env,
            &id,
            "print(version(), open('state.txt').read(), 'extra' in globals())\n_ = open('state.txt', 'w').write('fork')",
        );
        assert_eq!(in_fork.code, 0, "{}\n{}", in_fork.stdout, in_fork.stderr);
        assert!(
            in_fork.stdout.ends_with("one one False\n"),
            "{}",
            in_fork.stdout
        );
        let in_original = exec_in(
            &env,
            "s",
            "print(version(), open('state.txt').read(), 'extra' in globals())",
        );
        assert_eq!(in_original.code, 0, "{}", in_original.stderr);
        assert!(
            in_original.stdout.ends_with("two two True\n"),
            "{}",
            in_original.stdout
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("state.txt")).unwrap(),
            "fork"
        );
        assert_eq!(
            std::fs::read_to_string(env.workspace().join("state.txt")).unwrap(),
            "two"
        );
        // Numbers go on from each session's own last turn.
        assert!(env
            .vis(&["sessions", "show", &id])
            .stdout
            .contains("t2/i1  ok"));
        assert!(env
            .vis(&["sessions", "show", "s"])
            .stdout
            .contains("t3/i1  ok"));
    }
);

vistest!(
    a_fork_at_turn_n_sends_what_the_original_would_have_sent_after_turn_n,
    |env| {
        let fake = FakeProvider::start();
        let kind = ProviderKind::OpenAi;
        let base = fake.base_url(kind);
        let chat = |extra: &[&str]| {
            let mut args = vec![
                "chat",
                "--provider",
                "openai",
                "--base-url",
                &base,
                "--model",
                "fake-model",
            ];
            args.extend_from_slice(extra);
            env.vis(&args)
        };
        fake.push(calls(
            kind,
            "a",
            &["def square(n):\n    return n * n\nprint(square(7))"],
        ));
        fake.push(answer(kind, "49."));
        fake.push(calls(kind, "b", &["print(square(8))"]));
        fake.push(answer(kind, "64."));
        let first = chat(&["-m", "square 7", "-m", "now 8"]);
        assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
        let id = env.newest_session();
        let after_two = env.vis(&["context", &id, "--json"]);
        assert_eq!(after_two.code, 0, "{}", after_two.stderr);

        fake.push(calls(
            kind,
            "c",
            &["def square(n):\n    return -1\nprint(square(9))"],
        ));
        fake.push(answer(kind, "changed."));
        let third = chat(&["--resume", &id, "-m", "redefine"]);
        assert_eq!(third.code, 0, "{}\n{}", third.stdout, third.stderr);
        assert_ne!(
            env.vis(&["context", &id, "--json"]).stdout,
            after_two.stdout
        );

        let fork = env.vis(&["sessions", "fork", &id, "--at", "t2"]);
        let new_id = forked_id(&fork);
        let forked = env.vis(&["context", &new_id, "--json"]);
        assert_eq!(forked.code, 0, "{}", forked.stderr);
        assert_eq!(forked.stdout, after_two.stdout);
        // Its definitions are those of t2: square as first defined.
        let run = exec_in(&env, &new_id, "print(square(3))");
        assert!(run.stdout.ends_with("9\n"), "{}", run.stdout);
    }
);

/// Everything in `dir`, names and contents.
fn listing(dir: &Path) -> Vec<(String, String)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let content = std::fs::read_to_string(&p).unwrap_or_default();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                content,
            )
        })
        .collect();
    out.sort();
    out
}

vistest!(bad_fork_inputs_are_refused_and_nothing_is_created, |env| {
    let missing = env.vis(&["sessions", "fork", "s", "--at", "t1"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("no session 's': the database"),
        "{}",
        missing.stderr
    );
    env.exec("s", "print(1)");
    env.exec("s", "print(2)");
    let list_before = env.vis(&["sessions", "list"]).stdout;
    let busy = env.path().join("busy");
    std::fs::create_dir_all(&busy).unwrap();
    std::fs::write(busy.join("keep.txt"), "mine").unwrap();
    let inside = env.workspace().join("copy");
    let cases: [(&[&str], &str); 7] = [
        (
            &["nosuch", "--at", "t1"],
            "no session 'nosuch' in this database",
        ),
        (&["s", "--at", "5"], "bad key \"5\": it must start with t"),
        (&["s", "--at", "t0"], "numbers start at 1"),
        (
            &["s", "--at", "t1/i1"],
            "a rewind or fork point is a turn, such as t3",
        ),
        (
            &["s", "--at", "t3"],
            "session s has no turn 3 (its turns are t1 to t2); fork at one of those",
        ),
        (
            &["s", "--at", "t1", "--workspace", busy.to_str().unwrap()],
            "it exists and is not empty; pass a new or empty directory",
        ),
        (
            &["s", "--at", "t1", "--workspace", inside.to_str().unwrap()],
            "it is inside the session's workspace",
        ),
    ];
    for (args, message) in cases {
        let mut all = vec!["sessions", "fork"];
        all.extend_from_slice(args);
        let run = env.vis(&all);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
    // Nothing was created: no session, no directory, the busy one as it was.
    assert_eq!(env.vis(&["sessions", "list"]).stdout, list_before);
    assert!(!inside.exists());
    assert_eq!(
        listing(&busy),
        vec![("keep.txt".to_string(), "mine".to_string())]
    );
});

vistest!(
    a_fork_carries_the_checkpoints_before_its_fork_point,
    |env| {
        let ws = env.workspace();
        std::fs::write(ws.join("f.txt"), "v0\n").unwrap();
        env.exec("h", "print(1)");
        env.exec("h", "open('f.txt', 'w').write('v2\\n')");
        env.exec("h", "open('f.txt', 'w').write('v3\\n')");
        env.exec("h", "open('f.txt', 'w').write('v4\\n')");
        let copy = env.path().join("copy");

        // In a copy of the workspace as it was after t3.
        let run = env.vis(&[
            "sessions",
            "fork",
            "h",
            "--at",
            "t3",
            "--workspace",
            copy.to_str().unwrap(),
        ]);
        let fork = forked_id(&run);
        assert!(
            run.stdout.contains("checkpoints through t3"),
            "{}",
            run.stdout
        );
        assert_eq!(std::fs::read_to_string(copy.join("f.txt")).unwrap(), "v3\n");
        // Turns before the fork point: diff and rewind, with paths in the copy.
        let diff = env.vis(&["diff", &fork, "t2"]);
        assert_eq!(diff.code, 0, "{}", diff.stderr);
        assert!(diff.stdout.contains("-v0\n+v2\n"), "{}", diff.stdout);
        // The original's workspace and history are untouched by the fork.
        let original = env.vis(&["diff", "h", "t4"]);
        assert!(
            original.stdout.contains("-v3\n+v4\n"),
            "{}",
            original.stdout
        );

        // In the original's workspace: what the original did after t2 is the fork's
        // outside change, and its history reaches back to the start.
        let shared = forked_id(&env.vis(&["sessions", "fork", "h", "--at", "t2"]));
        exec_in(&env, &shared, "print('go on')");
        let rewound = env.vis(&["rewind", &shared, "t2", "--force"]);
        assert_eq!(rewound.code, 0, "{}\n{}", rewound.stdout, rewound.stderr);
        assert_eq!(std::fs::read_to_string(ws.join("f.txt")).unwrap(), "v0\n");

        // Removing the original's checkpoints leaves the fork's whole (its blobs are links).
        let checkpoints = env.db().parent().unwrap().join("checkpoints");
        std::fs::remove_dir_all(checkpoints.join("h")).unwrap();
        let rewound = env.vis(&["rewind", &fork, "t2"]);
        assert_eq!(rewound.code, 0, "{}\n{}", rewound.stdout, rewound.stderr);
        assert_eq!(std::fs::read_to_string(copy.join("f.txt")).unwrap(), "v0\n");
    }
);
