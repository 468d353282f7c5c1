//! The hub without running a server: stored tool lists become functions (deny list applied),
//! calls are checked before anything starts, and `session["mcp"]` says what happened.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::config::{ServerSource, Transport};

/// A hub with one stdio server `fx` that is never started (its command does not exist), its
/// tools taken from a stored list, and a 1 KiB message limit.
fn hub(deny: &[&str]) -> McpHub {
    let spec = ServerSpec {
        name: "fx".into(),
        source: ServerSource::Config,
        transport: Transport::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        },
        timeout: None,
        file: PathBuf::from("/c/config.toml"),
    };
    let hub = McpHub::new(
        McpPlan {
            servers: vec![spec],
            skipped: vec![Skipped {
                name: "proj".into(),
                file: PathBuf::from("/ws/.vis/mcp.toml"),
                launch: Some("python server.py".into()),
                review: vec![],
                reason: "it is declared by the workspace and not approved to run".into(),
                fix: "review it, then run `vis mcp approve /ws`".into(),
            }],
        },
        HubSettings {
            call_timeout: Duration::from_secs(5),
            startup_timeout: Duration::from_secs(5),
            workspace: PathBuf::from("/"),
            artifact_dir: std::env::temp_dir(),
            deny: DenyList::new(deny.iter().copied()).unwrap(),
            max_message_bytes: 1024,
            program: PathBuf::from("/nonexistent/vis"),
        },
    );
    let tools = json!([
        {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "__init__", "inputSchema": {"type": "object"}},
        {"name": "drop_all", "inputSchema": {"type": "object"}},
        {"name": "get-user", "inputSchema": {"type": "object"}},
        {"name": "get_user", "inputSchema": {"type": "object"}},
    ]);
    hub.use_cached_tools("fx", &tools.to_string());
    hub
}

fn error_text(answer: Result<Value, crate::protocol::CallError>) -> String {
    match answer {
        Err(e) => e.0,
        Ok(v) => panic!("not an error: {v}"),
    }
}

#[test]
fn stored_tools_become_functions_with_the_deny_list_applied() {
    let hub = hub(&["fx.drop_all"]);
    let (namespaces, functions) = hub.functions();
    assert_eq!(namespaces.len(), 1);
    assert_eq!(namespaces[0].summary, "MCP server `fx` (3 tools)");
    let names: Vec<&str> = functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["fx.echo", "fx.__init___", "fx.get_user"]);
    let status = hub.status_json();
    let fx = &status["servers"]["fx"];
    assert_eq!(fx["status"], "not started; it starts on the first call");
    assert_eq!(fx["tools"], 3);
    assert_eq!(fx["tools_from"], "the list this server gave last time");
    assert_eq!(fx["left_out"][0]["tool"], "get-user");
    assert_eq!(status["skipped"][0]["server"], "proj");
    assert_eq!(
        hub.notices(),
        ["vis: MCP server `proj` is skipped: it is declared by the workspace and not approved to run; review it, then run `vis mcp approve /ws`"]
    );
    assert!(hub.unlisted().is_empty());
}

#[tokio::test]
async fn calls_are_checked_before_any_server_starts() {
    let hub = hub(&["fx.drop_all"]);
    // As a block's call arrives: parsed (`protocol::HostRequest`), then answered by the hub.
    let call = |params: Value| {
        let hub = hub.clone();
        async move {
            match crate::protocol::HostRequest::parse("mcp.call", params)? {
                crate::protocol::HostRequest::McpCall {
                    server,
                    tool,
                    arguments,
                } => hub.call(&server, &tool, arguments).await,
                other => panic!("parsed as {other:?}"),
            }
        }
    };
    assert_eq!(
        error_text(call(json!({"server": "gh", "tool": "x"})).await),
        "there is no MCP server `gh`; the servers are fx (see session[\"mcp\"])"
    );
    assert_eq!(
        error_text(call(json!({"server": "fx", "tool": "nope"})).await),
        "MCP server `fx` has no tool `nope`; doc('fx') lists its tools"
    );
    // A denied tool is refused as if it did not exist.
    assert_eq!(
        error_text(call(json!({"server": "fx", "tool": "drop_all"})).await),
        "MCP server `fx` has no tool `drop_all`; doc('fx') lists its tools"
    );
    assert!(
        error_text(call(json!({"server": "fx", "tool": "echo", "arguments": [1]})).await)
            .contains("`arguments` must be an object")
    );
    assert!(crate::protocol::HostRequest::parse("mcp.nope", json!({}))
        .unwrap_err()
        .0
        .contains("no 'mcp.nope' call"));
    // Arguments over the message limit: a tool error naming it, and the server not started.
    let big =
        call(json!({"server": "fx", "tool": "echo", "arguments": {"text": "x".repeat(2000)}}))
            .await
            .unwrap();
    assert_eq!(big["kind"], "tool_error");
    assert_eq!(
        big["message"],
        "the arguments of `echo` are 2 KiB, over the limit of 1 KiB for one MCP message; pass less (e.g. a file's path instead of its content), or raise [mcp] max_message_mb in config.toml"
    );
    assert_eq!(
        hub.status_json()["servers"]["fx"]["status"],
        "not started; it starts on the first call"
    );
    // A call that does start it reports why it could not (the guard's program is missing).
    let failed = call(json!({"server": "fx", "tool": "echo", "arguments": {"text": "hi"}}))
        .await
        .unwrap();
    assert_eq!(failed["kind"], "server_error");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.starts_with("MCP server `fx` could not start `/nonexistent/mcp-server` in /: ")
            && message.contains("check `command` in /c/config.toml"),
        "{message}"
    );
    assert_eq!(
        hub.status_json()["servers"]["fx"]["status"],
        "stopped after an error; it starts again on the next call"
    );
}
