//! JSON-RPC hygiene at both ends of MCP on stdio: `vis mcp` answers every bad line fed to its
//! stdin (raw bytes, no SDK client would send them), and messages over `[mcp] max_message_mb`
//! fail with an error naming the limit instead of a timeout, in both directions.

use serde_json::{json, Value};

use crate::support::mcp::{last_json, with_fixture, write_config, HttpFixture, RawMcp};
use crate::vistest;

fn error_of(answer: &Value) -> (Value, i64, String) {
    (
        answer["id"].clone(),
        answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {answer}")),
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {answer}"))
        .to_string()
}

vistest!(
    bad_lines_on_stdin_get_json_rpc_errors_and_nothing_breaks,
    |env| {
        let mut mcp = RawMcp::start(&env, &[]);
        // Before the handshake too: a broken first line does not end the server.
        mcp.send(b"hello?\n");
        let (id, code, message) = error_of(&mcp.next());
        assert_eq!((id, code), (Value::Null, -32700));
        assert!(
            message.contains("the MCP client sent a line that is not JSON")
                && message.contains("send one JSON-RPC 2.0 message per line"),
            "{message}"
        );
        mcp.initialize();
        let cases: Vec<(&[u8], Value, i64, &str)> = vec![
            (
                b"{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/call\", \"params\": {\n",
                json!(7),
                -32700,
                "not JSON",
            ),
            (b"\xff\xfe not utf-8\n", Value::Null, -32700, "not JSON"),
            (
                b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]\n",
                Value::Null,
                -32600,
                "batches are not supported",
            ),
            (b"\"ping\"\n", Value::Null, -32600, "not an object"),
            (
                b"{\"jsonrpc\":\"1.0\",\"id\":2,\"method\":\"ping\"}\n",
                json!(2),
                -32600,
                "\"jsonrpc\": \"2.0\"",
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":[3],\"method\":\"ping\"}\n",
                Value::Null,
                -32600,
                "neither an integer nor a string",
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":5}\n",
                json!(8),
                -32602,
                "Invalid params for tools/call",
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":9}\n",
                json!(9),
                -32600,
                "neither \"method\" nor \"result\"",
            ),
        ];
        for (line, want_id, want_code, says) in cases {
            mcp.send(line);
            let (id, code, message) = error_of(&mcp.next());
            let shown = String::from_utf8_lossy(line);
            assert_eq!((id, code), (want_id, want_code), "{shown}: {message}");
            assert!(message.contains(says), "{shown}: {message}");
        }
        // An unknown method is the SDK's `Method not found`; a bad notification gets nothing.
        mcp.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/nonsense\",\"params\":[1]}\n");
        mcp.send(b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"no/such/method\"}\n");
        let (id, code, _) = error_of(&mcp.next());
        assert_eq!((id, code), (json!(10), -32601));
        // The session works as before: the first block is the turn's first iteration.
        let answer = mcp.call(11, "print(6 * 7)");
        assert_eq!(answer["id"], 11);
        let text = text_of(&answer);
        assert!(text.starts_with("42\n[vis] status: ok (t1/i1, "), "{text}");
        assert!(mcp.finish().success());
    }
);

vistest!(
    a_request_over_the_limit_is_refused_with_the_limit_and_nothing_runs,
    |env| {
        write_config(&env, "[mcp]\nmax_message_mb = 1\n");
        let mut mcp = RawMcp::initialized(&env, &["--session", "big-in"]);
        let code = format!(
            "open('ran.txt', 'w').write('x')\n# {}",
            "y".repeat(1_500_000)
        );
        let answer = mcp.call(5, &code);
        let (id, code, message) = error_of(&answer);
        assert_eq!((id, code), (json!(5), -32600));
        assert!(
            message.contains("over the limit of 1 MiB for one MCP message")
                && message.contains("[mcp] max_message_mb"),
            "{message}"
        );
        // Nothing ran and nothing was recorded: the next block is the first of the session.
        assert!(!env.workspace().join("ran.txt").exists());
        let text = text_of(&mcp.call(6, "print('after')"));
        assert!(
            text.starts_with("after\n[vis] status: ok (t1/i1, "),
            "{text}"
        );
        assert!(mcp.finish().success());
    }
);

vistest!(
    an_answer_over_the_limit_is_an_error_naming_it_not_a_timeout,
    |env| {
        write_config(&env, "[mcp]\nmax_message_mb = 1\n");
        let mut mcp = RawMcp::initialized(&env, &["--output-limit", "3000000"]);
        let answer = mcp.call(3, "kept = 1\nprint('z' * 2_000_000)");
        let (id, code, message) = error_of(&answer);
        assert_eq!((id, code), (json!(3), -32603));
        assert!(
            message
                .starts_with("the result is 1.9 MiB, over the limit of 1 MiB for one MCP message")
                && message.contains("--output-limit characters (now 3000000): lower it"),
            "{message}"
        );
        // The block ran (and is recorded); the session goes on with its variables.
        let text = text_of(&mcp.call(4, "print(kept)"));
        assert!(text.starts_with("1\n[vis] status: ok (t1/i2, "), "{text}");
        assert!(mcp.finish().success());
    }
);

vistest!(
    a_server_answer_over_the_limit_fails_the_call_with_the_limit,
    |env| {
        with_fixture(&env, "");
        let mut config = std::fs::read_to_string(env.config_dir().join("config.toml")).unwrap();
        config.insert_str(0, "[mcp]\nmax_message_mb = 1\n");
        write_config(&env, &config);
        let r = env.exec(
            "big-out",
            r#"
import json
first = fx.pid()
out = {}
try:
    fx.big(1_500_000)
    out["big"] = "no error"
except McpToolError as e:
    out["big"] = [type(e).__name__, str(e)]
try:
    fx.echo("a" * 1_200_000)
    out["args"] = "no error"
except McpToolError as e:
    out["args"] = [type(e).__name__, str(e)]
out["small"] = fx.big(5)
out["same_server"] = fx.pid() == first
out["status"] = session["mcp"]["servers"]["fx"]["status"]
print(json.dumps(out))
"#,
        );
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let v = last_json(&r.stdout);
        assert_eq!(v["big"][0], "McpToolError", "{v}");
        let big = v["big"][1].as_str().unwrap();
        assert!(
            big.starts_with("MCP server `fx` answered with a message of ")
                && big.contains(", over the limit of 1 MiB for one MCP message")
                && big.contains("raise [mcp] max_message_mb"),
            "{big}"
        );
        let args = v["args"][1].as_str().unwrap();
        assert_eq!(v["args"][0], "McpToolError");
        assert!(
            args.starts_with(
                "the arguments of `echo` are 1.1 MiB, over the limit of 1 MiB for one MCP message"
            ),
            "{args}"
        );
        // The server was neither killed nor restarted.
        assert_eq!(v["small"], "bbbbb");
        assert_eq!(v["same_server"], true);
        assert_eq!(v["status"], "running");
    }
);

vistest!(
    an_http_server_answer_over_the_limit_fails_the_call_too,
    |env| {
        let server = HttpFixture::start();
        write_config(
            &env,
            &format!(
                "[mcp]\nmax_message_mb = 1\ncall_timeout = 100\n[mcp.servers.web]\nurl = {}\n",
                crate::support::mcp::toml_str(&server.url)
            ),
        );
        let r = env.exec(
        "big-http",
        "import json\ntry:\n    web.big(1_500_000)\n    out = 'no error'\nexcept McpToolError as e:\n    out = [type(e).__name__, str(e)]\nprint(json.dumps({'big': out, 'small': web.big(3)}))",
    );
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let v = last_json(&r.stdout);
        assert_eq!(v["big"][0], "McpToolError", "{v}");
        let message = v["big"][1].as_str().unwrap();
        assert!(
        message.starts_with("MCP server `web` answered with a message of more than 1 MiB, over the limit of 1 MiB for one MCP message"),
        "{message}"
    );
        // The next call reconnects and works.
        assert_eq!(v["small"], "bbb");
    }
);
