//! `vis replay`: a session's recorded blocks re-run against this build in a scratch copy of
//! its workspace, compared iteration by iteration after normalisation.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{wait_until, Run, TestEnv};
use crate::vistest;

/// A user extension (`greet.hello`) the recorded blocks call: changing it is a change of what
/// this build does with the same code.
fn write_greet(env: &TestEnv, body: &str) {
    let dir = env.config_dir().join("extensions");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("greet.py"),
        format!(
            "from vis.extension import register\n\n@register\ndef hello(name: str) -> str:\n    \"\"\"Greets NAME.\"\"\"\n{body}\n"
        ),
    )
    .unwrap();
}

/// Twenty turns, each its own `vis exec` process: definitions, files, the extension, an error,
/// and outputs that vary by nature (paths, addresses, times, temp paths, a pid).
const TWENTY_TURNS: [&str; 20] = [
    "def area(w, h):\n    return w * h\nprint(area(3, 4))",
    "print(greet.hello('ada'))",
    "open('notes.txt', 'w').write('first line\\n')\nprint(open('notes.txt').read())",
    "import os\nprint(os.getcwd())",
    "print(object())",
    "import time\nprint(time.time())",
    "import tempfile\nprint(tempfile.mkdtemp())",
    "import os\nprint('pid', os.getpid())",
    "1 / 0",
    "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\nprint(Point(1, 2).y)",
    "print(area(5, 6), greet.hello('bob'))",
    "counter = 1",
    "print('counter' in globals())",
    "import datetime\nprint(datetime.datetime.now())",
    "import time\nt = time.perf_counter()\nprint(f'took {time.perf_counter() - t:.4f}s')",
    "del area\nprint('area' in globals())",
    "sorted(p.name for p in __import__('pathlib').Path('.').iterdir() if p.suffix == '.txt')",
    "print(greet.hello('eve'))",
    "print(repr(lambda: 0))",
    "print(sorted(d['name'] for d in defs()))",
];

/// Every file beneath `dir` with its content.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

fn replay(env: &TestEnv, args: &[&str]) -> Run {
    let mut all = vec!["replay"];
    all.extend_from_slice(args);
    env.vis(&all)
}

vistest!(
    a_twenty_turn_session_replays_identically_and_a_changed_extension_is_reported,
    |env| {
        write_greet(&env, "    return f'hello {name}'");
        for code in TWENTY_TURNS {
            env.exec("s", code);
        }
        let show = env.vis(&["sessions", "show", "s"]);
        assert!(
            show.stdout.contains("20 turns, 20 iterations"),
            "{}",
            show.stdout
        );
        assert!(show.stdout.contains("t9/i1  error"), "{}", show.stdout);

        let same = replay(&env, &["s"]);
        assert_eq!(same.code, 0, "{}\n{}", same.stdout, same.stderr);
        for turn in 1..=20 {
            assert!(
                same.stdout.contains(&format!("t{turn}/i1  same\n")),
                "t{turn}: {}",
                same.stdout
            );
        }
        assert!(
            same.stdout.ends_with(
                "replay of s: 20 same, 0 different output, 0 different status, 0 not replayable, 0 skipped\n"
            ),
            "{}",
            same.stdout
        );

        // The extension now answers differently, and fails for one name.
        write_greet(
            &env,
            "    if name == 'eve':\n        raise ValueError('no eve')\n    return f'HELLO {name}'",
        );
        let changed = replay(&env, &["s"]);
        assert_eq!(changed.code, 1, "{}\n{}", changed.stdout, changed.stderr);
        let out = &changed.stdout;
        assert!(
            out.contains(
                "t2/i1  different output\n    @@ line 2 @@\n    -hello ada\n    +HELLO ada\n"
            ),
            "{out}"
        );
        assert!(out.contains("t11/i1  different output\n    @@ line 2 @@\n    -30 hello bob\n    +30 HELLO bob\n"), "{out}");
        assert!(
            out.contains("t18/i1  different status: ok in the recording, error now\n    @@ line 2 @@\n    -hello eve\n    +Traceback (most recent call last):\n"),
            "{out}"
        );
        assert!(out.contains("ValueError: no eve"), "{out}");
        assert!(
            out.contains("t1/i1  same\n") && out.contains("t20/i1  same\n"),
            "{out}"
        );
        assert!(
            out.ends_with(
                "replay of s: 17 same, 2 different output, 1 different status, 0 not replayable, 0 skipped\n"
            ),
            "{out}"
        );
    }
);

vistest!(
    a_replay_never_touches_the_original_workspace_or_session,
    |env| {
        // The session reads a file as it was at its start, then changes it: the scratch copy
        // is the workspace restored to the session's start, so the read is the same.
        std::fs::write(env.workspace().join("seed.txt"), "v1").unwrap();
        env.exec("s", "print(open('seed.txt').read())");
        env.exec(
            "s",
            "open('seed.txt', 'w').write('v2')\nopen('out.txt', 'w').write('from the session')",
        );
        env.exec("s", "import os\nos.makedirs('made', exist_ok=True)\nopen('made/a.txt', 'w').write('a')\nprint(sorted(os.listdir('.')))");
        // The person changes the file after the session.
        std::fs::write(env.workspace().join("out.txt"), "mine").unwrap();
        let workspace_before = files(&env.workspace());
        let export_before = env.vis(&["sessions", "export", "s"]).stdout;
        let list_before = env.vis(&["sessions", "list"]).stdout;

        let kept = env.path().join("scratch");
        let run = replay(&env, &["s", "--workspace", kept.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("t1/i1  same\n"), "{}", run.stdout);
        assert!(
            run.stderr.contains(&format!(
                "the scratch workspace is kept in {}",
                kept.display()
            )),
            "{}",
            run.stderr
        );
        // The blocks wrote into the kept scratch copy…
        assert_eq!(
            std::fs::read_to_string(kept.join("seed.txt")).unwrap(),
            "v2"
        );
        assert_eq!(
            std::fs::read_to_string(kept.join("out.txt")).unwrap(),
            "from the session"
        );
        assert_eq!(
            std::fs::read_to_string(kept.join("made/a.txt")).unwrap(),
            "a"
        );
        // …and nothing of the original changed: files, records, the list of sessions.
        assert_eq!(files(&env.workspace()), workspace_before);
        assert_eq!(env.vis(&["sessions", "export", "s"]).stdout, export_before);
        assert_eq!(env.vis(&["sessions", "list"]).stdout, list_before);

        // The default scratch copy is temporary: nothing is left in the original either.
        let run = replay(&env, &["s"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert_eq!(files(&env.workspace()), workspace_before);
        assert_eq!(env.vis(&["sessions", "export", "s"]).stdout, export_before);
    }
);

vistest!(
    host_calls_are_not_replayable_and_interrupted_blocks_are_skipped,
    |env| {
        assert_eq!(env.exec("s", "print('before')").code, 0);
        // `vis exec` has no conversation either: the call fails in the recording too.
        env.exec("s", "fold_session('t1', 'the start')");
        let started = env.workspace().join("block-started");
        let code = format!(
            "import time\nopen({:?}, 'w').close()\ntime.sleep(60)",
            started.display().to_string()
        );
        let child = env
            .command(&["exec", "--session", "s", &code])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert!(wait_until(std::time::Duration::from_secs(60), || started.exists()));
        // SAFETY: signalling the child we spawned.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
        child.wait_with_output().unwrap();
        env.exec("s", "print('after')");

        let run = replay(&env, &["s"]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let out = &run.stdout;
        assert!(out.contains("t1/i1  same\n"), "{out}");
        assert!(
            out.contains("t2/i1  not replayable: fold_session()\n"),
            "{out}"
        );
        assert!(
            out.contains("t3/i1  skipped: interrupted in the recording"),
            "{out}"
        );
        assert!(out.contains("t4/i1  same\n"), "{out}");
        assert!(
            out.ends_with("replay of s: 2 same, 0 different output, 0 different status, 1 not replayable, 1 skipped\n"),
            "{out}"
        );
    }
);

vistest!(bad_inputs_are_refused_and_nothing_is_made, |env| {
    let missing = replay(&env, &["s"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("no session 's': the database"),
        "{}",
        missing.stderr
    );

    env.exec("s", "print(1)");
    let unknown = replay(&env, &["nosuch"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown
            .stderr
            .contains("no session 'nosuch' in this database; `vis sessions list`"),
        "{}",
        unknown.stderr
    );

    let busy = env.path().join("busy");
    std::fs::create_dir_all(&busy).unwrap();
    std::fs::write(busy.join("keep.txt"), "mine").unwrap();
    let full = replay(&env, &["s", "--workspace", busy.to_str().unwrap()]);
    assert_eq!(full.code, 2);
    assert!(
        full.stderr
            .contains("it exists and is not empty; pass a new or empty directory"),
        "{}",
        full.stderr
    );
    assert_eq!(files(&busy).len(), 1);
    assert_eq!(
        std::fs::read_to_string(busy.join("keep.txt")).unwrap(),
        "mine"
    );

    let inside = env.workspace().join("copy");
    let nested = replay(&env, &["s", "--workspace", inside.to_str().unwrap()]);
    assert_eq!(nested.code, 2);
    assert!(
        nested
            .stderr
            .contains("it is inside the session's workspace"),
        "{}",
        nested.stderr
    );
    assert!(!inside.exists());
});

vistest!(an_mcp_call_is_not_replayable, |env| {
    crate::support::mcp::with_fixture(&env, "");
    let recorded = env.exec(
        "s",
        "r = fx.search_issues('bug', limit=1)\nprint(type(r).__name__)",
    );
    assert_eq!(recorded.code, 0, "{}\n{}", recorded.stdout, recorded.stderr);
    env.exec("s", "print('no tools here')");
    let run = replay(&env, &["s"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("t1/i1  not replayable: MCP call fx.search-issues()\n"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("t2/i1  same\n"), "{}", run.stdout);
    assert!(
            run.stdout.ends_with("replay of s: 1 same, 0 different output, 0 different status, 1 not replayable, 0 skipped\n"),
            "{}",
            run.stdout
        );
});

vistest!(crashes_and_timeouts_replay_with_their_status, |env| {
    let limited = |code: &str| {
        let ws = env.workspace();
        env.vis(&[
            "exec",
            "--session",
            "s",
            "--timeout",
            "1",
            "--workspace",
            ws.to_str().unwrap(),
            code,
        ])
    };
    assert_eq!(limited("print('up')").code, 0);
    assert_eq!(
        limited("import os\nprint('going', flush=True)\nos._exit(3)").code,
        1
    );
    assert_eq!(limited("import time\ntime.sleep(30)").code, 1);
    let show = env.vis(&["sessions", "show", "s"]);
    assert!(
        show.stdout.contains("t2/i1  crashed") && show.stdout.contains("t3/i1  timeout"),
        "{}",
        show.stdout
    );
    let run = replay(&env, &["s", "--timeout", "1"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.ends_with("replay of s: 3 same, 0 different output, 0 different status, 0 not replayable, 0 skipped\n"),
        "{}",
        run.stdout
    );
});

vistest!(a_chat_session_replays_identically, |env| {
    use crate::support::chat::{answer, calls};
    use vis::providers::ProviderKind;
    let fake = crate::support::fake_provider::FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    let base = fake.base_url(kind);
    fake.push(calls(
        kind,
        "a",
        &["def square(n):\n    return n * n\nprint(square(7))"],
    ));
    fake.push(answer(kind, "49."));
    // A block that prints nothing: the conversation recorded `(no output)`.
    fake.push(calls(kind, "b", &["kept = square(8)", "print(kept)"]));
    fake.push(answer(kind, "64."));
    let chat = env.vis(&[
        "chat",
        "--provider",
        "openai",
        "--base-url",
        &base,
        "--model",
        "fake-model",
        "-m",
        "square 7",
        "-m",
        "now 8",
    ]);
    assert_eq!(chat.code, 0, "{}\n{}", chat.stdout, chat.stderr);
    let id = env.newest_session();
    assert!(env
        .vis(&["sessions", "show", &id])
        .stdout
        .contains("    | (no output)\n"));
    let run = replay(&env, &[&id]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.ends_with(&format!(
            "replay of {id}: 3 same, 0 different output, 0 different status, 0 not replayable, 0 skipped\n"
        )),
        "{}",
        run.stdout
    );
});
