//! What a local server says about its context window.
//!
//! Model tables know the hosted models; a local server runs whatever it was started with, in a
//! window it was given (`llama-server -c 8192`). Several servers say so:
//!
//! | server | where | field |
//! |---|---|---|
//! | llama.cpp `llama-server` | `GET /props` | `default_generation_settings.n_ctx` (the window each request gets) |
//! | llama.cpp `llama-server` | `GET /v1/models` | `data[].meta.n_ctx_train` (the model's trained window) |
//! | vLLM | `GET /v1/models` | `data[].max_model_len` |
//! | Ollama | `GET /api/ps` | `models[].context_length` (the window of the loaded model) |
//! | Ollama | `POST /api/show` | `num_ctx` in `parameters`, else `model_info["<arch>.context_length"]` (the model's maximum) |
//! | LM Studio | `GET /api/v0/models/{model}` | `loaded_context_length`, else `max_context_length` |
//! | OpenRouter and others | `GET /v1/models` | `data[].context_length` |
//!
//! llama-cpp-python says nothing (its `/v1/models` lists ids only, `/props` is 404).
//!
//! The probes go out together once per session start, each with a short timeout, only to
//! OpenAI-compatible servers that are not OpenAI's own API; every failure (refused, 404, not
//! JSON, a slow server) just leaves the figure unknown, and the gateway's guess stays, labelled
//! as one. The figure that describes the running server best wins (the order of the table).

use std::time::Duration;

use futures::future::join_all;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::Value;

use super::{ProviderKind, ProviderSettings};

/// How long each probe may take (they run at the same time).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The most of a probe's answer read (OpenRouter's model list is about a megabyte).
const PROBE_BODY_LIMIT: usize = 8 << 20;

/// A server's own figure for its context window, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerWindow {
    pub tokens: u64,
    /// `llama.cpp /props n_ctx`, `vLLM max_model_len`, …
    pub origin: &'static str,
}

/// The probes, in the order their figures are preferred.
enum Probe {
    Props,
    Models,
    OllamaPs,
    OllamaShow,
    LmStudio,
}

/// The context window `settings`' server tells about, if it tells (see the module docs).
pub async fn context_window(settings: &ProviderSettings) -> Option<ServerWindow> {
    if settings.kind != ProviderKind::OpenAi {
        return None;
    }
    let base = settings.base_url.trim().trim_end_matches('/').to_string();
    let url = reqwest::Url::parse(&base).ok()?;
    if url.host_str() == Some("api.openai.com") {
        return None;
    }
    let root = base.strip_suffix("/v1").unwrap_or(&base).to_string();
    let mut headers = HeaderMap::new();
    if let Some(key) = settings
        .api_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
    {
        if let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {key}")) {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
    }
    super::client::install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("vis/", env!("CARGO_PKG_VERSION")))
        .timeout(PROBE_TIMEOUT)
        .connect_timeout(PROBE_TIMEOUT)
        .default_headers(headers);
    if super::client::is_loopback(&url) {
        builder = builder.no_proxy();
    }
    let client = builder.build().ok()?;
    let model = settings.model.as_str();
    let probes = [
        Probe::Props,
        Probe::Models,
        Probe::OllamaPs,
        Probe::OllamaShow,
        Probe::LmStudio,
    ];
    let answers = join_all(probes.iter().map(|probe| {
        let request = match probe {
            Probe::Props => client.get(format!("{root}/props")),
            Probe::Models => client.get(format!("{base}/models")),
            Probe::OllamaPs => client.get(format!("{root}/api/ps")),
            Probe::OllamaShow => client
                .post(format!("{root}/api/show"))
                .json(&serde_json::json!({ "model": model })),
            Probe::LmStudio => client.get(format!("{root}/api/v0/models/{}", url_segment(model))),
        };
        fetch(request)
    }))
    .await;
    let mut found: Vec<ServerWindow> = Vec::new();
    for (probe, answer) in probes.iter().zip(answers) {
        if let Some(value) = answer {
            found.extend(read(probe, &value, model));
        }
    }
    found.into_iter().next()
}

/// The JSON of a successful answer, or nothing.
async fn fetch(request: reqwest::RequestBuilder) -> Option<Value> {
    let mut response = request.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        body.extend_from_slice(&chunk);
        if body.len() > PROBE_BODY_LIMIT {
            return None;
        }
    }
    serde_json::from_slice(&body).ok()
}

/// `name` as one path segment (a model id may hold `/` and `:`).
fn url_segment(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A positive whole number of tokens at `path`.
fn tokens(value: &Value, path: &[&str]) -> Option<u64> {
    let mut v = value;
    for key in path {
        v = v.get(key)?;
    }
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as u64))
        .filter(|&n| n > 0)
}

/// The entry of a model list that is `model` (or the only one: a local server serves one
/// model whatever name the request gives).
fn entry<'a>(list: &'a [Value], model: &str, key: &str) -> Option<&'a Value> {
    list.iter()
        .find(|m| m.get(key).and_then(Value::as_str) == Some(model))
        .or_else(|| (list.len() == 1).then(|| &list[0]))
}

/// What one probe's answer says, best figure first.
fn read(probe: &Probe, value: &Value, model: &str) -> Vec<ServerWindow> {
    let window = |tokens: Option<u64>, origin: &'static str| {
        tokens.map(|tokens| ServerWindow { tokens, origin })
    };
    match probe {
        Probe::Props => window(
            tokens(value, &["default_generation_settings", "n_ctx"]),
            "llama.cpp /props n_ctx",
        )
        .into_iter()
        .collect(),
        Probe::Models => {
            let Some(list) = value.get("data").and_then(Value::as_array) else {
                return Vec::new();
            };
            let Some(m) = entry(list, model, "id") else {
                return Vec::new();
            };
            [
                window(
                    tokens(m, &["max_model_len"]),
                    "vLLM /v1/models max_model_len",
                ),
                window(tokens(m, &["context_length"]), "/v1/models context_length"),
                window(
                    tokens(m, &["meta", "n_ctx_train"]),
                    "llama.cpp /v1/models n_ctx_train (the model's trained window)",
                ),
            ]
            .into_iter()
            .flatten()
            .collect()
        }
        Probe::OllamaPs => {
            let Some(list) = value.get("models").and_then(Value::as_array) else {
                return Vec::new();
            };
            let loaded = list.iter().find(|m| {
                [m.get("name"), m.get("model")]
                    .into_iter()
                    .flatten()
                    .any(|n| n.as_str() == Some(model))
            });
            loaded
                .and_then(|m| {
                    window(
                        tokens(m, &["context_length"]),
                        "Ollama /api/ps context_length",
                    )
                })
                .into_iter()
                .collect()
        }
        Probe::OllamaShow => {
            let num_ctx = value
                .get("parameters")
                .and_then(Value::as_str)
                .and_then(|p| {
                    p.lines().find_map(|line| {
                        let mut words = line.split_whitespace();
                        (words.next() == Some("num_ctx"))
                            .then(|| words.next().and_then(|n| n.parse::<u64>().ok()))
                            .flatten()
                    })
                })
                .filter(|&n| n > 0);
            let trained = value
                .get("model_info")
                .and_then(Value::as_object)
                .and_then(|info| {
                    info.iter()
                        .find(|(k, _)| k.ends_with(".context_length"))
                        .and_then(|(_, v)| v.as_u64())
                })
                .filter(|&n| n > 0);
            [
                window(num_ctx, "Ollama /api/show num_ctx"),
                window(
                    trained,
                    "Ollama /api/show context_length (the model's maximum; Ollama may run it with a smaller num_ctx)",
                ),
            ]
            .into_iter()
            .flatten()
            .collect()
        }
        Probe::LmStudio => [
            window(
                tokens(value, &["loaded_context_length"]),
                "LM Studio loaded_context_length",
            ),
            window(
                tokens(value, &["max_context_length"]),
                "LM Studio max_context_length (the model's maximum)",
            ),
        ]
        .into_iter()
        .flatten()
        .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_server_shape_is_read() {
        let props = json!({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1});
        assert_eq!(read(&Probe::Props, &props, "m")[0].tokens, 8192);
        let vllm = json!({"data": [{"id": "Qwen/Qwen3-8B", "max_model_len": 32768}]});
        assert_eq!(
            read(&Probe::Models, &vllm, "Qwen/Qwen3-8B")[0].tokens,
            32768
        );
        let llama = json!({"data": [{"id": "x.gguf", "meta": {"n_ctx_train": 131072}}]});
        assert_eq!(read(&Probe::Models, &llama, "other-name")[0].tokens, 131072);
        let two =
            json!({"data": [{"id": "a", "context_length": 1}, {"id": "b", "context_length": 2}]});
        assert_eq!(read(&Probe::Models, &two, "b")[0].tokens, 2);
        assert!(read(&Probe::Models, &two, "c").is_empty());
        let ps =
            json!({"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "context_length": 4096}]});
        assert_eq!(read(&Probe::OllamaPs, &ps, "qwen3:8b")[0].tokens, 4096);
        let show = json!({"parameters": "temperature 0.6\nnum_ctx    16384\n",
            "model_info": {"qwen3.context_length": 40960}});
        let got = read(&Probe::OllamaShow, &show, "qwen3:8b");
        assert_eq!((got[0].tokens, got[1].tokens), (16384, 40960));
        let lms = json!({"id": "m", "max_context_length": 32768, "loaded_context_length": 4096});
        assert_eq!(read(&Probe::LmStudio, &lms, "m")[0].tokens, 4096);
        // llama-cpp-python's list has no figure.
        let plain = json!({"object": "list", "data": [{"id": "/x.gguf", "object": "model"}]});
        assert!(read(&Probe::Models, &plain, "smollm2").is_empty());
        assert_eq!(url_segment("qwen3:8b/x y"), "qwen3%3A8b%2Fx%20y");
    }
}
