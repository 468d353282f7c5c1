//! Blocks that hang, crash or exhaust memory never take the host down (SPEC §3, §10).

use std::time::{Duration, Instant};

use vis::protocol::{ExitInfo, PersistedDef, Status};
use vis::runtime::NoHostCalls;

use crate::support::{run, wait_until, TestEnv};
use crate::vistest;

fn helper_def() -> PersistedDef {
    PersistedDef {
        name: "helper".into(),
        kind: "function".into(),
        source: "def helper(x):\n    return x * 2\n".into(),
        signature: "def helper(x)".into(),
        doc: String::new(),
    }
}

fn assert_recovers(env: &TestEnv, rt: &mut vis::runtime::Runtime, reason: &str) {
    let next = run(env, rt, "helper(21)");
    assert_eq!(next.status, Status::Ok, "{}", next.output);
    assert!(
        next.output
            .starts_with(&format!("[vis] new worker ({reason}")),
        "restart notice missing: {}",
        next.output
    );
    assert!(
        next.output.contains("restored 1 definition: helper"),
        "{}",
        next.output
    );
    assert!(next.output.ends_with("42\n"), "{}", next.output);
    let restored = next.restored.expect("restore notice");
    assert_eq!(restored.report.ok, ["helper"]);
}

vistest!(timeout_interrupts_sleep_and_keeps_the_worker, |env| {
    let mut rt = env.runtime_with(|_| {}, vec![helper_def()]);
    run(&env, &mut rt, "kept = 5");
    let pid = rt.worker_pid();
    let started = Instant::now();
    let out = rt
        .exec(
            env.block_with_timeout(
                "print('start')\nimport time\ntime.sleep(60)",
                Duration::from_millis(500),
            ),
            &mut NoHostCalls,
        )
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status, Status::Timeout);
    assert!(out.output.starts_with("start\n"), "{}", out.output);
    assert!(out.output.contains("KeyboardInterrupt"), "{}", out.output);
    assert!(
        out.output
            .contains("[vis] timeout: the block ran longer than 0.5 s and was interrupted"),
        "{}",
        out.output
    );
    assert!(out.worker_lost.is_none());
    assert_eq!(rt.worker_pid(), pid);
    assert_eq!(run(&env, &mut rt, "kept").output, "5\n");
});

vistest!(timeout_interrupts_a_busy_loop, |env| {
    let mut rt = env.runtime();
    let out = rt
        .exec(
            env.block_with_timeout("while True: pass", Duration::from_millis(300)),
            &mut NoHostCalls,
        )
        .unwrap();
    assert_eq!(out.status, Status::Timeout);
    assert!(out.worker_lost.is_none(), "{}", out.output);
    assert_eq!(run(&env, &mut rt, "1").output, "1\n");
});

vistest!(
    a_block_that_ignores_the_interrupt_is_killed_and_the_worker_restarted,
    |env| {
        let mut rt = env.runtime_with(
            |o| o.interrupt_grace = Duration::from_millis(500),
            vec![helper_def()],
        );
        run(&env, &mut rt, "x = 1");
        let code = "import time\nwhile True:\n    try:\n        time.sleep(100)\n    except KeyboardInterrupt:\n        print('ignored')";
        let started = Instant::now();
        let out = rt
            .exec(
                env.block_with_timeout(code, Duration::from_millis(300)),
                &mut NoHostCalls,
            )
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(20));
        assert_eq!(out.status, Status::Timeout);
        assert!(out.output.starts_with("ignored\n"), "{}", out.output);
        assert!(
            out.output
                .contains("did not stop within 0.5 s of the interrupt, so the worker was killed"),
            "{}",
            out.output
        );
        assert_eq!(out.worker_lost, Some(ExitInfo::Signal(libc::SIGKILL)));
        assert_recovers(&env, &mut rt, "after a timeout");
    }
);

vistest!(user_interrupt_from_another_thread, |env| {
    let mut rt = env.runtime();
    run(&env, &mut rt, "kept = 1");
    let interrupter = rt.interrupter();
    let started = env.workspace().join("block-started");
    let flag = started.clone();
    // Interrupts once the block is in its sleep (it says so with a file), not after a guess.
    let t = std::thread::spawn(move || {
        assert!(wait_until(Duration::from_secs(60), || flag.exists()));
        interrupter.interrupt();
    });
    let code = format!(
        "import time\nopen({:?}, 'w').close()\ntime.sleep(30)",
        started.display().to_string()
    );
    let out = run(&env, &mut rt, &code);
    t.join().unwrap();
    assert_eq!(out.status, Status::Interrupted);
    assert!(
        out.output
            .contains("[vis] interrupted: the block was stopped on request"),
        "{}",
        out.output
    );
    assert_eq!(run(&env, &mut rt, "kept").output, "1\n");
});

vistest!(os_exit_is_a_crash_the_host_survives, |env| {
    let mut rt = env.runtime_with(|_| {}, vec![helper_def()]);
    run(&env, &mut rt, "1");
    let out = run(&env, &mut rt, "print('last words')\nimport os\nos._exit(3)");
    assert_eq!(out.status, Status::Crashed);
    assert_eq!(out.worker_lost, Some(ExitInfo::Code(3)));
    assert!(out.output.starts_with("last words\n"), "{}", out.output);
    assert!(
        out.output
            .contains("[vis] crashed: the worker exited with code 3"),
        "{}",
        out.output
    );
    assert_recovers(&env, &mut rt, "after a crash");
});

vistest!(segfault_is_a_crash_with_the_fault_traceback, |env| {
    let mut rt = env.runtime_with(|_| {}, vec![helper_def()]);
    let out = run(&env, &mut rt, "import ctypes\nctypes.string_at(0)");
    assert_eq!(out.status, Status::Crashed);
    assert_eq!(out.worker_lost, Some(ExitInfo::Signal(libc::SIGSEGV)));
    assert!(out.output.contains("Segmentation fault"), "{}", out.output);
    assert!(
        out.output.contains("File \"<t1/i1>\", line 2"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("killed by signal 11 (SIGSEGV)"),
        "{}",
        out.output
    );
    assert_recovers(&env, &mut rt, "after a crash");
});

vistest!(sys_exit_ends_only_the_block, |env| {
    let mut rt = env.runtime_with(|_| {}, vec![helper_def()]);
    run(&env, &mut rt, "kept = 3");
    let out = run(&env, &mut rt, "import sys\nsys.exit(4)");
    assert_eq!(out.status, Status::Error);
    assert!(out.output.contains("SystemExit: 4"), "{}", out.output);
    assert!(out.worker_lost.is_none());
    assert_eq!(run(&env, &mut rt, "kept, helper(1)").output, "(3, 2)\n");
});

vistest!(memory_limit_stops_a_runaway_allocation, |env| {
    let mut rt = env.runtime_with(|o| o.memory_limit_mb = 512, vec![helper_def()]);
    let out = run(
        &env,
        &mut rt,
        "hog = []\nwhile True:\n    hog.append(bytearray(50 * 1024 * 1024))",
    );
    // Depending on where the allocation fails, Python raises MemoryError or the process
    // dies; either way the host reports it and carries on.
    match out.status {
        Status::Error => {
            assert!(out.output.contains("MemoryError"), "{}", out.output);
            assert!(out.output.contains("memory limit"), "{}", out.output);
            let next = run(&env, &mut rt, "del hog\nhelper(21)");
            assert_eq!(next.output, "42\n");
        }
        Status::Crashed => assert_recovers(&env, &mut rt, "after a crash"),
        other => panic!("unexpected status {other:?}: {}", out.output),
    }
    // A single impossible allocation fails cleanly.
    let out = run(&env, &mut rt, "bytearray(10**12)");
    assert_eq!(out.status, Status::Error);
    assert!(out.output.contains("MemoryError"), "{}", out.output);
});

vistest!(
    a_definition_that_crashes_on_restore_does_not_lock_the_session_out,
    |env| {
        let bad = PersistedDef {
            name: "boom".into(),
            kind: "function".into(),
            source: "@(lambda f: __import__('os')._exit(9))\ndef boom(): pass\n".into(),
            signature: "def boom()".into(),
            doc: String::new(),
        };
        let mut rt = env.runtime_with(|_| {}, vec![helper_def(), bad]);
        let out = run(&env, &mut rt, "print('alive', helper(2))");
        assert_eq!(out.status, Status::Ok);
        // The definition the worker died on is skipped; the others come back in a new one.
        assert!(
            out.output.starts_with("[vis] new worker: restored 1 definition: helper; 1 failed: boom (restoring definitions stopped the worker (exited with code 9) while this one ran; it was skipped (define it again, or drop it with `name = None`))\n"),
            "{}",
            out.output
        );
        assert!(out.output.ends_with("alive 4\n"), "{}", out.output);
    }
);

vistest!(worker_start_failure_is_a_clear_error, |env| {
    let mut rt = env.runtime_with(|o| o.program = "/nonexistent/vis".into(), vec![]);
    let err = rt.exec(env.block("1"), &mut NoHostCalls).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot start the worker /nonexistent/vis"),
        "{err}"
    );
});

vistest!(
    an_extension_that_kills_the_worker_at_import_falls_back_to_bundled_ones,
    |env| {
        let dir = env.workspace().join(".vis/extensions");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("fatal.py"),
            "print('loading fatal')\nimport os\nos._exit(7)\n",
        )
        .unwrap();
        let mut rt = env.runtime_with(|_| {}, vec![helper_def()]);
        let out = run(&env, &mut rt, "print(helper(2), callable(git.status))\nsession['restored']['extensions_skipped'] is not None");
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        assert!(out.output.contains("[vis] only the bundled extensions are loaded: the worker did not start with the others (the worker exited with code 7: loading fatal)"), "{}", out.output);
        assert!(out.output.ends_with("4 True\nTrue\n"), "{}", out.output);
    }
);

vistest!(
    an_extension_that_hangs_at_import_falls_back_to_bundled_ones,
    |env| {
        let dir = env.workspace().join(".vis/extensions");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("slow.py"), "import time\ntime.sleep(600)\n").unwrap();
        let mut rt = env.runtime_with(|o| o.startup_timeout = Duration::from_secs(2), vec![]);
        let started = Instant::now();
        let out = run(&env, &mut rt, "1 + 1");
        assert!(started.elapsed() < Duration::from_secs(60));
        assert!(
            out.output
                .contains("[vis] only the bundled extensions are loaded"),
            "{}",
            out.output
        );
        assert!(
            out.output.contains("no ready signal within"),
            "{}",
            out.output
        );
        assert!(out.output.ends_with("2\n"), "{}", out.output);
    }
);
