//! The crate's layering, checked on its source: a top-level module is used through what its
//! root (`mod.rs`) exports, never through a sibling's submodule path; no directory's modules
//! depend on each other in a cycle; and the Python package's modules do not import each other
//! in a cycle.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The submodules of top-level module `name` (its files and directories).
fn submodules(name: &str) -> Vec<String> {
    let mut subs = Vec::new();
    for entry in std::fs::read_dir(src().join(name)).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        if stem != "mod" && (path.is_dir() || path.extension().is_some_and(|e| e == "rs")) {
            subs.push(stem);
        }
    }
    subs
}

/// `crate::<top>::<sub>` paths in `text`, including the grouped form
/// `crate::<top>::{<sub>::…}`.
fn submodule_paths(text: &str, top: &str, subs: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let prefix = format!("crate::{top}::");
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        rest = &rest[at + prefix.len()..];
        let group = rest
            .strip_prefix('{')
            .map(|g| &g[..g.find('}').unwrap_or(g.len())]);
        let heads: Vec<&str> = match group {
            Some(g) => g
                .split(',')
                .filter_map(|part| part.trim().split_once("::").map(|(head, _)| head))
                .collect(),
            None => {
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if rest[end..].starts_with("::") {
                    vec![&rest[..end]]
                } else {
                    Vec::new()
                }
            }
        };
        for head in heads {
            if subs.iter().any(|s| s == head) {
                found.push(format!("crate::{top}::{head}"));
            }
        }
    }
    found
}

#[test]
fn no_module_reaches_into_a_siblings_submodules() {
    let root = src();
    let tops: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert!(tops.iter().any(|t| t == "runtime"), "{tops:?}");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut violations = Vec::new();
    for file in &files {
        let owner = file
            .strip_prefix(&root)
            .unwrap()
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let text = std::fs::read_to_string(file).unwrap();
        for top in tops.iter().filter(|t| **t != owner) {
            for path in submodule_paths(&text, top, &submodules(top)) {
                violations.push(format!("{}: {path}", file.display()));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "use what the module's root exports (add a `pub use` there):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_checker_finds_both_path_forms() {
    let subs = vec!["worker".to_string(), "output".to_string()];
    let text = "use crate::runtime::{worker::run, Supervisor};\nlet n = crate::runtime::output::cap(1);\nuse crate::runtime::Runtime;";
    assert_eq!(
        submodule_paths(text, "runtime", &subs),
        ["crate::runtime::worker", "crate::runtime::output"]
    );
}

/// A file's code without its unit tests (a trailing `#[cfg(test)] mod tests`) and without
/// line comments: what the module itself depends on.
fn code_of(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    text.lines()
        .map(|line| match line.trim_start().starts_with("//") {
            true => "",
            false => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segments of the paths after each `prefix` in `text`: `crate::a::b` gives `a`,
/// `crate::{a::b, c, d::{e, f}}` gives `a`, `c` and `d`.
fn heads_after(text: &str, prefix: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut heads = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        // `super::x` must not be the tail of `super::super::x` or of a longer path.
        let before = text[..at].chars().next_back();
        let rest = &text[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            || rest.starts_with("super::")
        {
            continue;
        }
        match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            heads.push(ident(group[start..i].trim()));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            heads.push(ident(group[start..i].trim()));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => heads.push(ident(rest)),
        }
    }
    heads.retain(|h| !h.is_empty());
    heads
}

/// The cycles (strongly connected components of more than one node) of a directed graph, by
/// Tarjan's algorithm.
fn cycles(
    nodes: &[String],
    edges: &std::collections::BTreeMap<String, Vec<String>>,
) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a std::collections::BTreeMap<String, Vec<String>>,
        index: std::collections::HashMap<&'a str, usize>,
        low: std::collections::HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w.as_str()) {
                    let low = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: Default::default(),
        low: Default::default(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in nodes {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

/// A module's path in the crate from its file (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// True for a module compiled only for tests: `tests.rs`, or one its parent declares as
/// `#[cfg(test)] mod name;`.
fn is_test_only(path: &Path) -> bool {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    if stem == "tests" {
        return true;
    }
    let Some(dir) = path.parent() else {
        return false;
    };
    let parent = ["mod.rs", "lib.rs"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists() && p != path);
    let text = parent
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap_or_default();
    text.split("#[cfg(test)]").skip(1).any(|rest| {
        rest.trim_start()
            .strip_prefix("mod ")
            .and_then(|r| r.split(';').next())
            .is_some_and(|name| name.trim() == stem)
    })
}

/// The dependency graph among the children of the module at `dir` (its files and
/// subdirectories): an edge `a -> b` when code in `a` names sibling `b` as `crate::<dir>::b`
/// or through `super::`. Unit tests (`tests.rs`, a trailing `mod tests`) do not count.
fn sibling_graph(dir: &Path) -> (Vec<String>, std::collections::BTreeMap<String, Vec<String>>) {
    let here = module_path(&dir.join("mod.rs"));
    let mut children = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let skip = ["mod", "lib", "main"].contains(&stem.as_str()) || is_test_only(&path);
        if !skip && (path.is_dir() || path.extension().is_some_and(|e| e == "rs")) {
            children.push((stem, path));
        }
    }
    let names: Vec<String> = children.iter().map(|(n, _)| n.clone()).collect();
    let mut edges = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (name, path) in &children {
        let mut files = Vec::new();
        if path.is_dir() {
            rust_files(path, &mut files);
        } else {
            files.push(path.clone());
        }
        for file in files.iter().filter(|f| !is_test_only(f)) {
            let code = code_of(&std::fs::read_to_string(file).unwrap());
            let depth = module_path(file).len() - here.len();
            let mut prefixes = vec![format!(
                "crate::{}",
                here.iter().map(|p| format!("{p}::")).collect::<String>()
            )];
            if depth > 0 {
                prefixes.push("super::".repeat(depth));
            }
            for prefix in &prefixes {
                for head in heads_after(&code, prefix) {
                    if head != *name && names.contains(&head) {
                        let out = edges.entry(name.clone()).or_default();
                        if !out.contains(&head) {
                            out.push(head);
                        }
                    }
                }
            }
        }
    }
    (names, edges)
}

#[test]
fn the_module_graph_has_no_cycle() {
    // Every directory of the crate, its root included: the top-level modules are the
    // children of `src/`, so `crate::X` between them is checked here too.
    let mut dirs = vec![src()];
    let mut i = 0;
    while i < dirs.len() {
        for entry in std::fs::read_dir(&dirs[i]).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
        i += 1;
    }
    let mut found = Vec::new();
    for dir in &dirs {
        let (names, edges) = sibling_graph(dir);
        for cycle in cycles(&names, &edges) {
            found.push(format!("{}: {}", dir.display(), cycle.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that depend on each other (move what both need into one of them, or below both):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_cycle_checker_reads_paths_and_finds_cycles() {
    assert_eq!(
        heads_after(
            "use crate::{a::b, c, d::{e, f}};\nlet x = crate::g::h();",
            "crate::"
        ),
        ["a", "c", "d", "g"]
    );
    // `super::super::x` is not `super::x`.
    assert_eq!(
        heads_after("use super::super::x; use super::y;", "super::"),
        ["y"]
    );
    assert_eq!(heads_after("use super::super::x;", "super::super::"), ["x"]);
    assert_eq!(
        code_of("use a;\n// use b;\n#[cfg(test)]\nmod tests {\n use c;\n}"),
        "use a;\n"
    );
    let names: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let mut edges = std::collections::BTreeMap::new();
    edges.insert("a".to_string(), vec!["b".to_string()]);
    edges.insert("b".to_string(), vec!["c".to_string()]);
    edges.insert("c".to_string(), vec!["a".to_string(), "d".to_string()]);
    assert_eq!(cycles(&names, &edges), [["a", "b", "c"]]);
    edges.insert("c".to_string(), vec!["d".to_string()]);
    assert!(cycles(&names, &edges).is_empty());
}

/// The import cycles of the Python package at `root`, found by
/// `tests/fixtures/import_cycles.py` (module-level imports; `TYPE_CHECKING` ones aside).
fn python_import_cycles(root: &Path) -> Vec<Vec<String>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import_cycles.py");
    let out = std::process::Command::new(crate::support::mcp::python())
        .arg(script)
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_python_package_has_no_import_cycle() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/vis");
    let found = python_import_cycles(&package);
    assert!(
        found.is_empty(),
        "Python modules that import each other at import time (import one lazily, or move what both need below both): {found:?}"
    );
}

#[test]
fn the_python_checker_finds_a_cycle_and_ignores_type_checking() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("__init__.py"), "").unwrap();
    std::fs::write(pkg.join("a.py"), "from pkg import b\n").unwrap();
    std::fs::write(pkg.join("b.py"), "from . import c\n").unwrap();
    std::fs::write(pkg.join("c.py"), "import pkg.a\n").unwrap();
    assert_eq!(python_import_cycles(&pkg), [["pkg.a", "pkg.b", "pkg.c"]]);
    std::fs::write(
        pkg.join("c.py"),
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import pkg.a\n\ndef f():\n    import pkg.a\n",
    )
    .unwrap();
    assert!(python_import_cycles(&pkg).is_empty());
}
