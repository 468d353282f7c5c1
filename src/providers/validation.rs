//! Validation errors in error bodies: the part that names the field.
//!
//! A server that checks requests against a schema answers a request it cannot parse with a
//! list of what failed, often inside a long message and sometimes with a status that says
//! "server error" (llama-cpp-python answers HTTP 500 with a pydantic list). Such a request
//! cannot succeed when sent again, so the client does not retry it, and the user should see
//! the field, not "down or overloaded". Forms understood:
//! - FastAPI's `{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}` (HTTP 422);
//! - a pydantic list printed into a message: `N validation errors:\n {'type': ..., 'loc':
//!   ('body', 'messages', 2, ...), 'msg': ...}` (llama-cpp-python) or pydantic's own text,
//!   `N validation errors for Model\nmessages.2.content\n  Input should be ... [type=...]`
//!   (vLLM and other pydantic servers);
//! - OpenAI's `{"error": {"message": ..., "param": "messages.[2].content"}}`.
//!
//! A union that fails fails once per member ("Input should be 'user'" for the role of every
//! other message type); those `literal_error`/`missing` entries are noise when a more
//! specific one is there, so the specific one is shown, with the count of the rest.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use super::error::{clean_message, json_message};

/// One failed check: where (`body -> messages -> 2 -> content`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    kind: String,
    place: String,
    message: String,
}

/// The field-naming part of the validation error `body` holds, as one short line
/// (`body -> messages -> 2 -> content: Input should be a valid string (and 6 more)`), or
/// `None` when the body is not a validation error.
pub(crate) fn validation_detail(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let failures = detail_list(&value)
        .or_else(|| json_message(&value).and_then(|m| printed_list(&m)))
        .or_else(|| openai_param(&value))?;
    Some(summary(&failures))
}

fn summary(failures: &[Failure]) -> String {
    let noise = |f: &Failure| matches!(f.kind.as_str(), "literal_error" | "missing");
    let best = failures
        .iter()
        .find(|f| !noise(f))
        .or_else(|| failures.first());
    let Some(best) = best else {
        return "a validation error".into();
    };
    let more = match failures.len() - 1 {
        0 => String::new(),
        n => format!(" (and {n} more)"),
    };
    let place = if best.place.is_empty() {
        String::new()
    } else {
        format!("{}: ", best.place)
    };
    clean_message(&format!("{place}{}{more}", best.message), 300)
}

/// A `loc` as a path; union member names (`ChatCompletionRequestAssistantMessage`) and
/// pydantic's internal steps (`function-after[...]`) are left out: they are not fields.
fn place<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    parts
        .into_iter()
        .map(|p| p.trim().trim_matches(|c| c == '\'' || c == '"'))
        .filter(|p| {
            !p.is_empty() && !p.starts_with(|c: char| c.is_ascii_uppercase()) && !p.contains('[')
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// FastAPI: `detail` is a list of `{loc, msg, type}`.
fn detail_list(value: &Value) -> Option<Vec<Failure>> {
    let items = value.get("detail")?.as_array()?;
    let failures: Vec<Failure> = items
        .iter()
        .filter_map(|item| {
            let loc = item.get("loc")?.as_array()?;
            let parts: Vec<String> = loc
                .iter()
                .map(|p| match p {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            Some(Failure {
                kind: item
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
                place: place(parts.iter().map(String::as_str)),
                message: item.get("msg")?.as_str()?.to_string(),
            })
        })
        .collect();
    (!failures.is_empty()).then_some(failures)
}

/// A pattern of this file, compiled once (`None` only if it did not compile: the tests
/// exercise every one).
fn regex(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

/// A pydantic list printed into a message: Python reprs of the error dicts
/// (llama-cpp-python), or pydantic's own `loc\n  msg [type=...]` text.
fn printed_list(message: &str) -> Option<Vec<Failure>> {
    static HEADER: OnceLock<Option<Regex>> = OnceLock::new();
    static REPR: OnceLock<Option<Regex>> = OnceLock::new();
    static TEXT: OnceLock<Option<Regex>> = OnceLock::new();
    let header = regex(&HEADER, r"\d+ validation errors?\b")?;
    if !header.is_match(message) {
        return None;
    }
    let mut failures: Vec<Failure> = Vec::new();
    let repr = regex(
        &REPR,
        r#"'type': '([^']*)', 'loc': \(([^)]*)\), 'msg': (?:"([^"]*)"|'([^']*)')"#,
    );
    if let Some(repr) = repr {
        failures.extend(repr.captures_iter(message).map(|c| {
            Failure {
                kind: c[1].to_string(),
                place: place(c[2].split(',')),
                message: c
                    .get(3)
                    .or_else(|| c.get(4))
                    .map_or("", |m| m.as_str())
                    .to_string(),
            }
        }));
    }
    let text = regex(
        &TEXT,
        r"(?m)^[ \t]*([^\s\[][^\n]*)\n[ \t]+([^\n\[]+?)[ \t]*\[type=([^,\]]+)",
    );
    if let (true, Some(text)) = (failures.is_empty(), text) {
        failures.extend(
            text.captures_iter(message)
                .filter(|c| !header.is_match(&c[1]))
                .map(|c| Failure {
                    kind: c[3].trim().to_string(),
                    place: place(c[1].split('.')),
                    message: c[2].to_string(),
                }),
        );
    }
    if failures.is_empty() {
        // A validation error whose entries are in no known form: its first line still
        // says more than "server error".
        failures.push(Failure {
            kind: String::new(),
            place: String::new(),
            message: message.lines().next().unwrap_or(message).to_string(),
        });
    }
    Some(failures)
}

/// OpenAI: `{"error": {"message", "param"}}` names the field in `param`.
fn openai_param(value: &Value) -> Option<Vec<Failure>> {
    let error = value.get("error")?;
    let param = error
        .get("param")?
        .as_str()
        .filter(|p| !p.trim().is_empty())?;
    let message = error.get("message")?.as_str()?;
    Some(vec![Failure {
        kind: error
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        place: param.to_string(),
        message: message.to_string(),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastapi_detail_lists_name_the_field() {
        let body = br#"{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{}},{"type":"string_type","loc":["body","messages",1,"content"],"msg":"Input should be a valid string"}]}"#;
        assert_eq!(
            validation_detail(body).as_deref(),
            Some("body -> messages -> 1 -> content: Input should be a valid string (and 1 more)")
        );
        // A plain `detail` string is an error, not a validation list.
        assert_eq!(validation_detail(br#"{"detail":"Not Found"}"#), None);
    }

    #[test]
    fn python_reprs_as_llama_cpp_python_prints_them() {
        let message = "3 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestUserMessage', 'role'), 'msg': \"Input should be 'user'\", 'input': 'assistant'}\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'tool_call_id'), 'msg': 'Field required'}\n\n  File \"x.py\", line 1";
        let body = serde_json::json!({"error": {"message": message, "type": "internal_server_error", "param": null}});
        assert_eq!(
            validation_detail(body.to_string().as_bytes()).as_deref(),
            Some("body -> messages -> 2 -> content: Input should be a valid string (and 2 more)")
        );
        // Only the noise of a union: the first entry is shown.
        let body = serde_json::json!({"detail": "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'model'), 'msg': 'Field required'}"});
        assert_eq!(
            validation_detail(body.to_string().as_bytes()).as_deref(),
            Some("body -> model: Field required")
        );
    }

    #[test]
    fn pydantic_text_as_vllm_prints_it() {
        let body = serde_json::json!({"object": "error", "type": "BadRequestError", "code": 400,
            "message": "1 validation error for ChatCompletionRequest\nmessages.2.content\n  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]"});
        assert_eq!(
            validation_detail(body.to_string().as_bytes()).as_deref(),
            Some("messages -> 2 -> content: Input should be a valid string")
        );
    }

    #[test]
    fn openai_param_is_the_place() {
        let body = br#"{"error":{"message":"Invalid type for 'messages[2].content': expected a string, but got null.","type":"invalid_request_error","param":"messages.[2].content","code":"invalid_type"}}"#;
        assert_eq!(
            validation_detail(body).as_deref(),
            Some("messages.[2].content: Invalid type for 'messages[2].content': expected a string, but got null.")
        );
        assert_eq!(
            validation_detail(
                br#"{"error":{"message":"overloaded","type":"server_error","param":null}}"#
            ),
            None
        );
    }

    #[test]
    fn other_bodies_are_not_validation_errors() {
        assert_eq!(validation_detail(b"<html>502</html>"), None);
        assert_eq!(
            validation_detail(br#"{"error":"model 'q' not found"}"#),
            None
        );
    }
}
