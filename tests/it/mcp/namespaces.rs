//! MCP servers as namespaces, against the fixture server (official Python SDK) over stdio and
//! streamable HTTP: signatures, values, errors, crashes, hangs, deny lists, approvals, secrets,
//! bad input.

use serde_json::{json, Value};

use crate::support::mcp::{
    drive, last_json, stdio_table, toml_str, with_fixture, write_config, write_workspace_servers,
    HttpFixture,
};
use crate::support::TestEnv;
use crate::vistest;

fn exec_json(env: &TestEnv, session: &str, code: &str) -> Value {
    let r = env.exec(session, code);
    assert_eq!(r.code, 0, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    last_json(&r.stdout)
}

vistest!(
    tools_are_functions_with_signatures_and_python_values,
    |env| {
        with_fixture(&env, "");
        let v = exec_json(
            &env,
            "ns",
            r#"
import json
found = apropos("fx")
d = doc("fx.search_issues")
r = fx.search_issues("bug", limit=2, filter={"state": "closed", "labels": ["ui"]})
order = fx.create_order({"name": "Ann"}, [{"sku": "a", "qty": 2}, {"sku": "b"}], note="rush")
pic = fx.picture()
print(json.dumps({
    "apropos": found.names,
    "doc": d,
    "doc_order": doc("fx.create_order"),
    "result": r,
    "order": order,
    "echo": fx.echo("hi"),
    "pid_type": type(fx.pid()).__name__,
    "picture": [pic[0], pic[1].type, pic[1].mime_type, open(pic[1].path, "rb").read()[:4].hex(), repr(pic[1])],
    "ns_doc": doc("fx"),
    "mcp": session["mcp"],
}))
"#,
        );
        let names: Vec<&str> = v["apropos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        for want in [
            "fx",
            "fx.search_issues",
            "fx.create_order",
            "fx.fail",
            "fx.get_user",
        ] {
            assert!(names.contains(&want), "{names:?}");
        }
        // `get-user` would collide with `get_user` once mapped: left out, and said so.
        assert!(!names.contains(&"fx.get_user_"), "{names:?}");
        let doc = v["doc"].as_str().unwrap();
        assert!(
        doc.starts_with("fx.search_issues(query: str, *, limit: int = 10, filter: dict | None = None) -> dict\n\nSearch the tracker's issues."),
        "{doc}"
    );
        assert!(
            doc.contains("keys: 'state': Literal['open', 'closed'], 'labels': list[str]")
                && doc.contains("(MCP tool `search-issues`)")
                && doc.contains("(from MCP server `fx`)"),
            "{doc}"
        );
        let order_doc = v["doc_order"].as_str().unwrap();
        assert!(
            order_doc.starts_with(
                "fx.create_order(customer: dict, items: list[dict], *, note: str = '') -> dict"
            ),
            "{order_doc}"
        );
        assert!(
            order_doc.contains("each item: 'sku': str (required), 'qty': int"),
            "{order_doc}"
        );
        assert_eq!(v["result"]["count"], 2);
        assert_eq!(v["result"]["items"][1]["labels"], json!(["ui"]));
        assert_eq!(v["result"]["items"][0]["state"], "closed");
        assert_eq!(
            v["order"],
            json!({"customer": "Ann", "lines": 2, "units": 3, "note": "rush"})
        );
        assert_eq!(v["echo"], "hi");
        assert_eq!(v["pid_type"], "int");
        let pic = v["picture"].as_array().unwrap();
        assert_eq!(pic[0], "a picture:");
        assert_eq!(pic[1], "image");
        assert_eq!(pic[2], "image/png");
        assert_eq!(pic[3], "89504e47");
        assert!(
            pic[4]
                .as_str()
                .unwrap()
                .starts_with("<image image/png, 70 bytes: "),
            "{pic:?}"
        );
        assert!(
            v["ns_doc"].as_str().unwrap().contains("A test server"),
            "{}",
            v["ns_doc"]
        );
        let fx = &v["mcp"]["servers"]["fx"];
        assert_eq!(fx["transport"], "stdio");
        assert_eq!(fx["left_out"][0]["tool"], "get-user");
        assert!(
            fx["left_out"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("would collide with `get_user`"),
            "{fx}"
        );
    }
);

vistest!(
    tool_errors_raise_mcp_tool_error_and_bad_arguments_are_clear,
    |env| {
        with_fixture(&env, "");
        let v = exec_json(
            &env,
            "errors",
            r#"
import json
from vis import _native
out = {}
try:
    fx.fail("the disk is full")
except McpToolError as e:
    out["tool_error"] = [type(e).__name__, str(e), e.server, e.tool]
try:
    fx.create_order({"email": "x"}, [])
except McpToolError as e:
    out["invalid"] = str(e)
for name, thunk in [
    ("missing", lambda: fx.search_issues()),
    ("unknown_kw", lambda: fx.search_issues("q", color="red")),
    ("too_many", lambda: fx.echo("a", "b")),
    ("not_json", lambda: fx.echo(object())),
]:
    try:
        thunk()
        out[name] = "no error"
    except TypeError as e:
        out[name] = str(e)
for name, params in [
    ("unknown_server", {"server": "nope", "tool": "x", "arguments": {}}),
    ("unknown_tool", {"server": "fx", "tool": "nope", "arguments": {}}),
    ("bad_params", {"server": "fx", "tool": 3}),
]:
    try:
        _native.host_call("mcp.call", params)
        out[name] = "no error"
    except RuntimeError as e:
        out[name] = str(e)
try:
    fx.nope
except AttributeError as e:
    out["attr"] = str(e)
print(json.dumps(out))
"#,
        );
        assert_eq!(
            v["tool_error"],
            json!([
                "McpToolError",
                "Error executing tool fail: the disk is full",
                "fx",
                "fail"
            ])
        );
        assert!(
            v["invalid"].as_str().unwrap().contains("customer.name"),
            "{v}"
        );
        let missing = v["missing"].as_str().unwrap();
        assert!(
            missing.contains("missing a required argument: 'query'")
                && missing.contains("doc('fx.search_issues')"),
            "{missing}"
        );
        assert!(v["unknown_kw"].as_str().unwrap().contains("color"), "{v}");
        assert!(v["too_many"].as_str().unwrap().contains("too many"), "{v}");
        assert!(
            v["not_json"]
                .as_str()
                .unwrap()
                .contains("must be JSON values"),
            "{v}"
        );
        assert!(
            v["unknown_server"]
                .as_str()
                .unwrap()
                .contains("there is no MCP server `nope`; the servers are fx"),
            "{v}"
        );
        assert!(
            v["unknown_tool"]
                .as_str()
                .unwrap()
                .contains("MCP server `fx` has no tool `nope`; doc('fx') lists its tools"),
            "{v}"
        );
        assert!(
            v["bad_params"]
                .as_str()
                .unwrap()
                .contains("`tool` must be a string"),
            "{v}"
        );
        assert!(v["attr"].as_str().unwrap().contains("doc('fx')"), "{v}");
    }
);

vistest!(
    a_server_that_exits_mid_call_is_reported_and_restarted,
    |env| {
        with_fixture(&env, "");
        // A long-lived host (vis mcp) keeps the report for the next block.
        let v = drive(
            &env,
            &[],
            r#"
out("crash", await call("first = fx.pid()\ntry:\n    fx.exit_now(code=3)\nexcept McpServerError as e:\n    print('server error:', e)\nprint(fx.pid() != first)"))
out("status", await call("import json\nprint(json.dumps(session['mcp']['servers']['fx']))"))
out("pid", await call("server_pid = fx.pid()\nprint(server_pid)"))
out("worker_crash", await call("import os\nos._exit(1)"))
out("after_worker_crash", await call("print(fx.pid())"))
"#,
        );
        let crash = v["crash"]["text"].as_str().unwrap();
        assert!(
            crash.contains("server error: MCP server `fx` exited with code 3")
                && crash.contains("exiting with 3 on request")
                && crash.contains("it starts again on the next call"),
            "{crash}"
        );
        assert!(
            crash.contains("\nTrue\n"),
            "restarted with a new process: {crash}"
        );
        let status = last_json(v["status"]["text"].as_str().unwrap());
        assert_eq!(status["status"], "running");
        assert_eq!(status["starts"], 2);
        assert!(
            status["error"]
                .as_str()
                .unwrap()
                .contains("exited with code 3"),
            "{status}"
        );
        // The server connection lives in the host: a new worker gets the tools again and
        // talks to the same server process.
        let pid = v["pid"]["text"]
            .as_str()
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
        assert_eq!(v["worker_crash"]["is_error"], true);
        let after = v["after_worker_crash"]["text"].as_str().unwrap();
        assert!(after.contains("new worker (after a crash"), "{after}");
        assert!(after.contains(&format!("\n{pid}\n")), "{pid}: {after}");
    }
);

vistest!(a_server_that_hangs_times_out_and_is_restarted, |env| {
    with_fixture(&env, "timeout = 1");
    let v = exec_json(
        &env,
        "hang",
        r#"
import json, time
first = fx.pid()
t0 = time.monotonic()
try:
    fx.hang()
    error = "no error"
except McpServerError as e:
    error = str(e)
took = time.monotonic() - t0
print(json.dumps({"error": error, "took": took, "restarted": fx.pid() != first}))
"#,
    );
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("did not answer the call to `hang` within 1 s, so it was stopped")
            && error.contains("timeout` in [mcp.servers.fx]"),
        "{error}"
    );
    assert!(v["took"].as_f64().unwrap() < 10.0, "{v}");
    assert_eq!(v["restarted"], true);
});

vistest!(interrupting_a_block_ends_its_wait_for_a_tool, |env| {
    with_fixture(&env, "");
    let ws = env.workspace();
    // The block's timeout (1 s) is shorter than the tool's (60 s): the block is interrupted
    // while it waits, and the worker keeps its variables.
    let r = env.vis(&[
        "exec",
        "--session",
        "intr",
        "--workspace",
        ws.to_str().unwrap(),
        "--timeout",
        "1",
        "kept = 1\nfx.hang()",
    ]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("KeyboardInterrupt")
            && r.stdout.contains("the worker and its variables are intact"),
        "{}",
        r.stdout
    );
});

vistest!(streamable_http_servers_work_the_same, |env| {
    let server = HttpFixture::start();
    write_config(
        &env,
        &format!(
            "[mcp.servers.web]\nurl = {}\nheaders = {{ X-Test = \"1\" }}\n",
            toml_str(&server.url)
        ),
    );
    let v = exec_json(
        &env,
        "http",
        r#"
import json
r = web.search_issues("net", limit=1)
try:
    web.fail("over http")
except McpToolError as e:
    err = str(e)
print(json.dumps({"r": r, "err": err, "transport": session["mcp"]["servers"]["web"]["transport"], "echo": web.echo("e")}))
"#,
    );
    assert_eq!(v["r"]["items"][0]["title"], "net #1");
    assert_eq!(v["err"], "Error executing tool fail: over http");
    assert_eq!(v["transport"], "http");
    assert_eq!(v["echo"], "e");
});

vistest!(denied_mcp_tools_do_not_exist, |env| {
    write_config(
        &env,
        &format!(
            "[permissions]\ndeny = [\"fx.fail\", \"fx.exit_now\", \"off\"]\n{}{}",
            stdio_table("fx", ""),
            stdio_table("off", "")
        ),
    );
    let v = exec_json(
        &env,
        "deny",
        r#"
import json
from vis import _native
out = {"names": apropos("fx").names, "catalog_has": None}
try:
    doc("fx.fail")
except LookupError as e:
    out["doc"] = str(e)
try:
    fx.fail("x")
except AttributeError as e:
    out["attr"] = str(e)
try:
    _native.host_call("mcp.call", {"server": "fx", "tool": "fail", "arguments": {"message": "x"}})
    out["raw"] = "called"
except RuntimeError as e:
    out["raw"] = str(e)
out["off_defined"] = "off" in globals()
out["servers"] = sorted(session["mcp"]["servers"])
print(json.dumps(out))
"#,
    );
    let names: Vec<&str> = v["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"fx.echo") && !names.contains(&"fx.fail"),
        "{names:?}"
    );
    assert!(!names.contains(&"fx.exit_now"));
    assert!(v["doc"].as_str().unwrap().contains("no function"), "{v}");
    assert!(
        v["attr"]
            .as_str()
            .unwrap()
            .contains("has no attribute 'fail'"),
        "{v}"
    );
    assert!(
        v["raw"].as_str().unwrap().contains("has no tool `fail`"),
        "{v}"
    );
    assert_eq!(v["off_defined"], false);
    // A denied server is not even started.
    assert_eq!(v["servers"], json!(["fx"]));
    // The catalog the prompt carries counts MCP tools, and not the denied ones.
    let cat = env.vis(&["catalog", "--workspace", env.workspace().to_str().unwrap()]);
    assert_eq!(cat.code, 0, "{}", cat.stderr);
    assert!(
        cat.stdout.contains("fx.search_issues(") && !cat.stdout.contains("fx.fail("),
        "{}",
        cat.stdout
    );
});

vistest!(secrets_stay_out_of_the_worker_and_other_servers, |env| {
    with_fixture(&env, "env = { FX_TOKEN = \"${VIS_TEST_HOST_SECRET}\" }");
    let ws = env.workspace();
    let mut cmd = env.command(&[
        "exec",
        "--session",
        "sec",
        "--workspace",
        ws.to_str().unwrap(),
        "import json, os\nprint(json.dumps({'server_token': fx.env('FX_TOKEN'), 'server_openai': fx.env('OPENAI_API_KEY'), 'worker': 'FX_TOKEN' in os.environ or 'VIS_TEST_HOST_SECRET' in os.environ, 'in_session': 'hunter2' in json.dumps(session)}))",
    ]);
    cmd.env("VIS_TEST_HOST_SECRET", "hunter2")
        .env("OPENAI_API_KEY", "sk-test");
    let r: crate::support::Run = cmd.output().unwrap().into();
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = last_json(&r.stdout);
    assert_eq!(v["server_token"], "hunter2");
    assert_eq!(v["server_openai"], "<unset>");
    assert_eq!(v["worker"], false);
    assert_eq!(v["in_session"], false);
    // An unset variable is a clear error at start, reported for the session.
    let r = env.exec("sec", "import json\ntry:\n    fx.echo('x')\nexcept McpServerError as e:\n    print(json.dumps({'error': str(e)}))");
    let v = last_json(&r.stdout);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("uses ${VIS_TEST_HOST_SECRET}, but the environment variable VIS_TEST_HOST_SECRET is not set"),
        "{v}"
    );
});

vistest!(
    vis_exec_starts_servers_lazily_from_stored_tool_lists,
    |env| {
        with_fixture(&env, "");
        let status = "import json\nprint(json.dumps(session['mcp']['servers']['fx']))";
        // The first time, the server starts to tell its tools.
        let v = exec_json(&env, "lazy", status);
        assert_eq!(v["status"], "running");
        // Later, its stored list is used and it starts only when a block calls it.
        let v = exec_json(&env, "lazy", status);
        assert!(
            v["status"].as_str().unwrap().starts_with("not started"),
            "{v}"
        );
        assert_eq!(v["tools_from"], "the list this server gave last time");
        let v = exec_json(&env, "lazy", "import json\nprint(json.dumps({'echo': fx.echo('lazy'), 'status': session['mcp']['servers']['fx']['status']}))");
        assert_eq!(v["echo"], "lazy");
    }
);

vistest!(bad_mcp_config_is_one_clear_line, |env| {
    for (config, want) in [
        (
            "[mcp.servers.gh]\nurl = \"localhost:8000\"\n",
            "not an http:// or https:// URL",
        ),
        (
            "[mcp.servers.my-server]\ncommand = \"x\"\n",
            "MCP server name `my-server` is not a valid namespace",
        ),
        (
            "[mcp.servers.gh]\ncommand = \"x\"\nenviron = {}\n",
            "unknown field `environ`",
        ),
        (
            "[mcp]\ncall_timeout = 0\n",
            "`mcp.call_timeout` must be a positive number of seconds",
        ),
        (
            "[mcp.servers.__builtins__]\ncommand = \"x\"\n",
            "MCP server name `__builtins__` is reserved",
        ),
        (
            "[mcp]\nmax_message_mb = 64\n",
            "`mcp.max_message_mb` must be a whole number of MiB from 1 to 32, got 64",
        ),
    ] {
        write_config(&env, config);
        let r = env.exec("bad", "print(1)");
        assert_eq!(r.code, 2, "{config}: {}", r.stdout);
        assert!(r.stderr.contains(want), "{config}: {}", r.stderr);
        assert!(r.stderr.contains("config.toml: line "), "{}", r.stderr);
        assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
    }
    // A command that does not exist: the block gets a server error with the fix.
    write_config(&env, "[mcp.servers.gone]\ncommand = \"/no/such/program\"\n");
    let v = exec_json(
        &env,
        "bad",
        "import json\nprint(json.dumps(session['mcp']))",
    );
    let err = v["servers"]["gone"]["error"].as_str().unwrap();
    assert!(
        err.contains("could not start `/no/such/program`") && err.contains("check `command`"),
        "{err}"
    );
    // A broken workspace file is reported, not fatal; approving it says what is wrong.
    write_config(&env, "");
    write_workspace_servers(&env.workspace(), "[mcp.servers.w]\ncommand = 3\n");
    let v = exec_json(
        &env,
        "bad",
        "import json\nprint(json.dumps(session['mcp']))",
    );
    assert!(
        v["skipped"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("mcp.toml"),
        "{v}"
    );
    let a = env.vis(&["mcp", "approve", env.workspace().to_str().unwrap()]);
    assert_eq!(a.code, 2);
    assert!(
        a.stderr.contains("[mcp.servers.w]: invalid type"),
        "{}",
        a.stderr
    );
    assert_eq!(a.stderr.trim_end().lines().count(), 1, "{}", a.stderr);
});

vistest!(servers_named_like_builtins_are_left_out, |env| {
    write_config(&env, &stdio_table("print", ""));
    let v = exec_json(
        &env,
        "builtin",
        "import json\nprint(json.dumps(session['mcp']['servers']['print']))",
    );
    assert!(
        v["namespace"]
            .as_str()
            .unwrap()
            .contains("taken by the Python builtin `print`"),
        "{v}"
    );
});
