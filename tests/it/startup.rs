//! The worker's start imports little: the standard modules that cost milliseconds are imported
//! where they are used, not by the prelude's start (issue 22 §8).

use vis::protocol::Status;

use crate::support::{run, TestEnv};
use crate::vistest;

/// A runtime whose worker starts from Vis's caches: a first worker fills them (the signatures
/// of the prelude's functions, computed with `inspect`), and starts find them from then on.
fn started_from_caches(env: &TestEnv) -> vis::runtime::Runtime {
    let mut first = env.runtime();
    assert_eq!(run(env, &mut first, "1").output, "1\n");
    drop(first);
    env.runtime()
}

/// Modules the prelude's start must not import (each, with what it pulls in, costs a bare
/// interpreter's start a millisecond or more; the last four a few tenths: `__future__` is
/// compiled in as a flag, the restore's code comes as bytes, `vis._outside` serves only a
/// plain Python, and `vis._mcp` comes with the first MCP namespace).
const HEAVY: &str = "['typing', 're', 'pathlib', 'ast', 'enum', 'ipaddress', 'urllib.parse', 'contextlib', 'inspect', 'importlib.util', 'importlib.metadata', 'zlib', 'json', 'tempfile', '__future__', 'binascii', 'vis._outside', 'vis._mcp']";

vistest!(the_prelude_start_imports_no_heavy_module, |env| {
    // The start that is checked finds the caches filled.
    let mut rt = started_from_caches(&env);
    // Measured against what the interpreter had loaded before the prelude (`site` and the
    // `.pth` files of this machine's site-packages may import any of them on their own).
    let code = format!(
        "import sys, _vis_embedded\nsorted(m for m in {HEAVY} if m in sys.modules and m not in _vis_embedded.MODULES_BEFORE_PRELUDE)"
    );
    let out = run(&env, &mut rt, &code);
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert_eq!(out.output, "[]\n");
});

vistest!(the_collector_runs_again_once_the_prelude_started, |env| {
    // Paused while the prelude starts (nothing worth collecting), never for a block; what
    // the start made is frozen, out of every later collection's way.
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "import gc\ngc.isenabled(), gc.get_freeze_count() > 1000",
    );
    assert_eq!(out.output, "(True, True)\n");
    // Garbage a block makes is collected as before.
    let out = run(
        &env,
        &mut rt,
        "import gc, weakref\nclass Node: pass\na = Node(); a.me = a; probe = weakref.ref(a); del a\ngc.collect() > 0, probe() is None",
    );
    assert_eq!(out.output, "(True, True)\n");
});

vistest!(path_is_there_when_a_block_names_it, |env| {
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "import vis\nprint(Path('a') / 'b', vis.Path is Path, 'Path' in dir(vis))",
    );
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert_eq!(out.output, "a/b True True\n");
    // Reached without naming it: through the namespace.
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "globals()['Path'].__name__");
    assert_eq!(out.output, "'Path'\n");
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "from vis import *\nPath.__module__");
    assert_eq!(out.output, "'pathlib'\n");
});

vistest!(a_restored_definition_that_names_path_finds_it, |env| {
    let first = env.exec("s", "def where(name):\n    return Path(name).name\n");
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let again = env.exec("s", "where('/a/b.txt')");
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.ends_with("'b.txt'\n"), "{}", again.stdout);
});

/// The prelude modules whose names are bound on first use (`vis.LAZY`).
const LAZY_MODULES: &str = "['vis.text', 'vis.shell', 'vis.jobs', 'vis.spawn', 'vis.images', 'vis.folding', 'vis.promote', 'vis.discovery']";

/// Names several lazy names, and compares each with the package's own.
const NAMES_THEM: &str =
    "import vis\nprint(callable(grep), vis.grep is grep, type(jobs).__name__, \
    vis.jobs is jobs, PatchError.__name__)";
/// True when `vis.FUNCTIONS` is every public function, in `__all__` order.
const FUNCTIONS_ARE_THE_OBJECTS: &str = "import vis\n[n for n in vis.__all__ if n != 'Path' \
    and callable(getattr(vis, n)) and not isinstance(getattr(vis, n), type)] == vis.FUNCTIONS";
/// Imports submodules named like their functions, then reads the functions.
const SUBMODULES_FIRST: &str = "import vis.spawn, vis.promote\nfrom vis import spawn as s\n\
    print(type(s).__name__, type(vis.promote).__name__, doc('jobs').__class__.__name__)";
/// True when the start (not the interpreter's own) made the syntax tree's node types: by
/// importing `_ast`, or by a first call of the builtin `compile` (the bundled package's empty
/// `__init__.py` compiled at start did, until it came with the build's bytecode).
const MADE_AST: &str = "(lambda e: e.syntax_tree_made() and not e.SYNTAX_TREE_BEFORE_PRELUDE)\
    (__import__('_vis_embedded'))";

vistest!(
    the_prelude_modules_load_when_a_block_first_names_them,
    |env| {
        // A start with the caches filled: none of them loaded, and the manifest has the prelude's
        // functions with their signatures and docs all the same (from the cache).
        let mut rt = started_from_caches(&env);
        let code = format!("import sys\nsorted(m for m in {LAZY_MODULES} if m in sys.modules)");
        assert_eq!(run(&env, &mut rt, &code).output, "[]\n");
        let cat = rt
            .manifest_entries()
            .iter()
            .find(|e| e.name == "cat")
            .expect("cat in the manifest")
            .clone();
        assert!(cat.signature.starts_with('('), "{cat:?}");
        assert!(!cat.doc.is_empty(), "{cat:?}");
        // Named by a block: there, and the same object as the package's.
        let out = run(&env, &mut rt, NAMES_THEM);
        assert_eq!(out.output, "True True function True PatchError\n");
        // Each public function is `vis.FUNCTIONS`, in order (the registry's core entries).
        let out = run(&env, &mut rt, FUNCTIONS_ARE_THE_OBJECTS);
        assert_eq!(out.output, "True\n");
        // A submodule imported by name does not hide the function of the same name.
        let mut rt = env.runtime();
        let out = run(&env, &mut rt, SUBMODULES_FIRST);
        assert_eq!(out.status, Status::Ok, "{}", out.output);
        assert!(
            out.output.starts_with("function function "),
            "{}",
            out.output
        );
        // Reached without naming them: through the namespace, or `from vis import *`.
        let mut rt = env.runtime();
        let out = run(&env, &mut rt, "globals()['cat'].__module__");
        assert_eq!(out.output, "'vis.text'\n");
        let mut rt = env.runtime();
        let code = "from vis import *\nspawn.__module__, show.__module__";
        let out = run(&env, &mut rt, code);
        assert_eq!(out.output, "('vis.spawn', 'vis.images')\n");
    }
);

vistest!(
    a_block_of_one_expression_is_compiled_without_a_syntax_tree,
    |env| {
        // A start from the caches and a one-line expression: the node types (`_ast`) are never
        // made, unless the interpreter's own start made them; the probe itself sees them once
        // they are.
        let mut rt = started_from_caches(&env);
        assert_eq!(run(&env, &mut rt, MADE_AST).output, "False\n");
        // Where the interpreter's own start made them (a `site` `.pth` that compiles, as this
        // machine's), the probe above cannot tell: the module it used to compile at start
        // comes as bytecode, whatever the interpreter.
        let bundled = "__import__('sys').modules['vis._native'].\
            embedded_bytecode('_vis_bundled/__init__.py') is not None";
        assert_eq!(run(&env, &mut rt, bundled).output, "True\n");
        let made = "compile('1', '', 'eval') and __import__('_vis_embedded').syntax_tree_made()";
        assert_eq!(run(&env, &mut rt, made).output, "True\n");
        // What the fast path takes and what it leaves to the parser behave as before: a value
        // shown, `None` not, a statement, a top-level await, a syntax error, and a block that
        // then needs the tree.
        let await_check = "import ast, vis._runner as r\n\
        r._TOP_LEVEL_AWAIT == ast.PyCF_ALLOW_TOP_LEVEL_AWAIT";
        for (code, expected) in [
            ("max(3, 4)", "4\n"),
            ("print('shown')", "shown\n"),
            ("y = 6  # a statement", ""),
            ("y * 7", "42\n"),
            ("y == 6", "True\n"),
            ("f'{y=}'", "'y=6'\n"),
            ("(lambda v=2: v * y)()", "12\n"),
            ("y += 1", ""),
            ("y", "7\n"),
            (
                "await __import__('asyncio').sleep(0, 'awaited')",
                "'awaited'\n",
            ),
            ("x = 1; x + 1", "2\n"),
            (await_check, "True\n"),
        ] {
            let out = run(&env, &mut rt, code);
            assert_eq!(out.status, Status::Ok, "{code}: {}", out.output);
            assert_eq!(out.output, expected, "{code}");
        }
        let out = run(&env, &mut rt, "1 +");
        assert_eq!(out.status, Status::Error, "{}", out.output);
        assert!(out.output.contains("SyntaxError"), "{}", out.output);
    }
);

vistest!(
    a_restored_definition_that_names_a_prelude_function_finds_it,
    |env| {
        let first = env.exec("s", "def count(path):\n    return len(grep('x', path))\n");
        assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
        std::fs::write(env.workspace().join("a.txt"), "x\ny\nx\n").unwrap();
        let again = env.exec("s", "count('a.txt')");
        assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
        assert!(again.stdout.ends_with("2\n"), "{}", again.stdout);
    }
);

vistest!(a_denied_prelude_function_is_never_bound, |env| {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        "[permissions]\ndeny = [\"sh\", \"cat\"]\n",
    )
    .unwrap();
    let named = env.exec("s", "cat('x')");
    assert_eq!(named.code, 1, "{}{}", named.stdout, named.stderr);
    assert!(
        named
            .stdout
            .contains("NameError: name 'cat' is not defined"),
        "{}",
        named.stdout
    );
    // Not through the namespace either (which binds every other lazy name).
    let all = env.exec(
        "s",
        "print('sh' in globals(), 'cat' in dir(), 'grep' in globals())",
    );
    assert_eq!(all.stdout, "False False True\n", "{}", all.stderr);
});

vistest!(vis_exec_records_its_block_before_it_ends, |env| {
    // `vis exec` settles the store's log before the turn's first write and ends without
    // waiting for its worker: the iteration and the turn are committed by the time it exits.
    for (i, code) in ["def f():\n    return 41\n", "f() + 1"].iter().enumerate() {
        let run = env.exec("s", code);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        let store = vis::store::Store::open(&env.db()).unwrap();
        let rows = store.iterations("s").unwrap();
        assert_eq!(rows.len(), i + 1);
        let last = &rows[i];
        assert_eq!(last.code, *code);
        assert_eq!(
            last.status,
            vis::protocol::IterationStatus::Ended(Status::Ok)
        );
        assert_eq!(last.output, run.stdout);
        let turns = store.turns("s").unwrap();
        assert_eq!(turns.len(), i + 1);
        assert_eq!(turns[i].status, vis::protocol::TurnStatus::Done);
    }
    // The workers are gone soon after (the kernel ends the namespace).
    let workspace = env.workspace().canonicalize().unwrap();
    // (Which a live worker of this workspace is found as.)
    let mut live = env.runtime();
    assert_eq!(run(&env, &mut live, "1").output, "1\n");
    assert!(!workers_of(&workspace).is_empty());
    drop(live);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = workers_of(&workspace);
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
});

/// The pids of live `vis worker` processes running in `workspace` (a zombie has neither a
/// command line nor a working directory).
fn workers_of(workspace: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let cwd = std::fs::read_link(entry.path().join("cwd"));
        if args.get(1) == Some(&&b"worker"[..]) && cwd.is_ok_and(|cwd| cwd == workspace) {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

/// `frame` as the host sends it: a 4-byte little-endian length, then the bytes.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

#[test]
fn a_worker_without_a_valid_start_message_says_why_and_exits() {
    // Its first message is its settings (the host may start it before it knows them).
    let mut oversized = u32::MAX.to_le_bytes().to_vec();
    oversized.extend_from_slice(b"{}");
    for (input, expected) in [
        (Vec::new(), "vis worker: cannot read the start message"),
        // A cut-off frame: its length promises more than ever comes.
        (
            framed(b"{\"type\":\"start\"}")[..8].to_vec(),
            "vis worker: cannot read the start message",
        ),
        (
            framed(b"{not json"),
            "vis worker: the start message is not valid",
        ),
        (
            framed(br#"{"type":"shutdown"}"#),
            "vis worker: the host's first message was not `start`",
        ),
        (
            oversized,
            "vis worker: the start message would be 4294967295 bytes",
        ),
    ] {
        let mut child = std::process::Command::new(crate::support::worker_bin())
            .arg("worker")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, &input).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(70), "{expected}: {stderr}");
        assert!(stderr.starts_with(expected), "{expected}: {stderr}");
    }
}

vistest!(vis_without_its_worker_binary_says_what_to_install, |env| {
    // `vis` alone in a directory: the worker binary is not beside it.
    let bin = env.path().join("lonely");
    std::fs::create_dir(&bin).unwrap();
    let vis = bin.join("vis");
    if std::fs::hard_link(crate::support::vis_bin(), &vis).is_err() {
        std::fs::copy(crate::support::vis_bin(), &vis).unwrap();
    }
    let out = std::process::Command::new(&vis)
        .arg("--db")
        .arg(env.db())
        .args(["exec", "--session", "s", "print(1)"])
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .current_dir(env.workspace())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot open {}: No such file or directory (os error 2); vis runs each session's Python in the vis-worker binary installed beside it: reinstall vis so that both are there",
            bin.join("vis-worker").display()
        )),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    // Nothing was recorded: no database, no session.
    assert!(!env.db().exists());
});

/// The mappings of process `pid` that are the interpreter library's and writable.
fn writable_python_maps(pid: &str) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .filter(|l| l.contains("libpython") && l.split_whitespace().nth(1).unwrap().contains('w'))
        .map(str::to_string)
        .collect()
}

vistest!(
    only_the_worker_keeps_the_interpreters_writable_pages,
    |env| {
        // The launcher and init never run Python: they drop those pages, so the worker's writes
        // to them while Python starts do not copy them.
        let mut rt = env.runtime();
        assert_eq!(run(&env, &mut rt, "1").output, "1\n");
        let launcher = rt.worker_pid().unwrap().to_string();
        let children = |pid: &str| -> Vec<String> {
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap()
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        // launcher -> init -> worker; without a PID namespace, launcher -> worker.
        let mut chain = vec![launcher];
        loop {
            let next = children(chain.last().unwrap());
            match next.as_slice() {
                [] => break,
                [only] => chain.push(only.clone()),
                more => panic!("{more:?}"),
            }
        }
        let expected = if rt.supervisor().isolation().pid_namespace {
            3
        } else {
            2
        };
        assert_eq!(chain.len(), expected, "{chain:?}");
        let (worker, helpers) = chain.split_last().unwrap();
        for helper in helpers {
            assert_eq!(
                writable_python_maps(helper),
                Vec::<String>::new(),
                "{helper}"
            );
        }
        assert!(!writable_python_maps(worker).is_empty());
    }
);

vistest!(
    a_variable_named_in_sandbox_env_reaches_a_vis_exec_block,
    |env| {
        // `vis exec` launches its worker before it reads the config: one that needs
        // `[sandbox] env` is started with it instead.
        std::fs::create_dir_all(env.config_dir()).unwrap();
        std::fs::write(
            env.config_dir().join("config.toml"),
            "[sandbox]\nenv = [\"VIS_TEST_PASSED\"]\n",
        )
        .unwrap();
        let out = env
        .command(&[
            "exec",
            "--session",
            "s",
            "import os\nprint(os.environ.get('VIS_TEST_PASSED'), os.environ.get('VIS_TEST_HELD'))",
        ])
        .env("VIS_TEST_PASSED", "yes")
        .env("VIS_TEST_HELD", "secret")
        .output()
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.ends_with("yes None\n"), "{stdout}");
    }
);

/// Each bad input of `vis._native.compile_expression`, with the error it raises, and its code
/// against the builtin `compile`'s for the same expression.
const COMPILE_EXPRESSION_CASES: &str = r#"from vis import _native
def error(*args):
    try:
        _native.compile_expression(*args)
    except BaseException as e:
        return '%s: %s' % (type(e).__name__, e)
print(error('1 +', '<t>', 0).split(' (')[0])
print(error('x = 1', '<t>', 0).split(' (')[0])
print(error('1\0', '<t>', 0))
print(error('1', '<t>', 0x4))
print(error('1', b'<t>', 0))
mine = _native.compile_expression('await f(x)', '<t>', 0x2000)
theirs = compile('await f(x)', '<t>', 'eval', flags=0x2000, dont_inherit=True)
print(mine.co_code == theirs.co_code, mine.co_flags == theirs.co_flags, mine.co_filename)"#;

vistest!(compile_expression_refuses_what_the_builtin_refuses, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, COMPILE_EXPRESSION_CASES);
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    assert_eq!(
        out.output,
        "SyntaxError: invalid syntax\n\
         SyntaxError: invalid syntax\n\
         ValueError: source code string cannot contain null bytes\n\
         ValueError: compile_expression(): unrecognised flags 0x4\n\
         TypeError: 'bytes' object is not an instance of 'str'\n\
         True True <t>\n"
    );
});
