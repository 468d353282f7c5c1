//! The runtime driven from async code: host calls answered while a block runs, calls from
//! background threads, interrupts that race the start of a block, and the worker's lifetime.

use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use vis::protocol::Status;
use vis::runtime::{HostHandler, Supervisor, WorkerOptions};

use crate::support::{worker_bin, TestEnv};
use crate::vistest;
use vis::protocol::{HostReply, HostRequest};

struct Echo;

/// Answers a block's `mcp.call` with its arguments.
impl HostHandler for Echo {
    fn call(&mut self, request: HostRequest) -> vis::protocol::CallAnswer {
        match request {
            HostRequest::McpCall { arguments, .. } => {
                Ok(HostReply::Mcp(json!({"echo": arguments})))
            }
            other => Err(format!("no method {}", other.method()).into()),
        }
    }
}

fn supervisor(env: &TestEnv) -> Supervisor {
    let mut opts = WorkerOptions::new(worker_bin());
    opts.workspace = Some(env.workspace());
    opts.interrupt_grace = Duration::from_millis(1500);
    Supervisor::new(opts, vec![])
}

fn events() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

vistest!(
    a_background_thread_calling_the_host_between_blocks_breaks_nothing,
    |env| {
        let mut rt = env.runtime();
        let start = "import threading, time\nfrom vis import _native\nanswers = []\ndef pester():\n    for _ in range(400):\n        try:\n            answers.append(('ok', _native.host_call('mcp.call', {'server': 'e', 'tool': 'echo', 'arguments': {'n': 1}})))\n        except RuntimeError as e:\n            answers.append(('err', str(e)))\n        time.sleep(0.001)\nt = threading.Thread(target=pester)\nt.start()";
        assert_eq!(
            rt.exec(env.block(start), &mut Echo).unwrap().status,
            Status::Ok
        );
        // Blocks keep running while the thread calls the host between and during them.
        for i in 0..40 {
            let out = rt.exec(env.block(&format!("{i} * 2")), &mut Echo).unwrap();
            assert_eq!(out.status, Status::Ok, "{}", out.output);
            assert_eq!(out.output, format!("{}\n", i * 2));
        }
        let out = rt
            .exec(
                env.block("t.join()\nprint(len(answers))\nfor e in sorted({v for k, v in answers if k == 'err'}):\n    print('E:', e)\nprint(sum(k == 'ok' for k, _ in answers) > 0)"),
                &mut Echo,
            )
            .unwrap();
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        assert!(out.output.starts_with("400\n"), "{}", out.output);
        assert!(out.output.ends_with("True\n"), "{}", out.output);
        // Calls made while no block ran were refused with a clear reason, not lost or hung.
        for line in out.output.lines().filter(|l| l.starts_with("E: ")) {
            assert!(
                line.contains("the host answers calls only while a block runs")
                    || line.contains("has ended"),
                "{line}"
            );
        }
        assert!(rt.worker_pid().is_some());
    }
);

vistest!(many_threads_call_the_host_at_once_during_a_block, |env| {
    let mut rt = env.runtime();
    let code = "import threading\nfrom vis import _native\nimport json\nres = {}\ndef call(i):\n    res[i] = _native.host_call('mcp.call', {'server': 'e', 'tool': 'echo', 'arguments': {'i': i}})['echo']['i']\nts = [threading.Thread(target=call, args=(i,)) for i in range(16)]\n[t.start() for t in ts]\n[t.join() for t in ts]\nprint(all(res[i] == i for i in range(16)), len(res))";
    let out = rt.exec(env.block(code), &mut Echo).unwrap();
    // `call` reads `res`, which a new worker would not have: the block is told so.
    assert!(
        out.output.starts_with("True 16\n[vis] call reads res,"),
        "{}",
        out.output
    );
});

vistest!(
    host_calls_are_answered_by_async_code_while_the_block_runs,
    |env| {
        let events = events();
        events.block_on(async {
        let mut sup = supervisor(&env);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let code = "from vis import _native\nadd = lambda a, b: _native.host_call('mcp.call', {'server': 'm', 'tool': 'add', 'arguments': {'a': a, 'b': b}})\nprint(add(2, 3))\nprint(add(10, 20))";
        let mut answered = 0;
        let outcome = {
            let run = sup.exec(env.block(code), tx, CancellationToken::new());
            tokio::pin!(run);
            loop {
            tokio::select! {
                outcome = &mut run => break outcome.unwrap(),
                Some(call) = rx.recv() => {
                    let HostRequest::McpCall { tool, arguments, .. } = call.request.clone() else {
                        panic!("{:?}", call.request);
                    };
                    assert_eq!(tool, "add");
                    let sum: i64 = arguments.values().filter_map(Value::as_i64).sum();
                    // The answer may take a while; the block waits for it.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    call.reply(Ok(HostReply::Mcp(json!(sum))));
                    answered += 1;
                }
            }
            }
        };
        assert_eq!(outcome.output, "5\n30\n");
        assert_eq!(answered, 2);
        sup.shutdown().await;
    });
    }
);

vistest!(
    an_interrupt_before_the_block_starts_means_it_does_not_run,
    |env| {
        let mut rt = env.runtime();
        // The interrupt comes while no worker exists yet: it is kept for this block, which is
        // stopped before it reaches the worker.
        rt.interrupter().interrupt();
        let out = rt
            .exec(env.block("open('ran.txt', 'w').write('x')"), &mut Echo)
            .unwrap();
        assert_eq!(out.status, Status::Interrupted);
        assert!(!out.ran);
        assert!(out.output.contains("did not run"), "{}", out.output);
        assert!(!env.workspace().join("ran.txt").exists());
        // The worker started normally (no crash, no safe mode) and runs the next block.
        let next = rt.exec(env.block("print('fine')"), &mut Echo).unwrap();
        assert_eq!(next.status, Status::Ok);
        assert_eq!(next.output, "fine\n");
    }
);

vistest!(
    interrupts_that_race_the_start_of_a_block_are_never_lost,
    |env| {
        let events = events();
        events.block_on(async {
            let mut sup = supervisor(&env);
            sup.start().await.unwrap();
            let pid = sup.worker_pid();
            for i in 0..15u64 {
                let stop = CancellationToken::new();
                let trigger = stop.clone();
                // From immediately to a few ms after the block was sent: before, during and after
                // the worker arms its handler.
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_micros(i * 300)).await;
                    trigger.cancel();
                });
                let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                let out = sup
                    .exec(env.block("import time\ntime.sleep(20)"), tx, stop)
                    .await
                    .unwrap();
                assert_eq!(out.status, Status::Interrupted, "round {i}: {}", out.output);
                assert!(out.worker_lost.is_none(), "round {i}: {}", out.output);
            }
            // One worker throughout: no interrupt killed it.
            assert_eq!(sup.worker_pid(), pid);
            sup.shutdown().await;
        });
    }
);

vistest!(the_worker_runs_in_its_own_pid_namespace, |env| {
    let mut rt = env.runtime();
    let out = rt
        .exec(env.block("import os\nos.getpid()"), &mut Echo)
        .unwrap();
    if rt.supervisor().isolation().pid_namespace {
        assert_eq!(out.output, "2\n");
    } else {
        // Kernels without user namespaces: the layer is reported missing, with the reason.
        assert!(!rt.supervisor().isolation().missing.is_empty());
    }
});

vistest!(
    killing_the_host_with_sigkill_ends_the_worker_and_all_it_started,
    |env| {
        // Every way a block can leave something running: a shell background job, a new
        // session, a double fork. The marker is the sleep length.
        let marker = "3141.5926";
        let code = format!(
            "import subprocess, time\nsh('sleep {marker} &')\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\nsubprocess.Popen(['sh', '-c', '(setsid sleep {marker} &) &'])\ntime.sleep(0.5)\nopen('ready', 'w').write('1')\ntime.sleep(600)"
        );
        let mut host = env
            .command(&["exec", "--session", "k", &code])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let ready = env.workspace().join("ready");
        assert!(crate::support::wait_until(Duration::from_secs(30), || {
            ready.exists()
        }));
        assert!(
            crate::support::wait_until(Duration::from_secs(5), || {
                crate::support::pids_with(marker).len() >= 3
            }),
            "{:?}",
            crate::support::pids_with(marker)
        );
        let ws = env.workspace();
        assert!(!crate::support::worker_pids_in(&ws).is_empty());
        host.kill().unwrap(); // SIGKILL
        host.wait().unwrap();
        let gone = crate::support::wait_until(Duration::from_secs(5), || {
            crate::support::pids_with(marker).is_empty()
                && crate::support::worker_pids_in(&ws).is_empty()
        });
        assert!(
            gone,
            "survivors: {:?} {:?}",
            crate::support::pids_with(marker),
            crate::support::worker_pids_in(&ws)
        );
    }
);

vistest!(a_worker_launched_early_is_the_one_that_starts, |env| {
    // `vis exec` launches the worker's process before it knows the session's settings.
    let events = events();
    events.block_on(async {
        let mut sup = supervisor(&env);
        let launched = vis::runtime::Launched::new(sup.options()).unwrap();
        let pid = launched.pid();
        sup.adopt(launched);
        sup.start().await.unwrap();
        assert_eq!(sup.worker_pid(), Some(pid));
        sup.shutdown().await;

        // One launched with another environment is not used (and not left behind).
        let mut other_opts = sup.options().clone();
        other_opts.env = vec!["VIS_TEST_OTHER".into()];
        let stale = vis::runtime::Launched::new(&other_opts).unwrap();
        let stale_pid = stale.pid();
        let mut sup = supervisor(&env);
        sup.adopt(stale);
        sup.start().await.unwrap();
        assert_ne!(sup.worker_pid(), Some(stale_pid));
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let out = sup
            .exec(env.block("1 + 1"), tx, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.output, "2\n");
        // Gone: killed when dropped (a zombie has an empty command line).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::fs::read(format!("/proc/{stale_pid}/cmdline")).is_ok_and(|c| !c.is_empty()) {
            assert!(
                std::time::Instant::now() < deadline,
                "{stale_pid} still runs"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        sup.shutdown().await;
    });
});
