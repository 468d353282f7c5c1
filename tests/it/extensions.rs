//! Extensions from all four sources, broken ones, the deny list, promote, the bundled `git` and
//! `tests` extensions, and `vis catalog`.

use std::path::Path;
use std::process::Command;

use crate::support::{run, TestEnv};
use crate::vistest;
use vis::protocol::Status;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn sh(dir: &Path, cmd: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const SIMPLE_EXT: &str = r##"from vis.extension import register, context_provider, page

@register
def hello(name: str = "world") -> str:
    """Say hello from NAME."""
    return "hello %s from NAME" % name

page("NAME.guide", "# NAME guide\n\nHow to use NAME.")

@context_provider
def context() -> dict:
    return {"source": "NAME"}
"##;

/// Builds a real wheel declaring the `vis.extensions` entry point and installs it with pip
/// into the workspace's `.venv` (which the worker adds to `sys.path`).
fn install_entry_point_package(env: &TestEnv) {
    let ws = env.workspace();
    let build = env.path().join("build");
    std::fs::create_dir_all(&build).unwrap();
    write(
        &build.join("make_wheel.py"),
        r#"import base64, hashlib, sys, zipfile
src = '''from vis.extension import register, context_provider

@register
def ping() -> str:
    """Answer pong (from an installed package)."""
    return "pong"

@context_provider
def context() -> dict:
    return {"installed": True}
'''
files = {
    "visdemo_pkg/__init__.py": src,
    "visdemo_pkg-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: visdemo-pkg\nVersion: 0.1\n",
    "visdemo_pkg-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: vis-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "visdemo_pkg-0.1.dist-info/entry_points.txt": "[vis.extensions]\nepdemo = visdemo_pkg\n",
}
record = []
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append("visdemo_pkg-0.1.dist-info/RECORD,,")
    z.writestr("visdemo_pkg-0.1.dist-info/RECORD", "\n".join(record) + "\n")
"#,
    );
    sh(
        &build,
        "python3 make_wheel.py visdemo_pkg-0.1-py3-none-any.whl",
    );
    sh(&ws, "python3 -m venv --without-pip .venv");
    sh(
        &ws,
        &format!(
            "python3 -m pip install -q --no-index --no-deps --disable-pip-version-check --target \"$(python3 -c 'import sys; print(\".venv/lib/python%d.%d/site-packages\" % sys.version_info[:2])')\" {}",
            build.join("visdemo_pkg-0.1-py3-none-any.whl").display()
        ),
    );
}

vistest!(extensions_load_from_workspace_config_and_bundled, |env| {
    write(
        &env.workspace().join(".vis/extensions/wsext.py"),
        &SIMPLE_EXT.replace("NAME", "wsext"),
    );
    // A package in the user config, with a relative import.
    write(
        &env.config_dir().join("extensions/cfgext/util.py"),
        "GREETING = 'hi'\n",
    );
    write(
        &env.config_dir().join("extensions/cfgext/__init__.py"),
        "from vis.extension import register\nfrom .util import GREETING\n\n@register\ndef greet() -> str:\n    \"\"\"Greet.\"\"\"\n    return GREETING\n",
    );
    // The workspace's `git` shadows the bundled one.
    let mut rt = env.runtime_with(|o| o.config_dir = Some(env.config_dir()), vec![]);
    let out = run(
        &env,
        &mut rt,
        "print(wsext.hello('x'), cfgext.greet())\nprint(session['extensions']['wsext'], session['extensions']['cfgext'])\nprint(doc('wsext.guide'))\nprint(apropos('^(wsext|cfgext)\\\\.'))",
    );
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert!(
        out.output
            .starts_with("hello x from wsext hi\n{'source': 'wsext'} {}\n# wsext guide"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains("wsext.hello(name: str = 'world') -> str  — Say hello from wsext."),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("cfgext.greet() -> str  — Greet."),
        "{}",
        out.output
    );
    let origins: Vec<String> = rt
        .manifest_entries()
        .iter()
        .filter(|e| e.name == "wsext.hello" || e.name == "cfgext.greet" || e.name == "git.status")
        .map(|e| format!("{}", e.origin))
        .collect();
    assert_eq!(
        origins,
        ["extension `cfgext`", "extension `git`", "extension `wsext`"]
    );

    // A workspace extension named like a bundled one shadows it.
    write(
        &env.workspace().join(".vis/extensions/git.py"),
        "from vis.extension import register\n\n@register\ndef status() -> str:\n    \"\"\"Mine.\"\"\"\n    return 'my status'\n",
    );
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "print(git.status(), hasattr(git, 'diff'))");
    assert_eq!(out.output, "my status False\n");
});

vistest!(
    extensions_load_from_an_installed_entry_point_package,
    |env| {
        install_entry_point_package(&env);
        let mut rt = env.runtime();
        let out = run(
            &env,
            &mut rt,
            "print(epdemo.ping(), session['extensions']['epdemo'])\nprint(apropos('ping'))",
        );
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        assert!(out.output.starts_with("pong {'installed': True}\nepdemo.ping() -> str  — Answer pong (from an installed package)."), "{}", out.output);
    }
);

/// The workspace venv's site-packages (where `install_entry_point_package` installs).
fn site_packages(env: &TestEnv) -> std::path::PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys; print('.venv/lib/python%d.%d/site-packages' % sys.version_info[:2])",
        ])
        .output()
        .unwrap();
    env.workspace()
        .join(String::from_utf8(out.stdout).unwrap().trim())
}

/// Sets a directory's mtime to `seconds` (since the epoch), well in the past: the index of a
/// directory that changed just now is not written (it may still be changing), one that settled
/// is.
fn backdate(dir: &Path, seconds: u64) {
    sh(dir, &format!("touch -d @{seconds} ."));
}

/// The entry-point index of `dir` in the env's cache directory: (path, content).
fn entry_point_index(env: &TestEnv, dir: &Path) -> (std::path::PathBuf, String) {
    for file in std::fs::read_dir(env.worker_cache_dir().join("entry-points")).unwrap() {
        let path = file.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let index: serde_json::Value = serde_json::from_str(&text).unwrap();
        if index["dir"] == dir.to_str().unwrap() {
            return (path, text);
        }
    }
    panic!("no entry-point index of {}", dir.display());
}

vistest!(
    the_entry_point_index_is_cached_and_follows_site_packages,
    |env| {
        install_entry_point_package(&env);
        let site = site_packages(&env);
        backdate(&site, 1_600_000_000);
        let first = run(&env, &mut env.runtime(), "print(epdemo.ping())");
        assert_eq!(first.output, "pong\n");
        let (index, text) = entry_point_index(&env, &site);
        assert!(text.contains("[\"epdemo\",\"visdemo_pkg\""), "{text}");

        // The next start takes the entry points from the index, not from the distributions:
        // an entry renamed in the index is what loads.
        std::fs::write(&index, text.replace("\"epdemo\"", "\"epcached\"")).unwrap();
        let cached = run(
            &env,
            &mut env.runtime(),
            "print(epcached.ping(), 'epdemo' in dir())",
        );
        assert_eq!(cached.output, "pong False\n");

        // Installing or removing a distribution changes site-packages' mtime: a fresh scan.
        std::fs::create_dir(site.join("other-1.0.dist-info")).unwrap();
        let rescanned = run(
            &env,
            &mut env.runtime(),
            "print(epdemo.ping(), 'epcached' in dir())",
        );
        assert_eq!(rescanned.output, "pong False\n");
        // Changed just now, so that scan was not cached yet; once settled it is.
        assert!(entry_point_index(&env, &site).1.contains("epcached"));
        backdate(&site, 1_600_000_100);
        run(&env, &mut env.runtime(), "pass");
        let (_, text) = entry_point_index(&env, &site);
        assert!(
            text.contains("\"epdemo\"") && !text.contains("epcached"),
            "{text}"
        );

        // A corrupt index is never trusted: it is scanned again and replaced.
        std::fs::write(&index, "{\"version\": 1, \"dir\": tru").unwrap();
        let out = run(&env, &mut env.runtime(), "print(epdemo.ping())");
        assert_eq!(out.output, "pong\n");
        assert!(entry_point_index(&env, &site).1.contains("\"epdemo\""));
    }
);

/// The signature cache entry that lists `function`: (path, content).
fn signature_cache(env: &TestEnv, function: &str) -> (std::path::PathBuf, String) {
    let mut found = Vec::new();
    for file in std::fs::read_dir(env.worker_cache_dir().join("signatures")).unwrap() {
        let path = file.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let entry: serde_json::Value = serde_json::from_str(&text).unwrap();
        if entry["functions"].get(function).is_some() {
            found.push((path, text));
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

vistest!(
    signatures_are_cached_per_version_of_the_extension_source,
    |env| {
        let ext = env.workspace().join(".vis/extensions/sigs.py");
        let source = |default: u32| {
            format!("from vis.extension import register\n\n@register\ndef area(w: int, h: int = {default}) -> int:\n    \"\"\"Area of a box.\"\"\"\n    return w * h\n")
        };
        write(&ext, &source(2));
        let block = "print(apropos('area'))\nprint(sigs.area(5))";
        let first = run(&env, &mut env.runtime(), block);
        assert!(
            first
                .output
                .starts_with("sigs.area(w: int, h: int = 2) -> int  — Area of a box.\n"),
            "{}",
            first.output
        );
        assert!(first.output.ends_with("\n10\n"), "{}", first.output);

        // The next start takes the signature from the cache: an edit there is what it shows.
        let (cache, text) = signature_cache(&env, "sigs.area");
        std::fs::write(&cache, text.replace("Area of a box.", "Area (cached).")).unwrap();
        let cached = run(&env, &mut env.runtime(), block);
        assert!(
            cached
                .output
                .starts_with("sigs.area(w: int, h: int = 2) -> int  — Area (cached).\n"),
            "{}",
            cached.output
        );

        // Editing the extension's file is a new version: computed again (and cached anew).
        write(&ext, &source(3));
        let edited = run(&env, &mut env.runtime(), block);
        assert!(
            edited
                .output
                .starts_with("sigs.area(w: int, h: int = 3) -> int  — Area of a box.\n"),
            "{}",
            edited.output
        );
        assert!(edited.output.ends_with("\n15\n"), "{}", edited.output);
        let entries = std::fs::read_dir(env.worker_cache_dir().join("signatures"))
            .unwrap()
            .count();
        assert!(
            entries >= 3,
            "core, the bundled extensions' and each version of sigs.py: {entries}"
        );
    }
);

vistest!(
    broken_extensions_are_reported_once_and_never_break_the_runtime,
    |env| {
        let exts = env.workspace().join(".vis/extensions");
        write(&exts.join("broken.py"), "import no_such_module_xyz\n");
        write(
        &exts.join("flaky.py"),
        "from vis.extension import register, context_provider\n\n@register\ndef ok() -> int:\n    return 1\n\n@context_provider\ndef context():\n    raise RuntimeError('provider exploded')\n",
    );
        write(
            &exts.join("dupe.py"),
            "from vis.extension import register\n\n@register('sh')\ndef mysh():\n    pass\n",
        );
        write(&exts.join("syntax.py"), "def (:\n");
        let mut rt = env.runtime();
        let first = run(&env, &mut rt, "print(flaky.ok())");
        assert_eq!(first.status, Status::Ok, "{}", first.output);
        let o = &first.output;
        assert!(
            o.contains("[vis] extension `broken` failed to load and is skipped")
                && o.contains("ModuleNotFoundError: No module named 'no_such_module_xyz'"),
            "{o}"
        );
        assert!(
            o.contains(
                "[vis] extension `flaky`: context provider failed: RuntimeError: provider exploded"
            ),
            "{o}"
        );
        assert!(
            o.contains("duplicate name `sh`: already registered by the core prelude"),
            "{o}"
        );
        assert!(
            o.contains("[vis] extension `syntax` failed to load") && o.contains("SyntaxError"),
            "{o}"
        );
        assert!(o.trim_end().ends_with('1'), "{o}");
        // Once: the next block is quiet, but session["extensions"] still holds the errors.
        let second = run(&env, &mut rt, "e = session['extensions']\nprint(sorted(e))\nprint(e['broken']['error'][:45])\nprint(e['flaky'])\nprint(sh('echo fine').output.strip())");
        assert_eq!(second.status, Status::Ok, "{}", second.output);
        assert!(!second.output.contains("[vis]"), "{}", second.output);
        assert!(second.output.starts_with("['broken', 'dupe', 'flaky', 'git', 'syntax', 'tests']\nModuleNotFoundError: No module named 'no_"), "{}", second.output);
        assert!(
            second
                .output
                .contains("{'error': 'context provider failed: RuntimeError: provider exploded"),
            "{}",
            second.output
        );
        assert!(second.output.ends_with("fine\n"), "{}", second.output);
        assert!(!rt
            .manifest_entries()
            .iter()
            .any(|e| e.name.starts_with("broken")));
    }
);

vistest!(denied_names_do_not_exist, |env| {
    let mut rt = env.runtime_with(
        |o| o.deny = vec!["git.blame".into(), "tests".into(), "sh".into()],
        vec![],
    );
    let out = run(&env, &mut rt, "print(apropos('blame|^tests|^sh$'))\nprint('tests' in globals(), 'sh' in globals(), sorted(session['extensions']))\nprint(hasattr(git, 'blame'), dir(git))");
    assert!(
        out.output.starts_with("No names match 'blame|^tests|^sh$'"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains("False False ['git']\nFalse ['diff', 'log', 'status']"),
        "{}",
        out.output
    );
    let out = run(&env, &mut rt, "doc('git.blame')");
    assert!(
        out.output
            .contains("LookupError: no function, namespace, page or skill named `git.blame`"),
        "{}",
        out.output
    );
    assert!(
        !out.output.contains("did you mean `git.blame`"),
        "{}",
        out.output
    );
    let out = run(&env, &mut rt, "git.blame('x')");
    assert!(
        out.output
            .contains("AttributeError: namespace 'git' has no attribute 'blame'"),
        "{}",
        out.output
    );
    let out = run(&env, &mut rt, "tests.run()");
    assert!(
        out.output
            .contains("NameError: name 'tests' is not defined"),
        "{}",
        out.output
    );
    let names: Vec<&str> = rt
        .manifest_entries()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| *n == "git.blame" || *n == "sh" || n.starts_with("tests")),
        "{names:?}"
    );
    assert!(names.contains(&"git.diff"));
});

vistest!(
    promote_writes_an_extension_that_later_sessions_load,
    |env| {
        let r = env.exec("a", "import re\n\ndef slugify(text: str) -> str:\n    \"\"\"Lower-case words joined by dashes.\"\"\"\n    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')\n");
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        let r = env.exec("a", "promote('slugify')");
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stdout.contains("promoted slugify -> helpers.slugify in ")
                && r.stdout.contains(".vis/extensions/helpers.py"),
            "{}",
            r.stdout
        );
        let file =
            std::fs::read_to_string(env.workspace().join(".vis/extensions/helpers.py")).unwrap();
        assert!(
            file.contains("import re\n")
                && file.contains("@register(\"helpers.slugify\")\ndef slugify"),
            "{file}"
        );
        // Promoting again replaces the function instead of duplicating it.
        let r = env.exec("a", "def slugify(text: str) -> str:\n    \"\"\"Version 2.\"\"\"\n    return re.sub(r'[^a-z0-9]+', '_', text.lower()).strip('_')\npromote('slugify')\nprint(helpers.slugify('Hello World'))");
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(r.stdout.ends_with("hello_world\n"), "{}", r.stdout);
        let file =
            std::fs::read_to_string(env.workspace().join(".vis/extensions/helpers.py")).unwrap();
        assert_eq!(file.matches("def slugify").count(), 1, "{file}");
        // A new session in the same workspace has it.
        let r = env.exec(
            "b",
            "print(helpers.slugify('A B'))\nprint(apropos('slugify'))",
        );
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stdout
                .starts_with("a_b\nhelpers.slugify(text: str) -> str  — Version 2."),
            "{}",
            r.stdout
        );
        // Clear errors.
        for (code, needle) in [
            (
                "promote('nope')",
                "LookupError: cannot promote 'nope': it is not a function in defs()",
            ),
            ("promote('re')", "it is a import, not a function"),
            (
                "promote('slugify', extension='bad-name')",
                "ValueError: invalid extension name 'bad-name'",
            ),
        ] {
            let r = env.exec("a", code);
            assert_eq!(r.code, 1, "{code}: {}", r.stdout);
            assert!(r.stdout.contains(needle), "{code}: {}", r.stdout);
        }
    }
);

vistest!(promote_updates_the_manifest_the_host_holds, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "def triple(x: int) -> int:\n    \"\"\"Times three.\"\"\"\n    return 3 * x\n",
    );
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert!(!rt
        .manifest_entries()
        .iter()
        .any(|e| e.name == "tools.triple"));
    let out = run(
        &env,
        &mut rt,
        "print(promote('triple', extension='tools'))\nprint(tools.triple(2))",
    );
    assert!(out.output.ends_with("6\n"), "{}", out.output);
    let e = rt
        .manifest_entries()
        .iter()
        .find(|e| e.name == "tools.triple")
        .expect("manifest updated");
    assert_eq!(e.signature, "(x: int) -> int");
});

fn git_repo(env: &TestEnv) -> std::path::PathBuf {
    let ws = env.workspace();
    sh(&ws, "git init -q -b main . && git config user.email t@example.com && git config user.name Tester && printf 'alpha\\nbeta\\ngamma\\n' > f.txt && git add f.txt && git commit -qm 'first commit' && printf 'alpha\\nBETA\\ngamma\\ndelta\\n' > f.txt && echo new > untracked.txt");
    ws
}

vistest!(git_extension_on_a_real_repository, |env| {
    git_repo(&env);
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "print(session['extensions']['git'])\ngit.status()",
    );
    assert_eq!(out.output, "{'repository': True, 'branch': 'main'}\nbranch main\n M f.txt\n?? untracked.txt\n[2 changed: 0 staged, 1 untracked]\n", "{}", out.output);
    let out = run(
        &env,
        &mut rt,
        "print(git.log())\nprint(git.diff())\nprint(git.blame('f.txt', 2, 3))\nprint(cat('f.txt'))",
    );
    let o = &out.output;
    assert_eq!(out.status, Status::Ok, "{o}");
    assert!(o.contains(" Tester  first commit\n"), "{o}");
    assert!(o.contains("=== f.txt\n@@ -1,3 +1,4 @@\n"), "{o}");
    assert!(o.contains("- |beta\n"), "{o}");
    // Diff and blame addresses are exactly cat's.
    let cat_addr = |line: &str| -> String {
        o.lines()
            .find(|l| {
                let head = l.split('|').next().unwrap();
                l.ends_with(&format!("|{line}"))
                    && head.split_once(':').is_some_and(|(n, h)| {
                        n.chars().all(|c| c.is_ascii_digit())
                            && h.chars().all(|c| c.is_ascii_lowercase())
                    })
            })
            .unwrap_or_else(|| panic!("no cat line for {line}: {o}"))
            .split('|')
            .next()
            .unwrap()
            .to_string()
    };
    let beta = cat_addr("BETA");
    let delta = cat_addr("delta");
    assert!(o.contains(&format!("+ {beta}|BETA\n")), "{o}");
    assert!(o.contains(&format!("+ {delta}|delta\n")), "{o}");
    assert!(o.contains(&format!("uncommitted  {beta}|BETA\n")), "{o}");
    assert!(
        o.contains(" Tester ") && o.contains(&format!("  {}|gamma", cat_addr("gamma"))),
        "{o}"
    );
    // An address from the diff works in patch.
    let out = run(
        &env,
        &mut rt,
        &format!("patch('f.txt', [('{beta}', 'Beta')])\nprint(open('f.txt').read().split())"),
    );
    assert!(
        out.output
            .ends_with("['alpha', 'Beta', 'gamma', 'delta']\n"),
        "{}",
        out.output
    );
    // Outside a repository: a clear error.
    let other = TestEnv::new();
    let mut rt = other.runtime();
    let out = run(
        &other,
        &mut rt,
        "print(session['extensions']['git'])\ngit.status()",
    );
    assert!(
        out.output.starts_with("{'repository': False}\n"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("is not inside a git repository"),
        "{}",
        out.output
    );
});

vistest!(tests_extension_runs_cargo_and_summarizes, |env| {
    let ws = env.workspace();
    write(
        &ws.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    write(
        &ws.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(1, 2), 3); }\n    #[test]\n    fn breaks() {\n        for i in 0..100 { println!(\"noise line {i}\"); }\n        assert_eq!(super::add(2, 2), 5, \"math is off\");\n    }\n}\n",
    );
    let mut rt = env.runtime();
    let target = env.path().join("cargo-target");
    let out = run(&env, &mut rt, &format!("import os\nos.environ['CARGO_TARGET_DIR'] = {:?}\nprint(tests.detect())\nr = tests.run(max_failure_lines=10)\nprint(r)\nprint(r.ok, r.passed, r.failed, [f['name'] for f in r.failures])", target.display().to_string()));
    let o = &out.output;
    assert_eq!(out.status, Status::Ok, "{o}");
    assert!(
        o.starts_with("['cargo']\ncargo: FAILED — 1 passed, 1 failed ("),
        "{o}"
    );
    assert!(
        o.contains("failed: tests::breaks\n---- tests::breaks ----\n"),
        "{o}"
    );
    assert!(o.contains("lines cut") && o.contains("math is off"), "{o}");
    assert!(o.contains("[full output: "), "{o}");
    assert!(o.trim_end().ends_with("False 1 1 ['tests::breaks']"), "{o}");
    assert!(o.lines().count() < 30, "compact: {o}");
    let out = run(&env, &mut rt, "print(tests.run('adds'))");
    assert!(
        out.output.starts_with("cargo: ok — 1 passed, 0 failed"),
        "{}",
        out.output
    );
    let out = run(&env, &mut rt, "tests.run(runner='make')");
    assert!(
        out.output.contains("ValueError: unknown runner 'make'"),
        "{}",
        out.output
    );
});

vistest!(tests_extension_runs_pytest_and_summarizes, |env| {
    let ws = env.workspace();
    write(
        &ws.join("test_calc.py"),
        "def add(a, b):\n    return a + b\n\ndef test_adds():\n    assert add(1, 2) == 3\n\ndef test_breaks():\n    assert add(2, 2) == 5, 'math is off'\n",
    );
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "print(tests.detect())\nr = tests.run()\nprint(r)\nprint(r.ok, r.passed, r.failed, [f['name'] for f in r.failures])");
    let o = &out.output;
    assert_eq!(out.status, Status::Ok, "{o}");
    assert!(
        o.starts_with("['pytest']\npytest: FAILED — 1 passed, 1 failed ("),
        "{o}"
    );
    assert!(o.contains("math is off"), "{o}");
    assert!(
        o.trim_end()
            .ends_with("False 1 1 ['test_calc.py::test_breaks']"),
        "{o}"
    );
    let out = run(&env, &mut rt, "print(tests.run('adds'))");
    assert!(
        out.output.starts_with("pytest: ok — 1 passed, 0 failed"),
        "{}",
        out.output
    );
});

vistest!(
    tests_extension_runs_npm_with_node_test_and_summarizes,
    |env| {
        let ws = env.workspace();
        write(
        &ws.join("package.json"),
        "{\"name\": \"tiny\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"node --test\"}}\n",
    );
        write(
        &ws.join("test/math.test.js"),
        "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => { assert.strictEqual(1 + 2, 3); });\ntest('breaks', () => { assert.strictEqual(2 + 2, 5, 'math is off'); });\n",
    );
        let mut rt = env.runtime();
        let out = run(&env, &mut rt, "print(tests.detect())\nr = tests.run()\nprint(r)\nprint(r.ok, r.passed, r.failed, [f['name'] for f in r.failures])");
        let o = &out.output;
        assert_eq!(out.status, Status::Ok, "{o}");
        assert!(
            o.starts_with("['npm']\nnpm: FAILED — 1 passed, 1 failed ("),
            "{o}"
        );
        assert!(o.contains("math is off"), "{o}");
        assert!(o.trim_end().ends_with("False 1 1 ['breaks']"), "{o}");
    }
);

vistest!(
    vis_catalog_prints_a_stable_hash_and_stores_the_snapshot,
    |env| {
        let a = env.vis(&["catalog"]);
        assert_eq!(a.code, 0, "{}", a.stderr);
        let b = env.vis(&["catalog", "--workspace", env.workspace().to_str().unwrap()]);
        assert_eq!(a.stdout, b.stdout);
        assert!(
            a.stdout
                .starts_with("Functions available in python_execution"),
            "{}",
            a.stdout
        );
        assert!(
            a.stdout.contains("\ngit.status() -> GitText  — ")
                && a.stdout.contains("\nvis.addresses  [page]"),
            "{}",
            a.stdout
        );
        let hash = a
            .stdout
            .lines()
            .last()
            .unwrap()
            .strip_prefix("hash: ")
            .unwrap()
            .to_string();
        assert!(a.stdout.contains("\nmode: full, "), "{}", a.stdout);
        let store = vis::store::Store::open(&env.db()).unwrap();
        let snap = store.catalog_snapshot(&hash).unwrap().expect("stored");
        assert_eq!(snap.hash, hash);

        // Budget and deny list from the config; a small budget gives the summary.
        write(
            &env.config_dir().join("config.toml"),
            "[permissions]\ndeny = [\"git.blame\"]\n[catalog]\nbudget = 100\n",
        );
        let c = env.vis(&["catalog"]);
        assert_eq!(c.code, 0, "{}", c.stderr);
        assert!(
            c.stdout.contains("\nmode: summary, ") && !c.stdout.contains("git.blame"),
            "{}",
            c.stdout
        );
        let d = env.vis(&["catalog", "--budget", "100000"]);
        assert!(
            d.stdout.contains("\nmode: full, ") && !d.stdout.contains("git.blame"),
            "{}",
            d.stdout
        );

        for (args, needle) in [
            (vec!["catalog", "--budget", "0"], "at least 1 token"),
            (vec!["catalog", "--budget", "lots"], "not a whole number"),
            (
                vec!["catalog", "--workspace", "/nonexistent/dir"],
                "does not exist or is not a directory",
            ),
        ] {
            let r = env.vis(&args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
            assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
        }
        write(
            &env.config_dir().join("config.toml"),
            "[permissions]\ndeny = [\"git.2fa\"]\n",
        );
        for args in [vec!["catalog"], vec!["exec", "print(1)"]] {
            let r = env.vis(&args);
            assert_eq!(r.code, 2, "{}", r.stderr);
            assert!(
                r.stderr
                    .contains("config.toml: line 2: in `permissions.deny`")
                    && r.stderr.contains("`2fa`"),
                "{}",
                r.stderr
            );
        }
    }
);
