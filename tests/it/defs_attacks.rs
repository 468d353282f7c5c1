//! What a worker reports can never add code (issue 21 §2): definitions forged in a result
//! frame, code hidden after a carriage return, a restored definition poisoning the code cache
//! another session loads, a trusted workspace's code filling the cache other workspaces read,
//! oversized definitions, and stored definitions that break, hang or kill a restore.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use vis::protocol::{PersistedDef, Status};

use crate::support::{run, Run, TestEnv};
use crate::vistest;

/// Python that writes `messages` as protocol frames to every pipe the process holds (a block
/// can find the worker's pipes in /proc/self/fd); it leaves the number of pipes written in
/// `hit`.
fn forge(messages: &[Value]) -> String {
    let mut code = String::from("frame = b''\n");
    for msg in messages {
        code.push_str(&format!(
            "body = {:?}.encode()\nframe += len(body).to_bytes(4, 'little') + body\n",
            msg.to_string()
        ));
    }
    code.push_str(
        "import os\nhit = 0\nfor fd in map(int, os.listdir('/proc/self/fd')):\n    if fd < 3:\n        continue\n    try:\n        if os.readlink('/proc/self/fd/%d' % fd).startswith('pipe:'):\n            os.write(fd, frame)\n            hit += 1\n    except OSError:\n        pass\n",
    );
    code
}

/// A result for blocks 0..8 (whichever runs) whose `defs_set` is `defs`.
fn forged_results(defs: &[Value]) -> Vec<Value> {
    (0..8)
        .map(|id| {
            json!({"type": "result", "id": id, "result": {
                "status": "ok", "output": "forged\n", "cut_chars": 0, "total_chars": 7,
                "artifact": null, "defs_set": defs, "defs_deleted": [], "exec_micros": 1,
                "manifest": null,
            }})
        })
        .collect()
}

/// The session's stored definitions as `vis sessions export` shows them.
fn stored_defs(env: &TestEnv, session: &str) -> Vec<Value> {
    let run = env.vis(&["sessions", "export", session]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json: Value = serde_json::from_str(&run.stdout).unwrap();
    json["defs"].as_array().unwrap().clone()
}

fn names(defs: &[Value]) -> Vec<&str> {
    defs.iter().map(|d| d["name"].as_str().unwrap()).collect()
}

/// `vis exec --session S --workspace W CODE` in a workspace other than the env's own.
fn exec_in(env: &TestEnv, workspace: &Path, session: &str, code: &str) -> Run {
    env.vis(&[
        "exec",
        "--session",
        session,
        "--workspace",
        workspace.to_str().unwrap(),
        code,
    ])
}

fn def(name: &str, kind: &str, source: &str) -> PersistedDef {
    PersistedDef {
        name: name.into(),
        kind: kind.into(),
        source: source.into(),
        signature: format!("def {name}()"),
        doc: String::new(),
    }
}

vistest!(code_hidden_after_a_carriage_return_is_never_kept, |env| {
    let pwned = env.path().join("pwned");
    let planted = format!("open({:?}, 'w').write('x')", pwned.to_str().unwrap());
    // What each claim passed before: an import checked only for `\n` and `;`.
    let claims: Vec<Value> = [
        ("os", format!("import os\r{planted}")),
        ("sys", format!("import sys\r\n{planted}")),
        ("json", format!("import json\x0c\n{planted}")),
        ("re", format!("import re \\\n;{planted}")),
    ]
    .iter()
    .map(|(name, source)| {
        json!({"name": name, "kind": "import", "source": source, "signature": name, "doc": ""})
    })
    .collect();
    let code = format!(
        "import os, sys, json, re\n{}\nprint('real', hit > 0)",
        forge(&forged_results(&claims))
    );
    let forged = env.exec("s", &code);
    assert!(
        forged
            .stdout
            .contains("[vis] ignored 4 definition(s) the worker reported that are not code of this block; they are not kept"),
        "{}{}",
        forged.stdout,
        forged.stderr
    );
    assert!(stored_defs(&env, "s").is_empty());
    // A new worker (the next process) restores nothing, and the planted code never runs.
    let next = env.exec("s", "print(sorted(d['name'] for d in defs()))");
    assert_eq!(next.stdout, "[]\n", "{}", next.stderr);
    assert!(!pwned.exists(), "the planted code ran");
});

vistest!(
    blocks_written_with_carriage_returns_keep_their_definitions,
    |env| {
        let first = env.exec(
            "s",
            "import os\rdef sep():\r    return os.sep\r\nclass Box:\r\n    size = 2\r",
        );
        assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
        assert_eq!(first.stdout, "");
        let defs = stored_defs(&env, "s");
        let sources: Vec<(&str, &str)> = defs
            .iter()
            .map(|d| (d["name"].as_str().unwrap(), d["source"].as_str().unwrap()))
            .collect();
        assert_eq!(
            sources,
            [
                ("os", "import os\n"),
                ("sep", "def sep():\n    return os.sep\n"),
                ("Box", "class Box:\n    size = 2\n"),
            ]
        );
        let next = env.exec("s", "print(sep(), Box.size)");
        assert_eq!(
            next.stdout,
            "[vis] new worker: restored 3 definitions: os, sep, Box\n/ 2\n"
        );
    }
);

// Blocks laid out every way Python allows: each definition the worker reports must be one
// the host cuts out the same (a mismatch shows as an `ignored` or `not kept` line), and each
// comes back in a new worker.
vistest!(the_host_reads_top_level_statements_as_python_does, |env| {
    let blocks = [
        // Decorators with blank lines and comments between; trailing comments; a `;` at the
        // end of a body; a one-line class.
        "import functools\n@functools.lru_cache\n\n# between\n@functools.wraps(len)\ndef a(x):  # why\n    return x;\n  # trailing\n\nclass B: pass;\n",
        // Form feeds, a backslash continuation, tabs, a `;`-separated line.
        "\x0cdef c(\n        x,\n):\n\treturn x \\\n\t\t+ 1\nimport re; P = re.compile(r'\\d+')\ndef d():\n    return P.pattern\n",
        // Strings and f-strings that hold what looks like code; a nested def is not kept.
        "def e():\n    s = '''\ndef hidden():\n    pass'''\n    return f\"{s!r:>{len(s)}}\" + 'import os; x'\nif True:\n    def nested(): pass\n",
        // Every import form, async defs, a constant with an annotation, unicode names.
        "from os import path as p, sep\nfrom json import (\n    dumps,\n    loads as ld,\n)\nimport os.path\nLIMIT: int | None = 3\nasync def f():\n    return LIMIT, p, sep, dumps, ld, os\ndef ｇ():\n    return 'g'\n",
    ];
    for (i, block) in blocks.iter().enumerate() {
        let out = env.exec("s", block);
        assert_eq!(out.code, 0, "block {i}: {}{}", out.stdout, out.stderr);
        assert!(
            !out.stdout.contains("ignored") && !out.stdout.contains("not kept"),
            "block {i}: {}",
            out.stdout
        );
    }
    let kept = stored_defs(&env, "s");
    let mut kept_names = names(&kept);
    kept_names.sort();
    assert_eq!(
        kept_names,
        [
            "B",
            "LIMIT",
            "P",
            "a",
            "c",
            "d",
            "dumps",
            "e",
            "f",
            "functools",
            "g",
            "ld",
            "os",
            "p",
            "re",
            "sep"
        ]
    );
    let source = |name: &str| {
        kept.iter()
            .find(|d| d["name"] == name)
            .map(|d| d["source"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(
        source("a"),
        "@functools.lru_cache\n\n# between\n@functools.wraps(len)\ndef a(x):  # why\n    return x;\n"
    );
    assert_eq!(source("ld"), "from json import loads as ld\n");
    assert_eq!(source("os"), "import os.path\n");
    let next = env.exec(
        "s",
        "import asyncio\nprint(a(1), B, c(1), d(), e(), asyncio.run(f())[0], g())",
    );
    assert_eq!(next.code, 0, "{}{}", next.stdout, next.stderr);
    assert!(
        next.stdout
            .starts_with("[vis] new worker: restored 16 definitions: "),
        "{}",
        next.stdout
    );
    assert!(!next.stdout.contains("failed"), "{}", next.stdout);
});

/// The restore cache file of a session in `workspace` whose only definition is
/// `def f(): return 1` (relative to its workers' cache directory).
fn cache_file_of_f(workspace: &Path) -> String {
    vis::runtime::cache::restore_path(
        Some(workspace.to_str().unwrap()),
        &[def("f", "function", "def f():\n    return 1\n")],
    )
}

/// Session `session` in `workspace` defines `def f(): return 1` and restores it once, so its
/// code cache exists under `cache_dir`: returns the file and its content.
fn victim(env: &TestEnv, workspace: &Path, session: &str, cache_dir: &Path) -> (PathBuf, String) {
    assert_eq!(
        exec_in(env, workspace, session, "def f():\n    return 1").code,
        0
    );
    let run = exec_in(env, workspace, session, "print(f())");
    assert_eq!(run.stdout.lines().last(), Some("1"), "{}", run.stdout);
    let file = cache_dir.join(cache_file_of_f(workspace));
    let content = std::fs::read_to_string(&file).unwrap();
    (file, content)
}

/// Python that hands the host, for each of `paths`, a cache file that makes `f` return 41:
/// through `vis._extensions`' cache writes and, with `frames`, in every message that ever
/// carried one.
fn poison(paths: &[String], frames: bool) -> String {
    let code = format!(
        r#"import binascii, json, marshal
from importlib.util import MAGIC_NUMBER
from vis._extensions.registry import registry
code = binascii.b2a_base64(marshal.dumps(compile("def f():\n    return 41\n", "<def f>", "exec")), newline=False).decode()
content = {{"version": 2, "magic": MAGIC_NUMBER.hex(), "defs": [["f", "function", "def f():\n    return 1\n", code]]}}
# A loop, not a comprehension: this also runs as a class body.
writes = []
for path in {paths:?}:
    writes.append({{"path": path, "content": content}})
registry.cache_writes.extend(writes)
frames = [
    {{"type": "compiled", "magic": MAGIC_NUMBER.hex(), "code": [code]}},
    {{"type": "restored", "ok": [], "failed": [], "unkept": [], "cache_writes": writes}},
]
import os
for msg in frames:
    body = json.dumps(msg).encode()
    for fd in map(int, os.listdir('/proc/self/fd')):
        try:
            if fd > 2 and os.readlink('/proc/self/fd/%d' % fd).startswith('pipe:'):
                os.write(fd, len(body).to_bytes(4, 'little') + body)
        except OSError:
            pass
"#
    );
    if frames {
        code
    } else {
        code.split("frames = [").next().unwrap().to_string()
    }
}

#[test]
fn a_restored_definition_cannot_poison_the_code_cache_of_another_session() {
    let env = TestEnv::untrusted();
    let ws = env.workspace();
    // Two sessions of one workspace share its workers' cache directory.
    let dir = vis::runtime::cache::workspace_dir(&env.cache_dir(), &ws, false);
    let (file, before) = victim(&env, &ws, "v", &dir);
    // The attacker's class body runs at every restore of its own session, and hands the host
    // the victim's cache file in every way it could; the `compiled` it forges would also make
    // the attacker's own cached `Poison` define `f` instead.
    let body: String = poison(&[cache_file_of_f(&ws)], true)
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let attack = env.exec("a", &format!("class Poison:\n{body}"));
    assert_eq!(attack.code, 0, "{}{}", attack.stdout, attack.stderr);
    let restored = env.exec("a", "print('Poison' in globals())");
    assert_eq!(
        restored.stdout.lines().last(),
        Some("True"),
        "{}",
        restored.stdout
    );
    let again = env.exec("a", "print('Poison' in globals(), 'f' in globals())");
    assert_eq!(
        again.stdout.lines().last(),
        Some("True False"),
        "{}",
        again.stdout
    );
    // The victim's next worker runs its own code, and its cache file is what it was.
    let next = env.exec("v", "print(f())");
    assert_eq!(next.stdout.lines().last(), Some("1"), "{}", next.stdout);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

vistest!(
    a_trusted_workspaces_code_cannot_fill_the_cache_other_workers_read,
    |env| {
        let ws = env.workspace();
        let other = env.path().join("other");
        std::fs::create_dir_all(&other).unwrap();
        let other = other.canonicalize().unwrap();
        // A session of another (untrusted) workspace, and one of this (trusted) one.
        let other_dir = vis::runtime::cache::workspace_dir(&env.cache_dir(), &other, false);
        let (other_file, before) = victim(&env, &other, "o", &other_dir);
        victim(&env, &ws, "v", &env.worker_cache_dir());
        // The trusted workspace's extension runs at every start of its workers and reports
        // cache files for both, as a worker reports what it rebuilt while starting.
        let ext = ws.join(".vis/extensions/poison.py");
        std::fs::create_dir_all(ext.parent().unwrap()).unwrap();
        let paths = [cache_file_of_f(&other), cache_file_of_f(&ws)];
        std::fs::write(&ext, poison(&paths, false)).unwrap();
        let started = env.exec("a", "print('started')");
        assert!(
            started.stdout.ends_with("started\n"),
            "{}{}",
            started.stdout,
            started.stderr
        );
        // What it reported landed in its own workspace's trusted cache only.
        assert!(env.worker_cache_dir().join(&paths[0]).exists());
        assert_eq!(std::fs::read_to_string(&other_file).unwrap(), before);
        let next = exec_in(&env, &other, "o", "print(f())");
        assert_eq!(next.stdout.lines().last(), Some("1"), "{}", next.stdout);
        // Its own trusted workers run its code anyway; once trust is revoked they do not, and
        // nothing it cached reaches them.
        let revoke = env.vis(&["trust", "--revoke", ws.to_str().unwrap()]);
        assert_eq!(revoke.code, 0, "{}{}", revoke.stdout, revoke.stderr);
        let revoked = env.exec("v", "print(f())");
        assert_eq!(
            revoked.stdout.lines().last(),
            Some("1"),
            "{}",
            revoked.stdout
        );
    }
);

vistest!(
    a_definition_over_the_size_limit_runs_but_is_not_kept,
    |env| {
        let big = "x".repeat(70_000);
        let source = format!("def big():\n    return len('{big}')\n");
        let out = env.exec_stdin(
            "s",
            format!("{source}def small():\n    return 1\nprint(big())").as_bytes(),
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(
        out.stdout,
        format!(
            "[vis] `big` is not kept across restarts: its source is {} bytes, over the 65,536 limit for one definition; keep large data in a file and read it when called, or split the code into smaller definitions\n70000\n",
            vis::runtime::group_thousands(source.len())
        )
    );
        assert_eq!(names(&stored_defs(&env, "s")), ["small"]);
        // Redefining a kept definition too large drops the earlier one too: a restart must not
        // bring back a stale version.
        env.exec("s", "def grows():\n    return 'small'");
        let out = env.exec_stdin("s", format!("def grows():\n    return '{big}'").as_bytes());
        assert!(
            out.stdout.contains("`grows` is not kept across restarts"),
            "{}",
            out.stdout
        );
        assert_eq!(names(&stored_defs(&env, "s")), ["small"]);
        // The session's total is capped too.
        let chunk = "y".repeat(60_000);
        let many: String = (0..9)
            .map(|i| format!("def part{i}():\n    return '{chunk}'\n"))
            .collect();
        let out = env.exec_stdin("s", many.as_bytes());
        assert!(
        out.stdout.contains("[vis] `part8` is not kept across restarts: the session's definitions would total 540,"),
        "{}",
        out.stdout
    );
        assert_eq!(stored_defs(&env, "s").len(), 9);
        let next = env.exec("s", "print(small(), part7()[:1])");
        assert!(next.stdout.ends_with("\n1 y\n"), "{}", next.stdout);
    }
);

/// Stores `defs` for session `s` as a version of Vis without limits or checks could have.
fn store_defs(env: &TestEnv, defs: &[PersistedDef]) {
    let mut store = vis::store::Store::open(&env.db()).unwrap();
    store
        .ensure_session("s", &[env.workspace().to_string_lossy().into_owned()])
        .unwrap();
    let turn = store
        .begin_turn("s", vis::protocol::TurnKind::Exec, None)
        .unwrap();
    store
        .finish_iteration(
            &vis::store::IterationRecord {
                session_id: "s",
                turn,
                iteration: 1,
                code: "",
                output: "",
                status: vis::protocol::IterationStatus::Ended(Status::Ok),
                started_at: 0,
                duration_ms: 0,
                exec_us: 0,
                artifact: None,
                worker_exit: None,
                defs_set: defs,
                defs_deleted: &[],
            },
            None,
        )
        .unwrap();
}

vistest!(
    a_huge_stored_definition_does_not_lock_the_session_out,
    |env| {
        let huge = format!(
            "def huge():\n    return '{}'\n",
            "z".repeat(30 * 1024 * 1024)
        );
        store_defs(
            &env,
            &[
                def("helper", "function", "def helper(x):\n    return x * 2\n"),
                def("huge", "function", &huge),
            ],
        );
        let out = env.exec("s", "print(helper(2))\nprint(defs())");
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        let notice = format!(
        "[vis] new worker: restored 1 definition: helper; 1 failed: huge (its source is {} bytes, over the 65,536 limit for one definition; it was not restored (it is still stored): define it again smaller, keeping data in files, or drop it (`huge = None`))\n4\n",
        vis::runtime::group_thousands(huge.len())
    );
        assert!(
            out.stdout.starts_with(&notice),
            "{}",
            &out.stdout[..out.stdout.len().min(600)]
        );
        assert!(
            out.stdout.contains("  def huge()  [not restored]"),
            "{}",
            out.stdout
        );
        // Nothing was lost: it is still stored, until the model drops it.
        assert_eq!(names(&stored_defs(&env, "s")), ["helper", "huge"]);
        env.exec("s", "huge = None");
        assert_eq!(names(&stored_defs(&env, "s")), ["helper"]);
    }
);

vistest!(
    a_stored_definition_that_is_more_than_its_statement_is_never_run,
    |env| {
        let pwned = env.path().join("pwned");
        let plant = format!("open({:?}, 'w').write('x')", pwned.to_str().unwrap());
        let defs = vec![
            def("os", "import", &format!("import os\n{plant}\n")),
            def("f", "function", &format!("def f():\n    pass\n{plant}\n")),
            def("g", "function", &format!("{plant}\ndef g():\n    pass\n")),
            def("H", "class", "class Other:\n    pass\n"),
            def("N", "constant", &format!("M = {plant}\n")),
            def("p", "function", "def p(:\n"),
            def("ok", "function", "def ok():\n    return 'ok'\n"),
        ];
        let mut rt = env.runtime_with(|_| {}, defs);
        let out = run(&env, &mut rt, "print(ok())");
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        let restored = out.restored.unwrap().report;
        assert_eq!(restored.ok, ["ok"]);
        let failed: Vec<(&str, &str)> = restored
            .failed
            .iter()
            .map(|(n, e)| (n.as_str(), e.as_str()))
            .collect();
        assert_eq!(failed.len(), 6, "{failed:?}");
        for (name, why) in &failed[..5] {
            assert!(
                why.starts_with("ValueError: the stored source is not one ")
                    && why.ends_with("so it was not run; define it again"),
                "{name}: {why}"
            );
        }
        assert_eq!(
            failed[0].1,
            "ValueError: the stored source is not one import statement that defines os (it holds 2 statements), so it was not run; define it again"
        );
        assert!(failed[3].1.contains("(it binds Other)"), "{}", failed[3].1);
        assert!(failed[5].1.starts_with("SyntaxError: "), "{}", failed[5].1);
        assert!(out.output.ends_with("ok\n"), "{}", out.output);
        assert!(
            !pwned.exists(),
            "a stored source ran more than its definition"
        );
    }
);

vistest!(
    definitions_that_hang_or_break_the_protocol_while_restored_are_skipped,
    |env| {
        let defs = vec![
            def("helper", "function", "def helper(x):\n    return x * 2\n"),
            def(
                "Garbage",
                "class",
                "class Garbage:\n    import os\n    for fd in range(3, 64):\n        try:\n            if os.readlink('/proc/self/fd/%d' % fd).startswith('pipe:'):\n                os.write(fd, b'\\x05\\x00\\x00\\x00junk!')\n        except OSError:\n            pass\n",
            ),
            def("Hang", "class", "class Hang:\n    import time\n    time.sleep(600)\n"),
            def("after", "function", "def after():\n    return 'after'\n"),
        ];
        let mut rt = env.runtime_with(|o| o.restore_timeout = Duration::from_secs(3), defs);
        let out = run(&env, &mut rt, "print(helper(2), after())");
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        let report = out.restored.unwrap().report;
        assert_eq!(report.ok, ["helper", "after"]);
        assert_eq!(report.failed.len(), 2, "{:?}", report.failed);
        assert_eq!(report.failed[0].0, "Garbage");
        assert!(
            report.failed[0]
                .1
                .starts_with("the worker broke the protocol (")
                && report.failed[0]
                    .1
                    .ends_with(") while this one was restored; it was skipped (define it again, or drop it with `name = None`)"),
            "{}",
            report.failed[0].1
        );
        assert_eq!(
            report.failed[1],
            (
                "Hang".to_string(),
                "restoring definitions took longer than 3 s while this one ran; it was skipped (define it again, or drop it with `name = None`)"
                    .to_string()
            )
        );
        assert!(out.output.ends_with("4 after\n"), "{}", out.output);
        // The session goes on in that worker.
        assert_eq!(run(&env, &mut rt, "helper(5)").output, "10\n");
    }
);

vistest!(
    a_restore_that_keeps_killing_workers_restores_nothing_and_the_session_goes_on,
    |env| {
        let crash = |name: &str| {
            def(
                name,
                "function",
                &format!("@(lambda f: __import__('os')._exit(3))\ndef {name}(): pass\n"),
            )
        };
        let defs = vec![crash("one"), crash("two"), crash("three"), crash("four")];
        let mut rt = env.runtime_with(|_| {}, defs);
        let out = run(&env, &mut rt, "print('alive')");
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        let report = out.restored.unwrap().report;
        assert!(report.ok.is_empty());
        let failed: Vec<&str> = report.failed.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(
            failed,
            [
                "restoring definitions stopped the worker (exited with code 3) while this one ran; it was skipped (define it again, or drop it with `name = None`)",
                "restoring definitions stopped the worker (exited with code 3) while this one ran; it was skipped (define it again, or drop it with `name = None`)",
                "restoring definitions stopped the worker (exited with code 3); none restored",
                "restoring definitions stopped the worker (exited with code 3); none restored",
            ]
        );
        assert!(out.output.ends_with("alive\n"), "{}", out.output);
    }
);
