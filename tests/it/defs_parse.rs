//! The host's reading of Python source (`vis::runtime::defs`) checked against Python's own: for
//! many generated blocks (every layout that moves a statement boundary: carriage returns, form
//! feeds, tabs, continuations, brackets, strings, f-strings, comments, `;`, decorators), the
//! top-level definitions, imports and assignments the host cuts out must be exactly those
//! `ast` finds, with the same text (`--nocapture` prints how many blocks were compared).

use serde_json::{json, Value};
use vis::runtime::defs::{top_level_statements, Dialect, StatementKind};

/// Pieces of blocks; `{n}` makes names unique.
const FRAGMENTS: &[&str] = &[
    "def f{n}(a, b=({n},\n  2)):\n    return a\n",
    "@dec\n# between\n\n@dec2(1,\n  2)\ndef g{n}():\n    '''doc\n    def x(): pass'''\n    return 1;  # trailing\n",
    "class C{n}(B):\n    x = '''\nclass D: pass\n'''\n    def m(self): return 1\n",
    "\x0cdef h{n}(): pass\n",
    "if x:\n    y = 1\n    \x0cz{n} = 2\n",
    "import os, sys as s{n}\n",
    "from a.b import (c as d{n},\n e,)\n",
    "from . import q{n}\n",
    "from __future__ import annotations\n",
    "A{n} = 1; B{n}: int = (2,\n 3)\n",
    "x{n} = f'{{a!r:>{{w}}}}' + \"\\\"\" + r'\\'' \n",
    "s{n} = '''\r\ndef fake(): pass\r\n'''\n",
    "t{n} = 1 \\\n  + 2\n",
    "async def k{n}():\n\tawait z\n",
    "def w{n}(): a = 1; return a;\n",
    "L{n} = [\n  1, # c\n  2]\n",
    "\n\n",
    "# comment\n",
    "   # indented comment\n",
    "try:\n    import json as j{n}\nexcept ImportError:\n    pass\n",
    "class E{n}: pass;\n",
    "P{n}: dict[str, int | None] = {{}}\n",
    "Q{n} = R{n} = 3\n",
    "u{n} += 1\n",
    "def v{n}(\n    x,  # why\n    y=')',\n):\n    return (x,\n            y)\n",
    "match = {n}\n",
    "lambda_{n} = lambda q=1: q\n",
    "def ｆ{n}(): pass\n",
    "bytes{n} = rb'\\x00' b\"\\\\\"\n",
    "with open(p) as fh:\n    import re as r{n}\n",
    "while False:\n    pass\nelse:\n    Z{n} = 1\n",
    "n{n} = 0x1F + 1.5e-3j + 1_000\n",
    // Not Python: the host must not crash on them, and Python keeps nothing.
    "def (:\n",
    "'''never closed\n",
    "x = (1,\n",
];

/// A small deterministic generator (the tests must be repeatable).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % below
    }
}

fn blocks(count: usize) -> Vec<String> {
    let mut rng = Lcg(21);
    (0..count)
        .map(|b| {
            let mut block = String::new();
            for n in 0..1 + rng.next(6) {
                let fragment =
                    FRAGMENTS[rng.next(FRAGMENTS.len())].replace("{n}", &format!("{b}_{n}"));
                // The same block with other line endings.
                let fragment = match rng.next(4) {
                    0 => fragment.replace('\n', "\r\n"),
                    1 => fragment.replace('\n', "\r"),
                    _ => fragment,
                };
                block.push_str(&fragment.replace("{{", "{").replace("}}", "}"));
            }
            block
        })
        .collect()
}

/// Python's answer for each block: `null` when it does not parse, else `[kind, name, text]`
/// for each top-level definition, one-name import and single-name assignment, cut as the
/// worker cuts them (`vis.defs`).
const ORACLE: &str = r#"
import ast, json, sys

def lines_of(code):
    lines = code.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [l + "\n" for l in lines[:-1]] + ([lines[-1]] if lines[-1] else [])

def segment(lines, node, start_line, start_col):
    chunk = lines[start_line - 1 : node.end_lineno]
    chunk[-1] = chunk[-1].encode()[: node.end_col_offset].decode()
    chunk[0] = chunk[0].lstrip(" \t\f") if start_col is None else chunk[0].encode()[start_col:].decode()
    return "".join(chunk)

out = []
for code in json.load(sys.stdin):
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        out.append(None)
        continue
    lines = lines_of(code)
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            found.append([kind, node.name, segment(lines, node, start, None)])
        elif isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__"):
            for alias in node.names:
                if isinstance(node, ast.Import):
                    one = ast.Import(names=[alias])
                    bound = alias.asname or alias.name.split(".")[0]
                else:
                    one = ast.ImportFrom(module=node.module, names=[alias], level=0)
                    bound = alias.asname or alias.name
                    if bound == "*":
                        bound = node.module + ".*"
                found.append(["import", bound, ast.unparse(one)])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found.append(["constant", node.targets[0].id, segment(lines, node, node.lineno, node.col_offset)])
        elif isinstance(node, ast.AnnAssign) and node.simple and node.value is not None:
            found.append(["constant", node.target.id, segment(lines, node, node.lineno, node.col_offset)])
    out.append(found)
json.dump(out, sys.stdout)
"#;

fn python_answers(blocks: &[String]) -> Vec<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .args(["-c", ORACLE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json!(blocks).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

fn host_answer(block: &str) -> Option<Value> {
    let statements = top_level_statements(block, Dialect::linked()).ok()?;
    let mut found = Vec::new();
    for s in statements {
        match s.kind {
            StatementKind::Function { name } => found.push(json!(["function", name, s.text])),
            StatementKind::Class { name } => found.push(json!(["class", name, s.text])),
            StatementKind::Import { names } => found.extend(
                names
                    .into_iter()
                    .map(|n| json!(["import", n.bound, n.source.trim_end()])),
            ),
            StatementKind::Assignment { name, .. } => found.push(json!(["constant", name, s.text])),
            StatementKind::Other => {}
        }
    }
    Some(Value::Array(found))
}

#[test]
fn the_host_cuts_statements_where_python_does() {
    let blocks = blocks(600);
    let answers = python_answers(&blocks);
    let mut compared = 0;
    for (block, python) in blocks.iter().zip(&answers) {
        let host = host_answer(block);
        if python.is_null() {
            // Python reads nothing in it (nothing ran); the host may read something or not,
            // but must not crash.
            continue;
        }
        compared += 1;
        assert_eq!(host.as_ref(), Some(python), "{block:?}");
    }
    assert!(compared > 300, "only {compared} blocks were Python");
    eprintln!("compared {compared} blocks");
}
