//! Who may use the server from a browser or a client: the token on every route (loopback
//! included), the one-time login URL and its cookie, Host (DNS rebinding), Origin and body
//! types (other sites).

use reqwest::Method;
use serde_json::{json, Value};

use super::Client;
use crate::support::fake_provider::FakeProvider;
use crate::support::serve::{ServerConfig, TestServer};
use crate::vistest;

/// Sends `body` (JSON) with extra headers; returns the status and the JSON (or text) answer.
pub(super) async fn send(
    c: &Client,
    method: Method,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut r = c.req(method, path);
    if let Some(b) = body {
        r = r
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// What the server holds: each session's id and turns.
pub(super) async fn sessions(server: &TestServer) -> Vec<(String, i64)> {
    let (status, list) = Client::new(server)
        .json(Method::GET, "/api/sessions", None)
        .await;
    assert_eq!(status, 200, "{list}");
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["turns"].as_i64().unwrap(),
            )
        })
        .collect()
}

vistest!(every_route_needs_the_token_loopback_included, |env| {
    let rt = crate::support::chat::events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let id = Client::new(&server).create(&env).await;
        let pwned = env.workspace().join("pwned");
        let exec = json!({"code": format!("open({:?}, 'w').close()", pwned)});
        let routes: Vec<(Method, String, Option<Value>)> = vec![
            (Method::GET, "/api/sessions".into(), None),
            (Method::GET, "/api/providers".into(), None),
            (Method::GET, "/metrics".into(), None),
            (Method::GET, "/openapi.json".into(), None),
            (Method::GET, format!("/api/sessions/{id}"), None),
            (Method::GET, format!("/api/sessions/{id}/events"), None),
            (Method::GET, format!("/api/sessions/{id}/context"), None),
            (
                Method::POST,
                "/api/sessions".into(),
                Some(json!({"workspace": env.workspace()})),
            ),
            (
                Method::POST,
                format!("/api/sessions/{id}/exec"),
                Some(exec.clone()),
            ),
            (
                Method::POST,
                format!("/api/sessions/{id}/turns"),
                Some(json!({"message": "hi"})),
            ),
            (Method::POST, format!("/api/sessions/{id}/interrupt"), None),
            (
                Method::DELETE,
                format!("/api/sessions/{id}?history=delete"),
                None,
            ),
            (Method::POST, "/api/logout".into(), None),
            (Method::GET, "/no/such/route".into(), None),
        ];
        let longer = format!("{}x", server.token);
        let prefix = &server.token[..20];
        for token in [None, Some("wrong"), Some(longer.as_str()), Some(prefix)] {
            let c = Client::with_token(&server, token);
            for (method, path, body) in &routes {
                let (s, v) = c.json(method.clone(), path, body.clone()).await;
                assert_eq!(
                    (s, v["code"].as_str()),
                    (401, Some("unauthorized")),
                    "{token:?} {method} {path}: {v}"
                );
                assert!(
                    v["message"]
                        .as_str()
                        .unwrap()
                        .contains("Authorization: Bearer"),
                    "{v}"
                );
            }
        }
        // Nothing happened: the one session is still there, untouched, and no block ran.
        assert_eq!(sessions(&server).await, [(id.clone(), 0)]);
        assert!(!pwned.exists());
        assert_eq!(fake.request_count(), 0);
        // The page itself loads without the token: it holds no data.
        let page = Client::anonymous(&server)
            .req(Method::GET, "/")
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(html.contains("<title>Vis</title>") && !html.contains(&id));
        // With the token every route answers.
        let c = Client::new(&server);
        for path in [
            "/api/sessions",
            "/api/providers",
            "/metrics",
            "/openapi.json",
        ] {
            let (s, v) = c.json(Method::GET, path, None).await;
            assert_eq!(s, 200, "{path}: {v}");
        }
    });
});

vistest!(a_rebinding_page_cannot_reach_the_server, |env| {
    // The review's reproduction: a page on evil.example (whose name now resolves to
    // 127.0.0.1) posts to the server, which used to create a session in '/' and run code.
    let rt = crate::support::chat::events();
    let fake = FakeProvider::start();
    let server = TestServer::start(
        &env,
        &fake,
        ServerConfig {
            public_name: Some("vis.example.test".into()),
            ..Default::default()
        },
    );
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        let port = server.url.rsplit(':').next().unwrap().to_string();
        let evil = format!("evil.example:{port}");
        let evil_origin = format!("http://{evil}");
        let pwned = env.workspace().join("pwned");
        let attempts: Vec<(Method, String, Option<Value>)> = vec![
            (
                Method::POST,
                "/api/sessions".into(),
                Some(json!({"workspace": env.workspace()})),
            ),
            (
                Method::POST,
                format!("/api/sessions/{id}/exec"),
                Some(json!({"code": format!("open({:?}, 'w').close()", pwned)})),
            ),
            (Method::GET, "/api/sessions".into(), None),
            (Method::GET, "/".into(), None),
            (Method::GET, "/login?code=x".to_string(), None),
        ];
        for (method, path, body) in attempts {
            // Even with the token (should the page have it), the name gives it away.
            for host in [
                evil.as_str(),
                "evil.example",
                "localhost.evil.example",
                "127.0.0.1.nip.io",
            ] {
                let (s, v) = send(
                    &c,
                    method.clone(),
                    &path,
                    body.clone(),
                    &[("host", host), ("origin", &evil_origin)],
                )
                .await;
                assert_eq!(
                    (s, v["code"].as_str()),
                    (403, Some("host_not_allowed")),
                    "{host} {method} {path}: {v}"
                );
                assert!(
                    v["message"].as_str().unwrap().contains("public_name"),
                    "{v}"
                );
            }
        }
        assert!(!pwned.exists());
        assert_eq!(sessions(&server).await, [(id.clone(), 0)]);
        // The names the server answers to.
        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            "vis.example.test".into(),
            format!("VIS.example.test:{port}"),
        ] {
            let (s, v) = send(&c, Method::GET, "/api/sessions", None, &[("host", &host)]).await;
            assert_eq!(s, 200, "{host}: {v}");
        }
    });
});

vistest!(other_sites_cannot_make_changes, |env| {
    let rt = crate::support::chat::events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        let port = server.url.rsplit(':').next().unwrap().to_string();
        let create = json!({"workspace": env.workspace()});
        let other_port = format!("http://127.0.0.1:{}", port.parse::<u16>().unwrap() ^ 1);
        for origin in [
            "http://evil.example",
            "null",
            other_port.as_str(),
            "http://localhost",
            "file://",
        ] {
            let (s, v) = send(
                &c,
                Method::POST,
                "/api/sessions",
                Some(create.clone()),
                &[("origin", origin)],
            )
            .await;
            assert_eq!(
                (s, v["code"].as_str()),
                (403, Some("origin_not_allowed")),
                "{origin}: {v}"
            );
            let (s, _) = send(
                &c,
                Method::DELETE,
                &format!("/api/sessions/{id}"),
                None,
                &[("origin", origin)],
            )
            .await;
            assert_eq!(s, 403, "{origin}");
        }
        // The body types an HTML form or a "simple" cross-site fetch can send.
        for kind in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/plain; charset=utf-8",
        ] {
            let resp = c
                .req(Method::POST, "/api/sessions")
                .header("content-type", kind)
                .body(create.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 415, "{kind}");
            let v: Value = resp.json().await.unwrap();
            assert_eq!(v["code"], "unsupported_media_type");
            assert!(
                v["message"].as_str().unwrap().contains("application/json"),
                "{v}"
            );
        }
        assert_eq!(sessions(&server).await, [(id.clone(), 0)]);
        // This server's own page, and clients without a browser (no Origin), get through.
        let own = server.url.clone();
        let (s, v) = send(
            &c,
            Method::POST,
            "/api/sessions",
            Some(create.clone()),
            &[("origin", &own)],
        )
        .await;
        assert_eq!(s, 201, "{v}");
        let (s, v) = c
            .json(Method::POST, "/api/sessions", Some(create.clone()))
            .await;
        assert_eq!(s, 201, "{v}");
    });
});

vistest!(
    the_one_time_login_url_gives_a_browser_a_strict_cookie_once,
    |env| {
        let rt = crate::support::chat::events();
        let fake = FakeProvider::start();
        let server = TestServer::start(&env, &fake, ServerConfig::default());
        rt.block_on(async {
            let anon = Client::anonymous(&server);
            let login = server.login_url();
            let path = login.strip_prefix(&server.url).unwrap().to_string();
            let resp = anon.req(Method::GET, &path).send().await.unwrap();
            assert_eq!(resp.status(), 303);
            assert_eq!(resp.headers()["location"], "/");
            let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
            for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
                assert!(set.contains(attr), "{set}");
            }
            let cookie = set.split(';').next().unwrap().to_string();
            assert!(
                cookie.starts_with(&format!("{}=", server.cookie_name())),
                "{cookie}"
            );
            // The code works once; a made-up one never.
            for used in [path.clone(), "/login?code=0123".into(), "/login".into()] {
                let resp = anon.req(Method::GET, &used).send().await.unwrap();
                assert_eq!(resp.status(), 303);
                assert_eq!(resp.headers()["location"], "/?login=expired", "{used}");
                assert!(resp.headers().get("set-cookie").is_none(), "{used}");
            }
            // The cookie reads; it changes things only with this server's Origin.
            let with_cookie = ("cookie", cookie.as_str());
            let own_origin = ("origin", server.url.as_str());
            let (s, v) = send(&anon, Method::GET, "/api/sessions", None, &[with_cookie]).await;
            assert_eq!(s, 200, "{v}");
            let create = json!({"workspace": env.workspace()});
            let (s, v) = send(
                &anon,
                Method::POST,
                "/api/sessions",
                Some(create.clone()),
                &[with_cookie],
            )
            .await;
            assert_eq!(
                (s, v["code"].as_str()),
                (403, Some("origin_not_allowed")),
                "{v}"
            );
            let (s, v) = send(
                &anon,
                Method::POST,
                "/api/sessions",
                Some(create.clone()),
                &[with_cookie, own_origin, ("sec-fetch-site", "same-site")],
            )
            .await;
            assert_eq!(
                (s, v["code"].as_str()),
                (403, Some("origin_not_allowed")),
                "{v}"
            );
            let (s, v) = send(
                &anon,
                Method::POST,
                "/api/sessions",
                Some(create.clone()),
                &[with_cookie, own_origin, ("sec-fetch-site", "same-origin")],
            )
            .await;
            assert_eq!(s, 201, "{v}");
            // A forged cookie is nothing.
            let forged = format!("{}=00ff", server.cookie_name());
            let (s, _) = send(
                &anon,
                Method::GET,
                "/api/sessions",
                None,
                &[("cookie", &forged)],
            )
            .await;
            assert_eq!(s, 401);
            // Logging out ends the cookie.
            let (s, _) = send(
                &anon,
                Method::POST,
                "/api/logout",
                None,
                &[with_cookie, own_origin],
            )
            .await;
            assert_eq!(s, 200);
            let (s, _) = send(&anon, Method::GET, "/api/sessions", None, &[with_cookie]).await;
            assert_eq!(s, 401);
            // The page's token form: the token (not anything else) buys a cookie.
            let (s, v) = anon
                .json(
                    Method::POST,
                    "/api/login",
                    Some(json!({"token": "not-it-at-all-really"})),
                )
                .await;
            assert_eq!((s, v["code"].as_str()), (401, Some("unauthorized")), "{v}");
            let resp = anon
                .req(Method::POST, "/api/login")
                .header("content-type", "application/json")
                .body(json!({"token": server.token}).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
            assert!(
                set.contains("HttpOnly") && set.contains("SameSite=Strict"),
                "{set}"
            );
            let fresh = set.split(';').next().unwrap();
            let (s, _) = send(
                &anon,
                Method::GET,
                "/api/sessions",
                None,
                &[("cookie", fresh)],
            )
            .await;
            assert_eq!(s, 200);
        });
    }
);

/// The page's modules, as the source tree has them: `/web/<file>` for every `.js` beside the
/// page.
fn module_paths() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/serve/web");
    let mut paths: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".js"))
        .map(|name| format!("/web/{name}"))
        .collect();
    paths.sort();
    paths
}

vistest!(
    the_pages_modules_load_without_the_token_at_their_fixed_paths_only,
    |env| {
        let rt = crate::support::chat::events();
        let fake = FakeProvider::start();
        let server = TestServer::start(&env, &fake, ServerConfig::default());
        rt.block_on(async {
            let anon = Client::anonymous(&server);
            let paths = module_paths();
            assert!(paths.contains(&"/web/main.js".to_string()), "{paths:?}");
            for path in &paths {
                let resp = anon.req(Method::GET, path).send().await.unwrap();
                assert_eq!(resp.status(), 200, "{path}");
                let header = |name: &str| resp.headers()[name].to_str().unwrap().to_string();
                assert_eq!(header("content-type"), "text/javascript; charset=utf-8");
                assert_eq!(header("x-content-type-options"), "nosniff");
                assert_eq!(header("cache-control"), "no-store");
                let file = path.strip_prefix("/web/").unwrap();
                let source = std::fs::read_to_string(
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("src/serve/web")
                        .join(file),
                )
                .unwrap();
                assert_eq!(resp.text().await.unwrap(), source, "{path} as written");
            }
            // Only those paths: anything else under /web/ is an ordinary route, which needs
            // the token, and with it is not found; nothing else is read.
            let c = Client::new(&server);
            for path in [
                "/web/",
                "/web/index.html",
                "/web/app.css",
                "/web/main.js/",
                "/web//main.js",
                "/web/%6dain.js",
                "/web/..%2f..%2fCargo.toml",
                "/web/x.js",
            ] {
                let (s, v) = anon.json(Method::GET, path, None).await;
                assert_eq!(
                    (s, v["code"].as_str()),
                    (401, Some("unauthorized")),
                    "{path}"
                );
                let (s, v) = c.json(Method::GET, path, None).await;
                assert_eq!((s, v["code"].as_str()), (404, Some("not_found")), "{path}");
            }
            // A module is read-only, and the Host check still comes first.
            let (s, _) = send(&anon, Method::POST, "/web/main.js", Some(json!({})), &[]).await;
            assert_eq!(s, 401);
            let (s, v) = send(
                &anon,
                Method::GET,
                "/web/main.js",
                None,
                &[("host", "evil.example")],
            )
            .await;
            assert_eq!((s, v["code"].as_str()), (403, Some("host_not_allowed")));
        });
    }
);
