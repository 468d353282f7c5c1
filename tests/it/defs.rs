//! Persisted definitions: saved with the session, restored in new workers, listed by defs().

use vis::runtime::Status;

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
        "limit = 5\ndef capped(x, top=limit):\n    return min(x, top)\ndef fine(): return 1",
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
