//! Build script:
//! - links the `vis` binary against the libpython it was configured with and records an rpath
//!   to it, so the worker loads that same library at run time (no LD_LIBRARY_PATH needed);
//! - embeds the prelude package (`python/vis`) and the bundled extensions (`extensions/`) into
//!   the binary, so an installed `vis` needs no Python files beside it;
//! - compiles those sources to bytecode with the very Python the binary links (marshalled code
//!   objects plus that Python's magic number), so a worker does not parse and compile the
//!   prelude at every start. A worker whose Python has another magic number compiles the
//!   sources instead; a build machine whose Python cannot run embeds no bytecode (same result);
//! - records that Python's version (`VIS_PYTHON_VERSION`), whose tokenizer the host follows.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    let mut units: Vec<(String, PathBuf)> = files
        .iter()
        .filter(|(rel, _)| rel.ends_with(".py"))
        .cloned()
        .collect();
    units.extend(
        bundled
            .iter()
            .filter(|(rel, _)| rel.ends_with(".py"))
            .map(|(rel, path)| (format!("_vis_bundled/{rel}"), path.clone())),
    );
    // The bundled package's own `__init__.py` is empty and has no file: compiled all the same,
    // since a worker compiling it would make every `ast` node type (the builtin `compile`'s
    // first call does), a millisecond of each start.
    let empty_init = out_dir.join("_vis_bundled_init.py");
    if std::fs::write(&empty_init, "").is_ok() {
        units.push(("_vis_bundled/__init__.py".to_string(), empty_init));
    }
    // The worker's bootstrap too (not a module: the worker runs it, see `BOOTSTRAP_BYTECODE`).
    units.push((BOOTSTRAP_UNIT.to_string(), python.join("_bootstrap.py")));
    src.push_str(&bytecode_table(&units, &out_dir));
    files.extend(bundled);
    let out = out_dir.join("prelude_sources.rs");
    if let Err(e) = std::fs::write(&out, src) {
        panic!("cannot write {}: {e}", out.display());
    }
    // The host tokenizes blocks as the worker's Python does (`runtime::defs`), and the rules
    // changed across versions (f-strings in 3.12, template strings in 3.14).
    let version = pyo3_build_config::get().version();
    println!(
        "cargo:rustc-env=VIS_PYTHON_VERSION={}.{}",
        version.major, version.minor
    );
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=python");
    println!("cargo:rerun-if-changed=extensions");
    for (_, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// Python that compiles each `(module path, source file)` pair given as arguments into
/// `<out>/<index>.marshal` and prints the interpreter's magic number as hex. File names match
/// what the worker's importer gives modules it compiles itself (`<vis>/vis/x.py`), so
/// tracebacks are the same either way.
///
/// `from __future__ import annotations` on a line of its own is compiled as the compiler flag
/// it stands for and its line left blank (line numbers unchanged): the same code, without
/// importing the module `__future__` at every worker start.
const COMPILE_SCRIPT: &str = r#"
import __future__, importlib.util, marshal, sys
FUTURE = "from __future__ import annotations"
out, pairs = sys.argv[1], sys.argv[2:]
for i in range(0, len(pairs), 2):
    rel, path = pairs[i], pairs[i + 1]
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    flags = 0
    if FUTURE in lines:
        lines[lines.index(FUTURE)] = ""
        flags = __future__.annotations.compiler_flag
    code = compile("\n".join(lines), "<vis>/" + rel, "exec", flags=flags, dont_inherit=True, optimize=0)
    with open("%s/%d.marshal" % (out, i // 2), "wb") as f:
        f.write(marshal.dumps(code))
print(importlib.util.MAGIC_NUMBER.hex())
"#;

/// The unit name of `python/_bootstrap.py` among the compiled units.
const BOOTSTRAP_UNIT: &str = "_bootstrap.py";

/// The Rust source of `PRELUDE_BYTECODE` (module path -> marshalled code),
/// `BOOTSTRAP_BYTECODE` and `PRELUDE_MAGIC`; all empty when the build's Python cannot compile
/// them.
fn bytecode_table(units: &[(String, PathBuf)], out_dir: &Path) -> String {
    let code_dir = out_dir.join("prelude_bytecode");
    let _ = std::fs::remove_dir_all(&code_dir);
    let compiled = pyo3_build_config::get()
        .executable()
        .filter(|_| std::fs::create_dir_all(&code_dir).is_ok())
        .and_then(|python| {
            let mut cmd = Command::new(python);
            cmd.arg("-I").arg("-c").arg(COMPILE_SCRIPT).arg(&code_dir);
            for (rel, path) in units {
                cmd.arg(rel).arg(path);
            }
            match cmd.output() {
                Ok(out) if out.status.success() => {
                    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
                }
                Ok(out) => {
                    println!(
                        "cargo:warning=the prelude is embedded without bytecode (workers compile it at start): {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                    None
                }
                Err(e) => {
                    println!("cargo:warning=the prelude is embedded without bytecode: cannot run {python}: {e}");
                    None
                }
            }
        });
    let mut src = String::from("/// The prelude and bundled extensions compiled by the build's Python: (module path, marshalled code).\npub static PRELUDE_BYTECODE: &[(&str, &[u8])] = &[\n");
    let mut bootstrap = String::from("&[]");
    let magic = match compiled {
        Some(magic) => {
            for (i, (rel, _)) in units.iter().enumerate() {
                let path = code_dir.join(format!("{i}.marshal")).display().to_string();
                if rel == BOOTSTRAP_UNIT {
                    bootstrap = format!("include_bytes!({path:?})");
                } else {
                    let _ = writeln!(src, "    ({rel:?}, include_bytes!({path:?})),");
                }
            }
            magic
        }
        None => String::new(),
    };
    src.push_str("];\n");
    let _ = writeln!(
        src,
        "/// `python/_bootstrap.py` compiled by the build's Python (marshalled; empty without one).\npub static BOOTSTRAP_BYTECODE: &[u8] = {bootstrap};"
    );
    let _ = writeln!(
        src,
        "/// `importlib.util.MAGIC_NUMBER` (hex) of the Python that compiled `PRELUDE_BYTECODE`.\npub static PRELUDE_MAGIC: &str = {magic:?};"
    );
    src
}
