//! The bounded line transport over in-memory pipes: what each bad line gets, on both sides.

use rmcp::model::{ClientJsonRpcMessage, EmptyResult, ServerJsonRpcMessage, ServerResult};
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

use super::*;

const LIMIT: usize = 1024;

struct Peer {
    /// What the transport writes, line by line.
    from: tokio::io::Lines<BufReader<ReadHalf<DuplexStream>>>,
    /// Where the peer writes what the transport reads.
    to: WriteHalf<DuplexStream>,
}

fn pair<Role: ServiceRole>(
    side: Side,
) -> (
    LineTransport<Role, ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>,
    Peer,
) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(ours);
    let (their_read, their_write) = tokio::io::split(theirs);
    (
        LineTransport::new(read, write, side, LIMIT, "lower --output-limit"),
        Peer {
            from: BufReader::new(their_read).lines(),
            to: their_write,
        },
    )
}

impl Peer {
    async fn send(&mut self, bytes: &[u8]) {
        self.to.write_all(bytes).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(std::time::Duration::from_secs(10), self.from.next_line())
            .await
            .expect("the transport wrote nothing")
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

fn server_side() -> (
    LineTransport<RoleServer, ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>,
    Peer,
) {
    pair::<RoleServer>(Side::Server)
}

const PING: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\"}\n";

/// After a bad line the transport goes on: the next ping comes through.
async fn still_reads(
    t: &mut LineTransport<RoleServer, ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>,
    peer: &mut Peer,
) {
    peer.send(PING).await;
    loop {
        match t.receive().await.expect("a message") {
            // Notifications the service does not know reach it as custom ones; it drops them.
            ClientJsonRpcMessage::Notification(_) => continue,
            got => {
                assert!(
                    matches!(got, ClientJsonRpcMessage::Request(ref r) if r.id == NumberOrString::Number(99)),
                    "{got:?}"
                );
                return;
            }
        }
    }
}

#[tokio::test]
async fn lines_that_are_not_json_get_a_parse_error() {
    let (mut t, mut peer) = server_side();
    peer.send(b"this is not json\n").await;
    still_reads(&mut t, &mut peer).await;
    let e = peer.next().await;
    assert_eq!(e["id"], Value::Null);
    assert_eq!(e["error"]["code"], -32700);
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Parse error: the MCP client sent a line that is not JSON")
            && message.ends_with("send one JSON-RPC 2.0 message per line"),
        "{message}"
    );
    // A broken request still gets its id back, so its sender stops waiting.
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"a\":}\n")
        .await;
    still_reads(&mut t, &mut peer).await;
    let e = peer.next().await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(7), json!(-32700))
    );
}

#[tokio::test]
async fn json_that_is_not_a_request_gets_invalid_request_or_params() {
    let (mut t, mut peer) = server_side();
    let cases: [(&[u8], Value, i64, &str); 6] = [
        (
            b"[1, 2]\n",
            Value::Null,
            -32600,
            "batches are not supported",
        ),
        (b"42\n", Value::Null, -32600, "not an object"),
        (
            b"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}\n",
            json!(1),
            -32600,
            "without \"jsonrpc\": \"2.0\"",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"ping\"}\n",
            Value::Null,
            -32600,
            "neither an integer nor a string",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":5}\n",
            json!("s"),
            -32602,
            "Invalid params for tools/call",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":3}\n",
            json!(3),
            -32600,
            "neither \"method\" nor \"result\"",
        ),
    ];
    for (line, id, code, says) in cases {
        peer.send(line).await;
        still_reads(&mut t, &mut peer).await;
        let e = peer.next().await;
        assert_eq!(e["id"], id, "{}", String::from_utf8_lossy(line));
        assert_eq!(e["error"]["code"], code, "{e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(says),
            "{e}"
        );
    }
}

#[tokio::test]
async fn notifications_are_never_answered() {
    let (mut t, mut peer) = server_side();
    peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/bogus\",\"params\":1}\n")
        .await;
    peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\"}\n")
        .await;
    still_reads(&mut t, &mut peer).await;
    // Nothing was written for them: the next line out is the ping's answer.
    t.send(ServerJsonRpcMessage::response(
        ServerResult::EmptyResult(EmptyResult {}),
        NumberOrString::Number(99),
    ))
    .await
    .unwrap();
    assert_eq!(peer.next().await["id"], 99);
}

#[tokio::test]
async fn a_request_over_the_limit_is_answered_at_once_with_the_limit() {
    let (mut t, mut peer) = server_side();
    // The id comes first: the error goes out before the line even ends.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"name\":\"python_execution\",\"arguments\":{{\"code\":\"{}",
        "x".repeat(3 * LIMIT)
    );
    peer.send(big.as_bytes()).await;
    let reading = tokio::spawn(async move {
        let got = t.receive().await;
        (t, got)
    });
    let e = peer.next().await;
    assert_eq!(e["id"], 5);
    assert_eq!(e["error"]["code"], -32600);
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "the message is more than 1 KiB, over the limit of 1 KiB for one MCP message"
        ) && message.contains("[mcp] max_message_mb"),
        "{message}"
    );
    // The rest of the line is skipped; the next message is read as usual.
    peer.send(b"\"}}}\n").await;
    peer.send(PING).await;
    let (mut t, got) = reading.await.unwrap();
    assert!(
        matches!(got, Some(ClientJsonRpcMessage::Request(_))),
        "{got:?}"
    );
    // The id at the end: answered when the line ends, with its size.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}},\"id\":\"late\"}}\n",
        "y".repeat(2 * LIMIT)
    );
    peer.send(big.as_bytes()).await;
    still_reads(&mut t, &mut peer).await;
    let e = peer.next().await;
    assert_eq!(e["id"], "late");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("the message is {}", size_text(big.len()))),
        "{e}"
    );
}

#[tokio::test]
async fn an_answer_of_ours_over_the_limit_becomes_an_error_naming_it() {
    let (mut t, mut peer) = server_side();
    let result: ServerResult = serde_json::from_value(json!({
        "content": [{"type": "text", "text": "z".repeat(2 * LIMIT)}]
    }))
    .unwrap();
    t.send(ServerJsonRpcMessage::response(
        result,
        NumberOrString::Number(8),
    ))
    .await
    .unwrap();
    let e = peer.next().await;
    assert_eq!(e["id"], 8);
    assert_eq!(e["error"]["code"], -32603);
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the result is 2 KiB, over the limit of 1 KiB for one MCP message; lower --output-limit"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_answer_over_the_limit_fails_the_call_that_waits_for_it() {
    let (mut t, mut peer) = pair::<RoleClient>(Side::Client {
        server: "fx".into(),
    });
    let answer = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}\n",
        "w".repeat(4 * LIMIT)
    );
    peer.send(answer.as_bytes()).await;
    let got = t.receive().await.expect("an error for request 12");
    let ServerJsonRpcMessage::Error(e) = got else {
        panic!("{got:?}");
    };
    assert_eq!(e.id, Some(NumberOrString::Number(12)));
    assert!(
        e.error.message.starts_with(
            "MCP server `fx` answered with a message of 4 KiB, over the limit of 1 KiB for one MCP message"
        ) && e.error.message.contains("raise [mcp] max_message_mb"),
        "{}",
        e.error.message
    );
    // A request of the server over the limit is answered to the server instead.
    let request = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"sampling/createMessage\",\"params\":{{\"x\":\"{}\"}}}}\n",
        "v".repeat(2 * LIMIT)
    );
    peer.send(request.as_bytes()).await;
    // A broken answer (not JSON) with an id fails its call too; stray output is skipped.
    peer.send(b"Server listening on stdio...\n").await;
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":13,\"result\":{\"content\":[}\n")
        .await;
    let got = t.receive().await.expect("an error for request 13");
    let ServerJsonRpcMessage::Error(e) = got else {
        panic!("{got:?}");
    };
    assert_eq!(e.id, Some(NumberOrString::Number(13)));
    assert!(
        e.error
            .message
            .contains("MCP server `fx` sent a line that is not JSON"),
        "{}",
        e.error.message
    );
    let e = peer.next().await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!(1), json!(-32600))
    );
}

#[test]
fn sizes_read_like_people_write_them() {
    assert_eq!(size_text(16 * 1024 * 1024), "16 MiB");
    assert_eq!(size_text(20_000_000), "19.1 MiB");
    assert_eq!(size_text(2048), "2 KiB");
    assert_eq!(size_text(35), "35 bytes");
}
