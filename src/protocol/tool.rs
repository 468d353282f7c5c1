//! The one tool the model gets, `python_execution`: its name and description as every request
//! (and `vis mcp`'s tool list) carries them, and how a call of it becomes a block's code, or the
//! one-line correction the model gets instead.

use serde_json::{json, Value};

use super::{ToolCall, ToolSpec};

/// The tool's name.
pub const TOOL_NAME: &str = "python_execution";

/// The one tool, exactly as every request describes it.
pub fn tool_spec() -> ToolSpec {
    ToolSpec {
        name: TOOL_NAME.into(),
        description: "Run a Python block in this session's persistent interpreter and get back what it printed (stdout and stderr, capped) and the value of a final expression. The prelude (cat, grep, patch, sh, defs, apropos, doc, Path) is imported; apropos and doc find everything else.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source to run."}},
            "required": ["code"],
            "additionalProperties": false,
        }),
    }
}

/// How a tool call is wrong: the one-line correction the model gets instead of a result (the
/// call is rejected, the turn goes on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolCallError {
    #[error("[vis] there is no tool '{}': the only tool is python_execution; {CALL_FORM}.", crate::protocol::clip(.0, 60))]
    UnknownTool(String),
    #[error("[vis] the arguments are not valid JSON ({0}); {CALL_FORM}.")]
    NotJson(String),
    #[error("[vis] \"code\" must be a string of Python source, not {0}; {CALL_FORM}.")]
    CodeNotString(&'static str),
    /// `got` describes what came instead: "no arguments", the keys, or the JSON kind.
    #[error("[vis] python_execution takes one argument, \"code\" (a string), but got {got}; {CALL_FORM}.")]
    NoCode { got: String },
}

const CALL_FORM: &str = "call python_execution with {\"code\": \"<Python source>\"}";

/// The code of a `python_execution` call, or the one-line correction the model gets instead.
pub fn code_of(call: &ToolCall) -> Result<String, ToolCallError> {
    if call.name != TOOL_NAME {
        return Err(ToolCallError::UnknownTool(call.name.clone()));
    }
    let mut value: Value =
        serde_json::from_str(&call.arguments).map_err(|e| ToolCallError::NotJson(e.to_string()))?;
    // Some models send the arguments object as a JSON string.
    if let Value::String(inner) = &value {
        if let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(inner) {
            value = parsed;
        }
    }
    match value.get("code") {
        Some(Value::String(code)) => Ok(code.clone()),
        Some(other) => Err(ToolCallError::CodeNotString(json_kind(other))),
        None => Err(ToolCallError::NoCode {
            got: match &value {
                Value::Object(map) if map.is_empty() => "no arguments".to_string(),
                Value::Object(map) => map
                    .keys()
                    .map(|k| format!("\"{}\"", crate::protocol::clip(k, 30)))
                    .collect::<Vec<_>>()
                    .join(", "),
                other => json_kind(other).to_string(),
            },
        }),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn wrong_calls_get_one_line_corrections() {
        assert_eq!(
            code_of(&call("python_execution", r#"{"code": "print(1)"}"#)).unwrap(),
            "print(1)"
        );
        assert_eq!(
            code_of(&call("python_execution", r#""{\"code\": \"1\"}""#)).unwrap(),
            "1"
        );
        let wrong =
            |name: &str, arguments: &str| code_of(&call(name, arguments)).unwrap_err().to_string();
        let e = wrong("bash", "{}");
        assert!(e.contains("there is no tool 'bash'"), "{e}");
        let e = wrong("python_execution", "{\"code\": ");
        assert!(e.contains("not valid JSON"), "{e}");
        let e = wrong("python_execution", r#"{"cmd": "ls"}"#);
        assert!(e.contains("but got \"cmd\""), "{e}");
        let e = wrong("python_execution", r#"{"code": 5}"#);
        assert!(e.contains("not a number"), "{e}");
        assert_eq!(
            wrong("python_execution", "[]"),
            "[vis] python_execution takes one argument, \"code\" (a string), but got an array; call python_execution with {\"code\": \"<Python source>\"}."
        );
        for e in [wrong("bash", "{}"), wrong("python_execution", "[]")] {
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
