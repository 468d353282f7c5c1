//! The session store under bad conditions: corrupt, foreign, unwritable, concurrent.

use std::collections::BTreeSet;

use rusqlite::Connection;

use crate::vistest;

fn sidecars_absent(db: &std::path::Path) -> bool {
    let wal = db.with_extension("db-wal");
    let shm = db.with_extension("db-shm");
    !wal.exists() && !shm.exists()
}

vistest!(
    a_corrupt_database_is_refused_and_left_byte_identical,
    |env| {
        let garbage: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(env.db(), &garbage).unwrap();
        let run = env.exec("s", "print(1)");
        assert_eq!(run.code, 2);
        assert!(
            run.stderr.contains("is not readable as SQLite"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("left untouched"), "{}", run.stderr);
        assert_eq!(run.stdout, "");
        assert_eq!(std::fs::read(env.db()).unwrap(), garbage);
        assert!(sidecars_absent(&env.db()));
        let list = env.vis(&["sessions", "list"]);
        assert_eq!(list.code, 2);
        assert_eq!(std::fs::read(env.db()).unwrap(), garbage);
    }
);

vistest!(a_foreign_sqlite_database_is_not_touched, |env| {
    {
        let conn = Connection::open(env.db()).unwrap();
        conn.execute_batch(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY); INSERT INTO customers VALUES (1);",
        )
        .unwrap();
    }
    let before = std::fs::read(env.db()).unwrap();
    let run = env.exec("s", "print(1)");
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("not a Vis database"), "{}", run.stderr);
    assert_eq!(std::fs::read(env.db()).unwrap(), before);
});

vistest!(a_database_from_a_newer_vis_is_refused, |env| {
    assert_eq!(env.exec("s", "1").code, 0);
    {
        let conn = Connection::open(env.db()).unwrap();
        conn.execute_batch("PRAGMA user_version = 999").unwrap();
    }
    let run = env.exec("s", "1");
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("schema version 999, newer than this vis understands"),
        "{}",
        run.stderr
    );
});

vistest!(an_unwritable_database_location_is_a_clear_error, |env| {
    // A regular file where a directory should be: the database cannot be created.
    let blocker = env.path().join("blocker");
    std::fs::write(&blocker, "not a dir").unwrap();
    let db = blocker.join("vis.db");
    let run = env.vis_raw(&["--db", db.to_str().unwrap(), "exec", "1"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("cannot write the database"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--db PATH"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "not a dir");
    // A directory given as the database.
    let run = env.vis_raw(&["--db", env.path().to_str().unwrap(), "exec", "1"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("it is a directory"), "{}", run.stderr);
    // A read-only directory (only meaningful when not running as root).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let ro = env.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        let run = env.vis_raw(&["--db", ro.join("vis.db").to_str().unwrap(), "exec", "1"]);
        assert_eq!(run.code, 2);
        assert!(
            run.stderr.contains("cannot write the database"),
            "{}",
            run.stderr
        );
    }
});

vistest!(
    concurrent_execs_on_one_session_number_turns_without_gaps,
    |env| {
        assert_eq!(env.exec("shared", "1").code, 0);
        let ws = env.workspace();
        let children: Vec<_> = (0..4)
            .map(|i| {
                env.command(&[
                    "exec",
                    "--session",
                    "shared",
                    "--workspace",
                    ws.to_str().unwrap(),
                    &format!("import time; time.sleep(0.2); print({i})"),
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        let conn = Connection::open(env.db()).unwrap();
        let turns: Vec<i64> = conn
            .prepare("SELECT turn FROM iterations WHERE session_id = 'shared' ORDER BY turn")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(turns, [1, 2, 3, 4, 5]);
        let outputs: BTreeSet<String> = conn
            .prepare("SELECT output FROM iterations WHERE session_id = 'shared' AND turn > 1")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            outputs,
            ["0\n", "1\n", "2\n", "3\n"]
                .iter()
                .map(|s| s.to_string())
                .collect()
        );
        let journal: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(journal, "wal");
    }
);

vistest!(
    each_completed_iteration_is_in_the_database_with_its_status,
    |env| {
        env.exec("s", "print('a')");
        env.vis(&[
            "exec",
            "--session",
            "s",
            "--timeout",
            "0.2",
            "while True: pass",
        ]);
        env.exec("s", "import os; os._exit(1)");
        let conn = Connection::open(env.db()).unwrap();
        let rows: Vec<(String, Option<String>)> = conn
            .prepare("SELECT status, worker_exit FROM iterations ORDER BY turn")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            rows,
            [
                ("ok".into(), None),
                ("timeout".into(), None),
                ("crashed".into(), Some("exited with code 1".into()))
            ]
        );
    }
);
