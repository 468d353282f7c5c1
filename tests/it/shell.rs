//! `sh()`: shell commands from a block.

use std::time::{Duration, Instant};

use vis::protocol::Status;

use crate::support::{pids_with, run, wait_until};
use crate::vistest;

vistest!(sh_returns_exit_code_and_interleaved_output, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "r = sh('echo out; echo err >&2; exit 3')\nprint(r.code, r.ok)\nr",
    );
    assert_eq!(out.output, "3 False\n[exit 3]\nout\nerr\n");
    let out = run(&env, &mut rt, "sh('pwd').output.strip()");
    assert_eq!(out.output, format!("'{}'\n", env.workspace().display()));
});

vistest!(sh_timeout_kills_the_whole_process_group, |env| {
    let mut rt = env.runtime();
    let marker = env.path().join("survived");
    let code = format!(
        "r = sh('(sleep 2; touch {}) & sleep 30', timeout=0.5)\nprint(r.timed_out, r.code)\nr",
        marker.display()
    );
    let started = Instant::now();
    let out = run(&env, &mut rt, &code);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        out.output.starts_with("True None\n[killed: timeout after"),
        "{}",
        out.output
    );
    // The backgrounded subshell carries the marker in its command line: once no process does,
    // nothing is left that could create it.
    assert!(
        wait_until(Duration::from_secs(10), || pids_with(
            &marker.display().to_string()
        )
        .is_empty()),
        "a background child outlived the timeout: {:?}",
        pids_with(&marker.display().to_string())
    );
    assert!(!marker.exists(), "a background child outlived the timeout");
});

vistest!(sh_output_is_capped_with_an_artifact, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "r = sh('seq 1 100000')\nprint(len(r.output) < 21000)\nr.output[-30:]",
    );
    assert!(out.output.starts_with("True\n"), "{}", out.output);
    assert!(out.output.contains("99999\\n100000\\n"), "{}", out.output);
    let out = run(&env, &mut rt, "import re\npath = re.search(r'full output: (\\S+) ', r.output).group(1)\nlen(Path(path).read_text().splitlines())");
    assert_eq!(out.output, "100000\n");
});

vistest!(sh_rejects_bad_arguments_clearly, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "sh('')");
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output
            .contains("ValueError: sh() needs a non-empty command string"),
        "{}",
        out.output
    );
    let out = run(&env, &mut rt, "sh('true', timeout=0)");
    assert!(
        out.output.contains("timeout must be a positive number"),
        "{}",
        out.output
    );
});

vistest!(sh_is_interrupted_with_the_block, |env| {
    let mut rt = env.runtime();
    let started = Instant::now();
    let out = rt
        .exec(
            env.block_with_timeout("sh('sleep 30')", Duration::from_millis(400)),
            &mut vis::runtime::NoHostCalls,
        )
        .unwrap();
    assert_eq!(out.status, Status::Timeout);
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(out.worker_lost.is_none(), "{}", out.output);
});
