//! The worker as a sandbox, tried as an attacker would (issue 10): every test reproduces one
//! attack through the real `vis` binary and checks that it fails. The text tools' own attacks
//! (symlink swaps, read-only files, concurrent appends, `..`) are in `text::attacks`; orphans
//! after a `kill -9` of the host in `supervisor`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{pids_with, vis_bin, wait_until, Run, TestEnv};
use crate::vistest;

/// `vis exec` in session `s` of `env` with extra environment and flags.
fn exec_with(env: &TestEnv, vars: &[(&str, &str)], flags: &[&str], code: &str) -> Run {
    let ws = env.workspace();
    let mut args = vec![
        "exec",
        "--session",
        "s",
        "--workspace",
        ws.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    args.push(code);
    let mut cmd = env.command(&args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap().into()
}

/// What the block printed, without the notes about restored definitions (a session's
/// imports are definitions too, restored by each new `vis exec` worker).
fn printed(run: &Run) -> String {
    run.stdout
        .lines()
        .filter(|l| !l.starts_with("[vis] new worker"))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn write_config(env: &TestEnv, toml: &str) {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(env.config_dir().join("config.toml"), toml).unwrap();
}

fn session_json(env: &TestEnv, session: &str) -> Value {
    let run = env.vis(&["sessions", "export", session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

// 1. Secrets through the parent.

vistest!(a_block_cannot_read_the_hosts_keys_by_any_path, |env| {
    let secrets = [
        ("OPENAI_API_KEY", "sk-secret-openai-1"),
        ("ANTHROPIC_API_KEY", "sk-secret-anthropic-2"),
        ("DATABASE_URL", "postgres://u:secret-pw-3@db.example/prod"),
        ("PGPASS", "secret-pgpass-4"),
        ("PGPASSWORD", "secret-pgpassword-5"),
        ("AWS_SECRET_ACCESS_KEY", "secret-aws-6"),
        ("GITHUB_TOKEN", "secret-gh-7"),
    ];
    let code = r#"
import os, re
found = []
for k, v in os.environ.items():
    if 'secret-' in v:
        found.append('environ:' + k)
def scan(path, limit=None):
    try:
        with open(path, 'rb') as f:
            data = f.read() if limit is None else f.read(limit)
    except OSError:
        return
    if b'secret-' in data:
        found.append(path)
pids = [p for p in os.listdir('/proc') if p.isdigit()]
for p in pids + ['self', str(os.getppid())]:
    scan('/proc/%s/environ' % p)
    scan('/proc/%s/cmdline' % p)
# The memory of every process this block can see, region by region.
for p in pids:
    if int(p) == os.getpid():
        continue
    try:
        maps = open('/proc/%s/maps' % p).read().splitlines()
        mem = open('/proc/%s/mem' % p, 'rb')
    except OSError:
        continue
    for line in maps:
        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
        if 'r' not in line.split()[1] or hi - lo > 64 << 20:
            continue
        try:
            mem.seek(lo)
            if b'secret-' in mem.read(hi - lo):
                found.append('/proc/%s/mem' % p)
                break
        except (OSError, OverflowError, ValueError):
            pass
print('ppid', os.getppid(), 'visible', sorted(int(p) for p in pids))
print('found', found)
"#;
    let run = exec_with(&env, &secrets, &[], code);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("found []"), "{}", run.stdout);
    // The worker sees only its own PID namespace: the host is not even visible.
    assert!(run.stdout.contains("ppid 1 "), "{}", run.stdout);
});

vistest!(
    ptrace_and_reading_other_processes_memory_are_refused,
    |env| {
        let code = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
r = libc.ptrace(16, 1, None, None)  # PTRACE_ATTACH to init
print('ptrace', r, os.strerror(ctypes.get_errno()))
class iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
buf = ctypes.create_string_buffer(16)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 16)
remote = iovec(0x400000, 16)
libc.process_vm_readv.restype = ctypes.c_ssize_t
r = libc.process_vm_readv(1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print('process_vm_readv', r, os.strerror(ctypes.get_errno()))
"#;
        let run = exec_with(&env, &[], &[], code);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("ptrace -1 Operation not permitted"),
            "{}",
            run.stdout
        );
        assert!(
            run.stdout
                .contains("process_vm_readv -1 Operation not permitted"),
            "{}",
            run.stdout
        );
    }
);

// 2. The standard library shadowed by the workspace.

vistest!(
    workspace_files_named_like_the_standard_library_never_run,
    |env| {
        let marker = env.path().join("shadow-ran");
        let names = [
            "logging",
            "signal",
            "json",
            "subprocess",
            "copy",
            "re",
            "typing",
            "asyncio",
            "socket",
            "threading",
            "traceback",
            "types",
            "enum",
            "functools",
            "io",
            "ast",
            "inspect",
            "tokenize",
            "dataclasses",
            "pathlib",
            "site",
            "sitecustomize",
            "usercustomize",
        ];
        for name in names {
            std::fs::write(
                env.workspace().join(format!("{name}.py")),
                format!(
                    "open({:?}, 'a').write('{name} ')\nraise SystemExit('shadowed {name}')\n",
                    marker.to_str().unwrap()
                ),
            )
            .unwrap();
        }
        std::fs::write(env.workspace().join("mine.py"), "VALUE = 42\n").unwrap();
        let code = "import json, logging, subprocess, copy, re\nprint(json.dumps([1]), re.sub('a', 'b', 'a'))\nimport mine\nprint(mine.VALUE)";
        for round in 0..2 {
            let run = exec_with(&env, &[], &[], code);
            assert_eq!(run.code, 0, "round {round}: {}{}", run.stdout, run.stderr);
            assert_eq!(printed(&run), "[1] b\n42\n", "round {round}");
            assert!(
                !marker.exists(),
                "ran: {}",
                std::fs::read_to_string(&marker).unwrap_or_default()
            );
        }
        // Untrusted, too.
        let untrusted = TestEnv::untrusted();
        for name in names {
            std::fs::copy(
                env.workspace().join(format!("{name}.py")),
                untrusted.workspace().join(format!("{name}.py")),
            )
            .unwrap();
        }
        let run = exec_with(&untrusted, &[], &[], "import json\nprint(json.dumps({}))");
        assert_eq!(run.stdout, "{}\n", "{}", run.stderr);
        assert!(!marker.exists());
    }
);

// 3. The host hangs forever.

vistest!(
    a_block_that_masks_signals_and_joins_the_hosts_group_is_still_stopped,
    |env| {
        let code = r#"
import os, signal
for s in range(1, signal.NSIG):
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError):
        pass
signal.pthread_sigmask(signal.SIG_BLOCK, range(1, signal.NSIG))
for target in (os.getppid(), 1):
    try:
        os.setpgid(0, os.getpgid(target))
    except OSError:
        pass
pid = os.fork()
if pid == 0:
    os.setsid()
while True:
    pass
"#;
        let mut child = env
            .command(&["exec", "--session", "h", "--timeout", "2", code])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Generous: the point is that it ends at all.
        let ended = wait_until(Duration::from_secs(90), || {
            child.try_wait().unwrap().is_some()
        });
        if !ended {
            child.kill().unwrap();
        }
        let out = child.wait_with_output().unwrap();
        assert!(ended, "vis exec never returned");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        assert!(stdout.contains("timeout"), "{stdout}");
        let ws = env.workspace().to_string_lossy().into_owned();
        assert!(wait_until(Duration::from_secs(10), || pids_with(&format!(
            "--workspace {ws}"
        ))
        .is_empty()));
    }
);

// 4. Orphans.

vistest!(nothing_a_block_starts_outlives_vis_exec, |env| {
    let marker = "2718.2818";
    let code = format!(
        "import subprocess, os\nsh('sleep {marker} &')\nsh('setsid sleep {marker} &')\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\nif os.fork() == 0:\n    if os.fork() == 0:\n        os.execvp('sleep', ['sleep', '{marker}'])\n    os._exit(0)\nos.wait()\nprint('started')"
    );
    let run = env.exec("o", &code);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("started"));
    assert!(
        wait_until(Duration::from_secs(10), || pids_with(marker).is_empty()),
        "survivors: {:?}",
        pids_with(marker)
    );
});

fn host_signal_ends_everything(env: &TestEnv, signal: i32) {
    let marker = format!("1414.{signal}");
    let code = format!(
        "import subprocess, time\nsh('sleep {marker} &')\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\nopen('ready', 'w').write('1')\ntime.sleep(600)"
    );
    let mut host = env
        .command(&["exec", "--session", "t", &code])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = env.workspace().join("ready");
    assert!(wait_until(Duration::from_secs(30), || ready.exists()));
    assert!(wait_until(Duration::from_secs(5), || pids_with(&marker)
        .len()
        >= 2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(host.id() as i32, signal) };
    host.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || pids_with(&marker).is_empty()),
        "signal {signal}: survivors {:?}",
        pids_with(&marker)
    );
    // The turn it left running is closed the next time the session opens.
    let run = env.exec("t", "print('next')");
    // A host that handled the signal in time interrupted the block and recorded it with the
    // imports it had made (the next worker then restores them and says so); one that was
    // killed first recorded nothing of it. Either way the next block runs.
    let (notes, rest): (Vec<&str>, Vec<&str>) = run
        .stdout
        .lines()
        .partition(|l| l.starts_with("[vis] new worker: restored"));
    assert!(
        rest == ["next"] && notes.len() <= 1,
        "signal {signal}: {}{}\nsession: {}",
        run.stdout,
        run.stderr,
        session_json(env, "t")
    );
    let json = session_json(env, "t");
    let statuses: Vec<&str> = json["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert!(!statuses.contains(&"running"), "{statuses:?}");
    std::fs::remove_file(&ready).unwrap();
}

vistest!(
    sigterm_sighup_or_sigkill_of_the_host_end_the_worker_and_its_children,
    |env| {
        for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGKILL] {
            host_signal_ends_everything(&env, signal);
        }
    }
);

// 5. Forged results.

/// Python that writes `frame` (bytes) to every pipe among the worker's descriptors.
const WRITE_TO_PROTOCOL_PIPES: &str = r#"
import os
hit = 0
for fd in map(int, os.listdir('/proc/self/fd')):
    if fd < 3:
        continue
    try:
        if not os.readlink('/proc/self/fd/%d' % fd).startswith('pipe:'):
            continue
        os.write(fd, frame)
        hit += 1
    except OSError:
        pass
"#;

vistest!(a_forged_result_frame_cannot_plant_definitions, |env| {
    let pwned = env.path().join("pwned");
    let evil = serde_json::json!({
        "name": "evil",
        "kind": "function",
        "source": format!("open({:?}, 'w').write('x')\ndef evil():\n    return 1\n", pwned.to_str().unwrap()),
        "signature": "evil()",
        "doc": "",
    });
    let mut frames = String::from("frame = b''\n");
    for id in 0..8 {
        // A complete, well-formed result: the host must still refuse what it plants.
        let msg = serde_json::json!({
            "type": "result", "id": id, "result": {
                "status": "ok", "output": "forged\n", "cut_chars": 0, "total_chars": 7,
                "artifact": null, "defs_set": [evil.clone()], "defs_deleted": ["helper"],
                "exec_micros": 1, "manifest": null,
            },
        });
        frames.push_str(&format!(
            "body = {:?}.encode()\nframe += len(body).to_bytes(4, 'little') + body\n",
            msg.to_string()
        ));
    }
    assert_eq!(env.exec("f", "def helper():\n    return 7").code, 0);
    // The planted source also appears verbatim in the block, in a string.
    let decoy = format!(
        "decoy = \"\"\"open({:?}, 'w').write('x')\ndef evil():\n    return 1\n\"\"\"\n",
        pwned.to_str().unwrap()
    );
    let code = format!("{decoy}{frames}{WRITE_TO_PROTOCOL_PIPES}\nprint('real', hit > 0)");
    env.exec("f", &code);
    let json = session_json(&env, "f");
    let defs: Vec<&str> = json["defs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    // The forged result may end the block early (no more than printing and exiting could do),
    // and may drop `helper` (as `del helper` could), but plants nothing that is not this
    // block's own code.
    assert!(defs.iter().all(|d| *d == "helper"), "{json}");
    // The block's own code is in the history, whatever it wrote.
    let iterations = json["iterations"].as_array().unwrap();
    assert!(iterations
        .iter()
        .any(|i| i["code"].as_str().unwrap().contains("os.write(fd, frame)")));
    let run = env.exec("f", "print('evil' in globals())");
    assert_eq!(run.stdout.lines().last(), Some("False"), "{}", run.stdout);
    assert!(!pwned.exists(), "the planted code ran");
});

vistest!(
    a_forged_result_cannot_claim_a_status_only_the_host_decides,
    |env| {
        for claimed in ["timeout", "crashed"] {
            let mut frames = String::from("frame = b''\n");
            for id in 0..8 {
                let msg = serde_json::json!({
                    "type": "result", "id": id, "result": {
                        "status": claimed, "output": "", "cut_chars": 0, "total_chars": 0,
                        "artifact": null, "defs_set": [], "defs_deleted": [], "exec_micros": 1,
                        "manifest": null,
                    },
                });
                frames.push_str(&format!(
                    "body = {:?}.encode()\nframe += len(body).to_bytes(4, 'little') + body\n",
                    msg.to_string()
                ));
            }
            let code = format!("{frames}{WRITE_TO_PROTOCOL_PIPES}\nimport time\ntime.sleep(1)");
            let run = env.exec("claim", &code);
            assert_eq!(run.code, 1, "{claimed}: {}{}", run.stdout, run.stderr);
            assert!(
                run.stdout.contains("[vis] crashed")
                    && run
                        .stdout
                        .contains(&format!("status `{claimed}`, which only the host decides")),
                "{claimed}: {}",
                run.stdout
            );
            let json = session_json(&env, "claim");
            let last = json["iterations"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(last["status"], "crashed", "{claimed}: {last}");
        }
    }
);

vistest!(garbage_on_the_protocol_pipe_kills_only_the_worker, |env| {
    for (what, frame) in [
        ("huge header", "b'\\xff\\xff\\xff\\xff' + b'x' * 100"),
        ("not json", "(7).to_bytes(4, 'little') + b'\\x1b]52;c;'"),
        (
            "wrong message",
            "(14).to_bytes(4, 'little') + b'{\"type\":\"no\"}'",
        ),
    ] {
        let code = format!(
            "frame = {frame}\n{WRITE_TO_PROTOCOL_PIPES}\nimport time\ntime.sleep(1)\nprint('after')"
        );
        let run = env.exec("g", &code);
        assert_eq!(run.code, 1, "{what}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("[vis] crashed") && run.stdout.contains("protocol"),
            "{what}: {}",
            run.stdout
        );
        assert!(!run.stdout.contains('\u{1b}'), "{what}: {:?}", run.stdout);
        let json = session_json(&env, "g");
        let last = json["iterations"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["status"], "crashed", "{what}: {last}");
        assert!(last["code"].as_str().unwrap().contains(frame), "{what}");
        assert_eq!(env.exec("g", "print(1 + 1)").stdout, "2\n", "{what}");
    }
});

// 6. Terminal escapes.

vistest!(
    control_characters_reach_a_terminal_escaped_and_the_store_raw,
    |env| {
        let code = "import sys\nsys.stdout.write('A\\x1b]52;c;aGk=\\x07B\\x1b]0;title\\x07C\\x1b[2J\\x1b[6n\\x9bD\\rE\\n')";
        let ws = env.workspace();
        let pane = crate::support::tmux::Tmux::start(
            &ws,
            &[
                ("VIS_HOME", env.path().join("home").to_string_lossy().into()),
                ("VIS_CONFIG_DIR", env.config_dir().to_string_lossy().into()),
            ],
            &vis_bin(),
            &[
                "--db".into(),
                env.db().to_string_lossy().into(),
                "exec".into(),
                "--session".into(),
                "e".into(),
                code.into(),
            ],
        );
        assert_eq!(pane.wait_exit(), 0);
        let screen = pane.screen();
        assert!(
            screen
                .contains("A\\x1b]52;c;aGk=\\x07B\\x1b]0;title\\x07C\\x1b[2J\\x1b[6n\\x9bD\\x0dE"),
            "{screen}"
        );
        drop(pane);
        // `vis sessions show` escapes too; `--json` keeps the raw bytes.
        let pane = crate::support::tmux::Tmux::start(
            &ws,
            &[("VIS_HOME", env.path().join("home").to_string_lossy().into())],
            &vis_bin(),
            &[
                "--db".into(),
                env.db().to_string_lossy().into(),
                "sessions".into(),
                "show".into(),
                "e".into(),
            ],
        );
        assert_eq!(pane.wait_exit(), 0);
        assert!(
            pane.screen().contains("A\\x1b]52;c;aGk=\\x07B"),
            "{}",
            pane.screen()
        );
        let shown = env.vis(&["sessions", "show", "e"]);
        assert!(!shown.stdout.contains('\u{1b}'), "{}", shown.stdout);
        let json = session_json(&env, "e");
        let output = json["iterations"][0]["output"].as_str().unwrap();
        assert!(output.starts_with("A\u{1b}]52;c;aGk=\u{7}B"), "{output:?}");
    }
);

// 8. Resources and store.

vistest!(artifacts_stop_at_the_sessions_quota_with_a_marker, |env| {
    write_config(&env, "[sandbox]\nartifact_quota_mb = 1\n");
    let run = env.exec("q", "print('x' * 3_000_000)");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("quota"),
        "{}",
        &run.stdout[run.stdout.len() - 600..]
    );
    let dir = env.path().join("artifacts");
    let used: u64 = walk_size(&env.path().join("home")) + walk_size(&dir);
    assert!(used < 2 * 1024 * 1024, "artifacts take {used} bytes");
});

fn walk_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                walk_size(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

vistest!(numeric_flags_out_of_range_are_usage_errors, |env| {
    for flags in [
        &["--timeout", "1e300"][..],
        &["--timeout", "nan"],
        &["--timeout=-1"],
        &["--timeout", "0"],
        &["--output-limit", "99999999999999999999999"],
        &["--memory-limit=-5"],
    ] {
        let run = exec_with(&env, &[], flags, "print(1)");
        assert_eq!(run.code, 2, "{flags:?}: {}{}", run.stdout, run.stderr);
        assert!(
            !run.stderr.contains("panicked"),
            "{flags:?}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains(flags[0].split('=').next().unwrap()),
            "{flags:?}: {}",
            run.stderr
        );
    }
    assert!(!env.db().exists() || session_json_opt(&env, "s").is_none());
});

fn session_json_opt(env: &TestEnv, session: &str) -> Option<Value> {
    let run = env.vis(&["sessions", "export", session]);
    (run.code == 0).then(|| serde_json::from_str(&run.stdout).unwrap())
}

vistest!(an_empty_database_file_is_refused_and_kept, |env| {
    std::fs::write(env.db(), b"").unwrap();
    let run = env.exec("z", "print(1)");
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("empty file (0 bytes)"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::metadata(env.db()).unwrap().len(), 0);
    // A database that does not exist yet is simply created.
    let fresh = TestEnv::new();
    assert_eq!(fresh.exec("z", "print(1)").stdout, "1\n");
});

/// Runs the shell `script` in a private mount namespace (so it may mount a small tmpfs), with
/// the vis binary as `$0` and `block` as `$1`; returns its stdout and stderr.
fn in_private_mounts(env: &TestEnv, script: &str, block: &str) -> (String, String) {
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", script])
        .arg(vis_bin())
        .arg(block)
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

vistest!(a_disk_that_fills_during_a_block_keeps_its_output, |env| {
    // A 3 MiB disk of its own (a tmpfs in a private mount namespace) holds the workspace and
    // the database; the block fills it.
    let disk = env.path().join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=3m tmpfs {d} && mkdir {d}/ws && \"$0\" --db {d}/v.db exec --session d --workspace {d}/ws 'print(1)' && \"$0\" --db {d}/v.db exec --session d \"$1\"; echo \"rc=$?\"; rm -f {d}/ws/fill; \"$0\" --db {d}/v.db exec --session d 'print(\"again\")'",
        d = disk.display()
    );
    let block = "f = open('fill', 'wb')\ntry:\n    while True:\n        f.write(b'x' * 65536)\n        f.flush()\nexcept OSError as e:\n    print('disk full:', e.strerror)";
    let (stdout, stderr) = in_private_mounts(&env, &script, block);
    assert!(
        stdout.contains("disk full: No space left on device"),
        "{stdout}{stderr}"
    );
    // Recording the iteration needs no new space when the store's log was checkpointed while
    // the worker started (the log is then rewritten from its start); if it does need space,
    // the failure is reported as such, after the output.
    assert!(
        stdout.contains("rc=0")
            || (stdout.contains("rc=1")
                && stderr.contains("the block ran, but recording it failed")),
        "{stdout}{stderr}"
    );
    assert!(stdout.ends_with("again\n"), "{stdout}{stderr}");
});

vistest!(
    a_store_that_fails_after_the_block_ran_still_shows_its_output,
    |env| {
        // A 3 MiB disk of its own (a tmpfs in a private mount namespace) holds the workspace and
        // the database. The block fills it and then prints more than the store's log can take in
        // the space it already has: the output is printed, the failure to record it is said as
        // such, the exit status is not the block's, and the session goes on once there is room.
        let disk = env.path().join("disk");
        std::fs::create_dir_all(&disk).unwrap();
        let script = format!(
        "mount -t tmpfs -o size=3m tmpfs {d} && mkdir {d}/ws && \"$0\" --db {d}/v.db exec --session r --workspace {d}/ws 'print(1)' >/dev/null && \"$0\" --db {d}/v.db exec --output-limit 1000000 --session r \"$1\" > {o}; echo \"rc=$?\"; tail -c 20 {o}; rm -f {d}/ws/fill; \"$0\" --db {d}/v.db exec --session r 'print(\"again\")'",
        d = disk.display(),
        o = env.path().join("out.txt").display()
    );
        let block = "f = open('fill', 'wb')\ntry:\n    while True:\n        f.write(b'x' * 65536)\n        f.flush()\nexcept OSError as e:\n    pass\nprint('y' * 600000)\nprint('ran to the end')";
        let (stdout, stderr) = in_private_mounts(&env, &script, block);
        assert!(stdout.contains("rc=1\n"), "{stdout}{stderr}");
        assert!(stdout.contains("yyy\nran to the end\n"), "{stdout}{stderr}");
        assert!(
            stderr.contains("the block ran, but recording it failed"),
            "{stderr}"
        );
        assert!(stdout.ends_with("again\n"), "{stdout}{stderr}");
    }
);

// 9. Writes into the user's repository.

vistest!(
    a_relative_db_path_never_puts_artifacts_in_the_workspace,
    |env| {
        let run: Run = Command::new(vis_bin())
            .args([
                "--db",
                "rel.db",
                "exec",
                "--session",
                "r",
                "--workspace",
                "workspace",
            ])
            .arg("print('y' * 100000)")
            .env("VIS_HOME", env.path().join("home"))
            .env("VIS_CONFIG_DIR", env.config_dir())
            .current_dir(env.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
            .into();
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.contains("full output: "),
            "{}",
            &run.stdout[..200]
        );
        assert!(env.path().join("rel.db").exists());
        let in_ws: Vec<_> = std::fs::read_dir(env.workspace())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(in_ws.is_empty(), "{in_ws:?}");
    }
);

// 11. Code from a cloned repository runs only after the user trusts it.

fn plant_workspace_code(env: &TestEnv, marker: &Path) {
    let ext = env.workspace().join(".vis/extensions");
    std::fs::create_dir_all(&ext).unwrap();
    std::fs::write(
        ext.join("evil.py"),
        format!(
            "open({:?}, 'a').write('extension ')\nfrom vis.extension import register\n@register\ndef helper():\n    '''A helper.'''\n    return 1\n",
            marker.to_str().unwrap()
        ),
    )
    .unwrap();
    let venv = env.workspace().join(".venv");
    let site = venv.join("lib/python3.11/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    std::fs::write(
        site.join("evil.pth"),
        format!(
            "import os; open({:?}, 'a').write('pth ')\n",
            marker.to_str().unwrap()
        ),
    )
    .unwrap();
    std::fs::write(site.join("plainpkg.py"), "X = 5\n").unwrap();
}

#[test]
fn an_untrusted_workspace_runs_none_of_its_code_until_trusted() {
    let env = TestEnv::untrusted();
    // In the workspace: the only place (beside its own) a worker may write.
    let marker = env.workspace().join("workspace-code-ran");
    plant_workspace_code(&env, &marker);
    let run = env.exec("u", "import plainpkg\nprint(plainpkg.X)");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains('5'), "{}", run.stdout);
    assert!(
        !marker.exists(),
        "ran: {:?}",
        std::fs::read_to_string(&marker)
    );
    let told = format!("{}{}", run.stdout, run.stderr);
    assert!(
        told.contains("not trusted") && told.contains("vis trust"),
        "{told}"
    );
    let catalog = env.vis(&["catalog"]);
    assert!(!marker.exists(), "vis catalog ran it: {}", catalog.stdout);

    let ws = env.workspace();
    let trusted = env.vis(&["trust", ws.to_str().unwrap()]);
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    let run = env.exec("u", "print(evil.helper())");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let ran = std::fs::read_to_string(&marker).unwrap();
    assert!(ran.contains("extension") && ran.contains("pth"), "{ran}");
}

// The OS layers.

vistest!(writes_outside_the_workspace_are_refused, |env| {
    // Not under `/tmp`, which is the worker's own.
    let outside = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "outside-{}-{}.txt",
        std::process::id(),
        env.path().file_name().unwrap().to_string_lossy()
    ));
    let code = format!(
        "import os\nopen('inside.txt', 'w').write('ok')\nopen('/tmp/vis-scratch-{pid}', 'w').write('ok')\nos.remove('/tmp/vis-scratch-{pid}')\nfor p in [{outside:?}, '/etc/vis-test-owned', os.path.expanduser('~/.bashrc-vis')]:\n    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n    except OSError as e:\n        print('refused', e.strerror)",
        pid = std::process::id(),
        outside = outside.to_str().unwrap()
    );
    let run = env.exec("w", &code);
    assert_eq!(
        run.stdout,
        "refused Read-only file system\n".repeat(3),
        "{}",
        run.stderr
    );
    assert!(!outside.exists());
    assert!(env.workspace().join("inside.txt").exists());
});

vistest!(
    read_only_mode_refuses_workspace_writes_but_keeps_scratch,
    |env| {
        let code = "import os, tempfile\ntry:\n    open('f.txt', 'w')\n    print('wrote')\nexcept OSError as e:\n    print('refused', e.strerror)\nwith tempfile.NamedTemporaryFile() as t:\n    t.write(b'scratch')\nprint('tmp ok', os.listdir('.'))";
        let run = exec_with(&env, &[], &["--sandbox", "read-only"], code);
        assert_eq!(
            run.stdout, "refused Read-only file system\ntmp ok []\n",
            "{}",
            run.stderr
        );
        assert!(!env.workspace().join("f.txt").exists());
    }
);

vistest!(the_network_is_off_by_default_with_a_hint, |env| {
    let code = "import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=5)";
    let run = env.exec("n", code);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("[vis] the network is off in this sandbox"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("--network"), "{}", run.stdout);
    // Loopback still works (servers a block starts for itself).
    let code = "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nc = socket.create_connection(s.getsockname())\nprint('loopback ok')";
    assert_eq!(printed(&env.exec("n", code)), "loopback ok\n");
    // Switched on, there is no hint and no network namespace.
    let run = exec_with(
        &env,
        &[],
        &["--network"],
        "print(session['sandbox']['network_off'])",
    );
    assert_eq!(printed(&run), "False\n", "{}", run.stderr);
});

vistest!(
    the_session_and_vis_sandbox_status_say_which_layers_are_in_force,
    |env| {
        let run = env.exec("l", "import json\nprint(json.dumps(session['sandbox']))");
        assert_eq!(run.code, 0, "{}", run.stderr);
        let layers: Value = serde_json::from_str(run.stdout.trim()).unwrap();
        for layer in [
            "pid_namespace",
            "mount_namespace",
            "private_proc",
            "network_off",
            "seccomp",
            "rlimits",
        ] {
            assert_eq!(layers[layer], true, "{layer}: {layers}");
        }
        assert_eq!(layers["landlock"], "full", "{layers}");
        assert_eq!(layers["missing"], serde_json::json!([]), "{layers}");
        let status = env.vis(&["sandbox", "status"]);
        assert_eq!(status.code, 0, "{}", status.stderr);
        assert!(
            status.stdout.contains("mode workspace-write, network off"),
            "{}",
            status.stdout
        );
        assert!(
            status.stdout.contains("seccomp           yes"),
            "{}",
            status.stdout
        );
        // With the sandbox off, every layer is reported missing, and `require` refuses.
        let off = exec_with(
            &env,
            &[],
            &["--sandbox", "off"],
            "print(session['sandbox']['missing'], session['sandbox']['seccomp'])",
        );
        assert_eq!(off.code, 0, "{}", off.stderr);
        assert!(
            off.stdout.contains("sandbox off") && off.stdout.contains("False"),
            "{}",
            off.stdout
        );
        write_config(&env, "[sandbox]\nrequire = true\n");
        let required = env.exec("l", "print('runs')");
        assert_eq!(
            printed(&required),
            "runs\n",
            "every layer is in force here: {}",
            required.stderr
        );
        let refused = exec_with(&env, &[], &["--sandbox", "off"], "print('runs')");
        assert_eq!(refused.code, 2, "{}", refused.stdout);
        assert!(refused.stderr.contains("require"), "{}", refused.stderr);
    }
);

vistest!(the_mode_off_refuses_a_network_it_cannot_switch_off, |env| {
    write_config(&env, "[sandbox]\nnetwork = false\n");
    let run = exec_with(&env, &[], &["--sandbox", "off"], "open('ran', 'w')");
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("no network namespace") && run.stderr.contains("network = false"),
        "{}",
        run.stderr
    );
    // Nothing ran and nothing was recorded.
    assert!(!env.workspace().join("ran").exists());
    assert!(!env.db().exists() || session_json_opt(&env, "s").is_none());
});

vistest!(an_unknown_sandbox_mode_is_a_clear_error, |env| {
    let run = exec_with(&env, &[], &["--sandbox", "open-sesame"], "print(1)");
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unknown sandbox mode 'open-sesame'"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("workspace-write"), "{}", run.stderr);
});

/// As an unprivileged user the worker gets a user namespace too, and the same walls.
#[test]
fn an_unprivileged_user_gets_every_layer() {
    let env = TestEnv::new();
    let top = env.path();
    // nobody must reach its world: the temp dir is root's.
    for dir in [
        top.to_path_buf(),
        env.workspace(),
        top.join("home"),
        top.join("config"),
    ] {
        std::fs::create_dir_all(&dir).unwrap();
        Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&dir)
            .status()
            .unwrap();
    }
    let ws = env.workspace();
    let code = "import json, os\nprint(os.getuid(), json.dumps(session['sandbox']))\ntry:\n    open('/tmp/../etc/vis-nobody', 'w')\nexcept OSError:\n    print('refused')";
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(vis_bin())
        .arg("--db")
        .arg(env.db())
        .args([
            "exec",
            "--session",
            "n",
            "--workspace",
            ws.to_str().unwrap(),
            code,
        ])
        .env("VIS_HOME", top.join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .env("HOME", top.join("home"))
        .current_dir(&ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let first = lines.next().unwrap();
    let (uid, json) = first.split_once(' ').unwrap();
    assert_eq!(
        uid, "65534",
        "files keep their owner: only the user's own uid is mapped"
    );
    let layers: Value = serde_json::from_str(json).unwrap();
    assert_eq!(layers["user_namespace"], true, "{layers}");
    assert_eq!(layers["pid_namespace"], true, "{layers}");
    assert_eq!(layers["seccomp"], true, "{layers}");
    assert_eq!(lines.next(), Some("refused"));
}
