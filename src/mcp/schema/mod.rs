//! MCP tools as Python functions: names, signatures and docstrings from `tools/list`.
//!
//! # Names
//! A tool's Python name is its MCP name when that is a valid identifier the namespace can
//! hold. Otherwise one rule maps it (the same spelling the catalog's name errors propose):
//! every character that cannot appear in a Python identifier becomes `_`, a name that then
//! starts with something an identifier cannot start with gets a leading `_`, and a keyword
//! or a name the namespace object itself uses gets a trailing `_` (`search-issues` →
//! `search_issues`, `2fa` → `_2fa`, `class` → `class_`, `__init__` → `__init___`, `_members`
//! → `_members_`). A namespace object's own names are every dunder (`__class__`, `__init__`,
//! … — Python finds those on the object before any member) and [`NAMESPACE_ATTRIBUTES`]. The
//! same rule, without the namespace part, maps argument names (`per-page` → `per_page`).
//! Nothing is rewritten into a collision: when mapped names collide, every tool whose name
//! had to be mapped is left out (a tool whose name needed no mapping keeps its name) and the
//! collision is reported; a tool whose argument names collide is left out too.
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
//!
//! # Bounds
//! Tool lists and schemas come from the server, so they are untrusted ([`types`] bounds the
//! schema walk in depth, size and time). A server's first [`MAX_TOOLS_PER_SERVER`] tools are
//! used; a tool with more than [`MAX_ARGUMENTS`] arguments is left out; descriptions are cut
//! at [`MAX_DESCRIPTION_CHARS`] (argument descriptions at [`MAX_ARGUMENT_DESCRIPTION_CHARS`]);
//! a default too long to show reads `...` in the signature.

mod text;
mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use serde_json::{Map, Value};

use crate::catalog::{spell_segment, validate_name, NameRule};
use crate::protocol::{McpFunction, McpParam};
use text::{cleandoc, one_line, short_literal};
use types::{Budget, Defs};
pub use types::{SCHEMA_NODES_PER_TOOL, SCHEMA_TIME_PER_SERVER};

/// Most tools of one server that become functions.
pub const MAX_TOOLS_PER_SERVER: usize = 1000;
/// Most arguments of one tool.
pub const MAX_ARGUMENTS: usize = 100;
/// Longest tool description kept in a docstring.
pub const MAX_DESCRIPTION_CHARS: usize = 8000;
/// Longest argument description kept in a docstring.
pub const MAX_ARGUMENT_DESCRIPTION_CHARS: usize = 500;
/// Longest tool or argument name (the MCP specification's recommendation for tool names).
pub const MAX_NAME_CHARS: usize = 128;

/// Attributes of a namespace object besides its dunders (the `__slots__` of `Namespace` in
/// `python/vis/_extensions/namespace.py`): a member of the same name could not be reached.
pub const NAMESPACE_ATTRIBUTES: [&str; 3] = ["_path", "_function", "_members"];

/// The Python identifier for an MCP argument name (see the module docs).
pub fn python_name(name: &str) -> String {
    spell_segment(name, NameRule::Identifier)
}

/// The Python name of an MCP tool: [`python_name`], plus a trailing `_` for a name the
/// namespace object itself uses (a dunder, or one of [`NAMESPACE_ATTRIBUTES`]).
pub fn tool_name(name: &str) -> String {
    let mut out = python_name(name);
    let dunder = out.len() > 4 && out.starts_with("__") && out.ends_with("__");
    if dunder || NAMESPACE_ATTRIBUTES.contains(&out.as_str()) {
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
    let deadline = Instant::now() + SCHEMA_TIME_PER_SERVER;
    functions_within(server, tools, deadline, SCHEMA_NODES_PER_TOOL)
}

/// [`server_functions`] with explicit bounds (the tests pass a spent deadline).
fn functions_within(
    server: &str,
    tools: &[Value],
    deadline: Instant,
    nodes_per_tool: usize,
) -> (Vec<McpFunction>, Vec<LeftOut>) {
    let mut left_out = Vec::new();
    let (tools, beyond) = tools.split_at(tools.len().min(MAX_TOOLS_PER_SERVER));
    if !beyond.is_empty() {
        left_out.push(LeftOut {
            tool: format!("({} more tools)", beyond.len()),
            reason: format!(
                "the server lists {} tools; vis uses the first {MAX_TOOLS_PER_SERVER}",
                tools.len() + beyond.len()
            ),
        });
    }
    // Python name -> the MCP names that want it.
    let mut wanted: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut named: Vec<(&str, &Value)> = Vec::with_capacity(tools.len());
    for tool in tools {
        match tool.get("name").and_then(Value::as_str) {
            None => left_out.push(LeftOut {
                tool: "(unnamed)".into(),
                reason: "the server listed a tool without a name".into(),
            }),
            Some("") => left_out.push(LeftOut {
                tool: String::new(),
                reason: "the tool's name is empty".into(),
            }),
            Some(name) if name.chars().count() > MAX_NAME_CHARS => left_out.push(LeftOut {
                tool: crate::protocol::clip(name, MAX_NAME_CHARS),
                reason: format!(
                    "its name is {} characters long; a tool name may have at most {MAX_NAME_CHARS}",
                    name.chars().count()
                ),
            }),
            Some(name) => {
                wanted.entry(tool_name(name)).or_default().push(name);
                named.push((name, tool));
            }
        }
    }
    let mut functions = Vec::new();
    for (name, tool) in named {
        let py = tool_name(name);
        let rivals = &wanted[&py];
        if rivals.len() > 1 && py != name {
            let others: Vec<String> = rivals
                .iter()
                .filter(|n| **n != name)
                .take(5)
                .map(|n| format!("`{n}`"))
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
        let budget = Budget::new(nodes_per_tool, deadline);
        match function(server, name, &py, tool, &budget) {
            Ok(f) => functions.push(f),
            Err(problem) => left_out.push(LeftOut {
                tool: name.to_string(),
                reason: problem.to_string(),
            }),
        }
    }
    (functions, left_out)
}

/// Why a listed tool cannot be a function.
#[derive(Debug, thiserror::Error)]
enum ToolProblem {
    #[error("its arguments `{first}` and `{second}` both map to the Python name `{python}`")]
    ArgumentCollision {
        first: String,
        second: String,
        python: String,
    },
    #[error("it has {count} arguments, more than the {MAX_ARGUMENTS} a function may take")]
    TooManyArguments { count: usize },
    #[error("its argument name `{clipped}` is {length} characters long; at most {MAX_NAME_CHARS}")]
    LongArgumentName { clipped: String, length: usize },
}

/// One argument while its function is assembled.
struct Arg<'a> {
    param: McpParam,
    ty: String,
    schema: &'a Value,
}

/// One tool as a function.
fn function(
    server: &str,
    tool: &str,
    py: &str,
    spec: &Value,
    budget: &Budget,
) -> Result<McpFunction, ToolProblem> {
    let empty = Map::new();
    let schema = spec
        .get("inputSchema")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut args = arguments(schema)?;
    let defs = Defs::of(schema, budget);
    for a in &mut args {
        a.ty = defs.type_text(a.schema, 0);
    }
    // Required first (positional), then optional (keyword-only); each group in schema order.
    args.sort_by_key(|a| !a.param.required);
    let output = spec.get("outputSchema").filter(|o| o.is_object());
    let returns = output.map(|o| match wrapped_result(o) {
        Some(inner) => Defs::of(o.as_object().unwrap_or(&empty), budget).type_text(inner, 0),
        None => "dict".to_string(),
    });
    let mut signature = signature_of(&args);
    if let Some(r) = &returns {
        signature.push_str(&format!(" -> {r}"));
    }
    let doc = docstring(
        server,
        tool,
        py,
        spec,
        &args,
        &defs,
        returns.as_deref(),
        budget,
    );
    Ok(McpFunction {
        name: format!("{server}.{py}"),
        server: server.to_string(),
        tool: tool.to_string(),
        signature,
        doc,
        params: args.into_iter().map(|a| a.param).collect(),
    })
}

/// The arguments an input schema declares, in schema order (types not yet filled in).
fn arguments(schema: &Map<String, Value>) -> Result<Vec<Arg<'_>>, ToolProblem> {
    static MISSING: Value = Value::Null;
    static NO_PROPERTIES: std::sync::LazyLock<Map<String, Value>> =
        std::sync::LazyLock::new(Map::new);
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&NO_PROPERTIES);
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Required names the schema does not describe still have to be passed.
    let undescribed: Vec<&str> = required
        .iter()
        .copied()
        .filter(|key| !properties.contains_key(*key))
        .collect();
    let count = properties.len() + undescribed.len();
    if count > MAX_ARGUMENTS {
        return Err(ToolProblem::TooManyArguments { count });
    }
    if let Some(long) = properties
        .keys()
        .map(String::as_str)
        .chain(undescribed.iter().copied())
        .find(|k| k.chars().count() > MAX_NAME_CHARS)
    {
        return Err(ToolProblem::LongArgumentName {
            clipped: crate::protocol::clip(long, 40),
            length: long.chars().count(),
        });
    }
    let mut args: Vec<Arg<'_>> = Vec::with_capacity(count);
    for (key, prop) in properties {
        args.push(Arg {
            param: McpParam {
                name: python_name(key),
                key: key.clone(),
                required: required.contains(key.as_str()),
                default: prop
                    .get("default")
                    .map(|d| short_literal(d).unwrap_or_else(|| "...".into())),
            },
            ty: String::new(),
            schema: prop,
        });
    }
    for key in undescribed {
        args.push(Arg {
            param: McpParam {
                name: python_name(key),
                key: key.to_string(),
                required: true,
                default: None,
            },
            ty: String::new(),
            schema: &MISSING,
        });
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for a in &args {
        if let Some(other) = seen.insert(a.param.name.as_str(), a.param.key.as_str()) {
            return Err(ToolProblem::ArgumentCollision {
                first: other.to_string(),
                second: a.param.key.clone(),
                python: a.param.name.clone(),
            });
        }
    }
    Ok(args)
}

/// `(query: str, *, limit: int = 10)`.
fn signature_of(args: &[Arg<'_>]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut star = false;
    for a in args {
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
    format!("({})", parts.join(", "))
}

/// The docstring: description, arguments, what comes back, and any note on bounds.
#[allow(clippy::too_many_arguments)]
fn docstring(
    server: &str,
    tool: &str,
    py: &str,
    spec: &Value,
    args: &[Arg<'_>],
    defs: &Defs<'_>,
    returns: Option<&str>,
    budget: &Budget,
) -> String {
    let description = spec
        .get("description")
        .and_then(Value::as_str)
        .map(|d| crate::protocol::clip(d, MAX_DESCRIPTION_CHARS))
        .filter(|d| !d.trim().is_empty());
    let mut doc = match description {
        Some(d) => cleandoc(&d),
        None => format!("MCP tool `{tool}` of server `{server}`."),
    };
    if !args.is_empty() {
        doc.push_str("\n\nArguments:");
        for a in args {
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
                .map(|d| one_line(d, MAX_ARGUMENT_DESCRIPTION_CHARS))
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
    match returns {
        Some(r) if r != "dict" => doc.push_str(&format!("\n\nReturns {r}.")),
        Some(_) => doc.push_str("\n\nReturns the tool's structured result (a dict)."),
        None => doc.push_str("\n\nReturns the tool's text (str); several parts come as a list, images and resources as McpContent (with .path)."),
    }
    doc.push_str(" A failure raises McpToolError.");
    if let Some(exceeded) = budget.exceeded() {
        doc.push_str("\n\n");
        doc.push_str(&exceeded.note(server));
    }
    if py != tool {
        doc.push_str(&format!("\n(MCP tool `{tool}`)"));
    }
    doc
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

#[cfg(test)]
mod tests;
