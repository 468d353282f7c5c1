//! The PostgreSQL store under what a database server makes possible to get wrong: writers
//! numbering one session at once, a connection killed mid-transaction, the server restarting
//! during a write, a statement timeout, a newer schema, concurrent first starts. The contract
//! itself runs in `store::the_postgres_store_keeps_the_contract`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use vis::protocol::{TurnKind, TurnStatus};
use vis::store::{HistoryKind, NewHistoryItem, RequestRecord, Store, StoreError, ToolAnswer};

use crate::store::{def, iteration};
use crate::support::postgres::{self, database_name, Cluster};
use crate::support::wait_until;

fn open(url: &str) -> Box<Store> {
    Store::open(Path::new(url)).unwrap()
}

/// The same database through a pool of its own: as another process would reach it.
fn other_process(url: &str, name: &str) -> String {
    format!("{url}&application_name={name}")
}

/// A psql session (application_name `locker`) that runs `sql` and then sleeps inside the
/// same transaction, holding whatever locks `sql` took until it is terminated.
fn hold_lock(cluster: &Cluster, url: &str, sql: &str) -> Child {
    let child = Command::new(cluster.program("psql"))
        .env("PGAPPNAME", "locker")
        .args([
            "-h",
            cluster.socket_dir().to_str().unwrap(),
            "-U",
            "postgres",
        ])
        .args(["-d", &database_name(url), "-v", "ON_ERROR_STOP=1"])
        .arg("-c")
        .arg(format!("BEGIN; {sql}; SELECT pg_sleep(600); COMMIT;"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let db = database_name(url);
    assert!(
        wait_until(Duration::from_secs(60), || {
            cluster
            .psql(
                &db,
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'locker' AND wait_event = 'PgSleep'"
            )
            .trim()
            == "1"
        }),
        "the locker never took its lock"
    );
    child
}

/// Waits until a backend of `url`'s database waits for a lock; returns its pid.
fn blocked_backend(cluster: &Cluster, url: &str) -> String {
    let db = database_name(url);
    let mut pid = String::new();
    assert!(
        wait_until(Duration::from_secs(60), || {
            pid = cluster
                .psql(
                    &db,
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
                )
                .trim()
                .to_string();
            !pid.is_empty()
        }),
        "the store's call never waited for the lock"
    );
    pid
}

fn release(cluster: &Cluster, url: &str, mut locker: Child) {
    cluster.psql(
        &database_name(url),
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locker'",
    );
    let _ = locker.kill();
    let _ = locker.wait();
}

#[test]
fn writers_numbering_one_session_at_once_leave_no_gaps_or_duplicates() {
    let url = postgres::database();
    open(&url).ensure_session("s", &["/w".into()]).unwrap();
    const WRITERS: usize = 4;
    const TURNS: usize = 15;
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = other_process(&url, &format!("writer{w}"));
            std::thread::spawn(move || {
                let mut store = open(&url);
                for _ in 0..TURNS {
                    let turn = store.begin_turn("s", TurnKind::Chat, Some("go")).unwrap();
                    store
                        .append_history(
                            "s",
                            &NewHistoryItem {
                                turn,
                                kind: HistoryKind::User,
                                body: "go",
                                tokens: 1,
                                meta: None,
                            },
                        )
                        .unwrap();
                    for i in 1..=2 {
                        let set = [def(&format!("f{w}"))];
                        store
                            .finish_iteration(
                                &iteration("s", turn, i, &set, &[]),
                                Some(&ToolAnswer {
                                    call_id: format!("c{turn}-{i}"),
                                    tokens: 1,
                                    images: Vec::new(),
                                }),
                            )
                            .unwrap();
                    }
                    store
                        .record_request(
                            "s",
                            &RequestRecord {
                                turn,
                                provider: "p".into(),
                                model: "m".into(),
                                ..Default::default()
                            },
                        )
                        .unwrap();
                    store.end_turn("s", turn, TurnStatus::Done).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let store = open(&url);
    let total = (WRITERS * TURNS) as i64;
    let turns: Vec<i64> = store.turns("s").unwrap().iter().map(|t| t.turn).collect();
    assert_eq!(turns, (1..=total).collect::<Vec<_>>());
    let history: Vec<i64> = store.history("s").unwrap().iter().map(|h| h.seq).collect();
    assert_eq!(history, (1..=total * 3).collect::<Vec<_>>());
    let requests: Vec<i64> = store.requests("s").unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(requests, (1..=total).collect::<Vec<_>>());
    let iterations = store.iterations("s").unwrap();
    assert_eq!(iterations.len() as i64, total * 2);
    let keys: BTreeSet<(i64, i64)> = iterations.iter().map(|i| (i.turn, i.iteration)).collect();
    assert_eq!(keys.len() as i64, total * 2, "no iteration twice");
    // Every tool result points at its own iteration.
    for item in store.history("s").unwrap() {
        if item.kind == HistoryKind::ToolResult {
            assert_eq!(item.body, "out\n");
        }
    }
    assert_eq!(store.load_defs("s").unwrap().len(), WRITERS);
}

#[test]
fn a_connection_killed_mid_transaction_writes_nothing_and_the_next_call_works() {
    let cluster = postgres::cluster();
    let url = postgres::database();
    let mut store = open(&url);
    store.ensure_session("s", &["/w".into()]).unwrap();
    let turn = store.begin_turn("s", TurnKind::Exec, None).unwrap();
    store
        .finish_iteration(&iteration("s", turn, 1, &[def("a")], &[]), None)
        .unwrap();
    // The upsert of `a` waits for the locker after the iteration's row is written.
    let locker = hold_lock(
        cluster,
        &url,
        "SELECT 1 FROM defs WHERE session_id = 's' AND name = 'a' FOR UPDATE",
    );
    let writer = std::thread::spawn(move || {
        let result = store.finish_iteration(&iteration("s", turn, 2, &[def("a")], &[]), None);
        (store, result)
    });
    let pid = blocked_backend(cluster, &url);
    cluster.psql(
        &database_name(&url),
        &format!("SELECT pg_terminate_backend({pid})"),
    );
    let (mut store, result) = writer.join().unwrap();
    let err = result.unwrap_err();
    assert!(matches!(err, StoreError::ConnectionLost(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("connection to PostgreSQL was lost"),
        "{message}"
    );
    assert!(message.contains("nothing of it was written"), "{message}");
    release(cluster, &url, locker);
    // Nothing of the killed transaction is there: not its iteration, not its change log.
    assert_eq!(store.iterations("s").unwrap().len(), 1);
    let (set, _) = store.def_changes_of("s", turn, 2).unwrap();
    assert!(set.is_empty());
    // The pool recovers: the same call works now.
    store
        .finish_iteration(&iteration("s", turn, 2, &[def("a")], &[]), None)
        .unwrap();
    assert_eq!(store.iterations("s").unwrap().len(), 2);
    assert_eq!(
        store.begin_turn("s", TurnKind::Exec, None).unwrap(),
        turn + 1
    );
}

#[test]
fn a_server_restart_during_a_write_is_a_clear_error_then_the_store_recovers() {
    // A cluster of this test's own: the restart must not disturb the others.
    let cluster = postgres::private_cluster("restart");
    let url = cluster.database();
    let mut store = open(&url);
    store.ensure_session("s", &["/w".into()]).unwrap();
    let turn = store.begin_turn("s", TurnKind::Chat, Some("hi")).unwrap();
    store
        .finish_iteration(&iteration("s", turn, 1, &[def("a")], &[]), None)
        .unwrap();
    let locker = hold_lock(
        &cluster,
        &url,
        "SELECT 1 FROM defs WHERE session_id = 's' AND name = 'a' FOR UPDATE",
    );
    let writer = std::thread::spawn(move || {
        let answer = ToolAnswer {
            call_id: "c2".into(),
            tokens: 1,
            images: Vec::new(),
        };
        let result =
            store.finish_iteration(&iteration("s", turn, 2, &[def("a")], &[]), Some(&answer));
        (store, result)
    });
    blocked_backend(&cluster, &url);
    cluster.restart();
    let (mut store, result) = writer.join().unwrap();
    let err = result.unwrap_err();
    assert!(matches!(err, StoreError::ConnectionLost(_)), "{err:?}");
    release(&cluster, &url, locker);
    // Every pooled connection died with the server; the next calls get fresh ones.
    assert_eq!(
        store.iterations("s").unwrap().len(),
        1,
        "nothing half-written"
    );
    assert!(store.history("s").unwrap().is_empty());
    let seq = store
        .finish_iteration(
            &iteration("s", turn, 2, &[def("a")], &[]),
            Some(&ToolAnswer {
                call_id: "c2".into(),
                tokens: 1,
                images: Vec::new(),
            }),
        )
        .unwrap();
    assert_eq!(seq, Some(1));
    assert_eq!(store.iterations("s").unwrap().len(), 2);
}

#[test]
fn a_statement_timeout_is_a_clear_error_that_names_it_and_writes_nothing() {
    let cluster = postgres::cluster();
    let base = postgres::database();
    open(&base).ensure_session("s", &["/w".into()]).unwrap();
    // 300 ms for any statement, as a team would set it in the URL.
    let url = format!("{base}&options=-c%20statement_timeout%3D300");
    let mut store = open(&url);
    assert_eq!(store.begin_turn("s", TurnKind::Exec, None).unwrap(), 1);
    let locker = hold_lock(
        cluster,
        &base,
        "SELECT 1 FROM sessions WHERE id = 's' FOR UPDATE",
    );
    let err = store.begin_turn("s", TurnKind::Exec, None).unwrap_err();
    assert!(matches!(err, StoreError::StatementTimeout(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("statement_timeout"), "{message}");
    assert!(message.contains("nothing of it was written"), "{message}");
    release(cluster, &base, locker);
    assert_eq!(store.turns("s").unwrap().len(), 1);
    assert_eq!(
        store.begin_turn("s", TurnKind::Exec, None).unwrap(),
        2,
        "the cancelled turn left no gap"
    );
}

#[test]
fn a_database_from_a_newer_vis_is_refused_and_left_alone() {
    let cluster = postgres::cluster();
    let url = postgres::database();
    open(&url).ensure_session("s", &["/w".into()]).unwrap();
    let db = database_name(&url);
    cluster.psql(
        &db,
        "UPDATE vis_meta SET value = '999' WHERE key = 'schema_version'",
    );
    let err = Store::open(Path::new(&url)).err().unwrap();
    assert!(
        matches!(err, StoreError::TooNew { found: 999, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("schema version 999, newer than this vis understands"),
        "{err}"
    );
    assert_eq!(
        cluster.psql(&db, "SELECT count(*) FROM sessions").trim(),
        "1"
    );
}

#[test]
fn a_database_with_someone_elses_sessions_table_is_refused() {
    let cluster = postgres::cluster();
    let url = postgres::database();
    let db = database_name(&url);
    cluster.psql(
        &db,
        "CREATE TABLE sessions (id INT); INSERT INTO sessions VALUES (7)",
    );
    let err = Store::open(Path::new(&url)).err().unwrap();
    assert!(err.to_string().contains("not a Vis database"), "{err}");
    assert_eq!(cluster.psql(&db, "SELECT id FROM sessions").trim(), "7");
}

#[test]
fn processes_starting_on_a_new_database_at_once_migrate_it_once() {
    let url = postgres::database();
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let url = other_process(&url, &format!("starter{i}"));
            std::thread::spawn(move || {
                let store = Store::open(Path::new(&url))?;
                store.ensure_session(&format!("s{i}"), &["/w".to_string()])?;
                store.schema_version()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap(), vis::store::latest_version());
    }
    assert_eq!(open(&url).list_sessions().unwrap().len(), 6);
}

#[test]
fn an_unreachable_server_is_a_clear_error_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "postgres://vis:hunter2@localhost/vis?host={}",
        dir.path().display()
    );
    let err = Store::open(Path::new(&url)).err().unwrap();
    let message = err.to_string();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert!(
        message.contains("cannot connect to PostgreSQL at postgres://vis:***@localhost/vis"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}
