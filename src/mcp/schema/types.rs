//! Python type texts from JSON schemas, with bounded expansion.
//!
//! A schema comes from an MCP server, so it is untrusted: `$ref`s may point back at
//! themselves, `anyOf` may fan out widely at every level, and an enum may hold a million
//! values. The walk is bounded three ways:
//!
//! - **depth**: nested schemas are followed [`MAX_DEPTH`] levels (deeper ones show their
//!   outermost type), `$ref` chains [`MAX_DEPTH`] hops;
//! - **size**: every schema node visited costs one unit of a [`Budget`] (per tool,
//!   [`SCHEMA_NODES_PER_TOOL`]);
//! - **time**: the budget also carries the server's deadline ([`SCHEMA_TIME_PER_SERVER`] for
//!   all of its tools).
//!
//! Past a bound the walk stops at once and the argument's type is `Any`; the caller puts a
//! note in the function's documentation ([`Exceeded::note`]). A 2 KB schema that expands
//! exponentially (`{"anyOf": [{"$ref": "#/$defs/A"}] * 60}`) thus costs at most the budget.

use std::cell::Cell;
use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::text::{py_str, short_literal};

/// Longest type text shown for one argument before it is shortened to its base type.
pub const MAX_TYPE_CHARS: usize = 60;
/// How deep `$ref`s and nested schemas are followed for type texts.
pub const MAX_DEPTH: usize = 4;
/// Schema nodes one tool's types may visit (all its arguments, their keys, its result).
pub const SCHEMA_NODES_PER_TOOL: usize = 10_000;
/// Time all of one server's tools may take to become functions.
pub const SCHEMA_TIME_PER_SERVER: Duration = Duration::from_secs(2);
/// Most enum values shown as a `Literal[...]`.
const MAX_LITERAL_VALUES: usize = 8;
/// Most keys of an object argument listed in its documentation.
const MAX_KEYS_SHOWN: usize = 12;
/// The deadline is read every this many nodes (reading the clock costs more than a node).
const CLOCK_EVERY: u32 = 64;

/// Which bound stopped a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Size,
    Time,
}

impl Exceeded {
    /// The note the function's documentation carries.
    pub fn note(self, server: &str) -> String {
        let why = match self {
            Exceeded::Size => format!(
                "its input schema needs more than {SCHEMA_NODES_PER_TOOL} schema nodes to expand (a very large or self-referencing schema)"
            ),
            Exceeded::Time => format!(
                "turning the schemas of MCP server `{server}` into types took over {} s",
                SCHEMA_TIME_PER_SERVER.as_secs()
            ),
        };
        format!(
            "Note: vis could not turn this tool's input schema into Python types: {why}. Arguments shown as Any are sent as given; the server checks them."
        )
    }
}

/// What one tool's type walk may still spend.
pub struct Budget {
    left: Cell<usize>,
    deadline: Instant,
    ticks: Cell<u32>,
    exceeded: Cell<Option<Exceeded>>,
}

impl Budget {
    pub fn new(nodes: usize, deadline: Instant) -> Budget {
        let budget = Budget {
            left: Cell::new(nodes),
            deadline,
            ticks: Cell::new(0),
            exceeded: Cell::new(None),
        };
        if Instant::now() >= deadline {
            budget.exceeded.set(Some(Exceeded::Time));
        }
        budget
    }

    /// Pays for one node; false once a bound is exceeded (and from then on).
    fn spend(&self) -> bool {
        if self.exceeded.get().is_some() {
            return false;
        }
        let left = self.left.get();
        if left == 0 {
            self.exceeded.set(Some(Exceeded::Size));
            return false;
        }
        self.left.set(left - 1);
        let ticks = self.ticks.get().wrapping_add(1);
        self.ticks.set(ticks);
        if ticks % CLOCK_EVERY == 0 && Instant::now() >= self.deadline {
            self.exceeded.set(Some(Exceeded::Time));
            return false;
        }
        true
    }

    pub fn exceeded(&self) -> Option<Exceeded> {
        self.exceeded.get()
    }
}

/// The `$defs` (or `definitions`) of a schema, for `$ref`s, and the budget of the walk.
pub struct Defs<'a> {
    defs: Option<&'a Map<String, Value>>,
    definitions: Option<&'a Map<String, Value>>,
    budget: &'a Budget,
}

impl<'a> Defs<'a> {
    pub fn of(schema: &'a Map<String, Value>, budget: &'a Budget) -> Defs<'a> {
        Defs {
            defs: schema.get("$defs").and_then(Value::as_object),
            definitions: schema.get("definitions").and_then(Value::as_object),
            budget,
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

    /// Follows a `$ref` (a few hops).
    fn deref<'b>(&self, mut schema: &'b Value) -> &'b Value
    where
        'a: 'b,
    {
        for _ in 0..MAX_DEPTH {
            if !self.budget.spend() {
                return schema;
            }
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

    /// The Python type text of a schema, shortened when very long; `Any` once the budget
    /// is spent (the caller checks [`Budget::exceeded`] and says so).
    pub fn type_text(&self, schema: &Value, depth: usize) -> String {
        let full = self.type_inner(schema, depth);
        if self.budget.exceeded().is_some() {
            return "Any".into();
        }
        if full.chars().count() <= MAX_TYPE_CHARS {
            return full;
        }
        let short = self.type_inner(schema, MAX_DEPTH);
        if self.budget.exceeded().is_some() {
            return "Any".into();
        }
        if short.chars().count() <= MAX_TYPE_CHARS {
            short
        } else {
            "Any".into()
        }
    }

    fn type_inner(&self, schema: &Value, depth: usize) -> String {
        if !self.budget.spend() {
            return "Any".into();
        }
        let schema = self.deref(schema);
        let Some(obj) = schema.as_object() else {
            return "Any".into();
        };
        if let Some(c) = obj.get("const") {
            return match short_literal(c) {
                Some(text) => format!("Literal[{text}]"),
                None => base_of_values(std::slice::from_ref(c)),
            };
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array) {
            return self.enum_text(values, depth);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(members) = obj.get(key).and_then(Value::as_array) {
                return self.union_text(members, depth);
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
                let mut parts: Vec<String> = Vec::new();
                for t in types.iter().filter_map(Value::as_str) {
                    let part = self.simple(t, obj, depth);
                    if !parts.contains(&part) {
                        parts.push(part);
                    }
                    if parts.len() > 8 {
                        return "Any".into();
                    }
                }
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

    fn enum_text(&self, values: &[Value], depth: usize) -> String {
        if depth >= MAX_DEPTH || values.len() > MAX_LITERAL_VALUES {
            return base_of_values(values);
        }
        let mut items: Vec<String> = Vec::with_capacity(values.len());
        for v in values {
            match short_literal(v) {
                Some(text) => items.push(text),
                None => return base_of_values(values),
            }
        }
        format!("Literal[{}]", items.join(", "))
    }

    /// `A | B | None` for `anyOf`/`oneOf`: members deduplicated, `None` last.
    fn union_text(&self, members: &[Value], depth: usize) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut chars = 0;
        for m in members {
            let t = if depth >= MAX_DEPTH {
                self.base(m)
            } else {
                self.type_inner(m, depth + 1)
            };
            if self.budget.exceeded().is_some() {
                return "Any".into();
            }
            for piece in t.split(" | ") {
                if piece == "Any" {
                    return "Any".into();
                }
                if seen.insert(piece.to_string()) {
                    chars += piece.len() + 3;
                    parts.push(piece.to_string());
                }
            }
            // Too long to show already: the caller shortens it to base types anyway.
            if chars > MAX_TYPE_CHARS * 2 {
                break;
            }
        }
        // `None` last, as people write `str | None`.
        parts.sort_by_key(|p| p == "None");
        if parts.is_empty() {
            "Any".into()
        } else {
            parts.join(" | ")
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
        if !self.budget.spend() {
            return "Any".into();
        }
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
    /// `doc()` shows nested arguments one level deep. `None` once the budget is spent.
    pub fn object_keys(&self, schema: &Value) -> Option<String> {
        let mut schema = self.deref(schema);
        // `X | None`: describe X.
        for key in ["anyOf", "oneOf"] {
            if let Some(members) = schema.get(key).and_then(Value::as_array) {
                let mut objects = Vec::new();
                for m in members {
                    let m = self.deref(m);
                    if m.get("type").and_then(Value::as_str) != Some("null") {
                        objects.push(m);
                    }
                    if objects.len() > 1 {
                        break;
                    }
                }
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
        let mut items: Vec<String> = Vec::new();
        for (k, v) in props.iter().take(MAX_KEYS_SHOWN) {
            let mut s = format!(
                "{}: {}",
                py_str(&crate::protocol::clip(k, MAX_TYPE_CHARS)),
                self.type_text(v, 1)
            );
            if required.contains(k.as_str()) {
                s.push_str(" (required)");
            }
            items.push(s);
        }
        if self.budget.exceeded().is_some() {
            return None;
        }
        let more = props.len().saturating_sub(MAX_KEYS_SHOWN);
        let mut text = format!("{prefix}{}", items.join(", "));
        if more > 0 {
            text.push_str(&format!(", +{more} more"));
        }
        Some(text)
    }
}

/// The one type all `values` share (`str`, `int`, …), else `Any`.
pub fn base_of_values(values: &[Value]) -> String {
    let mut kinds: BTreeSet<&str> = BTreeSet::new();
    for v in values {
        kinds.insert(match v {
            Value::String(_) => "str",
            Value::Number(n) if n.is_i64() || n.is_u64() => "int",
            Value::Number(_) => "float",
            Value::Bool(_) => "bool",
            Value::Null => "None",
            _ => "Any",
        });
        if kinds.len() > 1 {
            return "Any".into();
        }
    }
    kinds.into_iter().next().unwrap_or("Any").to_string()
}
