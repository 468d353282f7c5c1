//! Calls a running block makes to the host (SPEC §1): one request type and one reply type.
//!
//! On the pipe a call is `{method, params}` JSON sent by the worker, which is untrusted, so a
//! request is parsed here, field by field, into a [`HostRequest`]: a call that does not parse
//! is answered with a [`CallError`] naming what is wrong, and never reaches its handler. The
//! host answers each kind in one `match` (`runtime::host::runner`), and every answer is a
//! [`HostReply`], which the worker receives as plain JSON (see `python/vis/_protocol.py` for
//! the same types on the Python side).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{FoldReceipt, SessionRead};

/// A host call's refusal: the message the block sees, raised there as a Python exception. It
/// is an error for the model to read and act on, never one that aborts the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallError(pub String);

impl From<String> for CallError {
    fn from(message: String) -> Self {
        CallError(message)
    }
}

impl From<&str> for CallError {
    fn from(message: &str) -> Self {
        CallError(message.to_string())
    }
}

/// What a block asks of the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", content = "params")]
pub enum HostRequest {
    /// `fold_session(key, gist)`: answered by the session's conversation.
    #[serde(rename = "fold_session")]
    FoldSession { key: String, gist: String },
    /// `read_session(key)`: answered by the session's conversation.
    #[serde(rename = "read_session")]
    ReadSession { key: String },
    /// An MCP tool, called as `server.tool(...)`.
    #[serde(rename = "mcp.call")]
    McpCall {
        server: String,
        tool: String,
        arguments: Map<String, Value>,
    },
    /// The MCP servers' status (`session["mcp"]`).
    #[serde(rename = "mcp.status")]
    McpStatus {},
    /// `promote()`'s one write: `.vis/extensions/<extension>.py`.
    #[serde(rename = "write_extension")]
    WriteExtension { extension: String, text: String },
    /// `show(image, caption)`: the image's bytes (base64, untrusted: checked, decoded and
    /// scaled down on the host), attached to the block's tool result.
    #[serde(rename = "show_image")]
    ShowImage {
        data: String,
        caption: Option<String>,
    },
}

impl HostRequest {
    /// The method names, for messages.
    pub const METHODS: &'static [&'static str] = &[
        "fold_session",
        "read_session",
        "mcp.call",
        "mcp.status",
        "write_extension",
        "show_image",
    ];

    /// Parses the call the worker sent; the error is for the block.
    pub fn parse(method: &str, params: Value) -> Result<HostRequest, CallError> {
        let fields = match params {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => {
                return Err(CallError(format!(
                    "{method}: the parameters must be an object"
                )))
            }
        };
        let text = |name: &str| -> Result<String, CallError> {
            match fields.get(name) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(CallError(format!("{method}: `{name}` must be a string"))),
                None => Err(CallError(format!("{method}: `{name}` is missing"))),
            }
        };
        Ok(match method {
            "fold_session" => HostRequest::FoldSession {
                key: text("key")?,
                gist: text("gist")?,
            },
            "read_session" => HostRequest::ReadSession { key: text("key")? },
            "mcp.call" => HostRequest::McpCall {
                server: text("server")?,
                tool: text("tool")?,
                arguments: match fields.get("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(map)) => map.clone(),
                    Some(_) => {
                        return Err(CallError(
                            "mcp.call: `arguments` must be an object".to_string(),
                        ))
                    }
                },
            },
            "mcp.status" => HostRequest::McpStatus {},
            "write_extension" => HostRequest::WriteExtension {
                extension: text("extension")?,
                text: text("text")?,
            },
            "show_image" => HostRequest::ShowImage {
                data: text("data")?,
                caption: match fields.get("caption") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => {
                        return Err(CallError(
                            "show_image: `caption` must be a string or None".to_string(),
                        ))
                    }
                },
            },
            other => {
                return Err(CallError(format!(
                    "the host has no '{}' call; see doc('vis') for what blocks can call",
                    super::clip(other, 60)
                )))
            }
        })
    }

    /// The method's name, as the worker sent it.
    pub fn method(&self) -> &'static str {
        match self {
            HostRequest::FoldSession { .. } => "fold_session",
            HostRequest::ReadSession { .. } => "read_session",
            HostRequest::McpCall { .. } => "mcp.call",
            HostRequest::McpStatus {} => "mcp.status",
            HostRequest::WriteExtension { .. } => "write_extension",
            HostRequest::ShowImage { .. } => "show_image",
        }
    }

    /// Bytes of text the call carries (what a budget of calls counts).
    pub fn text_bytes(&self) -> usize {
        match self {
            HostRequest::FoldSession { key, gist } => key.len() + gist.len(),
            HostRequest::ReadSession { key } => key.len(),
            HostRequest::McpCall { server, tool, .. } => server.len() + tool.len(),
            HostRequest::McpStatus {} => 0,
            HostRequest::WriteExtension { extension, text } => extension.len() + text.len(),
            HostRequest::ShowImage { data, caption } => {
                data.len() + caption.as_ref().map_or(0, String::len)
            }
        }
    }
}

/// The answer to a [`HostRequest`], as the worker receives it (plain JSON: the variants are not
/// tagged on the wire, each request knows its reply).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum HostReply {
    Fold(FoldReceipt),
    Read(SessionRead),
    /// An MCP tool's result, converted for Python, or the servers' status.
    Mcp(Value),
    /// Where `write_extension` wrote.
    Written {
        path: String,
    },
    /// What `show_image` attached.
    Image(super::ImageRef),
}

impl HostReply {
    /// The reply as JSON for the pipe.
    pub fn into_json(self) -> Value {
        match self {
            HostReply::Mcp(value) => value,
            other => serde_json::to_value(other).unwrap_or(Value::Null),
        }
    }
}

/// What a host call answers: a reply, or the refusal the block sees.
pub type CallAnswer = Result<HostReply, CallError>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_method_parses_and_names_itself() {
        let cases = [
            ("fold_session", json!({"key": "t1", "gist": "g"})),
            ("read_session", json!({"key": "t1"})),
            (
                "mcp.call",
                json!({"server": "s", "tool": "t", "arguments": {"a": 1}}),
            ),
            ("mcp.status", json!({})),
            (
                "write_extension",
                json!({"extension": "h", "text": "x = 1\n"}),
            ),
            ("show_image", json!({"data": "iVBO", "caption": "c"})),
        ];
        assert_eq!(cases.len(), HostRequest::METHODS.len());
        for (method, params) in cases {
            let request = HostRequest::parse(method, params.clone()).unwrap();
            assert_eq!(request.method(), method);
            // The serde form is the wire form.
            let wire = serde_json::to_value(&request).unwrap();
            assert_eq!(wire["method"], method);
            assert_eq!(
                serde_json::from_value::<HostRequest>(wire).unwrap(),
                request
            );
        }
    }

    #[test]
    fn a_bad_call_is_refused_with_what_is_wrong() {
        let e = HostRequest::parse("fold_session", json!({"key": 1, "gist": "g"})).unwrap_err();
        assert_eq!(e.0, "fold_session: `key` must be a string");
        let e = HostRequest::parse("read_session", json!({})).unwrap_err();
        assert_eq!(e.0, "read_session: `key` is missing");
        let e = HostRequest::parse("mcp.call", json!({"server": "s", "tool": 2})).unwrap_err();
        assert_eq!(e.0, "mcp.call: `tool` must be a string");
        let e = HostRequest::parse(
            "mcp.call",
            json!({"server": "s", "tool": "t", "arguments": [1]}),
        )
        .unwrap_err();
        assert!(e.0.contains("must be an object"), "{e}");
        let e = HostRequest::parse("exec_anywhere", json!({})).unwrap_err();
        assert!(e.0.contains("no 'exec_anywhere' call"), "{e}");
        let e = HostRequest::parse("fold_session", json!([1])).unwrap_err();
        assert!(e.0.contains("must be an object"), "{e}");
    }
}
