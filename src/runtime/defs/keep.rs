//! Which of the definitions a worker reported for a block the host keeps, and what it keeps of
//! each: the code is always the host's own cut of the block's source, the worker's report
//! only says which top-level statements defined something (and, for functions and classes,
//! their signature and first doc line).

use super::statements::{top_level_statements, StatementKind, ValueShape};
use super::tokens::{normalize_newlines, Dialect};
use super::{
    MAX_CONSTANT_CHARS, MAX_DEFINITION_BYTES, MAX_DOC_CHARS, MAX_SESSION_DEFINITION_BYTES,
    MAX_SIGNATURE_CHARS,
};
use crate::protocol::PersistedDef;

/// The outcome for one block's reported definitions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// What to persist, in the order reported.
    pub defs: Vec<PersistedDef>,
    /// Lines for the block's output: each reported definition that is not kept, and why.
    pub notes: Vec<String>,
}

/// A statement of the block that could be persisted.
struct Candidate {
    kind: &'static str,
    name: String,
    /// The host's cut, with a final newline.
    source: String,
    /// For an assignment: whether its value and annotation are simple enough to restore.
    constant: Option<(ValueShape, bool)>,
}

/// Keeps, of the definitions the worker `reported` for the block `code`, those that are a
/// top-level statement of the block of the reported kind and name with the same text
/// (newlines normalized), within the size limits; a constant also needs a literal value or
/// a call on a kept import. `session` is the session's definitions once the block's
/// deletions are applied.
pub fn keep_reported(
    code: &str,
    reported: &[PersistedDef],
    session: &[PersistedDef],
    dialect: Dialect,
) -> Kept {
    if reported.is_empty() {
        return Kept::default();
    }
    let statements = match top_level_statements(code, dialect) {
        Ok(statements) => statements,
        Err(e) => {
            return Kept {
                defs: Vec::new(),
                notes: vec![format!(
                    "[vis] ignored {} definition(s) the worker reported: the host cannot read this block as Python ({e}); they are not kept",
                    reported.len()
                )],
            }
        }
    };
    let candidates = candidates(statements);
    let mut chosen: Vec<Option<PersistedDef>> = vec![None; reported.len()];
    let mut notes = Vec::new();
    let mut foreign = 0;
    // Imports, functions and classes first: a constant may call a kept import.
    let order = (0..reported.len())
        .filter(|&i| reported[i].kind != "constant")
        .chain((0..reported.len()).filter(|&i| reported[i].kind == "constant"));
    for i in order {
        let claim = &reported[i];
        let Some(found) = candidates.iter().rev().find(|c| {
            c.kind == claim.kind && c.name == claim.name && same_text(&c.source, &claim.source)
        }) else {
            foreign += 1;
            continue;
        };
        if let Some((shape, plain_annotation)) = &found.constant {
            let imports_now = session
                .iter()
                .chain(chosen.iter().flatten())
                .filter(|d| d.kind == "import")
                .map(|d| d.name.as_str());
            let simple = *plain_annotation
                && found.source.trim_end().chars().count() <= MAX_CONSTANT_CHARS
                && match shape {
                    ValueShape::Literal => true,
                    ValueShape::Call { root } => imports_now.into_iter().any(|name| name == root),
                    ValueShape::Other => false,
                };
            if !simple {
                notes.push(format!(
                    "[vis] `{}` is not kept across restarts: only simple constants are (NAME = literal, or NAME = module.func(literals) on a kept import)",
                    claim.name
                ));
                continue;
            }
        }
        let size = found.source.len();
        if size > MAX_DEFINITION_BYTES {
            notes.push(too_big(&claim.name, size));
            continue;
        }
        let total = total_after(session, &chosen, &claim.name) + size;
        if total > MAX_SESSION_DEFINITION_BYTES {
            notes.push(over_session_limit(&claim.name, total));
            continue;
        }
        chosen[i] = Some(persisted(found, claim));
    }
    if foreign > 0 {
        notes.push(format!("[vis] ignored {foreign} definition(s) the worker reported that are not code of this block; they are not kept"));
    }
    Kept {
        defs: chosen.into_iter().flatten().collect(),
        notes,
    }
}

/// The message for a definition over [`MAX_DEFINITION_BYTES`] (the worker prints the same).
pub fn too_big(name: &str, size: usize) -> String {
    format!(
        "[vis] `{name}` is not kept across restarts: its source is {} bytes, over the {} limit for one definition; keep large data in a file and read it when called, or split the code into smaller definitions",
        crate::runtime::group_thousands(size),
        crate::runtime::group_thousands(MAX_DEFINITION_BYTES)
    )
}

/// The message for a definition that would take the session over
/// [`MAX_SESSION_DEFINITION_BYTES`] (the worker prints the same).
pub fn over_session_limit(name: &str, total: usize) -> String {
    format!(
        "[vis] `{name}` is not kept across restarts: the session's definitions would total {} bytes, over the {} limit; drop ones no longer needed (`del name`) or keep data in files",
        crate::runtime::group_thousands(total),
        crate::runtime::group_thousands(MAX_SESSION_DEFINITION_BYTES)
    )
}

/// The bytes the session's definitions take with those chosen so far, without `replacing`
/// (which the new one replaces).
fn total_after(
    session: &[PersistedDef],
    chosen: &[Option<PersistedDef>],
    replacing: &str,
) -> usize {
    let chosen_names: Vec<&str> = chosen.iter().flatten().map(|d| d.name.as_str()).collect();
    session
        .iter()
        .filter(|d| d.name != replacing && !chosen_names.contains(&d.name.as_str()))
        .chain(chosen.iter().flatten().filter(|d| d.name != replacing))
        .map(|d| d.source.len())
        .sum()
}

fn candidates(statements: Vec<super::statements::Statement>) -> Vec<Candidate> {
    let mut out = Vec::new();
    for statement in statements {
        let source = format!("{}\n", statement.text);
        match statement.kind {
            StatementKind::Function { name } => out.push(Candidate {
                kind: "function",
                name,
                source,
                constant: None,
            }),
            StatementKind::Class { name } => out.push(Candidate {
                kind: "class",
                name,
                source,
                constant: None,
            }),
            StatementKind::Import { names } => out.extend(names.into_iter().map(|n| Candidate {
                kind: "import",
                name: n.bound,
                source: n.source,
                constant: None,
            })),
            StatementKind::Assignment {
                name,
                plain_annotation,
                value,
            } => out.push(Candidate {
                kind: "constant",
                name,
                source,
                constant: Some((value, plain_annotation)),
            }),
            StatementKind::Other => {}
        }
    }
    out
}

/// Whether the worker's `reported` source is the host's cut `ours`: the same once newlines
/// are normalized, up to a final `;` and trailing white space (Python versions differ on
/// whether a definition's last `;` is part of it).
fn same_text(ours: &str, reported: &str) -> bool {
    let trim = |s: &str| {
        s.trim_end_matches(|c: char| c == ';' || c.is_whitespace())
            .to_string()
    };
    trim(ours) == trim(&normalize_newlines(reported))
}

/// What is persisted: the host's source and, as metadata, the worker's signature and doc line
/// for a function or class (clipped to one line); an import's and a constant's are their text.
fn persisted(found: &Candidate, claim: &PersistedDef) -> PersistedDef {
    let (signature, doc) = match found.kind {
        "import" => (found.source.trim().to_string(), String::new()),
        "constant" => (clip(found.source.trim(), 70), String::new()),
        _ => (
            clip(&one_line(&claim.signature), MAX_SIGNATURE_CHARS),
            clip(&one_line(&claim.doc), MAX_DOC_CHARS),
        ),
    };
    PersistedDef {
        name: found.name.clone(),
        kind: found.kind.to_string(),
        source: found.source.clone(),
        signature,
        doc,
    }
}

fn one_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_string()
}

/// `text` cut to `limit` characters, the last being `…` when cut (as the worker clips).
fn clip(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text.to_string();
    }
    let mut out: String = text.chars().take(limit.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PY311: Dialect = Dialect::of_version(3, 11);

    fn def(name: &str, kind: &str, source: &str) -> PersistedDef {
        PersistedDef {
            name: name.into(),
            kind: kind.into(),
            source: source.into(),
            signature: format!("def {name}()\nsecond line"),
            doc: "Doc.\nMore.".into(),
        }
    }

    fn kept_names(kept: &Kept) -> Vec<&str> {
        kept.defs.iter().map(|d| d.name.as_str()).collect()
    }

    #[test]
    fn only_the_blocks_own_statements_are_kept() {
        let code = "import os\n@cache\ndef f(x):\n    return x\n    # done\n\nclass C:\n    pass\nevil = '''open('p', 'w')\ndef g():\n    pass'''\nif True:\n    def h():\n        pass\n";
        let reported = [
            def("f", "function", "@cache\ndef f(x):\n    return x\n"),
            def("C", "class", "class C:\n    pass\n"),
            def("os", "import", "import os\n"),
            // Text inside a string, a nested def, a wrong kind, a changed body, code
            // smuggled after an import (by `;` or a carriage return).
            def("g", "function", "def g():\n    pass"),
            def("h", "function", "def h():\n        pass"),
            def("C", "function", "class C:\n    pass\n"),
            def("f", "function", "@cache\ndef f(x):\n    return"),
            def("os", "import", "import os; os.system('x')"),
            def("os", "import", "import os\ros.system('x')"),
        ];
        let kept = keep_reported(code, &reported, &[], PY311);
        assert_eq!(kept_names(&kept), ["f", "C", "os"]);
        assert_eq!(
            kept.notes,
            ["[vis] ignored 6 definition(s) the worker reported that are not code of this block; they are not kept"]
        );
        // The metadata of a function is one clipped line; an import's is its text.
        assert_eq!(kept.defs[0].signature, "def f()");
        assert_eq!(kept.defs[0].doc, "Doc.");
        assert_eq!(kept.defs[2].signature, "import os");
    }

    #[test]
    fn the_source_kept_is_the_hosts_own_cut() {
        let code = "import os\rdef f():\r\n    return 1\r";
        let kept = keep_reported(
            code,
            &[
                def("os", "import", "import os\n"),
                def("f", "function", "def f():\r\n    return 1\r\n"),
            ],
            &[],
            PY311,
        );
        assert_eq!(kept.defs[0].source, "import os\n");
        assert_eq!(kept.defs[1].source, "def f():\n    return 1\n");
        assert!(kept.notes.is_empty(), "{:?}", kept.notes);
    }

    #[test]
    fn constants_need_a_simple_value() {
        let code = "import re\nPAT = re.compile(r'\\d+')\nLIMIT: int = 3\nRUN = os.system('x')\nBAD: f() = 1\nA = B = 1\n";
        let reported = [
            def("re", "import", "import re\n"),
            def("PAT", "constant", "PAT = re.compile(r'\\d+')\n"),
            def("LIMIT", "constant", "LIMIT: int = 3\n"),
            def("RUN", "constant", "RUN = os.system('x')\n"),
            def("BAD", "constant", "BAD: f() = 1\n"),
            def("A", "constant", "A = B = 1\n"),
        ];
        let kept = keep_reported(code, &reported, &[], PY311);
        assert_eq!(kept_names(&kept), ["re", "PAT", "LIMIT"]);
        assert_eq!(kept.defs[1].signature, "PAT = re.compile(r'\\d+')");
        assert_eq!(kept.notes.len(), 3, "{:?}", kept.notes);
        assert!(kept.notes[0]
            .starts_with("[vis] `RUN` is not kept across restarts: only simple constants"));
        assert!(
            kept.notes[2].contains("ignored 1 definition"),
            "{:?}",
            kept.notes
        );
        // An import the session already keeps counts too.
        let os = def("os", "import", "import os\n");
        let kept = keep_reported(code, &reported[3..4], &[os], PY311);
        assert_eq!(kept_names(&kept), ["RUN"]);
    }

    #[test]
    fn sizes_are_capped_per_definition_and_per_session() {
        let body = "x".repeat(MAX_DEFINITION_BYTES);
        let code = format!("def big():\n    return '{body}'\ndef small():\n    return 1\n");
        let reported = [
            def(
                "big",
                "function",
                &format!("def big():\n    return '{body}'\n"),
            ),
            def("small", "function", "def small():\n    return 1\n"),
        ];
        let kept = keep_reported(&code, &reported, &[], PY311);
        assert_eq!(kept_names(&kept), ["small"]);
        assert_eq!(kept.notes.len(), 1);
        assert!(
            kept.notes[0].starts_with("[vis] `big` is not kept across restarts: its source is 65,561 bytes, over the 65,536 limit for one definition; keep large data in a file"),
            "{}",
            kept.notes[0]
        );
        // The session's total counts what it keeps, less what the block replaces.
        let half = "y".repeat(MAX_DEFINITION_BYTES / 2);
        let session: Vec<PersistedDef> = (0..15)
            .map(|i| {
                def(
                    &format!("k{i}"),
                    "function",
                    &format!("def k{i}(): '{half}'\n"),
                )
            })
            .collect();
        let code = format!("def k0(): '{half}'\ndef more(): '{half}'\n");
        let reported = [
            def("k0", "function", &format!("def k0(): '{half}'\n")),
            def("more", "function", &format!("def more(): '{half}'\n")),
        ];
        let kept = keep_reported(&code, &reported, &session, PY311);
        assert_eq!(kept_names(&kept), ["k0"]);
        assert!(
            kept.notes[0].starts_with(
                "[vis] `more` is not kept across restarts: the session's definitions would total "
            ),
            "{:?}",
            kept.notes
        );
    }

    #[test]
    fn a_block_the_host_cannot_read_keeps_nothing() {
        let kept = keep_reported(
            "def f():\n    return '\n",
            &[def("f", "function", "def f():\n    return '\n")],
            &[],
            PY311,
        );
        assert!(kept.defs.is_empty());
        assert!(
            kept.notes[0]
                .contains("cannot read this block as Python (line 2: unterminated string literal)"),
            "{:?}",
            kept.notes
        );
    }
}
