//! The worker's start imports little: the standard modules that cost milliseconds are imported
//! where they are used, not by the prelude's start (issue 22 §8).

use vis::protocol::Status;

use crate::support::run;
use crate::vistest;

/// Modules the prelude's start must not import (each, with what it pulls in, costs a bare
/// interpreter's start a millisecond or more; the last three a few tenths: `__future__` is
/// compiled in as a flag, the restore's code comes as bytes, and `vis._outside` serves only a
/// plain Python).
const HEAVY: &str = "['typing', 're', 'pathlib', 'ast', 'enum', 'ipaddress', 'urllib.parse', 'contextlib', 'inspect', 'importlib.util', 'importlib.metadata', 'zlib', 'json', 'tempfile', '__future__', 'binascii', 'vis._outside']";

vistest!(the_prelude_start_imports_no_heavy_module, |env| {
    // A first worker fills Vis's caches (the signatures of the prelude's functions, computed
    // with `inspect`); a start finds them there from then on, and that start is checked.
    let mut first = env.runtime();
    assert_eq!(run(&env, &mut first, "1").output, "1\n");
    drop(first);
    let mut rt = env.runtime();
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
    // Paused while the prelude starts (nothing worth collecting), never for a block.
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "import gc\ngc.isenabled()");
    assert_eq!(out.output, "True\n");
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
    let workspace = env.workspace().to_string_lossy().into_owned();
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

/// The pids of live `vis worker` processes started for `workspace` (a zombie has no cmdline).
fn workers_of(workspace: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        if args.get(1) == Some(&&b"worker"[..]) && args.contains(&workspace.as_bytes()) {
            found.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}
