//! The `vis` command line: exit codes, messages, `sessions`.

use crate::vistest;

vistest!(exec_exit_codes_follow_the_block, |env| {
    let ok = env.exec("s", "print('hi')");
    assert_eq!((ok.code, ok.stdout.as_str()), (0, "hi\n"));
    let raised = env.exec("s", "raise KeyError('k')");
    assert_eq!(raised.code, 1);
    assert!(raised.stdout.contains("KeyError: 'k'"), "{}", raised.stdout);
    let timeout = env.vis(&[
        "exec",
        "--session",
        "s",
        "--timeout",
        "0.3",
        "import time; time.sleep(5)",
    ]);
    assert_eq!(timeout.code, 1);
    assert!(
        timeout.stdout.contains("[vis] timeout"),
        "{}",
        timeout.stdout
    );
});

vistest!(exec_reads_the_block_from_stdin, |env| {
    let out = env.exec_stdin("s", b"for i in range(3):\n    print(i)\n");
    assert_eq!(out.stdout, "0\n1\n2\n");
});

vistest!(exec_announces_a_new_session_on_stderr, |env| {
    let run = env.vis(&["exec", "1 + 1"]);
    assert_eq!(run.stdout, "2\n");
    assert!(
        run.stderr.starts_with("vis: new session s-"),
        "{}",
        run.stderr
    );
    let id = run.stderr.split_whitespace().nth(3).unwrap().to_string();
    let list = env.vis(&["sessions", "list"]);
    assert!(list.stdout.contains(&id), "{}", list.stdout);
});

vistest!(bad_exec_input_is_a_usage_error_and_records_nothing, |env| {
    let cases: &[(&[&str], &str)] = &[
        (&["exec", "--session", "s", ""], "the block is empty"),
        (&["exec", "--session", "s", "  \n "], "the block is empty"),
        (&["exec", "--session", "s"], "no code given"),
        (
            &["exec", "--session", "bad/id", "1"],
            "invalid session id 'bad/id'",
        ),
        (
            &["exec", "--session", "s", "--timeout", "0", "1"],
            "--timeout must be a positive number",
        ),
        (
            &["exec", "--session", "s", "--timeout", "nan", "1"],
            "--timeout must be a positive number",
        ),
        (
            &[
                "exec",
                "--session",
                "s",
                "--workspace",
                "/nonexistent/ws",
                "1",
            ],
            "workspace /nonexistent/ws is not usable",
        ),
    ];
    for (args, message) in cases {
        let run = env.vis(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
        assert_eq!(run.stdout, "");
    }
    // NUL cannot travel in argv; it arrives on stdin.
    let out = env.exec_stdin("s", b"x = 1\nprint('\0')\n");
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("NUL byte (line 2"), "{}", out.stderr);
    let out = env.exec_stdin("s", b"print('caf\xe9')\n");
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("the block on stdin is not UTF-8 (byte 10)"),
        "{}",
        out.stderr
    );
    // None of these created a turn.
    assert!(!env.db().exists() || !env.vis(&["sessions", "list"]).stdout.contains("s "));
});

vistest!(sessions_show_lists_turns_iterations_and_defs, |env| {
    env.exec(
        "proj",
        "def greet(name):\n    \"\"\"Say hello.\"\"\"\n    return 'hi ' + name\nprint(greet('a'))",
    );
    env.exec("proj", "1/0");
    let show = env.vis(&["sessions", "show", "proj"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let text = show.stdout;
    assert!(text.starts_with("session proj\n"), "{text}");
    assert!(
        text.contains("2 turns, 2 iterations, 1 definitions"),
        "{text}"
    );
    assert!(text.contains("t1/i1  ok  "), "{text}");
    assert!(
        text.contains("    > print(greet('a'))\n    | hi a\n"),
        "{text}"
    );
    assert!(text.contains("t2/i1  error  "), "{text}");
    assert!(
        text.contains("    | ZeroDivisionError: division by zero\n"),
        "{text}"
    );
    assert!(
        text.contains("definitions:\n  def greet(name)  — Say hello.\n"),
        "{text}"
    );
    let export = env.vis(&["sessions", "export", "proj"]);
    let v: serde_json::Value = serde_json::from_str(&export.stdout).unwrap();
    assert_eq!(v["iterations"].as_array().unwrap().len(), 2);
    assert_eq!(v["defs"][0]["name"], "greet");
});

vistest!(unknown_session_is_a_clear_error, |env| {
    let missing_db = env.vis(&["sessions", "show", "nope"]);
    assert_eq!(missing_db.code, 2);
    assert!(
        missing_db.stderr.contains("no session 'nope'"),
        "{}",
        missing_db.stderr
    );
    env.exec("real", "1");
    let run = env.vis(&["sessions", "show", "nope"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "no session 'nope' in this database; `vis sessions list` shows the sessions there are\n"
    );
});

vistest!(
    a_session_whose_workspace_vanished_asks_for_a_new_one,
    |env| {
        let ws = env.path().join("gone");
        std::fs::create_dir(&ws).unwrap();
        let first = env.vis(&[
            "exec",
            "--session",
            "s",
            "--workspace",
            ws.to_str().unwrap(),
            "1",
        ]);
        assert_eq!(first.code, 0, "{}", first.stderr);
        std::fs::remove_dir(&ws).unwrap();
        let run = env.vis(&["exec", "--session", "s", "1"]);
        assert_eq!(run.code, 2);
        assert!(
            run.stderr
                .contains("no longer exists; pass --workspace DIR"),
            "{}",
            run.stderr
        );
        let moved = env.exec("s", "import os; os.getcwd()");
        assert_eq!(moved.stdout, format!("'{}'\n", env.workspace().display()));
    }
);

vistest!(
    runtime_settings_come_from_config_env_and_flags_in_that_order,
    |env| {
        std::fs::create_dir_all(env.config_dir()).unwrap();
        std::fs::write(
            env.config_dir().join("config.toml"),
            "[runtime]\ntimeout = 0.3\noutput_limit = 200\n",
        )
        .unwrap();
        let from_config = env.exec("s", "import time; time.sleep(5)");
        assert_eq!(from_config.code, 1);
        assert!(
            from_config.stdout.contains("longer than 0.3 s"),
            "{}",
            from_config.stdout
        );
        let capped = env.exec("s", "print('x' * 1000)");
        assert!(
            capped.stdout.contains("characters cut"),
            "{}",
            capped.stdout
        );
        let from_env = env
            .command(&[
                "exec",
                "--session",
                "s",
                "import time; time.sleep(0.5); print('done')",
            ])
            .env("VIS_TIMEOUT", "5")
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&from_env.stdout).ends_with("done\n"));
        let from_flag = env
            .command(&[
                "exec",
                "--session",
                "s",
                "--timeout",
                "0.2",
                "import time; time.sleep(5)",
            ])
            .env("VIS_TIMEOUT", "5")
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&from_flag.stdout).contains("longer than 0.2 s"));
        let bad_env = env
            .command(&["exec", "--session", "s", "1"])
            .env("VIS_TIMEOUT", "soon")
            .output()
            .unwrap();
        assert_eq!(bad_env.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&bad_env.stderr)
            .contains("VIS_TIMEOUT must be a number of seconds, got 'soon'"));
        // Each limit's variable is named when its value is wrong; an empty one counts as
        // not set (the config's output limit of 200 still holds).
        let bad_output = env
            .command(&["exec", "--session", "s", "1"])
            .env("VIS_OUTPUT_LIMIT", "lots")
            .output()
            .unwrap();
        assert_eq!(bad_output.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&bad_output.stderr).contains(
            "--output-limit or VIS_OUTPUT_LIMIT must be a whole number of characters, got 'lots'"
        ));
        let empty_sandbox = env
            .command(&["exec", "--session", "s", "print('y' * 1000)"])
            .env("VIS_SANDBOX", "")
            .output()
            .unwrap();
        assert_eq!(
            empty_sandbox.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&empty_sandbox.stderr)
        );
        assert!(String::from_utf8_lossy(&empty_sandbox.stdout).contains("characters cut"));
        std::fs::write(
            env.config_dir().join("config.toml"),
            "[runtime]\nmemory_limit_mb = 1\n",
        )
        .unwrap();
        let bad = env.exec("s", "1");
        assert_eq!(bad.code, 2);
        assert!(
            bad.stderr.contains(
                "config.toml: line 2: `runtime.memory_limit_mb` must be a number of at least 64"
            ),
            "{}",
            bad.stderr
        );
    }
);

vistest!(ctrl_c_interrupts_the_block_not_the_program, |env| {
    assert_eq!(env.exec("s", "kept = 1").code, 0);
    // The block says it has started with a file (`vis exec` prints output when the block
    // ends); the interrupt follows that, not a guessed delay.
    let started = env.workspace().join("block-started");
    let code = format!(
        "print('start', flush=True)\nimport time\nopen({:?}, 'w').close()\ntime.sleep(30)",
        started.display().to_string()
    );
    let child = env
        .command(&["exec", "--session", "s", &code])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(crate::support::wait_until(
        std::time::Duration::from_secs(60),
        || started.exists()
    ));
    // SAFETY: signalling the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("KeyboardInterrupt"), "{stdout}");
    assert!(
        stdout.contains("[vis] interrupted: the block was stopped on request"),
        "{stdout}"
    );
    // The iteration was recorded as interrupted.
    let show = env.vis(&["sessions", "show", "s"]);
    assert!(
        show.stdout.contains("t2/i1  interrupted"),
        "{}",
        show.stdout
    );
});
