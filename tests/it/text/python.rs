//! The Python surface: `vis.text` loaded over a `vis._native` module built with `register`.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, Once};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule};

use super::support::Ws;

static SETUP: Once = Once::new();
/// The workspace is process-global, so Python tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join("vis")
}

/// Make `import vis.text` work: a `vis` package pointing at python/vis and a `vis._native`
/// module filled by `register`.
pub(super) fn setup() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    SETUP.call_once(|| {
        Python::initialize();
        Python::attach(|py| {
            let sys = py.import("sys").expect("sys");
            let modules = sys.getattr("modules").expect("modules");
            let vis = PyModule::new(py, "vis").expect("vis");
            vis.setattr(
                "__path__",
                vec![python_dir().to_string_lossy().into_owned()],
            )
            .expect("path");
            let native = PyModule::new(py, "vis._native").expect("native");
            vis::text::register_native(&native).expect("register");
            vis.setattr("_native", &native).expect("attr");
            modules.set_item("vis", &vis).expect("set vis");
            modules
                .set_item("vis._native", &native)
                .expect("set native");
            py.import("vis.text").expect("import vis.text");
        });
    });
    guard
}

/// Run `code` with `cat, grep, patch, ...` imported and `root` set as the workspace; returns
/// the value of the variable `out`.
pub(super) fn run(root: &std::path::Path, code: &str) -> String {
    vis::text::set_workspace(vis::text::Workspace::new([root]));
    Python::attach(|py| {
        let globals = PyDict::new(py);
        let prelude = format!("from vis.text import *\nimport os\nos.chdir({root:?})\n",);
        let full = CString::new(format!("{prelude}{code}")).expect("cstring");
        if let Err(err) = py.run(&full, Some(&globals), None) {
            let tb = err
                .traceback(py)
                .and_then(|t| t.format().ok())
                .unwrap_or_default();
            panic!("python failed: {err}\n{tb}");
        }
        globals
            .get_item("out")
            .expect("get out")
            .map(|v| v.str().expect("str").to_string())
            .unwrap_or_default()
    })
}

#[test]
fn repr_is_the_plain_text() {
    let _g = setup();
    let w = Ws::new();
    w.write("a.py", "x = 1\ny = 2\n");
    let out = run(
        w.dir.path(),
        r#"
r = cat("a.py")
g = grep("y")
assert repr(r) == str(r) == r.text, repr(r)
assert repr(g) == str(g) == g.text
assert r.total_lines == 2 and r.lines[1][2] == "y = 2"
assert repr(r).startswith("a.py (2 lines)\n1:")
out = repr(g)
"#,
    );
    assert!(
        out.starts_with("a.py\n2:") && out.ends_with("|y = 2"),
        "{out}"
    );
}

#[test]
fn patch_forms_from_python() {
    let _g = setup();
    let w = Ws::new();
    w.write("m.py", "def f():\n    return 1\n\nx = f()\n");
    let out = run(
        w.dir.path(),
        r#"
a = [l[1] for l in cat("m.py").lines]
r = patch("m.py", [
    (a[1], "    return 2"),
    (a[2], a[3], "y = f()"),
    patch.insert_before(a[0], "import os"),
    patch.insert_after(a[0], "    '''doc'''"),
    patch.insert_at_end("print(y)\n"),
])
assert repr(r) == r.text
assert (r.removed, r.added, r.checked) == (3, 5, "python"), (r.removed, r.added, r.checked)
single = patch("m.py", (cat("m.py").lines[0][1], "import sys"))
out = open("m.py").read()
"#,
    );
    assert_eq!(
        out,
        "import sys\ndef f():\n    '''doc'''\n    return 2\ny = f()\nprint(y)\n"
    );
}

#[test]
fn errors_are_python_exceptions_with_clear_messages() {
    let _g = setup();
    let w = Ws::new();
    w.write("m.py", "x = 1\n");
    std::fs::create_dir(w.path("sub")).expect("mkdir");
    let out = run(
        w.dir.path(),
        r#"
def raises(exc, fn, *args):
    try:
        fn(*args)
    except exc as e:
        return str(e)
    raise AssertionError(f"{fn.__name__}{args} did not raise {exc.__name__}")

a = cat("m.py").lines[0][1]
m = raises(AddressError, patch, "m.py", [("1:kodu" if a != "1:kodu" else "1:bake", "x")])
assert "stale" in m and "nothing changed" in m, m
assert issubclass(AddressError, PatchError) and issubclass(PatchError, ValueError)
m = raises(PatchError, patch, "m.py", [(a, "x = (")])
assert "python syntax error" in m, m
raises(FileNotFoundError, cat, "nope.py")
raises(PermissionError, cat, "/etc/hostname")
raises(IsADirectoryError, cat, "sub")
m = raises(ValueError, grep, "a(")
assert "position 1" in m, m
m = raises(TypeError, patch, "m.py", ["1:kodu"])
assert "each edit must be" in m, m
m = raises(AddressError, patch, "m.py", [(1, "x")])
assert "malformed address" in m, m
with open("m.py", "a") as unclosed:
    m = raises(FileChangedError, patch, "m.py", [(a, "x = 2")])
assert "m.py is open for writing" in m and "a file object not yet closed" in m, m
out = open("m.py").read()
"#,
    );
    assert_eq!(out, "x = 1\n");
}

#[test]
fn grep_structured_results() {
    let _g = setup();
    let w = Ws::new();
    w.write("a.txt", "foo\nbar\nfoo bar\n");
    w.write("b.txt", "foo\n");
    let out = run(
        w.dir.path(),
        r#"
g = grep("foo", glob="*.txt", context=1)
assert g.count == 3 and len(g) == 3 and bool(g)
assert g.files == ["a.txt", "b.txt"]
rows = [(m.path, m.line, m.address, m.text) for m in g]
assert rows[0][:2] == ("a.txt", 1) and rows[0][2].startswith("1:"), rows
assert [m.line for m in g.matches if m.path == "a.txt"] == [1, 3]
assert not grep("zzz")
out = repr(g.matches[2])
"#,
    );
    assert!(
        out.starts_with("b.txt:1:") && out.ends_with("|foo"),
        "{out}"
    );
}

#[test]
fn documented_surface() {
    let _g = setup();
    let w = Ws::new();
    let out = run(
        w.dir.path(),
        r#"
import inspect
for f in (cat, grep, patch, patch.insert_before, patch.insert_after, patch.insert_at_start, patch.insert_at_end):
    assert f.__doc__ and len(f.__doc__) > 20, f
out = "\n".join([str(inspect.signature(cat)), str(inspect.signature(grep)), str(inspect.signature(patch))])
"#,
    );
    assert!(
        out.starts_with("(path: 'PathArg', start: 'int | str | None' = None"),
        "{out}"
    );
}

#[test]
fn concurrent_python_threads_patching_python_files_do_not_deadlock() {
    let _g = setup();
    let w = Ws::new();
    w.write("c.py", "x = 0\n");
    let out = run(
        w.dir.path(),
        r#"
import threading
def work(n):
    for i in range(10):
        patch("c.py", [patch.insert_at_end(f"v{n}_{i} = {i}")])
ts = [threading.Thread(target=work, args=(n,)) for n in range(3)]
for t in ts: t.start()
for t in ts: t.join()
out = str(cat("c.py").total_lines)
"#,
    );
    assert_eq!(out, "31");
}

#[test]
fn cat_checks_address_hashes_from_python() {
    let _g = setup();
    let w = Ws::new();
    w.write("f.txt", "one\ntwo\nthree\n");
    let out = run(
        w.dir.path(),
        r#"
fresh = cat("f.txt").lines[1][1]
assert cat("f.txt", fresh).start == 2
assert cat("f.txt", fresh, fresh).end == 2
assert cat("f.txt", "2").start == 2          # a bare number in a string is a number
msgs = []
for bad in ["2:zzzz", "2:kodu" if fresh != "2:kodu" else "2:bate", "99:kodu", "nonsense"]:
    try:
        cat("f.txt", bad)
    except AddressError as e:
        msgs.append(str(e))
    else:
        raise AssertionError(f"cat accepted {bad!r}")
try:
    cat("f.txt", 1, "3:zzzz")
except AddressError as e:
    msgs.append(str(e))
else:
    raise AssertionError("end address not checked")
out = "\n====\n".join(msgs + [fresh])
"#,
    );
    let parts: Vec<&str> = out.split("\n====\n").collect();
    let fresh = parts[5];
    assert!(
        parts[0].contains("malformed address \"2:zzzz\"")
            && parts[0].contains(&format!("line 2 is now {fresh}"))
            && parts[0].contains(&format!("{fresh}|two")),
        "{out}"
    );
    assert!(
        parts[1].contains(&format!("is stale: line 2 is now {fresh}")),
        "{out}"
    );
    assert!(parts[2].contains("past the end"), "{out}");
    assert!(parts[3].contains("malformed address \"nonsense\""), "{out}");
    assert!(parts[4].contains("end:"), "{out}");
}

#[test]
fn huge_and_negative_numbers_are_value_errors() {
    let _g = setup();
    let w = Ws::new();
    w.write("f.txt", "one\ntwo\nthree\n");
    let out = run(
        w.dir.path(),
        r#"
def kind(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return "ok"

r = cat("f.txt", 1, 10**30)           # an end past the last line is clamped
assert (r.start, r.end) == (1, 3), (r.start, r.end)
assert cat("f.txt", 2, 2**64).end == 3
rows = [
    kind(cat, "f.txt", 10**30),
    kind(cat, "f.txt", 10**1000),
    kind(cat, "f.txt", -1),
    kind(cat, "f.txt", 0),
    kind(cat, "f.txt", 1, -(10**30)),
    kind(cat, "f.txt", "-3"),
    kind(cat, "f.txt", str(10**30)),
    kind(cat, "f.txt", True),
    kind(cat, "f.txt", 1.5),
    kind(grep, "one", context=-1),
    kind(grep, "one", limit=-5),
    kind(grep, "one", max_count=-(10**30)),
    kind(grep, "one", context=10**30),
    kind(grep, "one", limit=10**30),
    kind(grep, "one", max_count=10**30),
]
out = "\n@@\n".join(rows)
"#,
    );
    let rows: Vec<&str> = out.split("\n@@\n").collect();
    assert_eq!(rows.len(), 15, "{out}");
    for row in &rows {
        assert!(!row.contains("Overflow"), "{out}");
    }
    for (i, row) in rows[..7].iter().enumerate() {
        assert!(
            row.starts_with("ValueError: ") || row.starts_with("AddressError: "),
            "{i}: {row}"
        );
    }
    assert!(rows[0].contains("past the end of any file"), "{out}");
    assert!(rows[1].contains("digits"), "{}", rows[1]);
    assert!(rows[2].contains("line numbers start at 1"), "{out}");
    assert!(
        rows[7].starts_with("TypeError") && rows[8].starts_with("TypeError"),
        "{out}"
    );
    for row in &rows[9..12] {
        assert!(
            row.starts_with("ValueError: ") && row.contains("must be 0 or more"),
            "{row}"
        );
    }
    for (row, name) in rows[9..12]
        .iter()
        .zip(["context=-1", "limit=-5", "max_count="])
    {
        assert!(row.contains(name), "{row}");
    }
    assert_eq!(&rows[12..], &["ok", "ok", "ok"], "{out}");
}

#[test]
fn read_only_files_need_force_from_python() {
    use std::os::unix::fs::PermissionsExt;
    let _g = setup();
    let w = Ws::new();
    let path = w.write("ro.py", "x = 1\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let out = run(
        w.dir.path(),
        r#"
a = cat("ro.py").lines[0][1]
try:
    patch("ro.py", [(a, "x = 2")])
except PermissionError as e:
    msg = str(e)
else:
    raise AssertionError("a read-only file was patched")
assert "read-only" in msg and "force=True" in msg, msg
assert open("ro.py").read() == "x = 1\n"
r = patch("ro.py", [(a, "x = 2")], force=True)
assert r.changed
try:
    patch("ro.py", [(a, "x = 3")], force="yes")
except TypeError as e:
    assert "force must be True or False" in str(e)
assert issubclass(FileChangedError, PatchError)
out = open("ro.py").read()
"#,
    );
    assert_eq!(out, "x = 2\n");
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o444);
}
