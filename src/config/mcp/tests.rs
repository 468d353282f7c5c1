//! Server tables: parsing, errors, fingerprints, `${VAR}` expansion.

use super::*;

fn parse(text: &str) -> Result<McpConfig, String> {
    let table: toml::Table = text.parse().unwrap();
    parse_mcp_table(
        &table,
        text,
        Path::new("/c/config.toml"),
        ServerSource::Config,
    )
    .map_err(|e| e.to_string())
}

#[test]
fn reads_stdio_and_http_servers() {
    let c = parse(
        "[mcp]\ncall_timeout = 5\n[mcp.servers.gh]\ncommand = \"npx\"\nargs = [\"-y\", \"x y\"]\nenv = { T = \"1\" }\ntimeout = 2.5\n[mcp.servers.docs]\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer x\" }\n",
    )
    .unwrap();
    assert_eq!(c.call_timeout(), Duration::from_secs(5));
    assert_eq!(c.max_message_bytes(), 16 * 1024 * 1024);
    let small = parse("[mcp]\nmax_message_mb = 2\n").unwrap();
    assert_eq!(small.max_message_bytes(), 2 * 1024 * 1024);
    assert_eq!(c.servers.len(), 2);
    let gh = c.servers.iter().find(|s| s.name == "gh").unwrap();
    assert_eq!(gh.timeout, Some(Duration::from_millis(2500)));
    assert_eq!(gh.launch_line(), "T=… npx -y 'x y'");
    let docs = c.servers.iter().find(|s| s.name == "docs").unwrap();
    assert_eq!(docs.transport_kind(), "http");
    assert!(!docs.launch_line().contains("Bearer"));
}

#[test]
fn bad_tables_say_what_and_how() {
    let cases = [
        ("[mcp.servers.gh]\nargs = []\n", "needs `command`"),
        (
            "[mcp.servers.gh]\ncommand = \"a\"\nurl = \"http://x\"\n",
            "both `command` and `url`",
        ),
        (
            "[mcp.servers.gh]\ncommand = \"a\"\nargv = []\n",
            "unknown field `argv`",
        ),
        (
            "[mcp.servers.gh]\nurl = \"ftp://x\"\n",
            "not an http:// or https:// URL",
        ),
        (
            "[mcp.servers.gh]\ncommand = \"a\"\nheaders = {}\n",
            "`headers` applies to HTTP",
        ),
        (
            "[mcp.servers.gh]\nurl = \"http://x\"\nenv = {}\n",
            "`env` applies to servers vis starts",
        ),
        (
            "[mcp.servers.my-server]\ncommand = \"a\"\n",
            "not a valid namespace",
        ),
        ("[mcp.servers.\"a.b\"]\ncommand = \"a\"\n", "without `.`"),
        (
            "[mcp.servers.gh]\ncommand = \"a\"\ntimeout = -1\n",
            "positive number of seconds",
        ),
        (
            "[mcp]\ncall_timeout = \"x\"\n",
            "positive number of seconds",
        ),
        ("[mcp]\nservers = 3\n", "one table per server"),
        (
            "[mcp.servers.__builtins__]\ncommand = \"a\"\n",
            "MCP server name `__builtins__` is reserved: names of the form __name__ are Python's own (a block's `__builtins__`, `__name__`, …); rename the table, e.g. [mcp.servers.builtins_mcp]",
        ),
        (
            "[mcp]\nmax_message_mb = 0\n",
            "`mcp.max_message_mb` must be a whole number of MiB from 1 to 32, got 0",
        ),
        ("[mcp]\nmax_message_mb = 33\n", "from 1 to 32, got 33"),
        ("[mcp.servers]\ngh = \"npx\"\n", "must be a table"),
        ("[mcp.servers.gh]\ncommand = 5\n", "invalid type"),
        (
            "[mcp.servers.gh]\nurl = \"http://x\"\nheaders = { Accept = \"x\" }\n",
            "set by the MCP transport",
        ),
    ];
    for (text, want) in cases {
        let e = parse(text).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    let e = parse("\n[mcp.servers.gh]\nargs = []\n").unwrap_err();
    assert!(e.starts_with("line 2: "), "{e}");
}

#[test]
fn fingerprints_change_with_what_runs() {
    let a = parse("[mcp.servers.gh]\ncommand = \"a\"\nargs = [\"1\"]\n").unwrap();
    let b = parse("[mcp.servers.gh]\ncommand = \"a\"\nargs = [\"2\"]\n").unwrap();
    let a2 = parse("[mcp.servers.gh]\ncommand = \"a\"\nargs = [\"1\"]\ntimeout = 3\n").unwrap();
    assert_ne!(a.servers[0].fingerprint(), b.servers[0].fingerprint());
    assert_eq!(a.servers[0].fingerprint(), a2.servers[0].fingerprint());
}

#[test]
fn env_expansion() {
    std::env::set_var("VIS_MCP_TEST_X", "secret");
    assert_eq!(
        expand_env("Bearer ${VIS_MCP_TEST_X}!", "h").unwrap(),
        "Bearer secret!"
    );
    assert_eq!(
        expand_env("${VIS_MCP_TEST_UNSET_Y}", "env of x").unwrap_err(),
        ExpandError::Unset {
            what: "env of x".into(),
            name: "VIS_MCP_TEST_UNSET_Y".into()
        }
    );
    assert!(expand_env("${VIS_MCP_TEST_UNSET_Y}", "env of x")
        .unwrap_err()
        .to_string()
        .contains("VIS_MCP_TEST_UNSET_Y is not set"));
    assert!(expand_env("${oops", "h")
        .unwrap_err()
        .to_string()
        .contains("closing"));
}
