//! Stdio MCP servers die with the Vis process that started them, however it dies: SIGKILL a
//! `vis mcp`, `vis exec`, `vis chat` or `vis serve` in the middle of a block, and the server,
//! its child and the daemon it double-forked out of its session are all gone.

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::time::Duration;

use vis::providers::ProviderKind;

use crate::support::chat::calls;
use crate::support::fake_provider::FakeProvider;
use crate::support::mcp::{stdio_table, toml_str, with_fixture, write_config, RawMcp};
use crate::support::{wait_until, TestEnv};
use crate::vistest;

/// The block every host runs: it records the server's pid and those of the processes the
/// server started, then waits (so the host is killed in the middle of it).
const BLOCK: &str = "import json, time\npids = [fx.pid()] + fx.spawn_children()\nopen('pids.json', 'w').write(json.dumps(pids))\ntime.sleep(3600)";

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// The pids the block wrote (the server, its child, its daemon).
fn recorded_pids(env: &TestEnv, host: &mut Child) -> Vec<i32> {
    let file = env.workspace().join("pids.json");
    let written = wait_until(Duration::from_secs(120), || {
        std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str::<Vec<i32>>(&t).ok())
            .is_some()
            || host.try_wait().ok().flatten().is_some()
    });
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        written && !text.is_empty(),
        "the block did not record its pids (host: {:?})",
        host.try_wait()
    );
    let pids: Vec<i32> = serde_json::from_str(&text).unwrap();
    assert_eq!(pids.len(), 3, "{pids:?}");
    pids
}

/// SIGKILLs the host; every recorded process must be gone soon after.
fn kill_and_check(host: &mut Child, pids: &[i32]) {
    for &pid in pids {
        assert!(
            alive(pid),
            "{pid} of {pids:?} is not running before the kill"
        );
    }
    host.kill().unwrap();
    host.wait().unwrap();
    let gone = wait_until(Duration::from_secs(30), || pids.iter().all(|&p| !alive(p)));
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        gone,
        "still running after the host's SIGKILL: {left:?} of {pids:?}"
    );
}

vistest!(servers_die_with_a_killed_vis_exec, |env| {
    with_fixture(&env, "");
    let ws = env.workspace();
    let mut host = KillOnDrop(
        env.command(&[
            "exec",
            "--session",
            "killed",
            "--workspace",
            ws.to_str().unwrap(),
            BLOCK,
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let pids = recorded_pids(&env, &mut host.0);
    kill_and_check(&mut host.0, &pids);
});

vistest!(servers_die_with_a_killed_vis_mcp, |env| {
    with_fixture(&env, "");
    let mut mcp = RawMcp::initialized(&env, &[]);
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "python_execution", "arguments": {"code": BLOCK}}});
    mcp.send(format!("{request}\n").as_bytes());
    let pids = recorded_pids(&env, &mut mcp.child);
    kill_and_check(&mut mcp.child, &pids);
});

vistest!(servers_die_with_a_killed_vis_chat, |env| {
    with_fixture(&env, "");
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    fake.push(calls(kind, "a", &[BLOCK]));
    let mut host = KillOnDrop(
        env.command(&[
            "chat",
            "--provider",
            kind.as_str(),
            "--base-url",
            &fake.base_url(kind),
            "--model",
            "fake-model",
            "-m",
            "start the server",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let pids = recorded_pids(&env, &mut host.0);
    kill_and_check(&mut host.0, &pids);
});

/// One HTTP/1.1 request on a fresh connection; the response's status line and body.
pub(super) fn http(
    port: u16,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

/// A real `vis serve` with the fake provider and the fixture as server `fx`, listening on a
/// loopback port, and one session made through its API in the env's workspace.
pub(super) struct RealServe {
    pub host: KillOnDrop,
    pub port: u16,
    pub token: String,
    pub session: String,
}

pub(super) fn real_serve(env: &TestEnv, fake: &FakeProvider) -> RealServe {
    write_config(
        env,
        &format!(
            "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = {}\n{}",
            toml_str(&fake.base_url(ProviderKind::OpenAi)),
            stdio_table("fx", "")
        ),
    );
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let host = KillOnDrop(
        env.command(&["serve", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let up = wait_until(Duration::from_secs(60), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert!(up, "vis serve did not listen on {port}");
    // A client with the token vis serve generated at its first start.
    let token = std::fs::read_to_string(vis::config::serve_token_path(&env.db()))
        .unwrap()
        .trim()
        .to_string();
    // A session made through the API gets the workspace's MCP servers at once.
    let created = serde_json::json!({"workspace": env.workspace()}).to_string();
    let (status, body) = http(port, &token, "POST", "/api/sessions", &created);
    assert!(
        status.contains("201") || status.contains("200"),
        "{status}: {body}"
    );
    let session = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    RealServe {
        host,
        port,
        token,
        session,
    }
}

vistest!(servers_die_with_a_killed_vis_serve, |env| {
    let fake = FakeProvider::start();
    fake.push(calls(ProviderKind::OpenAi, "a", &[BLOCK]));
    let RealServe {
        mut host,
        port,
        token,
        session: id,
    } = real_serve(&env, &fake);
    // The turn's block never ends: its request is left waiting while the host is killed.
    let turn = std::thread::spawn(move || {
        let message = serde_json::json!({"message": "start the server"}).to_string();
        let path = format!("/api/sessions/{id}/turns");
        let _ = std::panic::catch_unwind(|| http(port, &token, "POST", &path, &message));
    });
    let pids = recorded_pids(&env, &mut host.0);
    kill_and_check(&mut host.0, &pids);
    let _ = turn.join();
});

/// A host process killed when the test ends, passed or not.
pub(super) struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
