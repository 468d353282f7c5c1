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
    /// `spawn(task, ...)`: starts a sub-session (answered by the session's children).
    #[serde(rename = "spawn")]
    Spawn(SpawnParams),
    /// `Sub.wait(timeout)`: the child's final answer once it ends (`timeout` in seconds).
    #[serde(rename = "sub.wait")]
    SubWait { id: String, timeout: Option<f64> },
    /// `Sub.status`: the child's state now.
    #[serde(rename = "sub.status")]
    SubStatus { id: String },
    /// `Sub.cancel()`.
    #[serde(rename = "sub.cancel")]
    SubCancel { id: String },
    /// `subs()`: the session's children.
    #[serde(rename = "sub.list")]
    SubList {},
    /// `show(image, caption)`: the image's bytes (base64, untrusted: checked, decoded and
    /// scaled down on the host), attached to the block's tool result.
    #[serde(rename = "show_image")]
    ShowImage {
        data: String,
        caption: Option<String>,
    },
}

/// What `spawn()` asks for, as the worker sent it (checked by the gateway, which knows the
/// configured models and the catalog).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnParams {
    pub task: String,
    /// `None`: the session's own model.
    pub model: Option<String>,
    /// `None`: every public name (`tools="all"`); else the allowed names and namespaces.
    pub tools: Option<Vec<String>>,
    /// The names the child's worker denies so that only `tools` remain, worked out by the
    /// parent's worker from its manifest (the config's deny list is added by the host, so
    /// this can only narrow what the parent itself may call).
    pub deny: Vec<String>,
    pub max_iterations: i64,
}

impl HostRequest {
    /// The method names, for messages.
    pub const METHODS: &'static [&'static str] = &[
        "fold_session",
        "read_session",
        "mcp.call",
        "mcp.status",
        "write_extension",
        "spawn",
        "sub.wait",
        "sub.status",
        "sub.cancel",
        "sub.list",
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
            "spawn" => HostRequest::Spawn(SpawnParams {
                task: text("task")?,
                model: match fields.get("model") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => {
                        return Err(CallError(
                            "spawn: `model` must be a string naming a configured model, or None"
                                .into(),
                        ))
                    }
                },
                tools: match fields.get("tools") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) if s == "all" => None,
                    Some(Value::Array(items)) => Some(
                        items
                            .iter()
                            .map(|v| v.as_str().map(str::to_string))
                            .collect::<Option<Vec<_>>>()
                            .ok_or_else(|| {
                                CallError(
                                    "spawn: `tools` must be \"all\" or a list of names".into(),
                                )
                            })?,
                    ),
                    Some(_) => {
                        return Err(CallError(
                            "spawn: `tools` must be \"all\" or a list of names".into(),
                        ))
                    }
                },
                deny: match fields.get("deny") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|v| v.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| CallError("spawn: `deny` must be a list of names".into()))?,
                    Some(_) => {
                        return Err(CallError("spawn: `deny` must be a list of names".into()))
                    }
                },
                max_iterations: match fields.get("max_iterations") {
                    None => 50,
                    Some(v) => v.as_i64().ok_or_else(|| {
                        CallError("spawn: `max_iterations` must be a whole number".into())
                    })?,
                },
            }),
            "sub.wait" => HostRequest::SubWait {
                id: text("id")?,
                timeout: match fields.get("timeout") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(v.as_f64().ok_or_else(|| {
                        CallError("sub.wait: `timeout` must be a number of seconds".into())
                    })?),
                },
            },
            "sub.status" => HostRequest::SubStatus { id: text("id")? },
            "sub.cancel" => HostRequest::SubCancel { id: text("id")? },
            "sub.list" => HostRequest::SubList {},
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

    /// A call about sub-sessions (`spawn`, `Sub.*`, `subs()`): the session's children answer it.
    pub fn is_sub_session(&self) -> bool {
        matches!(
            self,
            HostRequest::Spawn(_)
                | HostRequest::SubWait { .. }
                | HostRequest::SubStatus { .. }
                | HostRequest::SubCancel { .. }
                | HostRequest::SubList {}
        )
    }

    /// The method's name, as the worker sent it.
    pub fn method(&self) -> &'static str {
        match self {
            HostRequest::FoldSession { .. } => "fold_session",
            HostRequest::ReadSession { .. } => "read_session",
            HostRequest::McpCall { .. } => "mcp.call",
            HostRequest::McpStatus {} => "mcp.status",
            HostRequest::WriteExtension { .. } => "write_extension",
            HostRequest::Spawn(_) => "spawn",
            HostRequest::SubWait { .. } => "sub.wait",
            HostRequest::SubStatus { .. } => "sub.status",
            HostRequest::SubCancel { .. } => "sub.cancel",
            HostRequest::SubList {} => "sub.list",
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
            HostRequest::Spawn(params) => params.task.len(),
            HostRequest::SubWait { id, .. }
            | HostRequest::SubStatus { id }
            | HostRequest::SubCancel { id } => id.len(),
            HostRequest::SubList {} => 0,
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
    /// A sub-session's state (`spawn`, `Sub.wait`, `Sub.status`, `Sub.cancel`, `subs()`).
    Sub(Value),
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
            HostReply::Mcp(value) | HostReply::Sub(value) => value,
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
            (
                "spawn",
                json!({"task": "t", "model": null, "tools": ["cat"], "deny": ["grep"], "max_iterations": 5}),
            ),
            ("sub.wait", json!({"id": "s-1", "timeout": 1.5})),
            ("sub.status", json!({"id": "s-1"})),
            ("sub.cancel", json!({"id": "s-1"})),
            ("sub.list", json!({})),
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
