//! Workspace servers (`.vis/mcp.toml`) run only once the user approved them, and the
//! approval shows what exactly is approved: command line, directory, and every environment
//! variable or header the server gets, with secrets masked.

use serde_json::{json, Value};

use crate::support::mcp::{fixture_server, last_json, python, toml_str, write_workspace_servers};
use crate::support::TestEnv;
use crate::vistest;

fn exec_json(env: &TestEnv, session: &str, code: &str) -> Value {
    let r = env.exec(session, code);
    assert_eq!(r.code, 0, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    last_json(&r.stdout)
}

vistest!(workspace_servers_run_only_once_approved, |env| {
    let ws = env.workspace();
    let declare = |arg: &str| {
        write_workspace_servers(
            &ws,
            &format!(
                "[mcp.servers.proj]\ncommand = {}\nargs = [{}, {}]\n",
                toml_str(&python().to_string_lossy()),
                toml_str(&fixture_server().to_string_lossy()),
                toml_str(arg)
            ),
        )
    };
    declare("one");
    let code = "import json\nprint(json.dumps({'defined': 'proj' in globals(), 'skipped': session['mcp']['skipped']}))";
    let r = env.exec("appr", code);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v = last_json(&r.stdout);
    assert_eq!(v["defined"], false);
    let skipped = &v["skipped"][0];
    assert_eq!(skipped["server"], "proj");
    assert!(
        skipped["reason"].as_str().unwrap().contains("not approved"),
        "{skipped}"
    );
    let fix = skipped["fix"].as_str().unwrap();
    assert!(
        fix.contains(&format!("vis mcp approve {}", ws.display())),
        "{fix}"
    );
    assert!(
        skipped["runs"].as_str().unwrap().contains("server.py one"),
        "{skipped}"
    );
    assert!(
        r.stderr.contains("MCP server `proj` is skipped"),
        "{}",
        r.stderr
    );
    // Approve it, exactly as declared.
    let a = env.vis(&["mcp", "approve", ws.to_str().unwrap()]);
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert!(a.stdout.contains("approved `proj`"), "{}", a.stdout);
    let v = exec_json(&env, "appr", "import json\nprint(json.dumps({'echo': proj.echo('ok'), 'skipped': session['mcp']['skipped']}))");
    assert_eq!(v["echo"], "ok");
    assert_eq!(v["skipped"], json!([]));
    let listed = env.vis(&["mcp", "list", ws.to_str().unwrap()]);
    assert!(
        listed.stdout.contains("proj  runs  (workspace, stdio)"),
        "{}",
        listed.stdout
    );
    // A changed command line needs approval again.
    declare("two");
    let v = exec_json(&env, "appr", code);
    assert_eq!(v["defined"], false);
    assert!(v["skipped"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("not approved"));
    // An approval is per workspace: the same file elsewhere is not approved.
    let other = env.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(ws.join(".vis/mcp.toml"), {
        std::fs::create_dir_all(other.join(".vis")).unwrap();
        other.join(".vis/mcp.toml")
    })
    .unwrap();
    env.vis(&["mcp", "approve", ws.to_str().unwrap()]);
    let r = env.vis(&[
        "exec",
        "--session",
        "elsewhere",
        "--workspace",
        other.to_str().unwrap(),
        code,
    ]);
    let v = last_json(&r.stdout);
    assert_eq!(v["defined"], false, "{}", r.stdout);
});

vistest!(
    approval_shows_each_servers_environment_with_secrets_masked,
    |env| {
        let ws = env.workspace();
        write_workspace_servers(
            &ws,
            &format!(
                r#"[mcp.servers.proj]
command = {}
args = [{}]
cwd = "tools"
env = {{ DEBUG = "1", API_TOKEN = "hunter2-literal-token", UPSTREAM = "${{VIS_TEST_SECRET_KEY}}", CONFIG = "${{HOME}}/x", NOTE = "sk-proj-0123456789abcdefghijkl" }}

[mcp.servers.web]
url = "http://127.0.0.1:9/mcp"
headers = {{ Authorization = "Bearer ${{DOCS_TOKEN}}", X-Region = "eu-west-1" }}
"#,
                toml_str(&python().to_string_lossy()),
                toml_str(&fixture_server().to_string_lossy())
            ),
        );
        let expected = [
        "  environment: HOME, LOGNAME, PATH, SHELL, TERM, USER, LANG, LC_ALL, LC_CTYPE, TMPDIR, TZ from yours, and:",
        "    API_TOKEN=<hidden: 21 characters; a secret by its name>",
        "    CONFIG=${HOME}/x   <- from your environment: HOME",
        "    DEBUG=1",
        "    NOTE=<hidden: 30 characters; it looks like a secret>",
        "    UPSTREAM=${VIS_TEST_SECRET_KEY}   <- from your environment: VIS_TEST_SECRET_KEY (a secret by its name)",
        "  runs in tools (relative to the workspace)",
        "  headers:",
        "    Authorization: Bearer ${DOCS_TOKEN}   <- from your environment: DOCS_TOKEN (a secret by its name)",
        "    X-Region: eu-west-1",
    ];
        // Before approving, `vis mcp list` shows the same review under each skipped server.
        let listed = env.vis(&["mcp", "list", ws.to_str().unwrap()]);
        assert_eq!(listed.code, 0, "{}", listed.stderr);
        let approved = env.vis(&["mcp", "approve", ws.to_str().unwrap()]);
        assert_eq!(approved.code, 0, "{}", approved.stderr);
        for out in [&listed.stdout, &approved.stdout] {
            for line in expected {
                assert!(
                    out.lines().any(|l| l == line),
                    "missing {line:?} in:\n{out}"
                );
            }
            for secret in ["hunter2", "sk-proj"] {
                assert!(!out.contains(secret), "{secret} shown in:\n{out}");
            }
        }
        assert!(
            listed
                .stdout
                .contains("proj  skipped: it is declared by the workspace and not approved"),
            "{}",
            listed.stdout
        );
        assert!(
            approved.stdout.contains("approved `proj` for ")
                && approved.stdout.contains("approved `web` for "),
            "{}",
            approved.stdout
        );
        // The values as written are what was approved: the server gets them, expanded.
        std::fs::create_dir_all(ws.join("tools")).unwrap();
        let r = env
        .command(&[
            "exec",
            "--session",
            "env",
            "--workspace",
            ws.to_str().unwrap(),
            "import json\nprint(json.dumps({k: proj.env(k) for k in ['DEBUG', 'API_TOKEN', 'UPSTREAM']}))",
        ])
        .env("VIS_TEST_SECRET_KEY", "the-users-key")
        .output()
        .unwrap();
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(
            last_json(&stdout),
            json!({"DEBUG": "1", "API_TOKEN": "hunter2-literal-token", "UPSTREAM": "the-users-key"})
        );
    }
);
