//! The worker's interpreter uses the standard library of the libpython it loaded, whatever
//! `python3` the `PATH` names first: launched with a minimal environment (as MCP clients start
//! servers), the system's `/usr/bin/python3` used to lend the worker its standard library,
//! whose extension modules (`_socket`) belong to another build. The home is given to the
//! interpreter itself, never through `PYTHONHOME` in the environment blocks' commands inherit.

use std::path::PathBuf;
use std::process::Command;

use crate::support::{mcp, TestEnv};
use crate::vistest;

/// `vis exec --session s CODE` with nothing in the environment but `vars` (and the test's
/// own `VIS_HOME` and `VIS_CONFIG_DIR`).
fn exec_in(env: &TestEnv, vars: &[(&str, &str)], code: &str) -> (i32, String, String) {
    let mut cmd = env.command(&["exec", "--session", "s", code]);
    cmd.env_clear()
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .envs(vars.iter().copied());
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The worker's Python version (`3.11`), from a worker started the usual way.
fn worker_python_version(env: &TestEnv) -> String {
    let run = env.exec("v", "import sys\nprint('%d.%d' % sys.version_info[:2])");
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    run.stdout.lines().last().unwrap().to_string()
}

/// A `python3` on a directory first in `PATH`, beside a standard library of the worker's
/// version that is no standard library (only the landmark CPython searches for, `os.py`): an
/// interpreter that took its home from `PATH` cannot start with it. It lies in the workspace,
/// which the worker's filesystem view shows (the test's temp dir is not in it).
fn decoy_python(env: &TestEnv, version: &str) -> PathBuf {
    let prefix = env.workspace().join("decoy");
    let stdlib = prefix.join("lib").join(format!("python{version}"));
    std::fs::create_dir_all(&stdlib).unwrap();
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::write(
        stdlib.join("os.py"),
        "raise ImportError('the decoy stdlib')\n",
    )
    .unwrap();
    let python = prefix.join("bin/python3");
    std::fs::write(&python, "#!/bin/sh\necho decoy python\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    prefix.join("bin")
}

/// Checks, in a block, that the standard library is the one beside the loaded libpython (the
/// `libpython` mapped into the worker, read from `/proc/self/maps`) and that the extension
/// modules load; prints `same-home True True` on success.
const SAME_HOME: &str = r#"import os, socket, ssl, sqlite3, sys
lib = next(line.split()[-1] for line in open('/proc/self/maps') if '/libpython' in line)
prefix = os.path.realpath(sys.prefix) + os.sep
print('same-home', os.path.realpath(lib).startswith(prefix), os.path.realpath(os.__file__).startswith(prefix))
print('socket', socket.socket(socket.AF_INET, socket.SOCK_STREAM).family == socket.AF_INET)
print('executable', os.path.realpath(sys.executable).startswith(prefix))
r = sh('echo "home=[${PYTHONHOME-unset}]"')
print(r.output.strip())
"#;

vistest!(
    a_minimal_path_still_finds_the_loaded_interpreters_stdlib,
    |env| {
        let version = worker_python_version(&env);
        let decoy = decoy_python(&env, &version);
        let path = format!("{}:/usr/bin:/bin", decoy.display());
        let workspace = env.workspace();
        let home = workspace.to_string_lossy().into_owned();
        let (code, stdout, stderr) = exec_in(&env, &[("PATH", &path), ("HOME", &home)], SAME_HOME);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(stdout.contains("same-home True True\n"), "{stdout}{stderr}");
        assert!(stdout.contains("socket True\n"), "{stdout}");
        assert!(stdout.contains("executable True\n"), "{stdout}");
        // Nothing was put into the environment a block's commands inherit.
        assert!(stdout.contains("home=[unset]"), "{stdout}");
        // A block's `python3` is still the user's (the first on PATH), not the worker's.
        let (code, stdout, _) = exec_in(
            &env,
            &[("PATH", &path), ("HOME", &home)],
            "print(sh('python3').output.strip())",
        );
        assert_eq!(code, 0, "{stdout}");
        assert!(stdout.ends_with("decoy python\n"), "{stdout}");
    }
);

vistest!(
    the_system_path_alone_finds_the_loaded_interpreters_stdlib,
    |env| {
        // The reported case: `env -i PATH=/usr/bin:/bin HOME=… vis exec 'import socket'`.
        let home = env.workspace().to_string_lossy().into_owned();
        let (code, stdout, stderr) = exec_in(
            &env,
            &[("PATH", "/usr/bin:/bin"), ("HOME", &home)],
            SAME_HOME,
        );
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(stdout.contains("same-home True True\n"), "{stdout}{stderr}");
        assert!(stdout.contains("home=[unset]"), "{stdout}");
    }
);

vistest!(
    a_pythonhome_of_another_python_is_passed_on_but_not_used,
    |env| {
        // The user's PYTHONHOME is theirs: their commands get it as they set it. One without this
        // version's standard library would stop the worker's interpreter; it is not used there.
        let home = env.workspace().to_string_lossy().into_owned();
        let elsewhere = env.workspace().join("other-python");
        std::fs::create_dir_all(elsewhere.join("lib/python2.7")).unwrap();
        std::fs::write(elsewhere.join("lib/python2.7/os.py"), "").unwrap();
        let elsewhere = elsewhere.to_string_lossy().into_owned();
        let (code, stdout, stderr) = exec_in(
            &env,
            &[
                ("PATH", "/usr/bin:/bin"),
                ("HOME", &home),
                ("PYTHONHOME", &elsewhere),
            ],
            SAME_HOME,
        );
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(stdout.contains("same-home True True\n"), "{stdout}{stderr}");
        assert!(stdout.contains(&format!("home=[{elsewhere}]")), "{stdout}");
    }
);

vistest!(
    vis_mcp_started_with_a_minimal_environment_runs_a_block,
    |env| {
        // An MCP client starts its server with a few variables only (the SDK's default: HOME,
        // PATH, USER…); the client here runs with PATH=/usr/bin:/bin and passes that on.
        let version = worker_python_version(&env);
        let decoy = decoy_python(&env, &version);
        let client = mcp::python();
        let mut cmd = Command::new(&client);
        cmd.env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", decoy.display()))
            .env("HOME", env.workspace())
            .env("VIS_HOME", env.path().join("home"))
            .env("VIS_CONFIG_DIR", env.config_dir());
        let got = mcp::drive_with(
        &env,
        cmd,
        &[],
        "r = await call('import socket, ssl\\nprint(socket.gethostname() != \"\", ssl.OPENSSL_VERSION != \"\")')\nout('r', r)",
    );
        assert_eq!(got["r"]["is_error"], false, "{got}");
        assert!(
            got["r"]["text"].as_str().unwrap().contains("True True"),
            "{got}"
        );
    }
);
