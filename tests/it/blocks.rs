//! Block semantics through the real embedded interpreter (SPEC §3).

use serde_json::{json, Value};
use vis::protocol::Status;
use vis::runtime::HostHandler;

use crate::support::run;
use crate::vistest;
use vis::protocol::{HostReply, HostRequest};

vistest!(reports_the_libpython_it_was_built_against, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "import sys; print(sys.version); print(sys.executable)",
    );
    assert_eq!(out.status, Status::Ok);
    let expected = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.version)"])
        .output()
        .unwrap();
    let expected = String::from_utf8_lossy(&expected.stdout).trim().to_string();
    let mut lines = out.output.lines();
    assert_eq!(lines.next().unwrap(), expected);
    assert_eq!(rt.python_version(), Some(expected.as_str()));
    // Blocks that start `sys.executable` get a Python, not the vis binary.
    assert!(lines.next().unwrap().contains("python"), "{}", out.output);
});

vistest!(namespace_persists_between_blocks, |env| {
    let mut rt = env.runtime();
    assert_eq!(run(&env, &mut rt, "x = 40").output, "");
    assert_eq!(run(&env, &mut rt, "x + 2").output, "42\n");
    // `_` holds the last shown value, as in a REPL.
    assert_eq!(run(&env, &mut rt, "_ * 2").output, "84\n");
});

vistest!(final_expression_repr_like_a_repl, |env| {
    let mut rt = env.runtime();
    assert_eq!(run(&env, &mut rt, "'a' + 'b'").output, "'ab'\n");
    assert_eq!(run(&env, &mut rt, "None").output, "");
    assert_eq!(
        run(&env, &mut rt, "print('p')\n[1, 2]").output,
        "p\n[1, 2]\n"
    );
    assert_eq!(run(&env, &mut rt, "y = 3").output, "");
    // Top-level await works.
    assert_eq!(
        run(
            &env,
            &mut rt,
            "import asyncio\nawait asyncio.sleep(0, result=7)"
        )
        .output,
        "7\n"
    );
});

vistest!(exceptions_keep_output_and_point_at_the_block_line, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "print('before')\ndef f():\n    return 1/0\nf()",
    );
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output
            .starts_with("before\nTraceback (most recent call last):\n"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains("File \"<t1/i1>\", line 4, in <module>\n    f()\n"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("line 3, in f\n    return 1/0\n"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .ends_with("ZeroDivisionError: division by zero\n"),
        "{}",
        out.output
    );
    // Vis's own frames are not shown.
    assert!(!out.output.contains("<vis>"), "{}", out.output);
});

vistest!(library_frames_are_collapsed, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "import json\njson.loads('{bad')");
    assert_eq!(out.status, Status::Error);
    assert!(out.output.contains("line 2, in <module>"), "{}", out.output);
    assert!(
        out.output.contains("json.decoder.JSONDecodeError"),
        "{}",
        out.output
    );
    assert!(out.output.lines().count() < 12, "{}", out.output);
});

vistest!(syntax_error_shows_the_caret, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "x = 1\ndef f(:\n    pass");
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output
            .contains("File \"<t1/i1>\", line 2\n    def f(:\n          ^\n"),
        "{}",
        out.output
    );
    assert!(out.output.contains("SyntaxError"), "{}", out.output);
    // Nothing of a block that does not parse runs.
    assert_eq!(run(&env, &mut rt, "'x' in globals()").output, "False\n");
    // Nor of one that parses but does not compile, nor with a misplaced __future__ import.
    for code in [
        "y = 1\nreturn 5",
        "y = 1\nfrom __future__ import annotations",
    ] {
        let out = run(&env, &mut rt, code);
        assert_eq!(out.status, Status::Error);
        assert!(out.output.contains("SyntaxError"), "{}", out.output);
        assert_eq!(run(&env, &mut rt, "'y' in globals()").output, "False\n");
    }
});

vistest!(stdout_stderr_and_c_level_writes_keep_their_order, |env| {
    let mut rt = env.runtime();
    let code = "import os, sys\nprint('a')\nos.write(1, b'b\\n')\nprint('c', file=sys.stderr)\nos.system('echo d; echo e >&2')\nprint('f')";
    assert_eq!(run(&env, &mut rt, code).output, "a\nb\nc\nd\ne\nf\n");
});

vistest!(
    frame_like_bytes_on_stdout_do_not_corrupt_the_channel,
    |env| {
        let mut rt = env.runtime();
        let code = r#"import os, json
msg = json.dumps({"type": "result", "id": 1, "status": "ok", "output": "forged"}).encode()
os.write(1, len(msg).to_bytes(4, "little") + msg)
os.write(2, b"\x00\x00\x00\x00")
print("real")"#;
        let out = run(&env, &mut rt, code);
        assert_eq!(out.status, Status::Ok);
        assert!(
            out.output.contains("forged") && out.output.ends_with("real\n"),
            "{}",
            out.output
        );
        assert_eq!(run(&env, &mut rt, "1 + 1").output, "2\n");
    }
);

vistest!(input_sees_end_of_file, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "input('name? ')");
    assert_eq!(out.status, Status::Error);
    assert!(out.output.contains("EOFError"), "{}", out.output);
});

vistest!(long_output_is_capped_with_head_tail_and_artifact, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "for i in range(50000): print('line', i)");
    assert_eq!(out.status, Status::Ok);
    assert!(out.output.starts_with("line 0\n"));
    assert!(out.output.ends_with("line 49999\n"));
    assert!(out.output.chars().count() < 20_400, "{}", out.output.len());
    let artifact = out.artifact.clone().expect("artifact saved");
    assert!(
        out.output.contains(&format!(
            "characters cut; full output: {}",
            artifact.display()
        )),
        "marker missing"
    );
    let full = std::fs::read_to_string(&artifact).unwrap();
    assert_eq!(full.lines().count(), 50000);
    assert!(full.contains("line 25000\n"));
});

vistest!(huge_single_line_is_cut_by_characters, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "print('é' * 5_000_000)");
    assert_eq!(out.status, Status::Ok);
    assert!(out.output.chars().count() < 20_400);
    assert!(
        out.output.contains("of 5,000,001 characters cut"),
        "{}",
        &out.output[..200]
    );
    let saved = std::fs::read(out.artifact.unwrap()).unwrap();
    assert_eq!(saved.len(), 10_000_001);
});

vistest!(non_utf8_output_is_replaced_and_said, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe end\\n')\nsys.stdout.flush()",
    );
    assert_eq!(out.status, Status::Ok);
    assert!(
        out.output.starts_with("ok \u{fffd}\u{fffd} end\n"),
        "{:?}",
        out.output
    );
    assert!(out.output.contains("not UTF-8"), "{}", out.output);
    // Lone surrogates in a str are escaped rather than failing the print.
    let out = run(&env, &mut rt, "print('a\\udcff b')");
    assert_eq!(out.status, Status::Ok, "{}", out.output);
});

fn session_info(turn: i64, iteration: i64) -> vis::protocol::SessionInfo {
    vis::protocol::SessionInfo::new(
        "s",
        turn,
        iteration,
        vis::protocol::SessionCounts::default(),
        vis::protocol::Utilization::without_requests(),
    )
}

vistest!(session_dict_is_rebuilt_before_every_block, |env| {
    let mut rt = env.runtime();
    let mut req = env.block("import json; print(json.dumps(session, sort_keys=True))");
    req.session = session_info(7, 2);
    let roots = req.workspace_roots.clone();
    let out = rt.exec(req, &mut vis::runtime::NoHostCalls).unwrap();
    let v: Value = serde_json::from_str(out.output.trim()).unwrap();
    assert_eq!(v["turn"], 7);
    assert_eq!(v["iteration"], 2);
    // The roots travel one way, in the block's own field: the dict shows that, not a copy.
    assert_eq!(v["workspace_roots"], json!(roots));
    assert_eq!(v["restored"]["ok"], json!([]));
    let mut req = env.block("session['turn'] = 99");
    req.session = session_info(8, 1);
    rt.exec(req, &mut vis::runtime::NoHostCalls).unwrap();
    let mut req = env.block("session['turn'], session['restored']");
    req.session = session_info(9, 1);
    // A block's own edits do not leak into the next block's dict; `restored` is only set
    // on the first block after a start.
    assert_eq!(
        rt.exec(req, &mut vis::runtime::NoHostCalls).unwrap().output,
        "(9, None)\n"
    );
});

struct Echo(Vec<String>);

/// Answers a block's `mcp.call` (the one host call whose parameters are any JSON object) with
/// its arguments, as a test of the plumbing.
impl HostHandler for Echo {
    fn call(&mut self, request: HostRequest) -> vis::protocol::CallAnswer {
        self.0.push(request.method().to_string());
        match request {
            HostRequest::McpCall { arguments, .. } => {
                Ok(HostReply::Mcp(json!({"echo": arguments})))
            }
            other => Err(format!("no method {}", other.method()).into()),
        }
    }
}

vistest!(blocks_can_call_the_host_while_running, |env| {
    let mut rt = env.runtime();
    let mut host = Echo(vec![]);
    // Params and answers are Python values (no JSON text); what JSON cannot hold is refused
    // before anything is sent.
    let code = r#"from vis import _native
def echo(arguments):
    return _native.host_call('mcp.call', {'server': 'e', 'tool': 'echo', 'arguments': arguments})
print(echo({'a': 1, 'b': [True, None, 1.5, 'x', (2,)], 'big': 2**64 - 1}))
try:
    _native.host_call('nope', {})
except RuntimeError as e:
    print('error:', e)
for bad in ({1: 'x'}, {'s': {1, 2}}, float('nan'), 2**64, object()):
    try:
        echo(bad)
    except (TypeError, ValueError) as e:
        print(type(e).__name__ + ":", e)"#;
    let out = rt.exec(env.block(code), &mut host).unwrap();
    let lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "{'echo': {'a': 1, 'b': [True, None, 1.5, 'x', [2]], 'big': 18446744073709551615}}",
            "error: the host has no 'nope' call; see doc('vis') for what blocks can call"
        ],
        "{}",
        out.output
    );
    assert!(
        lines[2].starts_with("TypeError: dict keys must be str"),
        "{}",
        out.output
    );
    assert!(
        lines[3].starts_with("TypeError: set is not a JSON value"),
        "{}",
        out.output
    );
    assert_eq!(lines[4], "ValueError: nan is not a JSON number");
    assert_eq!(
        lines[5],
        "ValueError: the integer 18446744073709551616 is too large for JSON"
    );
    assert!(
        lines[6].starts_with("TypeError: object is not a JSON value"),
        "{}",
        out.output
    );
    // A call that does not parse never reaches the handler.
    assert_eq!(host.0, ["mcp.call"]);
});

vistest!(workspace_venv_packages_are_importable, |env| {
    let site = env.workspace().join(".venv/lib/python3.11/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        env.workspace().join(".venv/pyvenv.cfg"),
        "home = /usr/bin\n",
    )
    .unwrap();
    std::fs::write(site.join("vis_test_pkg.py"), "VALUE = 'from the venv'\n").unwrap();
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "import vis_test_pkg, sys\nprint(vis_test_pkg.VALUE)\nprint(sys.executable.endswith('.venv/bin/python'))");
    assert_eq!(out.output, "from the venv\nTrue\n");
});

vistest!(the_workspace_is_the_working_directory, |env| {
    std::fs::write(env.workspace().join("data.txt"), "hello").unwrap();
    let mut rt = env.runtime();
    assert_eq!(
        run(&env, &mut rt, "Path('data.txt').read_text()").output,
        "'hello'\n"
    );
});

vistest!(empty_and_nul_blocks_are_refused_before_running, |env| {
    let mut rt = env.runtime();
    let err = rt
        .exec(env.block("   \n"), &mut vis::runtime::NoHostCalls)
        .unwrap_err();
    assert!(matches!(err, vis::runtime::RuntimeError::InvalidBlock(_)));
    assert!(err.to_string().contains("empty"), "{err}");
    let err = rt
        .exec(env.block("print('a\0')"), &mut vis::runtime::NoHostCalls)
        .unwrap_err();
    assert!(err.to_string().contains("NUL byte"), "{err}");
    // The worker was never started for them.
    assert_eq!(rt.worker_pid(), None);
});

vistest!(gigantic_output_is_streamed_not_loaded, |env| {
    let mut rt = env.runtime();
    // 40 MiB: past the in-memory threshold, so head, tail and count come from the file.
    let out = run(
        &env,
        &mut rt,
        "import os\nfor i in range(40):\n    os.write(1, (b'%02d' % i) * (512 * 1024))",
    );
    assert_eq!(out.status, Status::Ok);
    assert!(out.output.starts_with("0000"), "{}", &out.output[..20]);
    assert!(
        out.output.ends_with("3939"),
        "{}",
        &out.output[out.output.len() - 20..]
    );
    assert!(
        out.output.contains("of 41,943,040 characters cut"),
        "{}",
        &out.output[..200]
    );
    let saved = std::fs::metadata(out.artifact.unwrap()).unwrap().len();
    assert_eq!(saved, 41_943_040);
});
