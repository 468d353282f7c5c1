//! Build script:
//! - links the `vis` binary against the libpython it was configured with and records an rpath
//!   to it, so the worker loads that same library at run time (no LD_LIBRARY_PATH needed);
//! - embeds the prelude package (`python/vis`) and the bundled extensions (`extensions/`) into
//!   the binary, so an installed `vis` needs no Python files beside it.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "__pycache__") {
                continue;
            }
            collect(&path, root, out);
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("py" | "md")) {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            out.push((rel, path));
        }
    }
}

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let python = manifest.join("python");
    let mut files = Vec::new();
    collect(&python.join("vis"), &python, &mut files);
    let mut src = String::from("/// The prelude package, embedded: (path under python/, source).\npub static PRELUDE_SOURCES: &[(&str, &str)] = &[\n");
    for (rel, path) in &files {
        let _ = writeln!(
            src,
            "    ({rel:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    src.push_str("];\n");
    // Bundled extensions (`extensions/` at the top of the repository), embedded the same way:
    // (path under extensions/, source).
    let bundled_root = manifest.join("extensions");
    let mut bundled = Vec::new();
    collect(&bundled_root, &bundled_root, &mut bundled);
    src.push_str("/// Bundled extensions, embedded: (path under extensions/, source).\npub static BUNDLED_EXTENSION_SOURCES: &[(&str, &str)] = &[\n");
    for (rel, path) in &bundled {
        let _ = writeln!(
            src,
            "    ({rel:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    src.push_str("];\n");
    files.extend(bundled);
    let out =
        PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("prelude_sources.rs");
    if let Err(e) = std::fs::write(&out, src) {
        panic!("cannot write {}: {e}", out.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=python");
    println!("cargo:rerun-if-changed=extensions");
    for (_, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
