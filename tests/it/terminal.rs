//! What the command line lets reach a terminal: crafted arguments, paths and stored text go
//! through the one escaper in every command (clap's own messages too), bidi controls and
//! invisible characters included; JSON keeps its value with those characters as `\u`
//! escapes; and a reader that goes away ends a command quietly, as SIGPIPE ends `cat`.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use crate::support::{Run, TestEnv};
use crate::vistest;

/// Terminal escapes (retitle, clear), a Trojan Source override and isolate, zero-width
/// characters and an invisible tag character.
const CRAFTED: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}evil\u{2066}x\u{200b}\u{feff}\u{e0041}";
/// How `CRAFTED` is shown.
const SHOWN: &str = "\\x1b]0;pwned\\x07\\x1b[2J\\u{202e}evil\\u{2066}x\\u{200b}\\u{feff}\\u{e0041}";

/// `text` has none of `CRAFTED`'s characters as they are.
fn assert_safe(what: &str, text: &str) {
    for c in CRAFTED.chars().filter(|c| !c.is_ascii_graphic()) {
        assert!(!text.contains(c), "{what}: a raw {c:?} in {text:?}");
    }
}

fn with_env(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> Run {
    let mut cmd = env.command(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap().into()
}

vistest!(crafted_arguments_are_escaped_in_every_message, |env| {
    let missing = env.path().join(format!("no-{CRAFTED}"));
    let missing = missing.to_str().unwrap();
    // Arguments, environment, and what the message is about.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        // clap's own errors quote the argument.
        (&[CRAFTED], &[], "unrecognized subcommand"),
        (&["sessions", CRAFTED], &[], "unrecognized subcommand"),
        (&["exec", "--timeout", CRAFTED, "1"], &[], "--timeout"),
        (&["catalog", "--budget", CRAFTED], &[], "not a whole number"),
        // and an environment value.
        (&["exec", "1"], &[("VIS_TIMEOUT", CRAFTED)], "VIS_TIMEOUT"),
        // Our usage errors quote session ids and paths.
        (&["sessions", "show", CRAFTED], &[], "no session"),
        (&["context", CRAFTED], &[], "session id"),
        (
            &["exec", "--session", "s", "--workspace", missing, "1"],
            &[],
            "no-",
        ),
        (&["trust", missing], &[], "no-"),
    ];
    for (args, vars, says) in cases {
        let run = with_env(&env, args, vars);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(SHOWN), "{args:?}: {}", run.stderr);
        assert_safe(&format!("{args:?}"), &run.stderr);
        assert_eq!(run.stdout, "", "{args:?}");
    }
    // Help shows the environment's values: escaped too, on standard output, status 0.
    let help = with_env(&env, &["chat", "--help"], &[("VIS_MODEL", CRAFTED)]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    assert!(
        help.stdout.contains(&format!("[env: VIS_MODEL={SHOWN}]")),
        "{}",
        help.stdout
    );
    assert_safe("--help", &help.stdout);
    // An argument that is not UTF-8 is refused without its bytes reaching the terminal.
    use std::os::unix::ffi::OsStrExt;
    let out = env
        .command(&["sessions", "show"])
        .arg(std::ffi::OsStr::from_bytes(b"\xff\x1b]0;pwned\x07"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !out.stderr.contains(&0x1b),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
});

vistest!(
    workspace_paths_and_stored_text_are_escaped_in_every_command,
    |env| {
        let ws = env.workspace().join(format!("ws-{CRAFTED}"));
        std::fs::create_dir(&ws).unwrap();
        let ws_arg = ws.to_str().unwrap();
        // JSON strings are Python strings (ESC and BEL as \u escapes, the rest raw).
        let literal = |text: &str| serde_json::to_string(text).unwrap();
        let code = format!(
            "def f():\n    {}\n    return 1\nlabel = {}\nprint(label)",
            literal(&format!("doc {CRAFTED}")),
            literal(CRAFTED)
        );
        let run = env.vis(&["exec", "--session", "s", "--workspace", ws_arg, &code]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        // Into a pipe `vis exec` prints exactly what the model got (the raw bytes).
        assert_eq!(run.stdout, format!("{CRAFTED}\n"));
        for args in [
            &["sessions", "list"][..],
            &["sessions"],
            &["sessions", "show", "s"],
            &["trust", "--list"],
            &["trust", ws_arg],
            &["mcp", "list", ws_arg],
        ] {
            let run = env.vis(args);
            assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
            assert_safe(&format!("{args:?}"), &run.stdout);
            assert_safe(&format!("{args:?}"), &run.stderr);
        }
        let list = env.vis(&["sessions", "list"]).stdout;
        assert!(list.contains(&format!("ws-{SHOWN}")), "{list}");
        let show = env.vis(&["sessions", "show", "s"]).stdout;
        for shown in [
            format!("  workspace {}\n", ws.display()).replace(CRAFTED, SHOWN),
            "    > label = \"\\u001b]0;pwned\\u0007\\u001b[2J\\u{202e}evil".to_string(),
            format!("    | {SHOWN}\n"),
            format!("  def f()  — doc {SHOWN}\n"),
        ] {
            assert!(show.contains(&shown), "{shown:?} not in\n{show}");
        }
        // JSON: the same value, with those characters as \u escapes.
        let export = env.vis(&["sessions", "export", "s"]);
        assert_safe("export", &export.stdout);
        let v: serde_json::Value = serde_json::from_str(&export.stdout).unwrap();
        assert_eq!(v["iterations"][0]["output"], format!("{CRAFTED}\n"));
        assert_eq!(v["session"]["workspace_roots"][0], ws_arg);
    }
);

/// Runs `vis args` with its standard output a pipe whose reader is already gone, so every
/// write fails; returns how it ended and its standard error.
fn with_reader_gone(env: &TestEnv, args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = env
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

vistest!(a_reader_that_goes_away_ends_a_command_quietly, |env| {
    // More than a pipe holds (64 KiB), so the writes cannot all succeed before the reader goes.
    let code = "x = 1\n".repeat(40_000);
    assert_eq!(env.exec_stdin("big", code.as_bytes()).code, 0);
    for args in [
        &["sessions", "show", "big"][..],
        &["sessions", "export", "big"],
        &[
            "exec",
            "--session",
            "big",
            "--output-limit",
            "1000000",
            "print('y' * 300_000)",
        ],
    ] {
        let (status, stderr) = with_reader_gone(&env, args);
        // Ended as by SIGPIPE, as `cat` is (no "failed printing to stdout" panic, no 101).
        assert_eq!(
            status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {status:?} {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
    // The block whose output found no reader was recorded all the same.
    let show = env.vis(&["sessions", "show", "big"]).stdout;
    assert!(
        show.contains("t2/i1  ok"),
        "{}",
        &show[..show.len().min(300)]
    );
    // In a shell pipeline: the status a shell shows for SIGPIPE.
    let db = env.db();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#""$0" --db "$1" sessions show big | head -n 1; echo "status ${PIPESTATUS[0]}""#)
        .arg(crate::support::vis_bin())
        .arg(&db)
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "session big\nstatus 141\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
});
