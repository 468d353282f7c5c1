//! The crate's layering, checked on its source: a top-level module is used through what its
//! root (`mod.rs`) exports, never through a sibling's submodule path.

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

/// The siblings (files and directories next to it) that the file `stem` in `dir` names as
/// `super::X` or `crate::<dir's path>::X`.
fn sibling_references(
    text: &str,
    module_path: &str,
    siblings: &[String],
    stem: &str,
) -> Vec<String> {
    let mut prefixes = vec!["super::".to_string()];
    if !module_path.is_empty() {
        prefixes.push(format!("crate::{module_path}::"));
    }
    let mut found = Vec::new();
    for prefix in &prefixes {
        for (at, _) in text.match_indices(prefix.as_str()) {
            // `super::super::x` or `self.super::` are not this directory's siblings.
            if at > 0 && text[..at].ends_with("::") {
                continue;
            }
            let rest = &text[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            if name != stem
                && siblings.iter().any(|s| s == name)
                && !found.iter().any(|f| f == name)
            {
                found.push(name.to_string());
            }
        }
    }
    found
}

/// A cycle in `graph` (file -> the siblings it references), if there is one.
fn find_cycle(graph: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &[(String, Vec<String>)],
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.iter().any(|d| d == node) {
            return None;
        }
        path.push(node.to_string());
        let next = graph
            .iter()
            .find(|(n, _)| n == node)
            .map(|(_, e)| e.clone())
            .unwrap_or_default();
        for n in &next {
            if let Some(cycle) = visit(n, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.push(node.to_string());
        None
    }
    let mut done = Vec::new();
    for (node, _) in graph {
        if let Some(cycle) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
}

/// Directories whose files still reference each other in a cycle (to be broken; none may be
/// added).
const KNOWN_CYCLES: &[&str] = &["runtime/host"];

#[test]
fn the_files_of_a_directory_reference_each_other_without_cycles() {
    let root = src();
    let mut dirs = vec![root.clone()];
    let mut cycles = Vec::new();
    while let Some(dir) = dirs.pop() {
        let mut siblings = Vec::new();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                dirs.push(path);
                siblings.push(stem);
            } else if path.extension().is_some_and(|e| e == "rs") && stem != "mod" {
                siblings.push(stem);
                files.push(path);
            }
        }
        let relative = dir
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .to_string();
        if KNOWN_CYCLES.contains(&relative.as_str()) || relative.is_empty() {
            // The crate root's files (`lib.rs`, `main.rs`) are not siblings of one module.
            continue;
        }
        let module_path = relative.replace('/', "::");
        let graph: Vec<(String, Vec<String>)> = files
            .iter()
            .map(|file| {
                let stem = file.file_stem().unwrap().to_string_lossy().to_string();
                let text = std::fs::read_to_string(file).unwrap();
                let refs = sibling_references(&text, &module_path, &siblings, &stem);
                (stem, refs)
            })
            .collect();
        if let Some(cycle) = find_cycle(&graph) {
            cycles.push(format!("src/{relative}: {}", cycle.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "files that reference each other in a cycle:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn the_cycle_checker_sees_super_and_crate_paths() {
    let siblings = ["worker", "python", "channel"].map(String::from);
    let text = "use super::channel::send;\nlet x = crate::runtime::child::worker::f();\nsuper::super::python::g();";
    assert_eq!(
        sibling_references(text, "runtime::child", &siblings, "python"),
        ["channel", "worker"]
    );
    let graph = vec![
        ("python".to_string(), vec!["worker".to_string()]),
        ("worker".to_string(), vec!["python".to_string()]),
    ];
    assert_eq!(find_cycle(&graph).unwrap(), ["python", "worker", "python"]);
    let graph = vec![
        ("python".to_string(), vec!["channel".to_string()]),
        (
            "worker".to_string(),
            vec!["python".to_string(), "channel".to_string()],
        ),
    ];
    assert_eq!(find_cycle(&graph), None);
}
