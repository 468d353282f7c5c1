//! cat, grep and patch through the real worker: wired into the prelude, confined to the
//! session's workspace, able to read saved outputs.

use vis::protocol::Status;

use crate::support::run;
use crate::vistest;

vistest!(read_then_edit_by_address_in_a_block, |env| {
    std::fs::write(
        env.workspace().join("calc.py"),
        "def add(a, b):\n    return a - b\n\nprint(add(2, 3))\n",
    )
    .unwrap();
    let mut rt = env.runtime();
    let shown = run(&env, &mut rt, "cat('calc.py')");
    assert_eq!(shown.status, Status::Ok, "{}", shown.output);
    assert!(
        shown.output.contains("|    return a - b\n"),
        "{}",
        shown.output
    );
    let found = run(
        &env,
        &mut rt,
        "g = grep('return', '.')\nprint(len(g.matches))\ng",
    );
    assert!(found.output.starts_with("1\n"), "{}", found.output);
    // The address grep printed is the one cat printed for the same line.
    let addr = run(
        &env,
        &mut rt,
        "a = g.matches[0].address; a == cat('calc.py').lines[1][1], a",
    );
    assert!(addr.output.starts_with("(True, '2:"), "{}", addr.output);
    let patched = run(&env, &mut rt, "patch('calc.py', [(a, '    return a + b')])");
    assert_eq!(patched.status, Status::Ok, "{}", patched.output);
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("calc.py")).unwrap(),
        "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n"
    );
    // The old address is now stale: the batch is rejected and the file unchanged.
    let stale = run(&env, &mut rt, "patch('calc.py', [(a, '    return 0')])");
    assert_eq!(stale.status, Status::Error);
    assert!(
        stale.output.contains("PatchError") || stale.output.contains("AddressError"),
        "{}",
        stale.output
    );
    assert!(std::fs::read_to_string(env.workspace().join("calc.py"))
        .unwrap()
        .contains("a + b"));
    let new_syntax_error = run(
        &env,
        &mut rt,
        "patch('calc.py', [patch.insert_at_end('def broken(:')])",
    );
    assert_eq!(new_syntax_error.status, Status::Error);
    assert!(
        new_syntax_error.output.contains("syntax"),
        "{}",
        new_syntax_error.output
    );
});

vistest!(text_tools_refuse_paths_outside_the_workspace, |env| {
    // Outside `/tmp`, whose host copy the worker does not even see.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let outside = dir.path().join("secret.txt");
    std::fs::write(&outside, "secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, env.workspace().join("link.txt")).unwrap();
    let mut rt = env.runtime();
    for code in [
        format!("cat({:?})", outside.display().to_string()),
        "cat('link.txt')".into(),
        "cat('../secret.txt')".into(),
    ] {
        let out = run(&env, &mut rt, &code);
        assert_eq!(out.status, Status::Error, "{code}");
        assert!(
            out.output.contains("PermissionError") && out.output.contains("outside"),
            "{code}: {}",
            out.output
        );
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
});

vistest!(cut_outputs_can_be_read_back_but_not_patched, |env| {
    let mut rt = env.runtime();
    let big = run(&env, &mut rt, "for i in range(30000): print('row', i)");
    let artifact = big.artifact.expect("artifact");
    let found = run(&env, &mut rt, &format!("grep('row 15000$', {artifact:?})"));
    assert_eq!(found.status, Status::Ok, "{}", found.output);
    assert!(found.output.contains("|row 15000\n"), "{}", found.output);
    let shown = run(&env, &mut rt, &format!("cat({artifact:?}, 2, 3)"));
    assert!(shown.output.contains("|row 1\n"), "{}", shown.output);
    let refused = run(
        &env,
        &mut rt,
        &format!("patch({artifact:?}, [patch.insert_at_start('x')])"),
    );
    assert_eq!(refused.status, Status::Error);
    assert!(
        refused.output.contains("PermissionError"),
        "{}",
        refused.output
    );
});
