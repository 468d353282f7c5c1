//! Schema-to-signature mapping: names, types, docs, and the bounds on hostile schemas.

use super::text::python_literal;
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
        f.doc
            .contains("keys: 'state': Literal['open', 'closed'] (required), 'labels': list[str]"),
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

/// A tool whose one argument `x` has `schema`, with `defs` as its `$defs`.
fn tool_with(name: &str, schema: Value, defs: Value) -> Value {
    json!({"name": name, "inputSchema": {
        "type": "object", "$defs": defs,
        "properties": {"x": schema, "y": {"type": "string"}}, "required": ["x"],
    }})
}

/// The function for `tool`, and how many schema nodes the walk may visit.
fn bounded(tool: Value) -> McpFunction {
    let (mut f, left) = server_functions("h", &[tool]);
    assert!(left.is_empty(), "{left:?}");
    f.remove(0)
}

fn assert_degraded(f: &McpFunction, why: &str) {
    assert!(f.signature.starts_with("(x: Any"), "{}", f.signature);
    assert!(
        f.doc
            .contains("Note: vis could not turn this tool's input schema into Python types")
            && f.doc.contains(why)
            && f.doc.contains("Arguments shown as Any are sent as given"),
        "{}",
        f.doc
    );
}

#[test]
fn the_self_referencing_any_of_bomb_is_any_at_once() {
    // The reviewed attack: 2 KB that expanded for 118 s (60^4 paths at depth 4). Its
    // members have no type, so the union is `Any` as soon as one member is.
    let members: Vec<Value> = (0..60).map(|_| json!({"$ref": "#/$defs/A"})).collect();
    let tool = tool_with(
        "bomb",
        json!({"$ref": "#/$defs/A"}),
        json!({"A": {"anyOf": members}}),
    );
    assert!(tool.to_string().len() < 2200, "{}", tool.to_string().len());
    let f = bounded(tool);
    assert_eq!(f.signature, "(x: Any, *, y: str | None = None)");
}

#[test]
fn an_exponential_bomb_past_the_node_budget_degrades_to_any_with_a_note() {
    // The same bomb with typed members: every member must be expanded (60^2 per level).
    let members: Vec<Value> = (0..60)
        .map(|_| json!({"type": "array", "items": {"$ref": "#/$defs/A"}}))
        .collect();
    let f = bounded(tool_with(
        "bomb",
        json!({"$ref": "#/$defs/A"}),
        json!({"A": {"anyOf": members}}),
    ));
    assert_degraded(&f, "more than 10000 schema nodes");
    // Later arguments of the same tool are Any too (the budget is spent).
    assert_eq!(f.signature, "(x: Any, *, y: Any = None)");
    assert_eq!(f.params.len(), 2);
    // Another tool of the server has its own budget.
    let (f, _) = server_functions(
        "h",
        &[
            tool_with(
                "bomb",
                json!({"$ref": "#/$defs/A"}),
                json!({"A": {"anyOf": (0..60).map(|_| json!({"type": "array", "items": {"$ref": "#/$defs/A"}})).collect::<Vec<_>>()}}),
            ),
            tool_with("fine", json!({"type": "integer"}), json!({})),
        ],
    );
    assert_eq!(f[1].signature, "(x: int, *, y: str | None = None)");
    assert!(!f[1].doc.contains("Note:"), "{}", f[1].doc);
}

#[test]
fn wide_fan_out_of_refs_and_deep_nesting_are_bounded() {
    // Every definition is a union over all 40 definitions (wide fan-out of `$ref`s).
    let mut defs = Map::new();
    for i in 0..40 {
        let refs: Vec<Value> = (0..40)
            .map(|j| json!({"type": "array", "items": {"$ref": format!("#/$defs/D{j}")}}))
            .collect();
        defs.insert(format!("D{i}"), json!({"oneOf": refs}));
    }
    let f = bounded(tool_with(
        "fanout",
        json!({"$ref": "#/$defs/D0"}),
        Value::Object(defs),
    ));
    assert_degraded(&f, "more than 10000 schema nodes");
    // Fan-out that stays small is typed as usual.
    let mut defs = Map::new();
    for i in 0..40 {
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
        );
    }
    let members: Vec<Value> = (0..40)
        .map(|j| json!({"type": "array", "items": {"$ref": format!("#/$defs/D{j}")}}))
        .collect();
    let f = bounded(tool_with(
        "fanout",
        json!({"anyOf": members}),
        Value::Object(defs),
    ));
    assert_eq!(f.signature, "(x: list[dict], *, y: str | None = None)");
    // Deep nesting: 120 levels of arrays (serde_json parses up to 128).
    let mut deep = json!({"type": "string"});
    for _ in 0..120 {
        deep = json!({"type": "array", "items": deep});
    }
    let f = bounded(tool_with("deep", deep, json!({})));
    assert_eq!(
        f.signature,
        "(x: list[list[list[list[list]]]], *, y: str | None = None)"
    );
    // A `$ref` chain that loops on itself.
    let f = bounded(tool_with(
        "loop",
        json!({"$ref": "#/$defs/A"}),
        json!({"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}),
    ));
    assert_eq!(f.signature, "(x: Any, *, y: str | None = None)");
}

#[test]
fn huge_enums_defaults_and_descriptions_stay_small() {
    let values: Vec<Value> = (0..200_000).map(|i| json!(format!("v{i}"))).collect();
    let f = bounded(tool_with("enum", json!({"enum": values}), json!({})));
    assert!(f.signature.starts_with("(x: str,"), "{}", f.signature);
    let long = "z".repeat(1_000_000);
    let f = bounded(
        json!({"name": "long", "description": long.clone(), "inputSchema": {
        "type": "object", "properties": {
            "a": {"enum": [long.clone()], "description": long.clone()},
            "b": {"type": "string", "default": long.clone()},
            "c": {"const": long.clone()},
        }}}),
    );
    assert_eq!(
        f.signature,
        "(*, a: str | None = None, b: str = ..., c: str | None = None)"
    );
    assert!(f.doc.len() < MAX_DESCRIPTION_CHARS + 3 * MAX_ARGUMENT_DESCRIPTION_CHARS + 1000);
    assert!(
        f.doc.contains("b (str, default ...)"),
        "{}",
        &f.doc[f.doc.len() - 600..]
    );
}

#[test]
fn a_spent_deadline_degrades_every_tool_with_the_time_note() {
    let tools = vec![
        tool_with("a", json!({"type": "integer"}), json!({})),
        tool_with("b", json!({"type": "string"}), json!({})),
    ];
    let (f, left) = functions_within("slow", &tools, Instant::now(), SCHEMA_NODES_PER_TOOL);
    assert!(left.is_empty());
    for f in &f {
        assert_degraded(
            f,
            "turning the schemas of MCP server `slow` into types took over 2 s",
        );
    }
}

#[test]
fn too_many_tools_arguments_and_long_names_are_left_out_with_the_limit() {
    let tools: Vec<Value> = (0..MAX_TOOLS_PER_SERVER + 5)
        .map(|i| json!({"name": format!("t{i}")}))
        .collect();
    let (f, left) = server_functions("s", &tools);
    assert_eq!(f.len(), MAX_TOOLS_PER_SERVER);
    assert_eq!(
        left[0].reason,
        "the server lists 1005 tools; vis uses the first 1000"
    );
    let props: Map<String, Value> = (0..=MAX_ARGUMENTS)
        .map(|i| (format!("a{i}"), json!({})))
        .collect();
    let long = "n".repeat(MAX_NAME_CHARS + 1);
    let (f, left) = server_functions(
        "s",
        &[
            json!({"name": "many", "inputSchema": {"type": "object", "properties": props}}),
            json!({"name": long}),
            json!({"name": "arg", "inputSchema": {"type": "object", "required": [long]}}),
        ],
    );
    assert!(f.is_empty());
    assert_eq!(
        left[0].reason,
        "its name is 129 characters long; a tool name may have at most 128"
    );
    assert_eq!(
        left[1].reason,
        "it has 101 arguments, more than the 100 a function may take"
    );
    assert!(
        left[2]
            .reason
            .contains("is 129 characters long; at most 128"),
        "{left:?}"
    );
}

#[test]
fn dunders_and_namespace_attributes_get_a_trailing_underscore() {
    assert_eq!(tool_name("__init__"), "__init___");
    assert_eq!(tool_name("__class__"), "__class___");
    assert_eq!(tool_name("_members"), "_members_");
    assert_eq!(tool_name("_path"), "_path_");
    assert_eq!(tool_name("class"), "class_");
    assert_eq!(tool_name("__"), "__");
    assert_eq!(tool_name("_private"), "_private");
    assert_eq!(tool_name("__x"), "__x");
    // Arguments are plain parameters: only keywords need mapping there.
    assert_eq!(python_name("__init__"), "__init__");
    let tools = vec![
        json!({"name": "__init__"}),
        json!({"name": "__class__"}),
        json!({"name": "_function"}),
        json!({"name": "ok"}),
        json!({"name": "__getattr__"}),
        json!({"name": "_members"}),
        json!({"name": "_members_"}),
    ];
    let (f, left) = server_functions("s", &tools);
    let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "s.__init___",
            "s.__class___",
            "s._function_",
            "s.ok",
            "s.__getattr___",
            "s._members_"
        ]
    );
    assert!(f[0].doc.ends_with("(MCP tool `__init__`)"), "{}", f[0].doc);
    assert_eq!(f[0].tool, "__init__");
    // `_members` would become the name a tool already has: it is the one left out.
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].tool, "_members");
    assert!(
        left[0].reason.contains("collide with `_members_`"),
        "{left:?}"
    );
}
