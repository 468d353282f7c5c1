//! MCP tool results as the worker turns them into Python values.
//!
//! The raw MCP envelope (`content`, `structuredContent`, `isError`) never reaches the
//! model's code. The host answers `mcp.call` with one of:
//!
//! - `{"kind": "value", "value": …}`: the structured content (dicts, lists, …);
//! - `{"kind": "content", "parts": [...]}`: text parts as `{"type": "text", "text"}`; images,
//!   audio and embedded resources written to artifact files in the session's artifact
//!   directory (`{"type": "image", "mime_type", "path", "size"}`), resource links as
//!   `{"type": "resource_link", "uri", "name", "mime_type"}`;
//! - `{"kind": "tool_error", "message"}`: the tool reported an error (`McpToolError`);
//! - `{"kind": "server_error", "message"}`: the server failed (`McpServerError`).
//!
//! Binary data is decoded and written here, on the host, into a directory the host chose (a
//! block never names where the host writes).

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{json, Map, Value};

/// The answer for a tool error.
pub fn tool_error(message: impl Into<String>) -> Value {
    json!({"kind": "tool_error", "message": message.into()})
}

/// The answer for a server failure.
pub fn server_error(message: impl Into<String>) -> Value {
    json!({"kind": "server_error", "message": message.into()})
}

/// Converts a `CallToolResult` (as MCP JSON) into the answer for the worker. Files go into
/// `artifacts`, named after the server and tool.
pub fn convert(
    result: &Value,
    output_schema: Option<&Value>,
    server: &str,
    tool: &str,
    artifacts: &Path,
) -> Value {
    let content: &[Value] = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text: Vec<&str> = content
            .iter()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect();
        let message = if text.is_empty() {
            format!(
                "the tool `{tool}` of MCP server `{server}` reported an error without a message"
            )
        } else {
            text.join("\n")
        };
        return tool_error(message);
    }
    if let Some(value) = result.get("structuredContent").filter(|v| !v.is_null()) {
        // `{"result": x}` under an output schema that only wraps one value: return x.
        let wrapped = output_schema
            .and_then(super::schema::wrapped_result)
            .is_some();
        if let (true, Some(map)) = (wrapped, value.as_object()) {
            if map.len() == 1 {
                if let Some(inner) = map.get("result") {
                    return json!({"kind": "value", "value": inner});
                }
            }
        }
        return json!({"kind": "value", "value": value});
    }
    let mut saver = Saver {
        dir: artifacts,
        prefix: format!("mcp-{}-{}-", safe(server), safe(tool)),
    };
    let parts: Vec<Value> = content.iter().map(|c| saver.part(c)).collect();
    json!({"kind": "content", "parts": parts})
}

/// `[A-Za-z0-9_-]` only, for file names.
fn safe(s: &str) -> String {
    s.chars()
        .take(40)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

struct Saver<'a> {
    dir: &'a Path,
    prefix: String,
}

impl Saver<'_> {
    fn part(&mut self, c: &Value) -> Value {
        let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
        let mime = c.get("mimeType").and_then(Value::as_str);
        match kind {
            "text" => {
                json!({"type": "text", "text": c.get("text").and_then(Value::as_str).unwrap_or("")})
            }
            "image" | "audio" => {
                let data = c.get("data").and_then(Value::as_str).unwrap_or("");
                self.binary(kind, mime, None, data)
            }
            "resource" => {
                let res = c.get("resource").cloned().unwrap_or(Value::Null);
                let uri = res.get("uri").and_then(Value::as_str);
                let mime = res.get("mimeType").and_then(Value::as_str);
                if let Some(text) = res.get("text").and_then(Value::as_str) {
                    self.file("resource", mime, uri, text.as_bytes())
                } else {
                    let blob = res.get("blob").and_then(Value::as_str).unwrap_or("");
                    self.binary("resource", mime, uri, blob)
                }
            }
            "resource_link" => {
                let mut out = Map::new();
                out.insert("type".into(), "resource_link".into());
                for (from, to) in [("uri", "uri"), ("name", "name"), ("mimeType", "mime_type")] {
                    if let Some(v) = c.get(from) {
                        out.insert(to.into(), v.clone());
                    }
                }
                Value::Object(out)
            }
            other => {
                // A content type this version does not know: keep it whole as JSON.
                let text = serde_json::to_vec_pretty(c).unwrap_or_default();
                let kind = if other.is_empty() { "unknown" } else { other };
                self.file(kind, Some("application/json"), None, &text)
            }
        }
    }

    fn binary(&mut self, kind: &str, mime: Option<&str>, uri: Option<&str>, data: &str) -> Value {
        match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
            Ok(bytes) => self.file(kind, mime, uri, &bytes),
            Err(e) => json!({
                "type": "text",
                "text": format!("[vis] the MCP server sent {kind} data that is not valid base64 ({e})"),
            }),
        }
    }

    fn file(&mut self, kind: &str, mime: Option<&str>, uri: Option<&str>, bytes: &[u8]) -> Value {
        let mut out = Map::new();
        out.insert("type".into(), kind.into());
        if let Some(m) = mime {
            out.insert("mime_type".into(), m.into());
        }
        if let Some(u) = uri {
            out.insert("uri".into(), u.into());
        }
        out.insert("size".into(), bytes.len().into());
        match self.write(extension(mime, kind), bytes) {
            Ok(path) => {
                out.insert("path".into(), path.to_string_lossy().into_owned().into());
            }
            Err(e) => {
                out.insert("path".into(), Value::Null);
                out.insert(
                    "error".into(),
                    format!("could not save it in {}: {e}", self.dir.display()).into(),
                );
            }
        }
        Value::Object(out)
    }

    fn write(&self, ext: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(self.dir)?;
        let mut file = tempfile::Builder::new()
            .prefix(&self.prefix)
            .suffix(&format!(".{ext}"))
            .tempfile_in(self.dir)?;
        file.write_all(bytes)?;
        let (_, path) = file.keep().map_err(|e| e.error)?;
        Ok(path)
    }
}

fn extension(mime: Option<&str>, kind: &str) -> &'static str {
    match mime.unwrap_or("") {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "application/json" => "json",
        "application/pdf" => "pdf",
        "text/markdown" => "md",
        "text/html" => "html",
        m if m.starts_with("text/") => "txt",
        _ if kind == "resource" => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_text_images_errors() {
        let dir = tempfile::tempdir().unwrap();
        let v = convert(
            &json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"a": 1}}),
            None,
            "s",
            "t",
            dir.path(),
        );
        assert_eq!(v, json!({"kind": "value", "value": {"a": 1}}));
        let wrapped = json!({"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]});
        let v = convert(
            &json!({"structuredContent": {"result": 7}}),
            Some(&wrapped),
            "s",
            "t",
            dir.path(),
        );
        assert_eq!(v, json!({"kind": "value", "value": 7}));
        let v = convert(
            &json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
            None,
            "s",
            "t",
            dir.path(),
        );
        assert_eq!(v, json!({"kind": "tool_error", "message": "boom"}));
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG....");
        let v = convert(
            &json!({"content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": png, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///x.md", "text": "# X", "mimeType": "text/markdown"}},
                {"type": "resource_link", "uri": "file:///y", "name": "y"},
            ]}),
            None,
            "my server",
            "render/1",
            dir.path(),
        );
        let parts = v["parts"].as_array().unwrap();
        assert_eq!(parts[0], json!({"type": "text", "text": "hi"}));
        let path = parts[1]["path"].as_str().unwrap();
        assert!(
            path.ends_with(".png") && path.contains("mcp-my_server-render_1-"),
            "{path}"
        );
        assert_eq!(std::fs::read(path).unwrap(), b"\x89PNG....");
        assert_eq!(parts[1]["size"], 8);
        assert_eq!(
            std::fs::read_to_string(parts[2]["path"].as_str().unwrap()).unwrap(),
            "# X"
        );
        assert_eq!(parts[2]["uri"], "file:///x.md");
        assert_eq!(
            parts[3],
            json!({"type": "resource_link", "uri": "file:///y", "name": "y"})
        );
        let v = convert(
            &json!({"content": [{"type": "image", "data": "%%%"}]}),
            None,
            "s",
            "t",
            dir.path(),
        );
        assert!(v["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not valid base64"));
    }
}
