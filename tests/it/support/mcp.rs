//! MCP helpers: the Python SDK venv (`.test-venv`, installed by `scripts/test.sh`), the fixture
//! server (`tests/fixtures/mcp/server.py`, stdio or streamable HTTP), config snippets, and a
//! real MCP client (`tests/fixtures/mcp/driver.py`) driving `vis mcp`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{vis_bin, TestEnv};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python of the venv holding the official MCP SDK.
pub fn python() -> PathBuf {
    let py = repo().join(".test-venv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: run scripts/test.sh once (it creates .test-venv with the MCP SDK)",
        py.display()
    );
    py
}

pub fn fixture_server() -> PathBuf {
    repo().join("tests/fixtures/mcp/server.py")
}

pub fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A `[mcp.servers.NAME]` table that runs the fixture server over stdio, plus `extra` lines.
pub fn stdio_table(name: &str, extra: &str) -> String {
    format!(
        "[mcp.servers.{name}]\ncommand = {}\nargs = [{}]\n{extra}\n",
        toml_str(&python().to_string_lossy()),
        toml_str(&fixture_server().to_string_lossy())
    )
}

/// Writes `config.toml` into the env's config directory.
pub fn write_config(env: &TestEnv, text: &str) {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(env.config_dir().join("config.toml"), text).unwrap();
}

/// Config with the fixture as server `fx` (stdio).
pub fn with_fixture(env: &TestEnv, extra: &str) {
    write_config(env, &stdio_table("fx", extra));
}

/// Runs `vis mcp ARGS` under the Python SDK client with `body` as the test body (see
/// `driver.py`); returns what the body recorded with `out(...)`.
pub fn drive(env: &TestEnv, args: &[&str], body: &str) -> Value {
    let mut client = Command::new(python());
    client
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir());
    drive_with(env, client, args, body)
}

/// [`drive`] with `client`: the client's Python, with the environment the test chose (the
/// client passes its own environment to `vis mcp`).
pub fn drive_with(env: &TestEnv, mut cmd: Command, args: &[&str], body: &str) -> Value {
    cmd.arg(repo().join("tests/fixtures/mcp/driver.py"))
        .arg(vis_bin())
        .arg("--db")
        .arg(env.db())
        .arg("mcp")
        .args(args)
        .current_dir(env.workspace())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP client failed ({}):\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    let line = stdout.lines().last().unwrap_or_default();
    let mut v: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("client output is not JSON ({e}): {stdout}\nstderr: {stderr}"));
    v["_stderr"] = stderr.into_owned().into();
    v
}

/// The fixture served over streamable HTTP on a free loopback port; killed on drop.
pub struct HttpFixture {
    pub child: Child,
    pub url: String,
}

impl HttpFixture {
    pub fn start() -> HttpFixture {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(python())
            .arg(fixture_server())
            .arg("--http")
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Ready when it accepts connections (its start-up imports take a moment).
        let ready = super::wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(ready, "the HTTP fixture did not start on port {port}");
        HttpFixture {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last JSON line a block printed (blocks print `json.dumps(...)` as their last line).
pub fn last_json(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{') || (l.starts_with('[') && !l.starts_with("[vis]")))
        .unwrap_or_else(|| panic!("no JSON line in: {stdout}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// `.vis/mcp.toml` in the env's workspace.
pub fn write_workspace_servers(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join(".vis")).unwrap();
    std::fs::write(dir.join(".vis/mcp.toml"), text).unwrap();
}

/// `vis mcp` driven by hand over its stdin/stdout: raw bytes in, JSON lines out. For what no
/// SDK client would send (broken lines, huge messages) and for killing the process itself.
pub struct RawMcp {
    pub child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

/// How long one answer may take before the test fails (a hang must not block CI).
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

impl RawMcp {
    /// Starts `vis mcp ARGS` in the env (its stderr goes to the test's stderr).
    pub fn start(env: &TestEnv, args: &[&str]) -> RawMcp {
        let mut child = env
            .command(&[&["mcp"], args].concat())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        RawMcp {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    /// Starts it and completes the MCP handshake.
    pub fn initialized(env: &TestEnv, args: &[&str]) -> RawMcp {
        let mut mcp = RawMcp::start(env, args);
        mcp.initialize();
        mcp
    }

    pub fn initialize(&mut self) -> Value {
        self.send(br#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-test","version":"0"}}}"#);
        self.send(b"\n");
        let answer = self.next();
        assert_eq!(answer["id"], "init", "{answer}");
        assert!(answer.get("result").is_some(), "{answer}");
        self.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        answer
    }

    pub fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next JSON line `vis mcp` writes.
    pub fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(ANSWER_WITHIN)
            .unwrap_or_else(|e| panic!("vis mcp did not answer within {ANSWER_WITHIN:?}: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// `tools/call python_execution {code}` with request id `id`; returns the answer.
    pub fn call(&mut self, id: i64, code: &str) -> Value {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "python_execution", "arguments": {"code": code}}});
        self.send(format!("{request}\n").as_bytes());
        self.next()
    }

    /// Closes stdin and waits for the process to exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for RawMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
