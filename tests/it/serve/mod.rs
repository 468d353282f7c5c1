//! `vis serve`: the API (`api`), who may use it and how (`access`: token, login, Host,
//! Origin; `local`: blocks and other local users), its limits (`limits`), and the real command
//! with its configuration (`command`: the token file, providers, workspaces, upgrades), and the
//! events of the work a block starts (`work_events`: jobs, sub-sessions, unsent images).

mod access;
mod api;
mod command;
mod fencing;
mod limits;
mod local;
mod nodes;
mod work_events;

use serde_json::{json, Value};
use vis::providers::ProviderKind;

use crate::support::serve::TestServer;
use crate::support::TestEnv;

pub const OPENAI: ProviderKind = ProviderKind::OpenAi;

pub struct Client {
    pub http: reqwest::Client,
    pub url: String,
    pub token: Option<String>,
}

impl Client {
    /// A client with the server's token, as a script or `curl` would be.
    pub fn new(server: &TestServer) -> Client {
        Client::with_token(server, Some(&server.token))
    }

    /// A client without credentials.
    pub fn anonymous(server: &TestServer) -> Client {
        Client::with_token(server, None)
    }

    pub fn with_token(server: &TestServer, token: Option<&str>) -> Client {
        Client::at(&server.url, token)
    }

    pub fn at(url: &str, token: Option<&str>) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            url: url.to_string(),
            token: token.map(str::to_string),
        }
    }

    /// `/metrics` without the `node="…"` label every sample carries
    /// (`support::serve::without_node_label`), so whole lines can be compared.
    pub async fn metrics(&self) -> String {
        let text = self
            .req(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        crate::support::serve::without_node_label(&text)
    }

    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.url));
        if let Some(t) = &self.token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        r
    }

    pub async fn json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self.req(method, path);
        if let Some(b) = body {
            r = r
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Runs `code` in session `id` (`POST /api/sessions/{id}/exec`).
    pub async fn exec(&self, id: &str, code: &str) -> (u16, Value) {
        self.json(
            reqwest::Method::POST,
            &format!("/api/sessions/{id}/exec"),
            Some(serde_json::json!({ "code": code })),
        )
        .await
    }

    pub async fn create(&self, env: &TestEnv) -> String {
        let (status, body) = self
            .json(
                reqwest::Method::POST,
                "/api/sessions",
                Some(json!({"workspace": env.workspace()})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    pub async fn turn(&self, id: &str, message: &str) -> reqwest::Response {
        self.req(reqwest::Method::POST, &format!("/api/sessions/{id}/turns"))
            .header("content-type", "application/json")
            .body(json!({"message": message}).to_string())
            .send()
            .await
            .unwrap()
    }
}
