//! Attackers on this machine: a block with the network on (it reaches loopback), and another
//! local user (as uid 1001: no token to read, none to plant).

use std::process::Command;

use reqwest::Method;
use serde_json::json;

use super::access::sessions;
use super::Client;
use crate::support::fake_provider::FakeProvider;
use crate::support::serve::{ServeProcess, ServerConfig, TestServer};
use crate::support::TestEnv;
use crate::vistest;

vistest!(a_block_without_the_token_cannot_drive_the_api, |env| {
    // The review's reproduction: with the network on, a block listed, read, ran code in and
    // deleted other sessions through the server on loopback.
    let rt = crate::support::chat::events();
    let fake = FakeProvider::start();
    let server = TestServer::start(
        &env,
        &fake,
        ServerConfig {
            tweak: Some(std::sync::Arc::new(|s| s.worker.sandbox.network = true)),
            ..Default::default()
        },
    );
    rt.block_on(async {
        let c = Client::new(&server);
        let victim = c.create(&env).await;
        let attacker = c.create(&env).await;
        let port = server.url.rsplit(':').next().unwrap();
        let code = format!(
            r#"import os, urllib.request, urllib.error
base = {url:?}
def call(method, path, body=None, headers={{}}):
    req = urllib.request.Request(base + path, method=method, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
json = {{'content-type': 'application/json'}}
print('list', call('GET', '/api/sessions'))
print('read', call('GET', '/api/sessions/{victim}'))
print('exec', call('POST', '/api/sessions/{victim}/exec', b'{{"code": "print(1)"}}', json))
print('delete', call('DELETE', '/api/sessions/{victim}?history=delete'))
print('rebind', call('GET', '/api/sessions', None, {{'Host': 'evil.example:{port}'}}))
print('env', sorted(k for k in os.environ if 'TOKEN' in k or 'VIS_SERVE' in k))"#,
            url = server.url,
        );
        let (s, v) = c
            .json(
                Method::POST,
                &format!("/api/sessions/{attacker}/exec"),
                Some(json!({"code": code})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let out = v["output"].as_str().unwrap();
        assert_eq!(
            out, "list 401\nread 401\nexec 401\ndelete 401\nrebind 403\nenv []\n",
            "{v}"
        );
        // The victim is intact.
        let mut held = sessions(&server).await;
        held.sort();
        let mut expected = vec![(victim.clone(), 0), (attacker.clone(), 1)];
        expected.sort();
        assert_eq!(held, expected);
    });
});

#[test]
fn a_block_cannot_read_the_serve_token() {
    let env = TestEnv::new();
    let mut cmd = env.command(&["serve", "--network"]);
    cmd.env_remove("VIS_SERVE_TOKEN");
    let server = ServeProcess::start(cmd);
    let token_file = vis::config::serve_token_path(&env.db());
    let token = std::fs::read_to_string(&token_file).unwrap();
    let rt = crate::support::chat::events();
    rt.block_on(async {
        let c = Client::at(&server.url, Some(token.trim()));
        let id = c.create(&env).await;
        let code = format!(
            "for p in [{:?}, {:?}]:\n    try:\n        open(p, 'rb').read(1)\n        print('read', p)\n    except OSError as e:\n        print('refused', type(e).__name__)",
            token_file,
            env.db()
        );
        let (s, v) = c
            .json(Method::POST, &format!("/api/sessions/{id}/exec"), Some(json!({"code": code})))
            .await;
        assert_eq!(s, 200, "{v}");
        let out = v["output"].as_str().unwrap();
        assert!(!out.contains("read"), "{out}");
        assert_eq!(out.matches("refused").count(), 2, "{out}");
    });
}

/// `cmd` run as uid 1001 (no such user need exist), with stdout and the exit code.
fn as_other_user(args: &[&str]) -> (i32, String) {
    let out = Command::new("setpriv")
        .args(["--reuid=1001", "--regid=1001", "--clear-groups", "--"])
        .args(args)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn another_local_user_cannot_use_the_server() {
    // The review's reproduction: as uid 1001, a session in /root on root's server wrote files
    // as root. Now the other user has no token: the file is root's alone, and without it
    // every request is refused.
    let env = TestEnv::new();
    let server = ServeProcess::start(env.command(&["serve"]));
    // Let the other user reach the directory, so the file's own mode is what protects it.
    for dir in [env.path().to_path_buf(), env.workspace()] {
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let token_file = vis::config::serve_token_path(&env.db());
    let (code, out) = as_other_user(&["cat", token_file.to_str().unwrap()]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    let target = format!("{}/api/sessions", server.url);
    for extra in [
        vec![],
        vec!["-H", "Authorization: Bearer "],
        vec!["-H", "Authorization: Bearer guess"],
    ] {
        let mut args = vec![
            "curl",
            "-s",
            "-w",
            " %{http_code}",
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"workspace": "/root"}"#,
        ];
        args.extend(extra);
        args.push(&target);
        let (code, out) = as_other_user(&args);
        assert_eq!(code, 0, "{out}");
        assert!(
            out.ends_with(" 401") && out.contains("unauthorized"),
            "{out}"
        );
    }
    let store = vis::store::Store::open(&env.db()).unwrap();
    assert!(store.list_sessions().unwrap().is_empty());
    // Even root's own client cannot make the home directory a workspace.
    let token = std::fs::read_to_string(&token_file).unwrap();
    let rt = crate::support::chat::events();
    rt.block_on(async {
        let c = Client::at(&server.url, Some(token.trim()));
        let home = std::env::var("HOME").unwrap();
        let (s, v) = c
            .json(
                Method::POST,
                "/api/sessions",
                Some(json!({"workspace": home})),
            )
            .await;
        assert_eq!((s, v["code"].as_str()), (400, Some("bad_request")), "{v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("home directory itself"),
            "{v}"
        );
    });
}

#[test]
fn a_token_file_another_user_planted_is_refused() {
    // In a directory others may write, another user could plant a token they know.
    let env = TestEnv::new();
    let shared = env.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(
        env.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(
        &shared,
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    let planted = shared.join("serve-token");
    let (code, out) = as_other_user(&[
        "sh",
        "-c",
        &format!(
            "umask 077; echo known-to-the-attacker-0123456789 > {}",
            planted.display()
        ),
    ]);
    assert_eq!(code, 0, "{out}");
    let db = shared.join("vis.db");
    let run: crate::support::Run = Command::new(crate::support::vis_bin())
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
        .into();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("belongs to uid 1001") && run.stderr.contains("remove it"),
        "{}",
        run.stderr
    );
    // Nothing was written: no database, the planted file as it was.
    assert!(!db.exists());
    assert_eq!(
        std::fs::read_to_string(&planted).unwrap(),
        "known-to-the-attacker-0123456789\n"
    );
}
