//! Unit tests of cutting statements out of a block.

use super::*;

const PY311: Dialect = Dialect::of_version(3, 11);
const PY312: Dialect = Dialect::of_version(3, 12);

fn statements(code: &str) -> Vec<Statement> {
    top_level_statements(code, PY311).unwrap()
}

fn function(name: &str) -> StatementKind {
    StatementKind::Function { name: name.into() }
}

fn imports(pairs: &[(&str, &str)]) -> StatementKind {
    StatementKind::Import {
        names: pairs
            .iter()
            .map(|(b, s)| ImportedName {
                bound: b.to_string(),
                source: format!("{s}\n"),
            })
            .collect(),
    }
}

#[test]
fn a_carriage_return_ends_an_import() {
    let got = statements("import os\ropen('/tmp/p', 'w')\r\ndef f():\r    return 1\r");
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].kind, imports(&[("os", "import os")]));
    assert_eq!(got[0].text, "import os");
    assert_eq!(got[1].kind, StatementKind::Other);
    assert_eq!(got[2].text, "def f():\n    return 1");
    assert_eq!(got[2].kind, function("f"));
}

#[test]
fn definitions_span_decorators_bodies_and_nothing_after() {
    let code = "@cache\n\n# note\n@wraps(g)\ndef f(x):\n    return x  # done\n  # trailing\n\nclass C(B):\n    def m(self): pass;\nasync def a(): await x\n";
    let got = statements(code);
    assert_eq!(
        got[0].text,
        "@cache\n\n# note\n@wraps(g)\ndef f(x):\n    return x"
    );
    assert_eq!(got[0].kind, function("f"));
    assert_eq!(got[1].text, "class C(B):\n    def m(self): pass;");
    assert_eq!(got[1].kind, StatementKind::Class { name: "C".into() });
    assert_eq!(got[2].kind, function("a"));
    // A def nested in another statement is not top level.
    let got = statements("if True:\n    def h(): pass\nelse:\n    pass\n");
    assert!(
        got.iter().all(|s| s.kind == StatementKind::Other),
        "{got:?}"
    );
    // A form feed puts a line back at column 0.
    let got = statements("if x:\n    y = 1\n    \x0cimport os\n");
    assert_eq!(got[1].kind, imports(&[("os", "import os")]));
}

#[test]
fn strings_and_comments_are_not_statements() {
    let got = statements(
        "s = '''\ndef g():\n    pass'''  # def h(): pass\nt = \"import os; import sys\"\n",
    );
    assert_eq!(got.len(), 2);
    assert!(got
        .iter()
        .all(|s| matches!(s.kind, StatementKind::Assignment { .. })));
    // 3.12 reads nested quotes in an f-string as one string; 3.11 ends the string early.
    let code = "x = f\"{\";\"}\"\n";
    assert_eq!(top_level_statements(code, PY312).unwrap().len(), 1);
    assert_eq!(top_level_statements(code, PY311).unwrap().len(), 2);
}

#[test]
fn semicolons_split_simple_lines_only() {
    let got = statements("import os; A = 1 ; B: int = 2;\ndef f(): a; b\n");
    let texts: Vec<&str> = got.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["import os", "A = 1", "B: int = 2", "def f(): a; b"]);
}

#[test]
fn imports_become_one_canonical_statement_per_name() {
    let got = statements(
        "import os.path, json as j\nfrom a.b import (c as d,\n    e,)\nfrom m import *\nfrom . import x\nfrom __future__ import annotations\nimport  ｍath\n",
    );
    assert_eq!(
        got[0].kind,
        imports(&[("os", "import os.path"), ("j", "import json as j")])
    );
    assert_eq!(
        got[1].kind,
        imports(&[("d", "from a.b import c as d"), ("e", "from a.b import e")])
    );
    assert_eq!(got[2].kind, imports(&[("m.*", "from m import *")]));
    assert_eq!(got[3].kind, imports(&[]));
    assert_eq!(got[4].kind, imports(&[]));
    assert_eq!(got[5].kind, imports(&[("math", "import math")]));
    for bad in [
        "import (os)",
        "import os,",
        "from m import",
        "from m import a b",
    ] {
        assert_eq!(statements(bad)[0].kind, StatementKind::Other, "{bad}");
    }
}

#[test]
fn assignments_and_the_shape_of_their_values() {
    let shape = |code: &str| match &statements(code)[0].kind {
        StatementKind::Assignment { value, .. } => Some(value.clone()),
        _ => None,
    };
    use ValueShape::*;
    for literal in [
        "X = 1",
        "X = -1.5e3j",
        "X = ('a', b'b', (None, True))",
        "X = 'a' 'b'",
    ] {
        assert_eq!(shape(literal), Some(Literal), "{literal}");
    }
    assert_eq!(
        shape("PAT = re.compile(r'\\d+', flags=0)"),
        Some(Call { root: "re".into() })
    );
    assert_eq!(
        shape("P = os.path.join('a', ('b',))"),
        Some(Call { root: "os".into() })
    );
    for other in [
        "X = f'{y}'",
        "X = [1]",
        "X = y",
        "X = re.compile(y)",
        "X = re.compile('a')(b)",
        "X = re.compile('a').x",
        "X = g(*'ab')",
        "X = lambda: 0",
    ] {
        assert_eq!(shape(other), Some(Other), "{other}");
    }
    assert_eq!(shape("F = lambda x=1: x"), Some(Other));
    for not_assignment in [
        "A = B = 1",
        "A, B = 1, 2",
        "A += 1",
        "A == 1",
        "x.y = 1",
        "A: int",
    ] {
        assert_eq!(shape(not_assignment), None, "{not_assignment}");
    }
    let plain = |code: &str| match &statements(code)[0].kind {
        StatementKind::Assignment {
            plain_annotation, ..
        } => *plain_annotation,
        _ => panic!("{code}"),
    };
    assert!(plain("X: dict[str, int | None] = 1"));
    assert!(!plain("X: f() = 1"));
}

#[test]
fn a_source_python_rejects_yields_nothing() {
    for bad in ["  x = 1\n", "x = (\n", "s = 'a\n", "if x:\n    y\n  z\n"] {
        assert!(top_level_statements(bad, PY311).is_err(), "{bad:?}");
    }
}
