//! The over-the-limit flag against the SDK's real reqwest client and a local HTTP server that
//! answers every request with one canned response; and the server's headers as HTTP headers.

use std::path::Path;

use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// Reads one request (head, then a body of its `content-length`).
async fn read_request(socket: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        seen.extend_from_slice(&buf[..n]);
        let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if seen.len() >= end + 4 + length {
            return;
        }
    }
}

/// A local server answering every request with `status`, `content_type` and `body`; its URL.
async fn serve(status: &'static str, content_type: &'static str, body: String) -> Arc<str> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                read_request(&mut socket).await;
                let head = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
            });
        }
    });
    url.into()
}

fn client() -> LimitedHttp {
    install_crypto_provider();
    LimitedHttp {
        inner: reqwest::Client::new(),
        over_limit: Arc::new(AtomicBool::new(false)),
    }
}

fn ping() -> ClientJsonRpcMessage {
    serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap()
}

/// A JSON-RPC answer to `ping` padded to about `bytes`.
fn answer(bytes: usize) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "result": {"pad": "x".repeat(bytes)}}).to_string()
}

fn limits(json_bytes: usize) -> StreamableHttpResponseLimits {
    let mut limits = StreamableHttpResponseLimits::default();
    limits.max_json_response_size = json_bytes;
    limits
}

fn raised(http: &LimitedHttp) -> bool {
    http.over_limit.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_json_answer_over_the_limit_raises_the_flag() {
    let url = serve("200 OK", "application/json", answer(500)).await;
    let http = client();
    let within = http
        .post_message_with_response_limits(
            url.clone(),
            ping(),
            None,
            None,
            HashMap::new(),
            limits(4096),
        )
        .await;
    assert!(
        matches!(within, Ok(StreamableHttpPostResponse::Json(..))),
        "{within:?}"
    );
    assert!(!raised(&http));
    let over = http
        .post_message_with_response_limits(url, ping(), None, None, HashMap::new(), limits(64))
        .await;
    assert!(
        matches!(over, Err(StreamableHttpError::ResponseBodyTooLarge { .. })),
        "{over:?}"
    );
    assert!(raised(&http));
}

#[tokio::test]
async fn an_sse_event_over_the_limit_raises_the_flag_when_it_arrives() {
    let body = format!("data: {}\n\n", answer(500));
    let url = serve("200 OK", "text/event-stream", body).await;
    let http = client();
    let posted = http
        .post_message_with_max_sse_event_size(url, ping(), None, None, HashMap::new(), 64)
        .await;
    let Ok(StreamableHttpPostResponse::Sse(stream, _)) = posted else {
        panic!("not a stream: {posted:?}");
    };
    // The stream is only opened: nothing was over the limit yet.
    assert!(!raised(&http));
    let items: Vec<bool> = stream.map(|item| item.is_ok()).collect().await;
    assert_eq!(items, [false], "the event is refused, not delivered");
    // The SDK's words for it are still the ones `EVENT_TOO_LARGE` looks for.
    assert!(raised(&http));
}

#[tokio::test]
async fn events_within_the_limit_leave_the_flag_down() {
    let body = format!("data: {}\n\ndata: {}\n\n", answer(10), answer(20));
    let url = serve("200 OK", "text/event-stream", body).await;
    let http = client();
    let stream = http
        .get_stream_with_max_sse_event_size(url, None, None, None, HashMap::new(), 4096)
        .await
        .unwrap();
    let events: Vec<String> = stream
        .map(|item| item.unwrap().data.unwrap_or_default())
        .collect()
        .await;
    assert_eq!(events, [answer(10), answer(20)]);
    assert!(!raised(&http));
}

#[tokio::test]
async fn an_event_over_the_limit_on_the_get_stream_raises_the_flag() {
    let body = format!("data: {}\n\n", answer(500));
    let url = serve("200 OK", "text/event-stream", body).await;
    let http = client();
    let stream = http
        .get_stream_with_max_sse_event_size(url, None, None, None, HashMap::new(), 64)
        .await
        .unwrap();
    let _drained: Vec<_> = stream.collect().await;
    assert!(raised(&http));
}

#[tokio::test]
async fn an_accepted_post_passes_through_and_an_http_error_is_not_a_size_error() {
    let http = client();
    let accepted = serve("202 Accepted", "application/json", String::new()).await;
    let posted = http
        .post_message(accepted, ping(), None, None, HashMap::new())
        .await;
    assert!(
        matches!(posted, Ok(StreamableHttpPostResponse::Accepted)),
        "{posted:?}"
    );
    let failing = serve("500 Internal Server Error", "text/plain", "boom".into()).await;
    let posted = http
        .post_message(failing, ping(), None, None, HashMap::new())
        .await;
    assert!(posted.is_err(), "{posted:?}");
    assert!(!raised(&http));
}

fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn headers_become_http_headers_with_the_environment_expanded() {
    let path = std::env::var("PATH").unwrap();
    let map = header_map(
        "docs",
        &headers(&[("X-Path", "p=${PATH}"), ("Accept-Language", "en")]),
        Path::new("/c/config.toml"),
    )
    .unwrap();
    assert_eq!(map.len(), 2);
    assert_eq!(map[&HeaderName::from_static("x-path")], format!("p={path}"));
    assert_eq!(map[&HeaderName::from_static("accept-language")], "en");
}

#[test]
fn a_header_http_cannot_carry_is_refused_naming_it_and_the_file() {
    let file = Path::new("/ws/.vis/mcp.toml");
    for bad in [("Bad Header", "x"), ("X-Token", "a\nb"), ("", "x")] {
        let err = header_map("docs", &headers(&[bad]), file).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "MCP server `docs`: header `{}` is not a valid HTTP header; fix it in /ws/.vis/mcp.toml",
                bad.0
            )
        );
    }
}

#[test]
fn an_unset_variable_in_a_header_names_the_header_and_the_variable() {
    let err = header_map(
        "docs",
        &headers(&[("Authorization", "Bearer ${VIS_TEST_NEVER_SET_TOKEN}")]),
        Path::new("/c/config.toml"),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[mcp.servers.docs] headers.Authorization uses ${VIS_TEST_NEVER_SET_TOKEN}, but the environment variable VIS_TEST_NEVER_SET_TOKEN is not set; set it or write the value"
    );
}
