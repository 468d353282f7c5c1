//! Choosing the database from the command line: `--db`/`VIS_DB` with a SQLite path or a
//! PostgreSQL URL, unknown schemes refused, passwords never printed, and `vis store copy`
//! moving sessions between backends without changing a byte of what the model is sent.

use vis::providers::ProviderKind;

use crate::support::chat::{answer, calls};
use crate::support::fake_provider::FakeProvider;
use crate::support::postgres;
use crate::support::TestEnv;
use crate::vistest;

/// `vis --db DB ARGS` in this env.
fn vis_at(env: &TestEnv, db: &str, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["--db", db];
    all.extend_from_slice(args);
    env.vis_raw(&all)
}

/// Entries of the workspace (the commands' working directory) whose name has a colon.
fn colon_entries(env: &TestEnv) -> Vec<String> {
    std::fs::read_dir(env.workspace())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(':'))
        .collect()
}

vistest!(an_unknown_scheme_is_refused_and_creates_nothing, |env| {
    for given in [
        "mysql://db/vis",
        "sqlite://vis.db",
        "postgres:vis",
        "PostgreSQL:x",
    ] {
        let run = vis_at(&env, given, &["sessions", "list"]);
        assert_eq!(run.code, 2, "{given}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains(&format!("--db {given}")),
            "{given}: {}",
            run.stderr
        );
        assert!(run.stderr.contains("postgres://"), "{}", run.stderr);
        let exec = vis_at(&env, given, &["exec", "print(1)"]);
        assert_eq!(exec.code, 2, "{}", exec.stderr);
    }
    assert!(vis_at(&env, "mysql://db/vis", &["sessions", "list"])
        .stderr
        .contains("does not know the scheme `mysql://`"));
    // The environment variable is checked the same way.
    let mut cmd = std::process::Command::new(crate::support::vis_bin());
    let out = cmd
        .args(["sessions", "list"])
        .env("VIS_DB", "mysql://db/vis")
        .env("VIS_HOME", env.path().join("home"))
        .current_dir(env.workspace())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(colon_entries(&env).is_empty(), "{:?}", colon_entries(&env));
    assert!(!env.path().join("home").join("vis.db").exists());
});

vistest!(a_path_with_a_colon_in_it_is_still_a_path, |env| {
    let run = vis_at(&env, "dir:with:colons/vis.db", &["exec", "print(6 * 7)"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "42\n");
    assert!(env.workspace().join("dir:with:colons/vis.db").is_file());
});

vistest!(a_password_in_the_url_is_never_printed, |env| {
    let url = format!(
        "postgres://vis:hunter2@localhost/vis?host={}",
        env.path().join("no-server").display()
    );
    for args in [
        &["sessions", "list"][..],
        &["exec", "print(1)"],
        &["context", "s1"],
    ] {
        let run = vis_at(&env, &url, args);
        assert_eq!(run.code, 3, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr
                .contains("cannot connect to PostgreSQL at postgres://vis:***@localhost/vis"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("hunter2") && !run.stdout.contains("hunter2"));
    }
    assert!(colon_entries(&env).is_empty(), "{:?}", colon_entries(&env));
});

vistest!(
    sessions_copied_to_postgres_send_the_same_bytes_and_go_on_there,
    |env| {
        let fake = FakeProvider::start();
        let kind = ProviderKind::OpenAi;
        let base = fake.base_url(kind);
        let chat = |db: &str, extra: &[&str]| {
            let mut args = vec![
                "chat",
                "--provider",
                "openai",
                "--base-url",
                &base,
                "--model",
                "fake-model",
            ];
            args.extend_from_slice(extra);
            vis_at(&env, db, &args)
        };
        let sqlite = env.db().to_str().unwrap().to_string();
        fake.push(calls(
            kind,
            "a",
            &["def square(n):\n    return n * n\nprint(square(7))"],
        ));
        fake.push(answer(kind, "49."));
        fake.push(calls(kind, "b", &["print(square(8))"]));
        fake.push(answer(kind, "64."));
        let first = chat(&sqlite, &["-m", "square 7", "-m", "now 8"]);
        assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
        let id = env.newest_session();
        assert_eq!(env.exec("plain", "x = 1\nprint(x)").code, 0);

        let url = postgres::database();
        let copy = env.vis_raw(&["store", "copy", &sqlite, &url]);
        assert_eq!(copy.code, 0, "{}{}", copy.stdout, copy.stderr);
        assert!(
            copy.stdout.contains("copied 2 session(s)"),
            "{}",
            copy.stdout
        );
        assert!(copy.stdout.contains("3 turns"), "{}", copy.stdout);

        for view in [
            &["context", &id][..],
            &["context", &id, "--json"],
            &["sessions", "show", &id],
            &["sessions", "show", "plain"],
            &["sessions", "export", &id],
            &["sessions", "list"],
        ] {
            let before = vis_at(&env, &sqlite, view);
            let after = vis_at(&env, &url, view);
            assert_eq!(before.code, 0, "{view:?}: {}", before.stderr);
            assert_eq!(after.code, 0, "{view:?}: {}", after.stderr);
            assert_eq!(before.stdout, after.stdout, "{view:?}");
        }

        // Running the copy again copies nothing and changes nothing.
        let again = env.vis_raw(&["store", "copy", &sqlite, &url]);
        assert_eq!(again.code, 0, "{}", again.stderr);
        assert!(
            again.stdout.contains("copied 0 session(s)"),
            "{}",
            again.stdout
        );
        assert!(
            again.stdout.contains("2 session(s) were there already"),
            "{}",
            again.stdout
        );

        // The session goes on in PostgreSQL: its next request starts with the bytes the
        // SQLite one would have sent.
        let expected = vis_at(&env, &sqlite, &["context", &id, "--json"]).stdout;
        fake.push(calls(kind, "c", &["print(square(9))"]));
        fake.push(answer(kind, "81."));
        let third = chat(&url, &["--resume", &id, "-m", "now 9"]);
        assert_eq!(third.code, 0, "{}\n{}", third.stdout, third.stderr);
        let sent = &fake.requests()[4];
        let expected: serde_json::Value = serde_json::from_str(&expected).unwrap();
        let n = expected["messages"].as_array().unwrap().len();
        assert_eq!(
            sent.json()["messages"].as_array().unwrap()[..n],
            expected["messages"].as_array().unwrap()[..]
        );
        assert!(third.stdout.contains("81"), "{}", third.stdout);

        // A session that differs in the target is a conflict, reported, not overwritten.
        fake.push(answer(kind, "elsewhere."));
        let diverged = chat(&sqlite, &["--resume", &id, "-m", "elsewhere"]);
        assert_eq!(diverged.code, 0, "{}", diverged.stderr);
        let conflict = env.vis_raw(&["store", "copy", &sqlite, &url]);
        assert_eq!(conflict.code, 1, "{}", conflict.stdout);
        assert!(
            conflict.stdout.contains(&format!("session {id} is in")),
            "{}",
            conflict.stdout
        );
        assert!(
            conflict.stdout.contains("not copied"),
            "{}",
            conflict.stdout
        );

        // And back: PostgreSQL to a new SQLite file.
        let back = env.path().join("back.db");
        let back = back.to_str().unwrap();
        let reverse = env.vis_raw(&["store", "copy", &url, back]);
        assert_eq!(reverse.code, 0, "{}{}", reverse.stdout, reverse.stderr);
        for view in [&["context", &id, "--json"][..], &["sessions", "show", &id]] {
            assert_eq!(
                vis_at(&env, &url, view).stdout,
                vis_at(&env, back, view).stdout,
                "{view:?}"
            );
        }
    }
);

vistest!(vis_db_in_the_environment_chooses_postgres, |env| {
    let url = postgres::database();
    let out = std::process::Command::new(crate::support::vis_bin())
        .args(["exec", "--session", "e1", "print('on postgres')"])
        .env("VIS_DB", &url)
        .env("VIS_HOME", env.path().join("home"))
        .env("VIS_CONFIG_DIR", env.config_dir())
        .current_dir(env.workspace())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "on postgres\n");
    let list = vis_at(&env, &url, &["sessions", "list"]);
    assert!(list.stdout.contains("e1"), "{}", list.stdout);
    // Nothing went to a SQLite file.
    assert!(!env.path().join("home").join("vis.db").exists());
    assert!(colon_entries(&env).is_empty());
});
