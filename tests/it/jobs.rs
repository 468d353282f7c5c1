//! Background jobs (`sh.background`, `Job`, `jobs()`): outliving blocks, their output, the
//! host's job table, losing them with the worker, caps, timeouts, interrupts, the sandbox.

use std::path::Path;
use std::time::Duration;

use vis::protocol::Status;
use vis::runtime::host::jobs::JobState;

use crate::support::{pids_with, run, wait_until};
use crate::vistest;

/// A unique marker to find a job's processes in /proc: a number, so it can be an argument
/// of `sleep` (which adds its arguments up) and stay in its command line even when the shell
/// execs it.
fn marker(env: &crate::support::TestEnv, name: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (env.path(), name, std::process::id()).hash(&mut h);
    format!("0.00{:012}", h.finish() % 1_000_000_000_000)
}

fn gone(marker: &str) -> bool {
    wait_until(Duration::from_secs(15), || pids_with(marker).is_empty())
}

vistest!(
    a_job_outlives_its_block_and_its_tail_is_read_while_it_runs,
    |env| {
        let mut rt = env.runtime();
        let m = marker(&env, "tail");
        let out = run(
        &env,
        &mut rt,
        &format!("j = sh.background('for i in 1 2 3; do echo line $i; done; sleep 60 {m}')\nprint(j.id, j.running)"),
    );
        assert_eq!(out.output, "1 True\n", "{out:?}");
        assert_eq!(out.status, Status::Ok);
        assert!(!pids_with(&m).is_empty(), "the job ended with its block");
        assert_eq!(rt.supervisor().jobs().running().len(), 1);
        let out = run(
        &env,
        &mut rt,
        "import time\nfor _ in range(300):\n    if 'line 3' in j.tail():\n        break\n    time.sleep(0.05)\nprint(j.tail(2))\nprint(j.running, j.exit_code, j.lines)\nprint(cat(j.artifact).total_lines)\nprint(jobs())",
    );
        let lines: Vec<&str> = out.output.lines().collect();
        assert_eq!(
            lines[..4],
            ["line 2", "line 3", "True None 3", "3"],
            "{}",
            out.output
        );
        assert!(lines[4].starts_with("[<job 1 running"), "{}", out.output);
        let out = run(
            &env,
            &mut rt,
            "j.kill()\nprint(j.running, j.exit_code, j.wait(0))",
        );
        assert_eq!(out.output, "False None -9\n");
        assert!(gone(&m), "kill() left the job running");
        let table = rt.supervisor().jobs().list();
        assert_eq!(table[0].state, JobState::Finished);
        assert!(table[0].killed);
        // The block saw it end: nothing is left to announce.
        assert!(rt.supervisor().jobs().take_announcements().is_empty());
    }
);

vistest!(
    a_job_that_ends_unseen_is_announced_once_by_the_host,
    |env| {
        let mut rt = env.runtime();
        run(&env, &mut rt, "j = sh.background('seq 1 1204; exit 3')");
        // Waits in a block (the test's runtime moves the host's reader only while a block runs)
        // without looking through the job's API, which would count as seeing it end.
        run(
            &env,
            &mut rt,
            "import sys\nsys.modules['vis.jobs']._JOBS[1]._done.wait(30)",
        );
        assert!(rt.supervisor().jobs().running().is_empty());
        let lines = rt.supervisor().jobs().take_announcements();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("[vis] job 1 finished: exit 3, 1,204 lines (artifact ")
                && lines[0].ends_with("/job-1.txt)"),
            "{lines:?}"
        );
        assert!(rt.supervisor().jobs().take_announcements().is_empty());
        // Ids go on in the session: the next job is 2, even from a new worker.
        rt.kill_worker("after restart()");
        let out = run(&env, &mut rt, "print(sh.background('true').id)");
        assert!(out.output.ends_with("2\n"), "{}", out.output);
    }
);

vistest!(
    a_job_is_killed_at_session_end_even_if_it_ignores_signals_and_daemonizes,
    |env| {
        let mut rt = env.runtime();
        let m = marker(&env, "daemon");
        // A job that ignores SIGTERM and SIGHUP, starts a daemon in its own session (setsid), and
        // a double-forked grandchild.
        let cmd = format!(
        "trap '' TERM HUP; setsid sh -c 'trap \\\"\\\" TERM HUP; sleep 1000 {m}1; true' & (sh -c 'sleep 1000 {m}2; true' &) ; sleep 1000 {m}3"
    );
        let out = run(
            &env,
            &mut rt,
            &format!(
                "j = sh.background(\"{cmd}\")\nimport time\ntime.sleep(0.5)\nprint(j.running)"
            ),
        );
        assert_eq!(out.output, "True\n", "{out:?}");
        // The job's shell, the daemon's shell and three sleeps at least.
        assert!(
            wait_until(Duration::from_secs(10), || pids_with(&m).len() >= 5),
            "not all started: {:?}",
            pids_with(&m)
        );
        rt.shutdown();
        assert!(gone(&m), "outlived the session: {:?}", pids_with(&m));
        let table = rt.supervisor().jobs().list();
        assert_eq!(table[0].state, JobState::Lost);
        assert_eq!(table[0].lost_because.as_deref(), Some("the session ended"));
    }
);

vistest!(
    jobs_lost_at_a_worker_restart_are_named_in_the_next_block,
    |env| {
        let mut rt = env.runtime();
        let m = marker(&env, "lost");
        run(
        &env,
        &mut rt,
        &format!("a = sh.background('sleep 60 {m}')\nb = sh.background('sleep 60 {m}')\nc = sh.background('true')\nc.wait(10)"),
    );
        rt.kill_worker("after restart()");
        assert!(gone(&m), "jobs outlived their worker");
        let out = run(&env, &mut rt, "print(jobs())");
        let lines: Vec<&str> = out.output.lines().collect();
        assert!(
            lines[0].starts_with("[vis] new worker (after restart())"),
            "{}",
            out.output
        );
        assert!(
        lines[1].starts_with("[vis] job 1 lost: it was killed with its worker (after restart()); its output so far is in "),
        "{}",
        out.output
    );
        assert!(lines[2].starts_with("[vis] job 2 lost:"), "{}", out.output);
        assert_eq!(lines[3], "[]", "{}", out.output);
        assert_eq!(
            lines.len(),
            4,
            "job 3 ended in a block before: {}",
            out.output
        );
        // Told once: neither the next block nor the next request repeats it.
        let out = run(&env, &mut rt, "print(1)");
        assert_eq!(out.output, "1\n");
        assert!(rt.supervisor().jobs().take_announcements().is_empty());
    }
);

vistest!(a_crashed_worker_loses_its_jobs, |env| {
    let mut rt = env.runtime();
    let m = marker(&env, "crash");
    let out = run(
        &env,
        &mut rt,
        &format!("j = sh.background('sleep 60 {m}')\nimport os\nos._exit(1)"),
    );
    assert_eq!(out.status, Status::Crashed);
    assert!(gone(&m));
    // The crashed block's own result says so; the next block does not repeat it.
    assert!(
        out.output
            .contains("[vis] job 1 lost: it was killed with its worker"),
        "{}",
        out.output
    );
    let out = run(&env, &mut rt, "print(2)");
    assert!(
        !out.output
            .contains("[vis] job 1 lost: it was killed with its worker"),
        "{}",
        out.output
    );
});

vistest!(the_job_cap_refuses_one_more_and_names_the_fix, |env| {
    let mut rt = env.runtime_with(|o| o.jobs_max = 2, vec![]);
    let m = marker(&env, "cap");
    let out = run(
        &env,
        &mut rt,
        &format!("a = sh.background('sleep 60 {m}')\nb = sh.background('sleep 60 {m}')\ntry:\n    sh.background('sleep 60 {m}')\nexcept RuntimeError as e:\n    print(e)\na.kill()\nprint(sh.background('true').id)"),
    );
    assert_eq!(
        out.output,
        "2 jobs are running, the most this session allows ([jobs] max = 2): wait for one or kill one (jobs() lists them), or raise [jobs] max in config.toml\n3\n",
        "{out:?}"
    );
    assert!(!pids_with(&m).is_empty(), "the job left running was killed");
    rt.shutdown();
    assert!(gone(&m));
});

vistest!(a_job_timeout_kills_its_process_group, |env| {
    let mut rt = env.runtime();
    let m = marker(&env, "timeout");
    let out = run(
        &env,
        &mut rt,
        &format!("j = sh.background('(sleep 60 {m}) & sleep 60 {m}', timeout=0.5)\nprint(j.wait(30))\nprint(j)"),
    );
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines[0], "-9", "{}", out.output);
    assert!(
        lines[1].starts_with("<job 1 killed by its timeout after"),
        "{}",
        out.output
    );
    assert!(gone(&m), "the timeout left part of the group");
});

vistest!(bad_inputs_are_refused_with_the_fix, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "for call in [lambda: sh.background(3), lambda: sh.background('  '), lambda: sh.background('true', timeout=-1), lambda: sh.background('true', timeout='5')]:\n    try:\n        call()\n    except ValueError as e:\n        print(e)\nj = sh.background('true')\nfor call in [lambda: j.tail(-1), lambda: j.wait(-1), lambda: j.tail(1.5)]:\n    try:\n        call()\n    except ValueError as e:\n        print(e)\nprint(len(jobs()))",
    );
    assert_eq!(
        out.output,
        "sh.background() needs a non-empty command string, e.g. sh.background('make test')\n\
         sh.background() needs a non-empty command string, e.g. sh.background('make test')\n\
         sh.background() timeout must be a positive number of seconds or None (no timeout), got -1\n\
         sh.background() timeout must be a positive number of seconds or None (no timeout), got '5'\n\
         tail(n) needs a whole number of lines >= 0, got -1; e.g. job.tail(50)\n\
         wait(timeout) needs a number of seconds >= 0 or None, got -1; e.g. job.wait(60)\n\
         tail(n) needs a whole number of lines >= 0, got 1.5; e.g. job.tail(50)\n\
         1\n"
    );
});

vistest!(waiting_is_interrupted_and_never_outlasts_the_block, |env| {
    let mut rt = env.runtime();
    let m = marker(&env, "wait");
    run(&env, &mut rt, &format!("j = sh.background('sleep 60 {m}')"));
    // The block's own timeout comes first: wait returns None before it, the block is ok.
    let block = env.block_with_timeout("print(j.wait())\nprint(j.running)", Duration::from_secs(3));
    let out = rt.exec(block, &mut vis::runtime::NoHostCalls).unwrap();
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert_eq!(out.output, "None\nTrue\n");
    // An interrupt (Ctrl-C) stops the wait at once; the job goes on.
    let interrupter = rt.interrupter();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        interrupter.interrupt();
    });
    let out = run(&env, &mut rt, "j.wait(50)");
    stopper.join().unwrap();
    assert_eq!(out.status, Status::Interrupted, "{out:?}");
    assert!(out.output.contains("KeyboardInterrupt"), "{}", out.output);
    assert!(!pids_with(&m).is_empty(), "the interrupt killed the job");
    let out = run(&env, &mut rt, "print(j.running)");
    assert_eq!(out.output, "True\n");
    rt.shutdown();
    assert!(gone(&m));
});

vistest!(a_chatty_job_is_capped_at_its_output_limit, |env| {
    let mut rt = env.runtime_with(|o| o.job_output_bytes = 100_000, vec![]);
    let out = run(
        &env,
        &mut rt,
        "j = sh.background('seq 1 200000')\nprint(j.wait(60), j.lines)\nimport os\nprint(os.path.getsize(j.artifact) < 100_200)\nprint(j.tail(1))",
    );
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines[0], "0 200000", "{}", out.output);
    assert_eq!(lines[1], "True", "{}", out.output);
    assert!(
        lines[2].starts_with("[vis] output over the cap of 100000 bytes:"),
        "{}",
        out.output
    );
});

vistest!(a_job_cannot_write_outside_the_workspace, |env| {
    // Not under `/tmp`, which is the worker's own.
    let outside = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "job-outside-{}-{}.txt",
        std::process::id(),
        env.path().file_name().unwrap().to_string_lossy()
    ));
    let code = format!(
        "j = sh.background('echo x > {o} || echo refused; echo ok > inside-job.txt')\nprint(j.wait(30))\nprint(j.tail())",
        o = outside.display()
    );
    let run = env.exec("w", &code);
    assert!(
        run.stdout.starts_with("0\n"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout.contains("Read-only file system"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("refused"), "{}", run.stdout);
    assert!(!outside.exists());
    assert!(env.workspace().join("inside-job.txt").exists());
});

vistest!(
    a_job_end_is_appended_to_exactly_one_request_and_kept_as_history,
    |env| {
        use crate::support::chat::{answer, calls, events, new_session, settings, turn};
        use crate::support::fake_provider::FakeProvider;
        use vis::providers::ProviderKind;

        let rt = events();
        let kind = ProviderKind::OpenAi;
        let fake = FakeProvider::start();
        // The job waits for a file the second block makes; that block then waits (without
        // looking at the job through its API) until the job's end was reported.
        fake.push(calls(
            kind,
            "a",
            &["j = sh.background('while [ ! -e go ]; do sleep 0.05; done; seq 1 1204')"],
        ));
        fake.push(calls(
        kind,
        "b",
        &["import sys, time\nJ = sys.modules['vis.jobs']\nopen('go', 'w').close()\nwhile not J._JOBS[1]._done.is_set():\n    time.sleep(0.05)"],
    ));
        fake.push(answer(kind, "started the job"));
        fake.push(answer(kind, "still here"));
        let mut session = new_session(&env, settings(&env, &fake, kind), "jobs-announce");
        let (end, events) = turn(&rt, &mut session, "run it");
        assert_eq!(end.text, "started the job", "{events:?}");
        let (end, _) = turn(&rt, &mut session, "and now?");
        assert_eq!(end.text, "still here");
        let line = "[vis] job 1 finished: exit 0, 1,204 lines (artifact ";
        let counts: Vec<usize> = fake
            .requests()
            .iter()
            .map(|r| r.body_str().matches(line).count())
            .collect();
        assert_eq!(
            counts,
            [0, 0, 1, 1],
            "announced in the third request only, then history"
        );
        // It is stored history: the resumed session's next request sends the same bytes.
        let stored = vis::store::Store::open(&env.db()).unwrap();
        let history = stored.history("jobs-announce").unwrap();
        assert_eq!(history.iter().filter(|h| h.body.contains(line)).count(), 1);
    }
);
