//! MCP servers whose tool lists are built to hurt (`tests/fixtures/mcp/hostile.py`): schema
//! bombs cost a bounded walk and degrade to `Any` with a note, and tool names that a
//! namespace object uses itself stay callable under their documented safe names.

use serde_json::{json, Value};

use crate::support::mcp::{last_json, python, toml_str, write_config, RawMcp};
use crate::support::TestEnv;
use crate::vistest;

fn with_hostile(env: &TestEnv) {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/hostile.py");
    write_config(
        env,
        &format!(
            "[mcp.servers.h]\ncommand = {}\nargs = [{}]\n",
            toml_str(&python().to_string_lossy()),
            toml_str(&script.to_string_lossy())
        ),
    );
}

fn exec_json(env: &TestEnv, code: &str) -> Value {
    let r = env.exec("hostile", code);
    assert_eq!(r.code, 0, "stdout: {}\nstderr: {}", r.stdout, r.stderr);
    last_json(&r.stdout)
}

vistest!(
    vis_mcp_answers_initialize_although_a_server_lists_schema_bombs,
    |env| {
        with_hostile(&env);
        // Before the bounds, the first bomb alone kept `initialize` unanswered for 118 s; the
        // wait for the answer is bounded (RawMcp), so a hang fails the test.
        let mut mcp = RawMcp::initialized(&env, &[]);
        let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "python_execution",
        "arguments": {"code": "print(h.typed_bomb([[1]]))\nprint(h.bomb(x={'a': 1}))"}}});
        mcp.send(format!("{request}\n").as_bytes());
        let answer = mcp.next();
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.starts_with(
                "typed_bomb {\"x\": [[1]]}\nbomb {\"x\": {\"a\": 1}}\n[vis] status: ok"
            ),
            "{answer}"
        );
        assert!(mcp.finish().success());
    }
);

vistest!(
    schema_bombs_become_any_with_a_note_in_their_documentation,
    |env| {
        with_hostile(&env);
        let v = exec_json(
            &env,
            r#"
import json
names = ["bomb", "typed_bomb", "fan_out", "deep", "huge_enum", "plain"]
print(json.dumps({
    "docs": {n: doc("h." + n) for n in names},
    "calls": [h.fan_out(x=[1]), h.deep([["a"]]), h.huge_enum("v7"), h.plain(3)],
    "tools": session["mcp"]["servers"]["h"]["tools"],
    "left_out": session["mcp"]["servers"]["h"].get("left_out", []),
}))
"#,
        );
        let doc = |name: &str| v["docs"][name].as_str().unwrap().to_string();
        let note = "Note: vis could not turn this tool's input schema into Python types: its input schema needs more than 10000 schema nodes to expand";
        // The exact bomb of the review: its members have no type, so its union is Any at once.
        let bomb = doc("bomb");
        assert!(
            bomb.starts_with("h.bomb(x: Any, *, note: str | None = None)"),
            "{bomb}"
        );
        for name in ["typed_bomb", "fan_out"] {
            let d = doc(name);
            assert!(d.starts_with(&format!("h.{name}(x: Any")), "{d}");
            assert!(
                d.contains(note) && d.contains("Arguments shown as Any are sent as given"),
                "{d}"
            );
        }
        assert!(
            doc("deep").starts_with("h.deep(x: list[list[list[list[list]]]])"),
            "{}",
            doc("deep")
        );
        assert!(
            doc("huge_enum").starts_with("h.huge_enum(x: str)"),
            "{}",
            doc("huge_enum")
        );
        assert!(doc("plain").starts_with("h.plain(x: int)") && !doc("plain").contains("Note:"));
        // Degraded or not, every tool is callable; arguments typed Any are sent as given.
        assert_eq!(
            v["calls"],
            json!([
                "fan_out {\"x\": [1]}",
                "deep {\"x\": [[\"a\"]]}",
                "huge_enum {\"x\": \"v7\"}",
                "plain {\"x\": 3}"
            ])
        );
        assert_eq!(v["tools"], 11);
        assert_eq!(v["left_out"], json!([]));
    }
);

vistest!(
    tools_named_like_a_namespaces_own_attributes_stay_callable,
    |env| {
        with_hostile(&env);
        let v = exec_json(
            &env,
            r#"
import json
print(json.dumps({
    "init": h.__init___(x=1),
    "class": h.__class___(),
    "getattr": h.__getattr___(name="n"),
    "members": h._members_(),
    "keyword": h.class_(x=2),
    "plain": h.plain(3),
    "type": type(h).__name__,
    "repr": repr(h),
    "dir": dir(h),
    "missing": (lambda: (getattr(h, "nope", "no such member")))(),
    "doc_init": doc("h.__init___"),
    "names": sorted(n for n in apropos("h").names if n.startswith("h.")),
}))
"#,
        );
        // Each tool is reached under its safe name and gets its own MCP name on the wire.
        assert_eq!(v["init"], "__init__ {\"x\": 1}");
        assert_eq!(v["class"], "__class__ {}");
        assert_eq!(v["getattr"], "__getattr__ {\"name\": \"n\"}");
        assert_eq!(v["members"], "_members {}");
        assert_eq!(v["keyword"], "class {\"x\": 2}");
        assert_eq!(v["plain"], "plain {\"x\": 3}");
        // The namespace object itself is untouched.
        assert_eq!(v["type"], "Namespace");
        assert!(
            v["repr"]
                .as_str()
                .unwrap()
                .starts_with("<namespace h: 11 members"),
            "{v}"
        );
        assert_eq!(v["missing"], "no such member");
        let dir: Vec<&str> = v["dir"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for name in [
            "__init___",
            "__class___",
            "__getattr___",
            "_members_",
            "class_",
            "plain",
        ] {
            assert!(dir.contains(&name), "{name}: {dir:?}");
        }
        let doc = v["doc_init"].as_str().unwrap();
        assert!(
            doc.starts_with("h.__init___(*, x: int | None = None)")
                && doc.contains("(MCP tool `__init__`)"),
            "{doc}"
        );
        assert!(
            v["names"]
                .as_array()
                .unwrap()
                .contains(&json!("h.__class___")),
            "{v}"
        );
    }
);
