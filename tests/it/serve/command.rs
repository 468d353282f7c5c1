//! The real `vis serve` command: its token (generated into `serve-token`, or given, never
//! weak), the login link it prints, providers only as configured (the server's key goes
//! nowhere else), workspaces only where allowed, and an upgrade of the binary under it.

use std::process::Command;

use reqwest::Method;
use serde_json::json;

use super::{Client, OPENAI};
use crate::support::chat::{answer, events};
use crate::support::fake_provider::FakeProvider;
use crate::support::serve::{read_events, ServeProcess};
use crate::support::{Run, TestEnv};
use crate::vistest;

/// Points the server's own provider (`default`) at `fake`, with `extra` appended to the config.
fn configure(env: &TestEnv, fake: &FakeProvider, extra: &str) {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        format!(
            "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\nmax_retries = 0\n{extra}",
            fake.base_url(OPENAI)
        ),
    )
    .unwrap();
}

fn token_of(env: &TestEnv) -> String {
    std::fs::read_to_string(vis::config::serve_token_path(&env.db()))
        .unwrap()
        .trim()
        .to_string()
}

vistest!(
    the_command_makes_a_token_and_prints_a_one_time_login_link,
    |env| {
        let first = ServeProcess::start(env.command(&["serve"]));
        let path = vis::config::serve_token_path(&env.db());
        assert_eq!(path, env.path().join("serve-token"));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o600
        );
        let token = token_of(&env);
        assert_eq!(token.len(), 64);
        // It says where the token is, never the token itself.
        assert!(
            first.banner.contains(&path.display().to_string()),
            "{}",
            first.banner
        );
        assert!(!first.banner.contains(&token), "{}", first.banner);
        assert!(first
            .login_url
            .starts_with(&format!("{}/login?code=", first.url)));
        let rt = events();
        rt.block_on(async {
            let c = Client::at(&first.url, Some(&token));
            let (s, v) = c.json(Method::GET, "/api/sessions", None).await;
            assert_eq!(s, 200, "{v}");
            let (s, _) = Client::at(&first.url, None)
                .json(Method::GET, "/api/sessions", None)
                .await;
            assert_eq!(s, 401);
            let login = first
                .login_url
                .strip_prefix(&first.url)
                .unwrap()
                .to_string();
            let anon = Client::at(&first.url, None);
            let resp = anon.req(Method::GET, &login).send().await.unwrap();
            assert_eq!(resp.status(), 303);
            assert!(resp.headers().get("set-cookie").is_some());
            let again = anon.req(Method::GET, &login).send().await.unwrap();
            assert_eq!(again.headers()["location"], "/?login=expired");
        });
        drop(first);
        // The next start keeps the token and prints a new link.
        let second = ServeProcess::start(env.command(&["serve"]));
        assert_eq!(token_of(&env), token);
        assert!(!second.login_url.is_empty());
    }
);

vistest!(a_weak_explicit_token_is_refused, |env| {
    let mut cmd = env.command(&["serve", "--listen", "127.0.0.1:0"]);
    cmd.env("VIS_SERVE_TOKEN", "s3cret");
    let run: Run = cmd.output().unwrap().into();
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("VIS_SERVE_TOKEN") && run.stderr.contains("at least 16"),
        "{}",
        run.stderr
    );
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        "[serve]\ntoken = \"short\"\n",
    )
    .unwrap();
    let run = env.vis(&["serve", "--listen", "127.0.0.1:0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("[serve] token in") && run.stderr.contains("config.toml"),
        "{}",
        run.stderr
    );
    // Nothing was written.
    assert!(!env.db().exists());
    assert!(!vis::config::serve_token_path(&env.db()).exists());
    // A strong one is used as given, and no file is made.
    std::fs::remove_file(env.config_dir().join("config.toml")).unwrap();
    let mut cmd = env.command(&["serve"]);
    cmd.env("VIS_SERVE_TOKEN", "a-strong-token-0123456789");
    let server = ServeProcess::start(cmd);
    assert!(
        server.banner.contains("VIS_SERVE_TOKEN"),
        "{}",
        server.banner
    );
    assert!(!vis::config::serve_token_path(&env.db()).exists());
    events().block_on(async {
        let (s, _) = Client::at(&server.url, Some("a-strong-token-0123456789"))
            .json(Method::GET, "/api/sessions", None)
            .await;
        assert_eq!(s, 200);
    });
});

vistest!(a_client_cannot_send_the_servers_key_elsewhere, |env| {
    // The review's reproduction: a session created with "base_url" sent the server's
    // `Authorization: Bearer <OPENAI_API_KEY>` to that URL.
    let fake = FakeProvider::start();
    let second = FakeProvider::start();
    let thief = FakeProvider::start();
    configure(
        &env,
        &fake,
        &format!(
            "[serve.providers.second]\nprovider = \"openai\"\nmodel = \"second-model\"\nbase_url = \"{}\"\napi_key_env = \"SECOND_KEY\"\n",
            second.base_url(OPENAI)
        ),
    );
    let mut cmd = env.command(&["serve"]);
    cmd.env("OPENAI_API_KEY", "sk-server-secret")
        .env("SECOND_KEY", "sk-second-secret");
    let server = ServeProcess::start(cmd);
    let rt = events();
    rt.block_on(async {
        let c = Client::at(&server.url, Some(&token_of(&env)));
        let ws = env.workspace();
        let stolen = thief.base_url(OPENAI);
        for (body, needle) in [
            (
                json!({"workspace": ws, "base_url": stolen}),
                "cannot choose the model or base URL",
            ),
            (
                json!({"workspace": ws, "model": "gpt-5", "provider": "default"}),
                "cannot choose the model or base URL",
            ),
            (
                json!({"workspace": ws, "provider": stolen}),
                "no provider named",
            ),
            (
                json!({"workspace": ws, "provider": "openai"}),
                "choose one of: default, second",
            ),
        ] {
            let (s, v) = c
                .json(Method::POST, "/api/sessions", Some(body.clone()))
                .await;
            assert_eq!(
                (s, v["code"].as_str()),
                (400, Some("bad_request")),
                "{body}: {v}"
            );
            assert!(
                v["message"].as_str().unwrap().contains(needle),
                "{body}: {v}"
            );
        }
        let (_, list) = c.json(Method::GET, "/api/sessions", None).await;
        assert_eq!(list, json!([]), "nothing was created");
        let (_, offered) = c.json(Method::GET, "/api/providers", None).await;
        assert_eq!(
            offered,
            json!([
                {"name": "default", "provider": "openai", "model": "fake-model"},
                {"name": "second", "provider": "openai", "model": "second-model"},
            ])
        );
        // The configured providers get their own keys.
        for (name, provider, key, model) in [
            ("default", &fake, "sk-server-secret", "fake-model"),
            ("second", &second, "sk-second-secret", "second-model"),
        ] {
            let (s, v) = c
                .json(
                    Method::POST,
                    "/api/sessions",
                    Some(json!({"workspace": ws, "provider": name})),
                )
                .await;
            assert_eq!(s, 201, "{v}");
            let id = v["id"].as_str().unwrap().to_string();
            provider.push(answer(OPENAI, "hello"));
            let evs = read_events(c.turn(&id, "hi").await, 1000).await;
            assert_eq!(evs.last().unwrap().data["status"], "done", "{evs:?}");
            let sent = provider.requests().pop().unwrap();
            assert_eq!(
                sent.header("authorization"),
                Some(format!("Bearer {key}").as_str())
            );
            assert_eq!(sent.json()["model"], model);
        }
        assert_eq!(thief.request_count(), 0);
    });
});

vistest!(
    a_stored_session_continues_only_with_a_configured_provider,
    |env| {
        // A session an older server created with a client's base URL: it is never used again.
        let fake = FakeProvider::start();
        let thief = FakeProvider::start();
        configure(&env, &fake, "");
        let id = "s-stored1";
        {
            let store = vis::store::Store::open(&env.db()).unwrap();
            store
                .ensure_session(id, &[env.workspace().to_string_lossy().into_owned()])
                .unwrap();
            store
                .set_session_model(id, "openai", "fake-model", &thief.base_url(OPENAI))
                .unwrap();
        }
        let mut cmd = env.command(&["serve"]);
        cmd.env("OPENAI_API_KEY", "sk-server-secret");
        let server = ServeProcess::start(cmd);
        events().block_on(async {
            let c = Client::at(&server.url, Some(&token_of(&env)));
            fake.push(answer(OPENAI, "hello"));
            let evs = read_events(c.turn(id, "hi").await, 1000).await;
            assert_eq!(evs.last().unwrap().data["status"], "done", "{evs:?}");
            let notice = evs.iter().find(|e| e.event == "notice").unwrap();
            assert!(
                notice.data["text"]
                    .as_str()
                    .unwrap()
                    .contains("continues with 'default'"),
                "{notice:?}"
            );
        });
        assert_eq!(thief.request_count(), 0);
        assert_eq!(fake.request_count(), 1);
        let store = vis::store::Store::open(&env.db()).unwrap();
        assert_eq!(
            store
                .session_model(id)
                .unwrap()
                .unwrap()
                .base_url
                .as_deref(),
            Some(fake.base_url(OPENAI).as_str())
        );
    }
);

vistest!(workspaces_only_where_the_server_allows, |env| {
    let fake = FakeProvider::start();
    let allowed = env.path().join("projects");
    let inside = allowed.join("one");
    let outside = env.path().join("elsewhere");
    let data = env.path().join("home");
    for d in [&inside, &outside, &data] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
    configure(
        &env,
        &fake,
        &format!("[serve]\nworkspaces = [\"{}\"]\n", allowed.display()),
    );
    // A session stored before, in a directory the server no longer allows.
    vis::store::Store::open(&env.db())
        .unwrap()
        .ensure_session("s-before1", &[outside.to_string_lossy().into_owned()])
        .unwrap();
    let server = ServeProcess::start(env.command(&["serve"]));
    events().block_on(async {
        let c = Client::at(&server.url, Some(&token_of(&env)));
        let cases = [
            (outside.clone(), "not beneath"),
            (allowed.join("link"), "not beneath"),
            ("/".into(), "'/' is refused"),
            (env.path().to_path_buf(), "holds Vis's own database"),
            (data.clone(), "is Vis's own data directory"),
            ("relative".into(), "not an absolute path"),
        ];
        for (ws, needle) in cases {
            let (s, v) = c
                .json(
                    Method::POST,
                    "/api/sessions",
                    Some(json!({"workspace": ws})),
                )
                .await;
            assert_eq!(
                (s, v["code"].as_str()),
                (400, Some("bad_request")),
                "{}: {v}",
                ws.display()
            );
            assert!(
                v["message"].as_str().unwrap().contains(needle),
                "{}: {v}",
                ws.display()
            );
        }
        let (_, list) = c.json(Method::GET, "/api/sessions", None).await;
        assert_eq!(
            list.as_array().unwrap().len(),
            1,
            "nothing was created: {list}"
        );
        let (s, v) = c
            .json(
                Method::POST,
                "/api/sessions/s-before1/exec",
                Some(json!({"code": "open('x', 'w').close()"})),
            )
            .await;
        assert_eq!((s, v["code"].as_str()), (400, Some("bad_request")), "{v}");
        assert!(
            v["message"].as_str().unwrap().contains("not beneath"),
            "{v}"
        );
        assert!(!outside.join("x").exists());
        let (s, v) = c
            .json(
                Method::POST,
                "/api/sessions",
                Some(json!({"workspace": inside})),
            )
            .await;
        assert_eq!(s, 201, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        let (s, v) = c.exec(&id, "import os\nprint(os.getcwd())").await;
        assert_eq!(
            (s, v["output"].as_str()),
            (
                200,
                Some(format!("{}\n", inside.canonicalize().unwrap().display()).as_str())
            ),
            "{v}"
        );
    });
});

vistest!(replacing_the_binary_does_not_break_new_sessions, |env| {
    // An upgrade replaces the file under a running server; its new workers must still start
    // (from the binary it runs, not from whatever the path now holds).
    let bin = env.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let copy = bin.join("vis");
    let worker = bin.join("vis-worker");
    for (from, to) in [
        (crate::support::vis_bin(), &copy),
        (crate::support::worker_bin(), &worker),
    ] {
        if std::fs::hard_link(&from, to).is_err() {
            std::fs::copy(&from, to).unwrap();
        }
    }
    let mut cmd = Command::new(&copy);
    cmd.arg("--db")
        .arg(env.db())
        .arg("serve")
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .current_dir(env.workspace());
    let server = ServeProcess::start(cmd);
    let rt = events();
    let c = Client::at(&server.url, Some(&token_of(&env)));
    let exec = |c: &Client, code: &'static str| {
        let c = Client::at(&c.url, c.token.as_deref());
        let env_ws = env.workspace();
        rt.block_on(async move {
            let (s, v) = c
                .json(
                    Method::POST,
                    "/api/sessions",
                    Some(json!({"workspace": env_ws})),
                )
                .await;
            assert_eq!(s, 201, "{v}");
            let id = v["id"].as_str().unwrap().to_string();
            c.exec(&id, code).await
        })
    };
    let (s, v) = exec(&c, "print('before')");
    assert_eq!((s, v["output"].as_str()), (200, Some("before\n")), "{v}");
    // The upgrade: new files renamed over the old ones (what package managers do).
    for old in [&copy, &worker] {
        let next = bin.join("next");
        std::fs::write(
            &next,
            "#!/bin/sh\necho 'not the binary the server runs' >&2\nexit 3\n",
        )
        .unwrap();
        std::fs::set_permissions(&next, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        std::fs::rename(&next, old).unwrap();
    }
    let (s, v) = exec(&c, "print('after')");
    assert_eq!((s, v["output"].as_str()), (200, Some("after\n")), "{v}");
    // And with the files gone altogether.
    std::fs::remove_file(&copy).unwrap();
    std::fs::remove_file(&worker).unwrap();
    let (s, v) = exec(&c, "print('gone')");
    assert_eq!((s, v["output"].as_str()), (200, Some("gone\n")), "{v}");
});
