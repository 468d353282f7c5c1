//! What an untrusted workspace's own files can do before the user trusts it: its `.venv` and
//! workspace modules under `tests.run()`, its `AGENTS.md` and skills in the model's prompt,
//! and what `vis trust` and `vis chat` tell the user that trusting enables.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{run, TestEnv};
use vis::protocol::Status;

/// The Python the worker runs blocks with when there is no venv (what venvs are made from).
fn worker_python() -> PathBuf {
    let scratch = TestEnv::new();
    let mut rt = scratch.runtime();
    let out = run(&scratch, &mut rt, "import sys\nprint(sys.executable)");
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    PathBuf::from(out.output.trim())
}

/// A real `.venv` in the workspace (seeing the worker Python's packages, pytest among them)
/// whose `.pth` file logs that it ran, workspace files named like standard modules that log
/// their import, and a passing test. Returns the log's path.
fn plant_venv_and_shadow(env: &TestEnv, python: &Path) -> PathBuf {
    let ws = env.workspace();
    let log = ws.join("ran.log");
    let made = Command::new(python)
        .args(["-m", "venv", "--without-pip", "--system-site-packages"])
        .arg(ws.join(".venv"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let lib = ws.join(".venv/lib");
    let version = std::fs::read_dir(&lib).unwrap().next().unwrap().unwrap();
    std::fs::write(
        version.path().join("site-packages/evil.pth"),
        format!("import os; open({log:?}, 'a').write('pth\\n')\n"),
    )
    .unwrap();
    // Standard modules pytest imports while it starts (contextlib may already be loaded by
    // the interpreter's own start-up; the others are not).
    for module in ["contextlib", "json", "inspect", "textwrap", "dataclasses"] {
        std::fs::write(
            ws.join(format!("{module}.py")),
            format!("open({log:?}, 'a').write('workspace {module}\\n')\n"),
        )
        .unwrap();
    }
    std::fs::write(ws.join("test_ok.py"), "def test_ok():\n    assert True\n").unwrap();
    log
}

#[test]
fn tests_run_uses_an_untrusted_venv_not_at_all_and_says_which_python_it_used() {
    let python = worker_python();
    for trusted in [false, true] {
        let env = if trusted {
            TestEnv::new()
        } else {
            TestEnv::untrusted()
        };
        let log = plant_venv_and_shadow(&env, &python);
        let mut rt = env.runtime_with(|o| o.trusted = trusted, vec![]);
        let out = run(
            &env,
            &mut rt,
            "r = tests.run()\nprint(r)\nprint('interpreter:', r.interpreter)",
        );
        let o = &out.output;
        assert_eq!(out.status, Status::Ok, "{o}");
        assert!(o.starts_with("pytest: ok — 1 passed, 0 failed"), "{o}");
        let ran = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!ran.contains("workspace "), "trusted={trusted}: {ran}");
        let venv_python = env.workspace().join(".venv/bin/python");
        if trusted {
            assert!(
                o.contains(&format!("interpreter: {}\n", venv_python.display())),
                "{o}"
            );
            assert!(ran.contains("pth"), "the trusted venv's .pth ran: {ran}");
            assert!(!o.contains("not trusted"), "{o}");
        } else {
            assert!(
                o.contains(&format!("interpreter: {}\n", python.display())),
                "{o}"
            );
            assert!(
                o.contains(&format!(
                    "[ran with {}, not the workspace's venv ({}): the workspace is not trusted; `vis trust {}` lets tests.run() use it]",
                    python.display(),
                    venv_python.display(),
                    env.workspace().display()
                )),
                "{o}"
            );
            assert!(ran.is_empty(), "the untrusted workspace ran: {ran}");
        }
    }
}

#[test]
fn tests_run_names_the_interpreter_that_has_no_pytest() {
    let python = worker_python();
    let env = TestEnv::new();
    let ws = env.workspace();
    let made = Command::new(&python)
        .args(["-m", "venv", "--without-pip"])
        .arg(ws.join(".venv"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    std::fs::write(ws.join("test_ok.py"), "def test_ok():\n    assert True\n").unwrap();
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "tests.run()");
    assert_eq!(out.status, Status::Error, "{}", out.output);
    assert!(
        out.output.contains(&format!(
            "RuntimeError: pytest is not installed for {}; install it (pip install pytest) or add it to the workspace's .venv",
            ws.join(".venv/bin/python").display()
        )),
        "{}",
        out.output
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("test_ok.py")).unwrap(),
        "def test_ok():\n    assert True\n"
    );
}
