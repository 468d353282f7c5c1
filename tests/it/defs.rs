//! Persisted definitions: saved with the session, restored in new workers, listed by defs().

use vis::protocol::Status;

use crate::support::run;
use crate::vistest;

vistest!(definitions_survive_across_vis_exec_processes, |env| {
    let first = env.exec("s", "import re\nvalue = 10\ndef double(x):\n    \"\"\"Twice x.\"\"\"\n    return x * 2\n\n@staticmethod\ndef decorated(): return 'd'\nclass Point:\n    \"\"\"A point.\"\"\"\n    def __init__(self, x, y):\n        self.x, self.y = x, y");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let second = env.exec(
        "s",
        "print(double(21), Point(1, 2).y, re.escape('.'))\nprint('value' in globals())",
    );
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    assert_eq!(
        second.stdout,
        "[vis] new worker: restored 4 definitions: re, double, decorated, Point\n42 2 \\.\nFalse\n"
    );
    let listing = env.exec("s", "defs()");
    assert!(listing.stdout.contains("3 definitions (kept across restarts):\n  def double(x)  — Twice x.\n  def decorated()\n  class Point(x, y)  — A point.\nimports: re\n"), "{}", listing.stdout);
});

vistest!(redefinition_replaces_and_del_removes, |env| {
    env.exec(
        "s",
        "def f():\n    return 1\ndef g(): return 'g'\nh = 3\ndef h(): pass",
    );
    env.exec("s", "def f(a=2):\n    return a");
    env.exec("s", "del g\nh = 5");
    let out = env.exec(
        "s",
        "print(f(), 'g' in globals(), 'h' in globals())\n[d['name'] for d in defs()]",
    );
    assert!(
        out.stdout.ends_with("2 False False\n['f']\n"),
        "{}",
        out.stdout
    );
});

vistest!(failed_restores_are_reported_by_name, |env| {
    // The default value refers to a variable, which is not persisted: restoring fails.
    env.exec(
        "s",
        "limit = len('12345')\ndef capped(x, top=limit):\n    return min(x, top)\ndef fine(): return 1",
    );
    let out = env.exec("s", "print(session['restored']['failed'])\nfine()");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("[vis] new worker: restored 1 definition: fine; 1 failed: capped (NameError: name 'limit' is not defined)\n"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("[{'name': 'capped', 'error': \"NameError: name 'limit' is not defined\"}]"),
        "{}",
        out.stdout
    );
    assert!(env
        .exec("s", "defs()")
        .stdout
        .contains("def capped(x, top=5)  [not restored]"));
});

vistest!(
    definitions_before_an_error_are_kept_those_after_are_not,
    |env| {
        let out = env.exec(
            "s",
            "def before(): return 'b'\nraise ValueError('stop')\ndef after(): return 'a'",
        );
        assert_eq!(out.code, 1);
        let out = env.exec("s", "[d['name'] for d in defs()]");
        assert!(out.stdout.ends_with("['before']\n"), "{}", out.stdout);
    }
);

vistest!(defs_lists_signatures_and_first_doc_lines, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "defs()");
    assert!(
        out.output.starts_with("no definitions yet"),
        "{}",
        out.output
    );
    run(&env, &mut rt, "async def fetch(url: str, *, retries: int = 3) -> bytes:\n    \"\"\"Fetch a URL.\n\n    More text.\"\"\"\n");
    let out = run(&env, &mut rt, "defs()");
    assert_eq!(out.status, Status::Ok);
    assert!(
        out.output
            .contains("async def fetch(url: str, *, retries: int = 3) -> bytes  — Fetch a URL.\n"),
        "{}",
        out.output
    );
    let out = run(
        &env,
        &mut rt,
        "d = defs()[0]; d['kind'], d['source'].splitlines()[0]",
    );
    assert_eq!(
        out.output,
        "('function', 'async def fetch(url: str, *, retries: int = 3) -> bytes:')\n"
    );
});

vistest!(defs_sees_definitions_from_the_same_block, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "from __future__ import annotations\ndef early(x: Undefined) -> int:\n    return 1\nprint([d['name'] for d in defs()])\ndef late(): pass");
    // The __future__ import applies to the statements after it (the annotation is not
    // evaluated), and defs() already lists `early` but not `late`, which has not run yet.
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert_eq!(out.output, "['early']\n");
    assert_eq!(
        out.defs_set
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        ["early", "late"]
    );
});

vistest!(
    constants_that_definitions_read_are_kept_and_other_globals_are_named,
    |env| {
        let first = env.exec(
        "c",
        "import re\nPAT = re.compile(r'\\d+')\nLIMIT: int = 2\nNAMES = ('a', 'b')\nrows = [1, 2]\nfor i in range(3):\n    last = i\ndef nums(s):\n    return [int(x) for x in PAT.findall(s)][:LIMIT]\ndef uses_state():\n    return rows + [last] + list(NAMES)\nclass Box:\n    size = LIMIT\nprint(nums('a1b22c333'))",
    );
        assert_eq!(first.code, 0, "{}", first.stderr);
        assert_eq!(
        first.stdout,
        "[1, 22]\n[vis] uses_state reads last, rows, which a new worker will not have: only definitions, imports and simple constants are kept; pass it as an argument, or make it a constant (NAME = literal, or NAME = module.func(literals))\n"
    );
        // A new worker (the next `vis exec`) has the constants, and not the other globals.
        let second = env.exec(
        "c",
        "print(nums('7 8 9'), Box.size, NAMES)\nprint('rows' in globals(), 'last' in globals())",
    );
        assert_eq!(second.code, 0, "{}", second.stderr);
        assert!(
            second
                .stdout
                .ends_with("[7, 8] 2 ('a', 'b')\nFalse False\n"),
            "{}",
            second.stdout
        );
        // The restore report names what a restored definition reads and the worker lacks.
        assert!(
            second.stdout.starts_with("[vis] new worker: restored ")
                && second.stdout.contains(
                    "; not kept across the restart: uses_state reads last, rows (define them again before calling)\n"
                ),
            "{}",
            second.stdout
        );
        let listing = env.exec("c", "defs()");
        let line = listing
            .stdout
            .lines()
            .find(|l| l.starts_with("constants: "))
            .unwrap_or_default();
        let mut kept: Vec<&str> = line.trim_start_matches("constants: ").split(", ").collect();
        kept.sort();
        assert_eq!(kept, ["LIMIT", "NAMES", "PAT"], "{}", listing.stdout);
        // Rebinding a kept constant to something else drops it, and the block hears who read it.
        let rebound = env.exec("c", "PAT = open('/dev/null')");
        assert!(
            rebound
                .stdout
                .contains("[vis] nums reads PAT, which a new worker will not have"),
            "{}",
            rebound.stdout
        );
        let after = env.exec("c", "nums('1')");
        assert!(
            after
                .stdout
                .contains("NameError: name 'PAT' is not defined"),
            "{}",
            after.stdout
        );
        // Mutable literals, calls on names that are not kept imports and chained assignments are
        // not constants.
        let other = env.exec(
            "c",
            "CACHE = {}\nSIZE = len('abc')\nA = B = 1\ndef peek():\n    return CACHE, SIZE, A, B",
        );
        assert!(
            other
                .stdout
                .contains("[vis] peek reads A, B, CACHE, SIZE, which"),
            "{}",
            other.stdout
        );
    }
);

/// The one restore cache file of this env's (trusted) workspace (`restore/<32 hex>.json`) and
/// its JSON.
fn restore_cache(env: &crate::support::TestEnv) -> (std::path::PathBuf, serde_json::Value) {
    let files: Vec<_> = std::fs::read_dir(env.worker_cache_dir().join("restore"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    (files[0].clone(), serde_json::from_str(&text).unwrap())
}

/// Base64 of the marshalled code of `source` compiled as the definition `name` is, by the
/// same Python the worker runs.
fn compiled(name: &str, source: &str) -> String {
    let script = format!(
        "import marshal, binascii\nprint(binascii.b2a_base64(marshal.dumps(compile({source:?}, '<def {name}>', 'exec', dont_inherit=True)), newline=False).decode())"
    );
    python3(&script).trim().to_string()
}

/// What `python3 -c script` prints (the same Python the worker runs); fails on an error.
fn python3(script: &str) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

vistest!(
    restored_definitions_are_compiled_once_then_loaded_compiled,
    |env| {
        env.exec("s", "def f():\n    return 1\ndef g():\n    return f() + 1");
        let first = env.exec("s", "print(g())");
        assert!(first.stdout.ends_with("\n2\n"), "{}", first.stdout);
        let (path, cache) = restore_cache(&env);
        let entries = cache["defs"].as_array().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0][0], "f");
        assert_eq!(entries[0][1], "function");
        assert_eq!(entries[0][2], "def f():\n    return 1\n");

        // The next start takes the code from the cache, not from the source: code planted there
        // (with the source it claims to be) is what runs. Only the host writes this directory.
        let mut planted = cache.clone();
        planted["defs"][0][3] = compiled("f", "def f():\n    return 41\n").into();
        std::fs::write(&path, planted.to_string()).unwrap();
        let from_cache = env.exec("s", "print(g())");
        assert!(
            from_cache.stdout.ends_with("\n42\n"),
            "{}",
            from_cache.stdout
        );

        // An entry whose sources are not the session's is not used (and is replaced).
        let mut other = planted.clone();
        other["defs"][0][2] = "def f():\n    return 40\n".into();
        std::fs::write(&path, other.to_string()).unwrap();
        let recompiled = env.exec("s", "print(g())");
        assert!(
            recompiled.stdout.ends_with("\n2\n"),
            "{}",
            recompiled.stdout
        );
        assert_eq!(restore_cache(&env).1, cache);
    }
);

vistest!(a_damaged_restore_cache_is_compiled_around, |env| {
    env.exec(
        "s",
        "import re\ndef words(s):\n    return re.findall(r'\\w+', s)",
    );
    env.exec("s", "pass");
    let (path, cache) = restore_cache(&env);
    let mut truncated = cache.clone();
    truncated["defs"].as_array_mut().unwrap().pop();
    let mut not_code = cache.clone();
    not_code["defs"][1][3] = "bm90IGNvZGU=".into();
    let mut not_base64 = cache.clone();
    not_base64["defs"][1][3] = "%%%".into();
    let mut other_kind = cache.clone();
    other_kind["defs"][1][1] = "class".into();
    let mut other_python = cache.clone();
    other_python["magic"] = "0d0d0d0a".into();
    let mut old_format = cache.clone();
    old_format["version"] = 1.into();
    for damaged in [
        "{\"defs\": [".to_string(),
        "[]".to_string(),
        truncated.to_string(),
        not_code.to_string(),
        not_base64.to_string(),
        other_kind.to_string(),
        other_python.to_string(),
        old_format.to_string(),
    ] {
        std::fs::write(&path, &damaged).unwrap();
        let out = env.exec("s", "print(words('a b'))");
        assert_eq!(out.code, 0, "{damaged}: {}", out.stderr);
        assert_eq!(
            out.stdout, "[vis] new worker: restored 2 definitions: re, words\n['a', 'b']\n",
            "{damaged}"
        );
        assert_eq!(restore_cache(&env).1, cache, "{damaged}");
    }
});

vistest!(
    a_cache_file_that_kills_the_worker_is_compiled_around,
    |env| {
        env.exec("s", "def f():\n    return 1\ndef g():\n    return f() + 1");
        env.exec("s", "pass");
        let (path, cache) = restore_cache(&env);
        // Code that ends the worker where `g` should be: the file, not `g`, is to blame.
        let mut deadly = cache.clone();
        deadly["defs"][1][3] = compiled("g", "import os\nos._exit(5)\n").into();
        std::fs::write(&path, deadly.to_string()).unwrap();
        let out = env.exec("s", "print(g())");
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        assert_eq!(
            out.stdout,
            "[vis] new worker: restored 2 definitions: f, g\n2\n"
        );
        assert_eq!(restore_cache(&env).1, cache);
    }
);

vistest!(
    what_a_definition_does_at_restore_cannot_change_the_kept_code,
    |env| {
        // A class body runs when it is restored; here it breaks `marshal.dumps`. The code kept
        // for the session was marshalled before any definition ran, so it is intact.
        env.exec(
        "s",
        "import marshal\nclass Saboteur:\n    marshal.dumps = lambda *a, **k: b'x'\ndef after():\n    return 'ok'",
    );
        let restored = env.exec("s", "print(after())");
        assert!(restored.stdout.ends_with("\nok\n"), "{}", restored.stdout);
        let (_, cache) = restore_cache(&env);
        let codes: Vec<&str> = cache["defs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[3].as_str().unwrap())
            .collect();
        assert_eq!(codes.len(), 3);
        let check = format!(
        "import marshal, binascii, types\nfor c in {codes:?}:\n    assert isinstance(marshal.loads(binascii.a2b_base64(c)), types.CodeType)\nprint('intact')"
    );
        assert_eq!(python3(&check), "intact\n");
        let again = env.exec("s", "print(after())");
        assert!(again.stdout.ends_with("\nok\n"), "{}", again.stdout);
    }
);
