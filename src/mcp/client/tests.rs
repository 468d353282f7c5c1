//! The hub without running a server: stored tool lists become functions (deny list applied),
//! calls are checked before anything starts, and `session["mcp"]` says what happened.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::config::{ServerSource, Transport};
use crate::protocol::CallError;

/// A server `name` of the user's config that runs `transport`.
fn spec(name: &str, transport: Transport) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        source: ServerSource::Config,
        transport,
        timeout: None,
        file: PathBuf::from("/c/config.toml"),
    }
}

/// A stdio server `fx` whose command does not exist (it never starts).
fn missing_command() -> ServerSpec {
    spec(
        "fx",
        Transport::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        },
    )
}

/// Settings with 5 s timeouts, `deny` and a 1 KiB message limit.
fn settings(deny: &[&str]) -> HubSettings {
    HubSettings {
        call_timeout: Duration::from_secs(5),
        startup_timeout: Duration::from_secs(5),
        workspace: PathBuf::from("/"),
        artifact_dir: std::env::temp_dir(),
        deny: DenyList::new(deny.iter().copied()).unwrap(),
        max_message_bytes: 1024,
        program: PathBuf::from("/nonexistent/vis"),
    }
}

/// A hub of `servers`, nothing skipped.
fn hub_of(servers: Vec<ServerSpec>, settings: HubSettings) -> McpHub {
    McpHub::new(
        McpPlan {
            servers,
            skipped: vec![],
        },
        settings,
    )
}

/// A hub with one stdio server `fx` that is never started (its command does not exist), its
/// tools taken from a stored list, and a 1 KiB message limit.
fn hub(deny: &[&str]) -> McpHub {
    let hub = McpHub::new(
        McpPlan {
            servers: vec![missing_command()],
            skipped: vec![Skipped {
                name: "proj".into(),
                file: PathBuf::from("/ws/.vis/mcp.toml"),
                launch: Some("python server.py".into()),
                review: vec![],
                reason: "it is declared by the workspace and not approved to run".into(),
                fix: "review it, then run `vis mcp approve /ws`".into(),
            }],
        },
        settings(deny),
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

/// The answer of calling `server.tool` with no arguments.
async fn call(hub: &McpHub, server: &str, tool: &str) -> Result<Value, CallError> {
    hub.call(server, tool, Default::default()).await
}

#[tokio::test]
async fn a_call_with_no_server_configured_says_so() {
    let hub = hub_of(vec![], settings(&[]));
    assert!(hub.is_empty());
    assert_eq!(
        error_text(call(&hub, "gh", "x").await),
        "there is no MCP server `gh`: none is configured (see session[\"mcp\"])"
    );
}

#[tokio::test]
async fn a_tool_the_worker_was_not_given_is_refused() {
    // `get-user` maps onto the `get_user` the server also lists, so it was left out.
    let hub = hub(&[]);
    assert_eq!(
        error_text(call(&hub, "fx", "get-user").await),
        "MCP server `fx` has no tool `get-user`; doc('fx') lists its tools"
    );
    // Before any list (live or stored), no tool was given at all.
    let unlisted = hub_of(vec![missing_command()], settings(&[]));
    assert_eq!(unlisted.unlisted(), ["fx"]);
    assert_eq!(
        error_text(call(&unlisted, "fx", "echo").await),
        "MCP server `fx` has no tool `echo`; doc('fx') lists its tools"
    );
    assert_eq!(
        unlisted.status_json()["servers"]["fx"]["status"],
        "not started; it starts on the first call"
    );
}

#[tokio::test]
async fn a_denied_server_gives_no_tools_and_refuses_every_call() {
    let hub = hub(&["fx"]);
    let (namespaces, functions) = hub.functions();
    assert!(namespaces.is_empty() && functions.is_empty());
    assert_eq!(hub.status_json()["servers"]["fx"]["tools"], 0);
    assert_eq!(
        error_text(call(&hub, "fx", "echo").await),
        "MCP server `fx` has no tool `echo`; doc('fx') lists its tools"
    );
}

#[test]
fn a_callable_tool_brings_its_output_schema() {
    let hub = hub_of(vec![missing_command()], settings(&["fx.hidden"]));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    let tools = json!([
        {"name": "count", "inputSchema": {"type": "object"}, "outputSchema": schema},
        {"name": "plain", "inputSchema": {"type": "object"}},
        {"name": "hidden", "inputSchema": {"type": "object"}},
    ]);
    hub.use_cached_tools("fx", &tools.to_string());
    let slot = hub.slot("fx").unwrap();
    assert_eq!(hub.callable(slot, "count"), Some(Some(schema)));
    assert_eq!(hub.callable(slot, "plain"), Some(None));
    assert_eq!(hub.callable(slot, "hidden"), None);
    assert_eq!(hub.callable(slot, "absent"), None);
}

#[test]
fn a_stored_list_is_used_only_when_it_is_a_list_and_none_is_known() {
    let hub = hub_of(vec![missing_command()], settings(&[]));
    hub.use_cached_tools("fx", "not json");
    hub.use_cached_tools("fx", r#"{"name": "echo"}"#);
    hub.use_cached_tools("nope", r#"[{"name": "echo", "inputSchema": {}}]"#);
    assert_eq!(hub.unlisted(), ["fx"]);
    hub.use_cached_tools(
        "fx",
        r#"[{"name": "a", "inputSchema": {"type": "object"}}]"#,
    );
    hub.use_cached_tools(
        "fx",
        r#"[{"name": "b", "inputSchema": {"type": "object"}}]"#,
    );
    let names: Vec<String> = hub.functions().1.into_iter().map(|f| f.name).collect();
    assert_eq!(names, ["fx.a"], "the first list stays");
    // A stored list is not a live one: nothing for the store to save.
    assert!(hub.take_unsaved_tool_lists().is_empty());
}

/// `session["mcp"]` for `server` after the hub tried to start it.
async fn after_connect(hub: &McpHub, server: &str) -> Value {
    hub.connect_all().await;
    hub.status_json()["servers"][server].clone()
}

#[tokio::test]
async fn an_http_header_that_cannot_be_sent_stops_the_start() {
    let server = spec(
        "docs",
        Transport::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: [("Bad Header".to_string(), "x".to_string())].into(),
        },
    );
    let hub = hub_of(vec![server], settings(&[]));
    let status = after_connect(&hub, "docs").await;
    assert_eq!(
        status["error"],
        "MCP server `docs`: header `Bad Header` is not a valid HTTP header; fix it in /c/config.toml"
    );
    assert_eq!(
        status["status"],
        "stopped after an error; it starts again on the next call"
    );
    assert_eq!(status["starts"], 0);
}

#[tokio::test]
async fn an_unset_variable_in_a_command_names_the_field_and_the_variable() {
    let server = spec(
        "fx",
        Transport::Stdio {
            command: "server".into(),
            args: vec!["--token=${VIS_TEST_NEVER_SET_TOKEN}".into()],
            env: Default::default(),
            cwd: None,
        },
    );
    let hub = hub_of(vec![server], settings(&[]));
    let status = after_connect(&hub, "fx").await;
    assert_eq!(
        status["error"],
        "[mcp.servers.fx] args uses ${VIS_TEST_NEVER_SET_TOKEN}, but the environment variable VIS_TEST_NEVER_SET_TOKEN is not set; set it or write the value"
    );
}

#[tokio::test]
async fn an_http_server_that_is_not_there_fails_the_handshake_with_the_fix() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let server = spec(
        "docs",
        Transport::Http {
            url: url.clone(),
            headers: Default::default(),
        },
    );
    let hub = hub_of(vec![server], settings(&[]));
    let answer = call(&hub, "docs", "search").await;
    // No tool was given yet, so the call is refused before anything starts; connecting
    // says why the server is not there.
    assert!(error_text(answer).contains("has no tool `search`"));
    let status = after_connect(&hub, "docs").await;
    let error = status["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!(
            "MCP server `docs` at {url} did not answer the MCP handshake ("
        )) && error.ends_with("); check that it runs and that `url` is its MCP endpoint"),
        "{error}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_the_handshake_times_out_naming_the_setting() {
    // It accepts connections and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let server = spec(
        "slow",
        Transport::Http {
            url: url.clone(),
            headers: Default::default(),
        },
    );
    let mut quick = settings(&[]);
    quick.startup_timeout = Duration::from_millis(300);
    let hub = hub_of(vec![server], quick);
    let status = after_connect(&hub, "slow").await;
    assert_eq!(
        status["error"],
        format!("MCP server `slow` did not start within 0.3 s; check that `{url}` runs and speaks MCP (a slow start needs a larger [mcp] startup_timeout)")
    );
    assert_eq!(
        status["status"],
        "stopped after an error; it starts again on the next call"
    );
    held.abort();
}

#[test]
fn durations_and_titles_read_as_people_write_them() {
    assert_eq!(seconds(Duration::from_secs(30)), "30 s");
    assert_eq!(seconds(Duration::from_millis(2500)), "2.5 s");
    assert_eq!(seconds(Duration::from_millis(300)), "0.3 s");
    assert_eq!(
        one_line("  Git\n  helpers\tfor   you "),
        "Git helpers for you"
    );
}
