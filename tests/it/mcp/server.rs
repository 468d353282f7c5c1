//! `vis mcp` driven by the official MCP Python SDK: tools, blocks, persistence across
//! connections, timeouts, crashes, cancellation, progress, stdout hygiene, instructions,
//! resources and the prompt.

use serde_json::Value;

use crate::support::mcp::{drive, write_config};
use crate::vistest;

fn text(v: &Value, key: &str) -> String {
    v[key]["text"].as_str().unwrap_or_default().to_string()
}

vistest!(lists_one_tool_and_runs_blocks, |env| {
    let v = drive(
        &env,
        &[],
        r#"
tools = (await s.list_tools()).tools
out("tools", [t.name for t in tools])
out("description", tools[0].description)
out("schema", tools[0].input_schema)
out("ok", await call("x = 41\nprint('hello')\nx + 1"))
out("again", await call("x"))
out("error", await call("1/0"))
out("bad_arguments", (await s.call_tool("python_execution", {"cmd": "ls"})).model_dump(mode="json"))
try:
    await s.call_tool("bash", {"code": "ls"})
    out("unknown_tool", "no error")
except Exception as e:
    out("unknown_tool", str(e))
"#,
    );
    assert_eq!(v["tools"], serde_json::json!(["python_execution"]));
    let description = v["description"].as_str().unwrap();
    assert!(
        description.contains("apropos") && description.contains("doc(name)"),
        "{description}"
    );
    assert_eq!(v["schema"]["required"], serde_json::json!(["code"]));
    assert_eq!(v["ok"]["is_error"], false);
    let ok = text(&v, "ok");
    assert!(
        ok.starts_with("hello\n42\n[vis] status: ok (t1/i1, "),
        "{ok}"
    );
    // One worker for the connection: the variable lives on.
    assert!(text(&v, "again").starts_with("41\n[vis] status: ok (t1/i2"));
    assert_eq!(v["error"]["is_error"], true);
    let err = text(&v, "error");
    assert!(
        err.contains("ZeroDivisionError") && err.contains("[vis] status: error (t1/i3"),
        "{err}"
    );
    let bad = &v["bad_arguments"];
    assert_eq!(bad["is_error"], true);
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("python_execution takes one argument, \"code\""),
        "{bad}"
    );
    let unknown = v["unknown_tool"].as_str().unwrap();
    assert!(unknown.contains("there is no tool 'bash'"), "{unknown}");
    assert_eq!(v["stream_errors"], serde_json::json!([]));
    // The session id is announced on stderr; the blocks are recorded like vis exec's.
    let stderr = v["_stderr"].as_str().unwrap();
    let id = stderr
        .split("new session ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{stderr}"));
    let shown = env.vis(&["sessions", "show", id]);
    assert!(
        shown.stdout.contains("x = 41") && shown.stdout.contains("mcp"),
        "{}",
        shown.stdout
    );
});

vistest!(definitions_persist_across_two_connections, |env| {
    let first = drive(
        &env,
        &["--session", "persist"],
        r#"
out("def", await call("def double(x):\n    \"\"\"Twice x.\"\"\"\n    return 2 * x\ndouble(4)"))
"#,
    );
    assert!(text(&first, "def").starts_with("8\n"), "{first}");
    let second = drive(
        &env,
        &["--session", "persist"],
        r#"
out("use", await call("double(21)"))
out("defs", (await s.read_resource("vis://session/defs")).contents[0].text)
"#,
    );
    let used = text(&second, "use");
    assert!(
        used.contains("restored 1 definition: double") && used.contains("42\n"),
        "{used}"
    );
    // The second connection is the session's second turn.
    assert!(used.contains("(t2/i1, "), "{used}");
    assert!(
        second["defs"]
            .as_str()
            .unwrap()
            .contains("def double(x)  — Twice x."),
        "{second}"
    );
});

vistest!(
    timeouts_and_crashes_set_is_error_and_the_session_goes_on,
    |env| {
        let v = drive(
            &env,
            &["--timeout", "1"],
            r#"
out("keep", await call("kept = 'yes'"))
out("timeout", await call("import time\ntime.sleep(30)"))
out("after_timeout", await call("kept"))
out("crash", await call("import os\nos._exit(7)"))
out("after_crash", await call("print('alive')"))
"#,
        );
        assert_eq!(v["timeout"]["is_error"], true);
        let t = text(&v, "timeout");
        assert!(
            t.contains("KeyboardInterrupt") && t.contains("[vis] status: timeout"),
            "{t}"
        );
        assert!(text(&v, "after_timeout").starts_with("'yes'\n"), "{v}");
        assert_eq!(v["crash"]["is_error"], true);
        let c = text(&v, "crash");
        assert!(
            c.contains("exited with code 7") && c.contains("[vis] status: crashed"),
            "{c}"
        );
        let a = text(&v, "after_crash");
        assert!(
            a.contains("new worker (after a crash") && a.contains("alive\n"),
            "{a}"
        );
        assert_eq!(v["after_crash"]["is_error"], false);
    }
);

vistest!(a_cancelled_request_interrupts_the_running_block, |env| {
    let v = drive(
        &env,
        &["--session", "cancel"],
        r#"
import os
t0 = time.monotonic()
scopes = []
async def run():
    with anyio.CancelScope() as scope:
        scopes.append(scope)
        await call("import time\nstarted = True\nopen('started.flag', 'w').close()\ntime.sleep(60)\nfinished = True")
async with anyio.create_task_group() as tg:
    tg.start_soon(run)
    # Cancel once the block is surely running (the client's request then gets cancelled).
    while not os.path.exists("started.flag"):
        await anyio.sleep(0.02)
    scopes[0].cancel()
out("cancelled_after", time.monotonic() - t0)
out("next", await call("print(started, 'finished' in globals())"))
out("waited", time.monotonic() - t0)
"#,
    );
    let next = text(&v, "next");
    // The block was interrupted (the worker and its variables stayed), not run to its end.
    assert!(next.starts_with("True False\n"), "{next}");
    assert!(v["waited"].as_f64().unwrap() < 30.0, "{v}");
    // The interrupted block is recorded as such.
    let export = env.vis(&["sessions", "export", "cancel"]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    let exported: Value = serde_json::from_str(&export.stdout).unwrap();
    let text = exported.to_string();
    assert!(text.contains("\"status\":\"interrupted\""), "{text}");
});

vistest!(progress_is_reported_while_a_block_runs, |env| {
    let v = drive(
        &env,
        &[],
        r#"
seen = []
async def progress(p, total, message):
    seen.append(message)
res = await s.call_tool("python_execution", {"code": "import time\ntime.sleep(4.5)\nprint('done')"}, progress_callback=progress)
out("text", res.content[0].text)
out("progress", seen)
"#,
    );
    let progress = v["progress"].as_array().unwrap();
    assert!(!progress.is_empty(), "{v}");
    assert!(
        progress[0]
            .as_str()
            .unwrap()
            .contains("the block is running"),
        "{v}"
    );
    assert!(v["text"].as_str().unwrap().starts_with("done\n"));
});

vistest!(writes_to_fd_1_never_reach_the_protocol_stream, |env| {
    let v = drive(
        &env,
        &[],
        r#"
out("c", await call("import os, subprocess, sys\nos.write(1, b'from C\\n')\nsubprocess.run(['sh', '-c', 'echo from a subprocess; echo to stderr >&2'])\nos.system('printf \"{not json\\\\n\"')\nsys.__stdout__.write('py stdout\\n')\nprint('x' * 70000)"))
out("after", await call("print('still speaking MCP')"))
"#,
    );
    let c = text(&v, "c");
    for want in [
        "from C",
        "from a subprocess",
        "to stderr",
        "{not json",
        "py stdout",
    ] {
        assert!(c.contains(want), "{want}: {c}");
    }
    // Long output is capped as usual, with the artifact named.
    assert!(c.contains("characters cut"), "{}", &c[..300.min(c.len())]);
    assert!(text(&v, "after").starts_with("still speaking MCP\n"));
    assert_eq!(v["stream_errors"], serde_json::json!([]));
});

vistest!(instructions_resources_and_the_addresses_prompt, |env| {
    let v = drive(
        &env,
        &["--session", "res"],
        r#"
out("instructions", init.instructions)
await call("def helper(a, b=2):\n    \"\"\"Adds.\"\"\"\n    return a + b")
res = await s.list_resources()
out("uris", [str(r.uri) for r in res.resources])
out("defs", (await s.read_resource("vis://session/defs")).contents[0].text)
out("catalog", (await s.read_resource("vis://catalog")).contents[0].text)
out("page", (await s.read_resource("vis://doc/vis.addresses")).contents[0].text)
prompts = await s.list_prompts()
out("prompts", [p.name for p in prompts.prompts])
p = await s.get_prompt("addresses")
out("prompt", p.messages[0].content.text)
try:
    await s.read_resource("vis://nope")
    out("missing", "no error")
except Exception as e:
    out("missing", str(e))
"#,
    );
    let instructions = v["instructions"].as_str().unwrap();
    assert!(
        instructions.starts_with("Vis session res (workspace "),
        "{instructions}"
    );
    assert!(
        instructions.contains("Functions available in python_execution")
            && instructions.contains("apropos(pattern"),
        "{instructions}"
    );
    let uris: Vec<&str> = v["uris"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    for want in [
        "vis://session/defs",
        "vis://catalog",
        "vis://doc/vis.addresses",
    ] {
        assert!(uris.contains(&want), "{uris:?}");
    }
    assert!(
        v["defs"]
            .as_str()
            .unwrap()
            .contains("def helper(a, b=2)  — Adds."),
        "{v}"
    );
    assert!(v["catalog"].as_str().unwrap().contains("hash: "), "{v}");
    assert!(v["page"].as_str().unwrap().contains("HASH"), "{v}");
    assert_eq!(v["prompts"], serde_json::json!(["addresses"]));
    let prompt = v["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("LINE:HASH") && prompt.contains("patch(path, edits)"),
        "{prompt}"
    );
    assert!(
        v["missing"]
            .as_str()
            .unwrap()
            .contains("no resource vis://nope"),
        "{v}"
    );
});

vistest!(bad_input_to_vis_mcp_is_one_clear_line, |env| {
    let r = env.vis(&["mcp", "--session", "bad id"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("invalid session id 'bad id'"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert_eq!(r.stdout, "", "nothing but protocol on stdout");
    let r = env.vis(&["mcp", "--workspace", "/no/such/dir"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("/no/such/dir"), "{}", r.stderr);
    write_config(&env, "[mcp.servers.x]\nargs = [\"a\"]\n");
    let r = env.vis(&["mcp"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("config.toml") && r.stderr.contains("needs `command`"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert_eq!(r.stdout, "");
});
