//! The `vis` package in a plain `python3` (no worker): what an extension's own unit tests see.
//! Registrations are recorded, not refused; calls that need the worker say so.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::run;
use crate::vistest;

/// `python/` of this repository: the package as `pip install .` puts it on sys.path.
fn package_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

/// Runs `code` in a plain `python3` (isolated from the environment) with the `vis` package and
/// `dir` on sys.path; returns stdout, failing on a non-zero exit.
fn plain_python(dir: &Path, code: &str) -> String {
    let prelude = format!(
        "import sys\nsys.path[:0] = [{:?}, {:?}]\n",
        package_root().display().to_string(),
        dir.display().to_string()
    );
    let out = Command::new("python3")
        .arg("-I")
        .arg("-c")
        .arg(prelude + code)
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

const EXTENSION: &str = r##"from vis.extension import context_provider, current, namespace, page, register

namespace("boxes", "Box arithmetic", pinned=True)

@register("boxes.area")
def area(w: int, h: int = 2) -> int:
    """Area of a box."""
    return w * h

@register
def volume(w: int, h: int, d: int) -> int:
    """Volume of a box."""
    return w * h * d

page("boxes.guide", "# Boxes\n\nHow to measure a box.")

@context_provider
def context() -> dict:
    return {"extension": current()}
"##;

vistest!(
    an_extension_imports_and_registers_in_a_plain_python,
    |env| {
        let dir = env.path().join("plain");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("boxext.py"), EXTENSION).unwrap();
        let out = plain_python(
            &dir,
            r#"import vis
import boxext
from vis.extension import registered
got = registered("boxext")
for e in got.entries:
    print(e["kind"], e["name"], e.get("signature", ""), "|", e.get("doc", "") or e.get("summary", ""))
print(sorted(got.functions), got.functions["boxes.area"](3), boxext.volume(1, 2, 3))
print(got.provider())
try:
    registered("nothing")
except LookupError as e:
    print("LookupError:", e)
"#,
        );
        assert_eq!(
        out,
        "namespace boxes  | Box arithmetic\n\
         function boxes.area (w: int, h: int = 2) -> int | Area of a box.\n\
         function boxext.volume (w: int, h: int, d: int) -> int | Volume of a box.\n\
         page boxes.guide  | # Boxes\n\nHow to measure a box.\n\
         ['boxes.area', 'boxext.volume'] 6 6\n\
         {'extension': 'boxext'}\n\
         LookupError: no registrations recorded for extension `nothing` (recorded: boxext); import the extension's module first, outside a worker\n"
    );
    }
);

vistest!(what_needs_the_worker_says_so_in_a_plain_python, |env| {
    let dir = env.path().join("plain");
    std::fs::create_dir_all(&dir).unwrap();
    let out = plain_python(
        &dir,
        r#"import vis
from vis.extension import WorkerRequiredError
for call in (lambda: vis.cat("x.txt"), lambda: vis.grep("x", "."), lambda: vis.sh("true"), lambda: vis.apropos("x"), lambda: vis.read_session("t1")):
    try:
        call()
    except WorkerRequiredError as e:
        print(str(e).split(", and this is")[0])
"#,
    );
    assert_eq!(
            out,
            "cat() needs the vis worker (it runs in vis's Rust core)\n\
             grep() needs the vis worker (it runs in vis's Rust core)\n\
             sh() needs the vis worker (it runs in vis's Rust core)\n\
             apropos()/doc() needs the vis worker (the session's manifest is searched in vis's Rust core)\n\
             read_session (a host call) needs the vis worker (it calls the gateway that owns the session)\n"
        );
    let full = plain_python(
        &dir,
        "import vis\ntry:\n    vis.cat('x.txt')\nexcept RuntimeError as e:\n    print(e)\n",
    );
    assert!(
        full.contains("this is a plain Python without one")
            && full.contains("Run it in a block (`vis exec`, `vis chat`)"),
        "{full}"
    );
});

vistest!(
    names_are_checked_the_same_inside_and_outside_the_worker,
    |env| {
        let dir = env.path().join("plain");
        std::fs::create_dir_all(&dir).unwrap();
        let code = r#"from vis import _native
for name, kind in [("a.1b", "function"), ("git.", "namespace"), ("my-skill", "skill"), ("x.class", "function"), ("ok.name", "function"), ("a b", "page"), ("é.-x", "page"), ("", "function"), ("x", "thing")]:
    try:
        _native.validate_name(name, kind)
        print("ok", name)
    except ValueError as e:
        print(e)
"#;
        let outside = plain_python(&dir, code);
        let mut rt = env.runtime();
        let inside = run(&env, &mut rt, code);
        assert_eq!(outside, inside.output);
        assert!(outside.contains("ok ok.name\n"), "{outside}");
    }
);

/// The names `python/vis/_native.pyi` declares: top-level items, and each class's public
/// members, as `["name", "Class.member", ...]` (sorted).
fn stub_names() -> Vec<String> {
    let text = std::fs::read_to_string(package_root().join("vis/_native.pyi")).unwrap();
    let mut names = Vec::new();
    let mut class = None;
    for line in text.lines() {
        let ident = |rest: &str| -> String {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        if let Some(rest) = line.strip_prefix("class ") {
            let name = ident(rest);
            names.push(name.clone());
            class = Some(name);
        } else if let Some(rest) = line.strip_prefix("def ") {
            names.push(ident(rest));
            class = None;
        } else if let Some(rest) = line.strip_prefix("    def ") {
            let member = ident(rest);
            if let (Some(class), false) = (&class, member.starts_with('_')) {
                names.push(format!("{class}.{member}"));
            }
        } else if line.contains(':') && !line.starts_with([' ', '#', '"', ')']) {
            let name = ident(line);
            if !name.is_empty() && line[name.len()..].starts_with(':') {
                names.push(name);
                class = None;
            }
        }
    }
    names.sort();
    names
}

/// Python that prints the public names of module `_native` the way `stub_names` lists them.
const LIST_NATIVE: &str = r#"names = []
for name in dir(_native):
    if name.startswith("_"):
        continue
    names.append(name)
    obj = getattr(_native, name)
    if isinstance(obj, type) and not issubclass(obj, BaseException):
        names += ["%s.%s" % (name, m) for m in vars(obj) if not m.startswith("_")]
print("\n".join(sorted(names)))
"#;

vistest!(the_stubs_declare_every_native_item, |env| {
    let stubs = stub_names();
    assert!(stubs.contains(&"Manifest.apropos".to_string()), "{stubs:?}");
    let mut rt = env.runtime();
    let inside = run(
        &env,
        &mut rt,
        &format!("from vis import _native\n{LIST_NATIVE}"),
    );
    assert_eq!(inside.output.lines().collect::<Vec<_>>(), stubs);
    // The plain-Python stand-in answers to the same names (its classes are placeholders).
    let dir = env.path().join("plain");
    std::fs::create_dir_all(&dir).unwrap();
    let top: Vec<&String> = stubs.iter().filter(|n| !n.contains('.')).collect();
    let outside = plain_python(
        &dir,
        &format!(
            "import vis\nfrom vis import _native\nprint([n for n in {top:?} if not hasattr(_native, n)])\n"
        ),
    );
    assert_eq!(outside, "[]\n", "names vis._outside lacks");
});
