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
