//! MCP tools as Python functions: names, signatures and docstrings from `tools/list`.
//!
//! # Names
//! A tool's Python name is its MCP name when that is a valid identifier. Otherwise one rule
//! maps it (the same spelling the catalog's name errors propose): every character that cannot
//! appear in a Python identifier becomes `_`, a name that then starts with something an
//! identifier cannot start with gets a leading `_`, and a keyword gets a trailing `_`
//! (`search-issues` → `search_issues`, `2fa` → `_2fa`, `class` → `class_`). The same rule maps
//! argument names (`per-page` → `per_page`). Nothing is rewritten into a collision: when
//! mapped names collide, every tool whose name had to be mapped is left out (a tool whose name
//! needed no mapping keeps its name) and the collision is reported; a tool whose argument
//! names collide is left out too.
//!
//! # Signatures
//! Required properties (in the schema's property order) are positional-or-keyword; the others
//! are keyword-only, after `*`. Types come from the JSON schema (`str`, `int`, `float`,
//! `bool`, `list[T]`, `dict[str, T]`, `Literal[...]`, unions with `|`, `$ref` resolved in
//! `$defs`), defaults from `default` as Python literals, and an optional argument without a
//! default reads `T | None = None`:
//! `github.search_issues(query: str, *, limit: int = 10, labels: list[str] | None = None)`.
//! An optional argument left out (or passed as `None`) is not sent: the server applies its
//! own default.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::catalog::{validate_name, NameRule, PYTHON_KEYWORDS};
use crate::protocol::{McpFunction, McpParam};

/// Longest type text shown for one argument before it is shortened to its base type.
const MAX_TYPE_CHARS: usize = 60;
/// How deep `$ref`s and nested schemas are followed for type texts.
const MAX_DEPTH: usize = 4;

/// The Python identifier for an MCP tool or argument name (see the module docs).
pub fn python_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if unicode_ident::is_xid_continue(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out
        .chars()
        .next()
        .is_none_or(|c| !(c == '_' || unicode_ident::is_xid_start(c)))
    {
        out.insert(0, '_');
    }
    if PYTHON_KEYWORDS.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// A tool that could not become a function, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub tool: String,
    pub reason: String,
}

/// Functions for one server's tools, in the server's order, and the tools left out.
pub fn server_functions(server: &str, tools: &[Value]) -> (Vec<McpFunction>, Vec<LeftOut>) {
    let mut left_out = Vec::new();
    // Python name -> the tools that want it (MCP name, whether it needed mapping).
    let mut wanted: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    for tool in tools {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            left_out.push(LeftOut {
                tool: "(unnamed)".into(),
                reason: "the server listed a tool without a name".into(),
            });
            continue;
        };
        if name.is_empty() {
            left_out.push(LeftOut {
                tool: String::new(),
                reason: "the tool's name is empty".into(),
            });
            continue;
        }
        let py = python_name(name);
        wanted
            .entry(py.clone())
            .or_default()
            .push((name.to_string(), py != name));
    }
    let mut functions = Vec::new();
    for tool in tools {
        let Some(name) = tool
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        let py = python_name(name);
        let rivals = &wanted[&py];
        if rivals.len() > 1 && py != name {
            let others: Vec<String> = rivals
                .iter()
                .filter(|(n, _)| n != name)
                .map(|(n, _)| format!("`{n}`"))
                .collect();
            left_out.push(LeftOut {
                tool: name.to_string(),
                reason: format!(
                    "its Python name `{py}` would collide with {}; the server must rename one of them",
                    others.join(", ")
                ),
            });
            continue;
        }
        let dotted = format!("{server}.{py}");
        if let Err(e) = validate_name(&dotted, NameRule::Identifier) {
            left_out.push(LeftOut {
                tool: name.to_string(),
                reason: format!("no valid Python name: {e}"),
            });
            continue;
        }
        match function(server, name, &py, tool) {
            Ok(f) => functions.push(f),
            Err(collision) => left_out.push(LeftOut {
                tool: name.to_string(),
                reason: collision.to_string(),
            }),
        }
    }
    (functions, left_out)
}

/// Two of a tool's arguments that would be one Python parameter (the tool is left out).
#[derive(Debug, thiserror::Error)]
#[error("its arguments `{first}` and `{second}` both map to the Python name `{python}`")]
struct ArgumentCollision {
    first: String,
    second: String,
    python: String,
}

/// One tool as a function.
fn function(
    server: &str,
    tool: &str,
    py: &str,
    spec: &Value,
) -> Result<McpFunction, ArgumentCollision> {
    let empty = Map::new();
    let schema = spec
        .get("inputSchema")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let defs = Defs::of(schema);
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    struct Arg<'a> {
        param: McpParam,
        ty: String,
        schema: &'a Value,
    }
    let mut args: Vec<Arg<'_>> = Vec::new();
    let missing = Value::Object(Map::new());
    for (key, prop) in properties {
        args.push(Arg {
            param: McpParam {
                name: python_name(key),
                key: key.clone(),
                required: required.contains(key.as_str()),
                default: prop.get("default").map(python_literal),
            },
            ty: String::new(),
            schema: prop,
        });
    }
    // Required names the schema does not describe still have to be passed.
    for key in &required {
        if !properties.contains_key(*key) {
            args.push(Arg {
                param: McpParam {
                    name: python_name(key),
                    key: (*key).to_string(),
                    required: true,
                    default: None,
                },
                ty: String::new(),
                schema: &missing,
            });
        }
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for a in &args {
        if let Some(other) = seen.insert(a.param.name.as_str(), a.param.key.as_str()) {
            return Err(ArgumentCollision {
                first: other.to_string(),
                second: a.param.key.clone(),
                python: a.param.name.clone(),
            });
        }
    }
    for a in &mut args {
        a.ty = defs.type_text(a.schema, 0);
    }
    // Required first (positional), then optional (keyword-only); each group in schema order.
    args.sort_by_key(|a| !a.param.required);
    let mut parts: Vec<String> = Vec::new();
    let mut star = false;
    for a in &args {
        let annotated = if a.ty == "Any" && a.schema.as_object().is_none_or(Map::is_empty) {
            a.param.name.clone()
        } else {
            format!("{}: {}", a.param.name, a.ty)
        };
        if a.param.required {
            parts.push(annotated);
            continue;
        }
        if !star {
            parts.push("*".into());
            star = true;
        }
        match &a.param.default {
            Some(d) => parts.push(format!("{annotated} = {d}")),
            None => {
                let ty = if a.ty == "Any" || a.ty.split(" | ").any(|t| t == "None") {
                    a.ty.clone()
                } else {
                    format!("{} | None", a.ty)
                };
                parts.push(format!("{}: {ty} = None", a.param.name));
            }
        }
    }
    let output = spec.get("outputSchema").filter(|o| o.is_object());
    let returns = match output {
        Some(o) => match wrapped_result(o) {
            Some(inner) => Some(Defs::of(o.as_object().unwrap_or(&empty)).type_text(inner, 0)),
            None => Some("dict".to_string()),
        },
        None => None,
    };
    let mut signature = format!("({})", parts.join(", "));
    if let Some(r) = &returns {
        signature.push_str(&format!(" -> {r}"));
    }
    // The docstring: description, arguments, what comes back.
    let description = spec
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|d| !d.is_empty());
    let mut doc = match description {
        Some(d) => cleandoc(d),
        None => format!("MCP tool `{tool}` of server `{server}`."),
    };
    if !args.is_empty() {
        doc.push_str("\n\nArguments:");
        for a in &args {
            doc.push_str(&format!("\n  {} ({}", a.param.name, a.ty));
            if a.param.required {
                doc.push_str(", required");
            } else if let Some(d) = &a.param.default {
                doc.push_str(&format!(", default {d}"));
            }
            if a.param.key != a.param.name {
                doc.push_str(&format!("; sent as \"{}\"", a.param.key));
            }
            doc.push(')');
            if let Some(text) = a
                .schema
                .get("description")
                .and_then(Value::as_str)
                .map(one_line)
                .filter(|t| !t.is_empty())
            {
                doc.push_str(" — ");
                doc.push_str(&text);
            }
            if let Some(keys) = defs.object_keys(a.schema) {
                doc.push_str(&format!("\n      keys: {keys}"));
            }
        }
    }
    match &returns {
        Some(r) if r != "dict" => doc.push_str(&format!("\n\nReturns {r}.")),
        Some(_) => doc.push_str("\n\nReturns the tool's structured result (a dict)."),
        None => doc.push_str("\n\nReturns the tool's text (str); several parts come as a list, images and resources as McpContent (with .path)."),
    }
    doc.push_str(" A failure raises McpToolError.");
    if py != tool {
        doc.push_str(&format!("\n(MCP tool `{tool}`)"));
    }
    Ok(McpFunction {
        name: format!("{server}.{py}"),
        server: server.to_string(),
        tool: tool.to_string(),
        signature,
        doc,
        params: args.into_iter().map(|a| a.param).collect(),
    })
}

/// The schema of `result` when an output schema only wraps one value as `{"result": …}`
/// (what the Python SDK does for tools returning a str, int, list, …): such structured
/// content is returned unwrapped.
pub fn wrapped_result(output_schema: &Value) -> Option<&Value> {
    let props = output_schema.get("properties")?.as_object()?;
    let required = output_schema.get("required")?.as_array()?;
    if props.len() == 1 && required.len() == 1 && required[0] == "result" {
        props.get("result")
    } else {
        None
    }
}

/// A description with the indentation of its continuation lines removed (like Python's
/// `inspect.cleandoc`: servers often send raw docstrings).
fn cleandoc(text: &str) -> String {
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

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
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

fn py_str(s: &str) -> String {
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

/// The `$defs` (or `definitions`) of a schema, for `$ref`s.
struct Defs<'a> {
    defs: Option<&'a Map<String, Value>>,
    definitions: Option<&'a Map<String, Value>>,
}

impl<'a> Defs<'a> {
    fn of(schema: &'a Map<String, Value>) -> Defs<'a> {
        Defs {
            defs: schema.get("$defs").and_then(Value::as_object),
            definitions: schema.get("definitions").and_then(Value::as_object),
        }
    }

    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        if let Some(name) = reference.strip_prefix("#/$defs/") {
            return self.defs?.get(name);
        }
        if let Some(name) = reference.strip_prefix("#/definitions/") {
            return self.definitions?.get(name);
        }
        None
    }

    /// Follows a `$ref` (a few levels).
    fn deref<'b>(&self, mut schema: &'b Value) -> &'b Value
    where
        'a: 'b,
    {
        for _ in 0..MAX_DEPTH {
            match schema.get("$ref").and_then(Value::as_str) {
                Some(r) => match self.resolve(r) {
                    Some(target) => schema = target,
                    None => return schema,
                },
                None => return schema,
            }
        }
        schema
    }

    /// The Python type text of a schema, shortened when very long.
    fn type_text(&self, schema: &Value, depth: usize) -> String {
        let full = self.type_inner(schema, depth);
        if full.chars().count() <= MAX_TYPE_CHARS {
            return full;
        }
        let short = self.type_inner(schema, MAX_DEPTH);
        if short.chars().count() <= MAX_TYPE_CHARS {
            short
        } else {
            "Any".into()
        }
    }

    fn type_inner(&self, schema: &Value, depth: usize) -> String {
        let schema = self.deref(schema);
        let Some(obj) = schema.as_object() else {
            return "Any".into();
        };
        if let Some(c) = obj.get("const") {
            return format!("Literal[{}]", python_literal(c));
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array) {
            if depth >= MAX_DEPTH || values.len() > 8 {
                return base_of_values(values);
            }
            let items: Vec<String> = values.iter().map(python_literal).collect();
            return format!("Literal[{}]", items.join(", "));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(members) = obj.get(key).and_then(Value::as_array) {
                let mut parts: Vec<String> = Vec::new();
                for m in members {
                    let t = if depth >= MAX_DEPTH {
                        self.base(m)
                    } else {
                        self.type_inner(m, depth + 1)
                    };
                    for piece in t.split(" | ") {
                        if !parts.iter().any(|p| p == piece) {
                            parts.push(piece.to_string());
                        }
                    }
                }
                if parts.iter().any(|p| p == "Any") {
                    return "Any".into();
                }
                // `None` last, as people write `str | None`.
                parts.sort_by_key(|p| p == "None");
                return if parts.is_empty() {
                    "Any".into()
                } else {
                    parts.join(" | ")
                };
            }
        }
        if let Some(members) = obj.get("allOf").and_then(Value::as_array) {
            if members.len() == 1 {
                return self.type_inner(&members[0], depth + 1);
            }
            return "dict".into();
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.simple(t, obj, depth),
            Some(Value::Array(types)) => {
                let mut parts: Vec<String> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.simple(t, obj, depth))
                    .collect();
                parts.dedup();
                parts.sort_by_key(|p| p == "None");
                if parts.is_empty() {
                    "Any".into()
                } else {
                    parts.join(" | ")
                }
            }
            _ if obj.contains_key("properties") => "dict".into(),
            _ => "Any".into(),
        }
    }

    fn simple(&self, t: &str, obj: &Map<String, Value>, depth: usize) -> String {
        match t {
            "string" => "str".into(),
            "integer" => "int".into(),
            "number" => "float".into(),
            "boolean" => "bool".into(),
            "null" => "None".into(),
            "array" => match obj.get("items") {
                Some(items) if items.is_object() && depth < MAX_DEPTH => {
                    format!("list[{}]", self.type_inner(items, depth + 1))
                }
                _ => "list".into(),
            },
            "object" => match obj.get("additionalProperties") {
                Some(extra) if extra.is_object() && !obj.contains_key("properties") => {
                    if depth < MAX_DEPTH {
                        format!("dict[str, {}]", self.type_inner(extra, depth + 1))
                    } else {
                        "dict".into()
                    }
                }
                _ => "dict".into(),
            },
            _ => "Any".into(),
        }
    }

    /// The outermost type only (`list`, `dict`, `str`).
    fn base(&self, schema: &Value) -> String {
        let schema = self.deref(schema);
        match schema.get("type") {
            Some(Value::String(t)) => match t.as_str() {
                "array" => "list".into(),
                "object" => "dict".into(),
                other => self.simple(other, &Map::new(), MAX_DEPTH),
            },
            _ => "Any".into(),
        }
    }

    /// `name: str (required), qty: int` for an object argument (or a list of objects), so
    /// `doc()` shows nested arguments one level deep.
    fn object_keys(&self, schema: &Value) -> Option<String> {
        let mut schema = self.deref(schema);
        // `X | None`: describe X.
        for key in ["anyOf", "oneOf"] {
            if let Some(members) = schema.get(key).and_then(Value::as_array) {
                let objects: Vec<&Value> = members
                    .iter()
                    .map(|m| self.deref(m))
                    .filter(|m| m.get("type").and_then(Value::as_str) != Some("null"))
                    .collect();
                if objects.len() == 1 {
                    schema = objects[0];
                }
            }
        }
        let mut prefix = "";
        if schema.get("type").and_then(Value::as_str) == Some("array") {
            schema = self.deref(schema.get("items")?);
            prefix = "each item: ";
        }
        let props = schema.get("properties")?.as_object()?;
        if props.is_empty() {
            return None;
        }
        let required: BTreeSet<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let items: Vec<String> = props
            .iter()
            .take(12)
            .map(|(k, v)| {
                let mut s = format!("{}: {}", py_str(k), self.type_text(v, 1));
                if required.contains(k.as_str()) {
                    s.push_str(" (required)");
                }
                s
            })
            .collect();
        let more = props.len().saturating_sub(12);
        let mut text = format!("{prefix}{}", items.join(", "));
        if more > 0 {
            text.push_str(&format!(", +{more} more"));
        }
        Some(text)
    }
}

fn base_of_values(values: &[Value]) -> String {
    let kinds: BTreeSet<&str> = values
        .iter()
        .map(|v| match v {
            Value::String(_) => "str",
            Value::Number(n) if n.is_i64() || n.is_u64() => "int",
            Value::Number(_) => "float",
            Value::Bool(_) => "bool",
            Value::Null => "None",
            _ => "Any",
        })
        .collect();
    if kinds.len() == 1 {
        kinds.into_iter().next().unwrap_or("Any").to_string()
    } else {
        "Any".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(tool: Value) -> McpFunction {
        let (mut f, left) = server_functions("github", &[tool]);
        assert!(left.is_empty(), "{left:?}");
        f.remove(0)
    }

    #[test]
    fn signature_from_schema() {
        let f = one(json!({
            "name": "search_issues",
            "description": "Search issues.\nMore text.",
            "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string", "description": "What to find"},
                "limit": {"type": "integer", "default": 10},
                "labels": {"type": "array", "items": {"type": "string"}},
            }, "required": ["query"]}
        }));
        assert_eq!(f.name, "github.search_issues");
        assert_eq!(
            f.signature,
            "(query: str, *, limit: int = 10, labels: list[str] | None = None)"
        );
        assert!(f.doc.starts_with("Search issues.\nMore text.\n\nArguments:\n  query (str, required) — What to find\n  limit (int, default 10)\n  labels (list[str])"), "{}", f.doc);
        assert_eq!(f.params[0].key, "query");
        assert!(f.params[0].required && !f.params[1].required);
    }

    #[test]
    fn names_are_mapped_by_one_rule() {
        assert_eq!(python_name("search-issues"), "search_issues");
        assert_eq!(python_name("2fa"), "_2fa");
        assert_eq!(python_name("class"), "class_");
        assert_eq!(python_name("a.b c"), "a_b_c");
        assert_eq!(python_name("ok_name"), "ok_name");
        assert_eq!(python_name("naïve"), "naïve");
        for n in ["search-issues", "2fa", "class", "a.b c", "", "-", "€"] {
            let p = python_name(n);
            assert!(
                validate_name(&p, NameRule::Identifier).is_ok(),
                "{n} -> {p}"
            );
        }
    }

    #[test]
    fn collisions_leave_out_the_rewritten_tools() {
        let tools = vec![
            json!({"name": "get_user", "inputSchema": {"type": "object"}}),
            json!({"name": "get-user", "inputSchema": {"type": "object"}}),
            json!({"name": "a-b", "inputSchema": {"type": "object"}}),
            json!({"name": "a.b", "inputSchema": {"type": "object"}}),
            json!({"name": "x-y", "inputSchema": {"type": "object"}}),
        ];
        let (f, left) = server_functions("s", &tools);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["s.get_user", "s.x_y"]);
        let out: Vec<&str> = left.iter().map(|l| l.tool.as_str()).collect();
        assert_eq!(out, ["get-user", "a-b", "a.b"]);
        assert!(
            left[0].reason.contains("collide with `get_user`"),
            "{}",
            left[0].reason
        );
        let f = &f[1];
        assert!(f.doc.contains("(MCP tool `x-y`)"));
        assert_eq!(f.tool, "x-y");
    }

    #[test]
    fn argument_names_map_and_collide() {
        let f = one(
            json!({"name": "t", "inputSchema": {"type": "object", "properties": {
            "per-page": {"type": "integer"}, "from": {"type": "string"}}, "required": ["from"]}}),
        );
        assert_eq!(f.signature, "(from_: str, *, per_page: int | None = None)");
        assert!(
            f.doc.contains("from_ (str, required; sent as \"from\")"),
            "{}",
            f.doc
        );
        let (_, left) = server_functions(
            "s",
            &[
                json!({"name": "t", "inputSchema": {"type": "object", "properties": {
                "per-page": {}, "per_page": {}}}}),
            ],
        );
        assert!(left[0]
            .reason
            .contains("both map to the Python name `per_page`"));
    }

    #[test]
    fn types_of_nested_and_odd_schemas() {
        let f = one(json!({"name": "t", "inputSchema": {
            "type": "object",
            "$defs": {"Filter": {"type": "object", "properties": {
                "state": {"enum": ["open", "closed"]}, "labels": {"type": "array", "items": {"type": "string"}}},
                "required": ["state"]}},
            "properties": {
                "filter": {"$ref": "#/$defs/Filter"},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "tags": {"type": "object", "additionalProperties": {"type": "number"}},
                "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}}, "required": ["name"]}},
                "flag": {"type": "boolean", "default": true},
                "anything": {},
                "multi": {"type": ["integer", "null"]},
            },
            "required": ["filter", "anything"],
        }}));
        assert_eq!(
            f.signature,
            "(filter: dict, anything, *, mode: Literal['a', 'b'] = 'a', maybe: str | None = None, tags: dict[str, float] | None = None, items: list[dict] | None = None, flag: bool = True, multi: int | None = None)"
        );
        assert!(
            f.doc.contains(
                "keys: 'state': Literal['open', 'closed'] (required), 'labels': list[str]"
            ),
            "{}",
            f.doc
        );
        assert!(
            f.doc
                .contains("each item: 'name': str (required), 'qty': int"),
            "{}",
            f.doc
        );
    }

    #[test]
    fn tools_without_schema_or_description() {
        let f = one(json!({"name": "ping"}));
        assert_eq!(f.signature, "()");
        assert!(f.doc.starts_with("MCP tool `ping` of server `github`."));
        let f = one(
            json!({"name": "out", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}),
        );
        assert_eq!(f.signature, "() -> dict");
        let f = one(
            json!({"name": "w", "description": "Echo.\n\n    Indented more.\n      Deeper.", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}}),
        );
        assert_eq!(f.signature, "() -> str");
        assert!(
            f.doc
                .starts_with("Echo.\n\nIndented more.\n  Deeper.\n\nReturns str."),
            "{}",
            f.doc
        );
        let f = one(json!({"name": "req", "inputSchema": {"type": "object", "required": ["x"]}}));
        assert_eq!(f.signature, "(x)");
    }

    #[test]
    fn literals() {
        assert_eq!(
            python_literal(&json!({"a": [1, true, null, "it's"]})),
            "{'a': [1, True, None, 'it\\'s']}"
        );
    }
}
