//! Text pieces of a function's documentation: Python literals, one-line and cleaned-up
//! descriptions, each bounded so a server's huge values cannot flood a docstring.

use serde_json::Value;

/// Longest literal (a default, an enum value) shown in a signature; longer ones read `...`.
pub const MAX_LITERAL_CHARS: usize = 60;

/// A description with the indentation of its continuation lines removed (like Python's
/// `inspect.cleandoc`: servers often send raw docstrings).
pub fn cleandoc(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let indent = lines
        .iter()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if i == 0 {
            out.push(line.trim().to_string());
        } else {
            out.push(line.get(indent..).unwrap_or("").trim_end().to_string());
        }
    }
    out.join("\n").trim().to_string()
}

/// `s` on one line, at most `max` characters (an ellipsis marks a cut).
pub fn one_line(s: &str, max: usize) -> String {
    // Only the start can be shown: a huge description is not split whole.
    let start = crate::protocol::clip(s, max.saturating_mul(4));
    crate::protocol::clip(&start.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

/// A JSON value as a Python literal (`true` → `True`, `null` → `None`, strings quoted).
pub fn python_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str(s),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(python_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), python_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// [`python_literal`] when it is short enough to show, else `None`. Cheap for huge values:
/// strings and containers are measured before they are rendered.
pub fn short_literal(v: &Value) -> Option<String> {
    if rough_size(v, MAX_LITERAL_CHARS + 1) > MAX_LITERAL_CHARS {
        return None;
    }
    let text = python_literal(v);
    (text.chars().count() <= MAX_LITERAL_CHARS).then_some(text)
}

/// A lower bound of the literal's length, counted only up to `stop`.
fn rough_size(v: &Value, stop: usize) -> usize {
    match v {
        Value::String(s) => s.len().min(stop) + 2,
        Value::Array(items) => {
            let mut n = 2;
            for item in items {
                n += rough_size(item, stop) + 2;
                if n >= stop {
                    break;
                }
            }
            n
        }
        Value::Object(map) => {
            let mut n = 2;
            for (k, item) in map {
                n += k.len().min(stop) + rough_size(item, stop) + 4;
                if n >= stop {
                    break;
                }
            }
            n
        }
        _ => 1,
    }
}

/// A Python string literal in single quotes.
pub fn py_str(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
