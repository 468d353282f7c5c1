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
        assert_eq!(run.code, 3, "{}", run.stderr);
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
        assert_eq!(list.code, 3);
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
    assert_eq!(run.code, 3, "{}", run.stderr);
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
    assert_eq!(run.code, 3, "{}", run.stderr);
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
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot write the database"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--db PATH"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "not a dir");
    // A directory given as the database.
    let run = env.vis_raw(&["--db", env.path().to_str().unwrap(), "exec", "1"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("it is a directory"), "{}", run.stderr);
    // A read-only directory (only meaningful when not running as root).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let ro = env.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        let run = env.vis_raw(&["--db", ro.join("vis.db").to_str().unwrap(), "exec", "1"]);
        assert_eq!(run.code, 3, "{}", run.stderr);
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

// ---- The store interface's contract, checked through `dyn SessionStore` ----
//
// Every backend must pass `contract`; a PostgreSQL backend would add one line per test below.

use vis::catalog::{render_catalog, Manifest};
use vis::protocol::{
    FoldSpan, IterationStatus, Measurement, PersistedDef, Status, TurnKind, TurnStatus,
};
use vis::store::{
    ChatPrefix, FoldRow, HistoryKind, IterationRecord, NewHistoryItem, RequestRecord, Store,
    StoreError, ToolAnswer,
};

pub(crate) fn def(name: &str) -> PersistedDef {
    PersistedDef {
        name: name.into(),
        kind: "function".into(),
        source: format!("def {name}(): pass\n"),
        signature: format!("def {name}()"),
        doc: String::new(),
    }
}

pub(crate) fn iteration<'a>(
    session: &'a str,
    turn: i64,
    iteration: i64,
    set: &'a [PersistedDef],
    deleted: &'a [String],
) -> IterationRecord<'a> {
    IterationRecord {
        session_id: session,
        turn,
        iteration,
        code: "pass",
        output: "out\n",
        status: IterationStatus::Ended(Status::Ok),
        started_at: vis::store::now_millis(),
        duration_ms: 1,
        exec_us: 1,
        artifact: None,
        worker_exit: None,
        defs_set: set,
        defs_deleted: deleted,
    }
}

/// What every backend keeps (`vis::store`'s trait docs), run against each.
pub(crate) fn contract(store: &mut Store) {
    // Sessions.
    assert!(store.session("s").unwrap().is_none());
    assert!(matches!(
        store.require_session("s"),
        Err(StoreError::UnknownSession(_))
    ));
    let row = store.ensure_session("s", &["/w".into()]).unwrap();
    let again = store.ensure_session("s", &["/other".into()]).unwrap();
    assert_eq!(
        row.workspace_roots, again.workspace_roots,
        "ensure keeps the first"
    );
    store.set_workspace_roots("s", &["/moved".into()]).unwrap();
    assert_eq!(
        store.require_session("s").unwrap().workspace_roots,
        ["/moved"]
    );
    let now = vis::store::now_millis();
    assert!(
        (now - row.created_at).abs() < 60_000,
        "milliseconds: {}",
        row.created_at
    );

    // Turns and iterations: numbers without gaps; definitions in definition order.
    let t1 = store.begin_turn("s", TurnKind::Exec, None).unwrap();
    assert_eq!(t1, 1);
    assert_eq!(store.next_iteration("s", t1).unwrap(), 1);
    store
        .begin_iteration("s", t1, 1, "def a(): pass", now)
        .unwrap();
    assert_eq!(
        store.iterations("s").unwrap()[0].status,
        IterationStatus::Running
    );
    // Beginning a running iteration again keeps the one row.
    store.begin_iteration("s", t1, 1, "code", 0).unwrap();
    assert_eq!(store.iterations("s").unwrap().len(), 1);
    store
        .finish_iteration(&iteration("s", t1, 1, &[def("a"), def("b")], &[]), None)
        .unwrap();
    assert_eq!(store.next_iteration("s", t1).unwrap(), 2);
    store.end_turn("s", t1, TurnStatus::Done).unwrap();
    let t2 = store.begin_turn("s", TurnKind::Chat, Some("hi")).unwrap();
    assert_eq!(t2, 2);
    // Finishing an iteration that was never begun records it whole.
    store
        .finish_iteration(
            &iteration("s", t2, 1, &[def("a")], &["b".to_string()]),
            None,
        )
        .unwrap();
    let names: Vec<_> = store
        .load_defs("s")
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, ["a"]);
    let its = store.iterations("s").unwrap();
    assert_eq!(its.len(), 2);
    assert_eq!(
        (its[0].status.as_str(), its[0].output.as_str()),
        ("ok", "out\n")
    );
    // A turn this live process owns is not dangling.
    assert!(store.running_turns("s").unwrap().is_empty());
    assert_eq!(store.close_dangling_turns("s").unwrap(), 0);
    store.end_turn("s", t2, TurnStatus::Interrupted).unwrap();
    let turns = store.turns("s").unwrap();
    assert_eq!(
        turns.iter().map(|t| t.status.as_str()).collect::<Vec<_>>(),
        ["done", "interrupted"]
    );
    assert_eq!(turns[1].user_text.as_deref(), Some("hi"));
    store
        .record_worker_event("s", "crash", "exited with code 1")
        .unwrap();

    // The conversation: items and tool results share one sequence.
    let t3 = store.begin_turn("s", TurnKind::Chat, Some("next")).unwrap();
    let seq = store
        .append_history(
            "s",
            &NewHistoryItem {
                turn: t3,
                kind: HistoryKind::User,
                body: "next",
                tokens: 1,
                meta: None,
            },
        )
        .unwrap();
    let tool = store
        .finish_iteration(
            &iteration("s", t3, 1, &[], &[]),
            Some(&ToolAnswer {
                images: Vec::new(),
                call_id: "call_1".into(),
                tokens: 3,
            }),
        )
        .unwrap();
    assert_eq!(tool, Some(seq + 1));
    let history = store.history("s").unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].kind, HistoryKind::ToolResult);
    assert_eq!(
        history[1].body, "out\n",
        "a tool result reads its iteration's output"
    );
    assert_eq!(history[1].status.map(IterationStatus::as_str), Some("ok"));

    // The prefix is fixed by the first save.
    let prefix = ChatPrefix {
        system: "sys".into(),
        tool: "{}".into(),
        catalog_hash: "h".into(),
        agents_md: None,
        tokens: 2,
    };
    store.save_chat_prefix("s", &prefix).unwrap();
    store
        .save_chat_prefix(
            "s",
            &ChatPrefix {
                system: "other".into(),
                ..prefix.clone()
            },
        )
        .unwrap();
    assert_eq!(store.chat_prefix("s").unwrap(), Some(prefix));
    store
        .set_session_model("s", "openai", "m", "http://x")
        .unwrap();
    assert_eq!(store.session_model("s").unwrap().unwrap().model, "m");
    assert_eq!(
        store.latest_chat_session("/moved").unwrap().as_deref(),
        Some("s")
    );
    assert_eq!(store.latest_chat_session("/elsewhere").unwrap(), None);

    // Request health: numbered, totalled.
    for (input, error) in [(Some(100), None), (None, Some("boom".to_string()))] {
        store
            .record_request(
                "s",
                &RequestRecord {
                    turn: t3,
                    provider: "openai".into(),
                    model: "m".into(),
                    input_tokens: input,
                    cached_tokens: input.map(|i| i / 2),
                    output_tokens: Some(7),
                    finish_reason: input.map(|_| "length".to_string()),
                    error,
                    ..Default::default()
                },
            )
            .unwrap();
    }
    let requests = store.requests("s").unwrap();
    assert_eq!(requests.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(requests[0].finish_reason.as_deref(), Some("length"));
    assert_eq!(requests[1].finish_reason, None);
    // The input limit a session ran with, and where it came from.
    assert_eq!(store.input_limit("s").unwrap(), None);
    let limit = vis::store::InputLimit {
        tokens: 6144,
        source: "the server's window of 8,192 tokens (llama.cpp /props n_ctx)".into(),
    };
    store.set_input_limit("s", &limit).unwrap();
    assert_eq!(store.input_limit("s").unwrap(), Some(limit));
    let totals = store.request_totals("s").unwrap();
    assert_eq!(
        (
            totals.input_tokens,
            totals.cached_tokens,
            totals.output_tokens,
            totals.requests,
            totals.failed
        ),
        (100, 50, 14, 2, 1)
    );

    // Folds: a later fold absorbs an earlier one; measurements are per group.
    let pending = Measurement::Pending {
        fold_count: 1,
        folds: vec![1],
        before_input_tokens: Some(10),
        before_provider: "openai".into(),
        before_model: "m".into(),
        before_turn: 1,
    };
    let fold = |id: i64, group: i64| FoldRow {
        id,
        turn: t3,
        iteration: Some(1),
        key: "t1".into(),
        spans: vec![FoldSpan {
            first_seq: 1,
            last_seq: 2,
            label: "t1".into(),
            text: "[vis] fold 1 replaces t1: g".into(),
        }],
        gist: "g".into(),
        automatic: false,
        absorbed_by: None,
        receipt: serde_json::from_value(serde_json::json!({"fold": id})).unwrap(),
        group_id: group,
        measurement: pending.clone(),
    };
    store.record_fold("s", &fold(1, 1), &[]).unwrap();
    store.record_fold("s", &fold(2, 1), &[1]).unwrap();
    let measured = Measurement::Measured {
        fold_count: 2,
        folds: vec![1, 2],
        before_input_tokens: 10,
        after_input_tokens: 8,
        net_reduction_tokens: 2,
    };
    store.set_fold_measurement("s", 1, &measured).unwrap();
    let folds = store.folds("s").unwrap();
    assert_eq!(folds[0].absorbed_by, Some(2));
    assert!(folds.iter().all(|f| f.measurement == measured));
    assert_eq!(folds[1].spans[0].label, "t1");
    assert_eq!(folds[1].receipt.fold, 2);
    assert_eq!(
        store.counts("s").unwrap().folds,
        1,
        "absorbed folds are not counted"
    );

    // Catalog snapshots and MCP records.
    let snap = render_catalog(&Manifest::new(vec![]).unwrap(), 100).unwrap();
    assert!(store.save_catalog_snapshot(&snap).unwrap());
    assert_eq!(store.catalog_snapshot(&snap.hash).unwrap(), Some(snap));
    assert!(!store.mcp_server_approved("/w", "gh", "f1").unwrap());
    store
        .approve_mcp_server("/w", "gh", "f1", "npx gh")
        .unwrap();
    assert!(store.mcp_server_approved("/w", "gh", "f1").unwrap());
    assert!(
        !store.mcp_server_approved("/w", "gh", "f2").unwrap(),
        "a changed command needs approval"
    );
    store.cache_mcp_tools("gh", "f1", "[]").unwrap();
    assert_eq!(
        store.cached_mcp_tools("gh", "f1").unwrap().as_deref(),
        Some("[]")
    );

    // Listing and deleting.
    store.ensure_session("other", &["/o".into()]).unwrap();
    let listed = store.list_sessions().unwrap();
    assert_eq!(listed.len(), 2);
    let s = listed.iter().find(|x| x.id == "s").unwrap();
    assert_eq!((s.turns, s.iterations, s.defs), (3, 3, 1));
    store.delete_session("s").unwrap();
    assert!(store.session("s").unwrap().is_none());
    assert!(store.history("s").unwrap().is_empty());
    assert!(store.folds("s").unwrap().is_empty());
    assert!(store.requests("s").unwrap().is_empty());
    assert_eq!(store.list_sessions().unwrap().len(), 1);
    assert!(store.schema_version().unwrap() >= 5);
}

#[test]
fn the_sqlite_store_keeps_the_contract_in_memory() {
    contract(&mut *Store::open_in_memory().unwrap());
}

#[test]
fn the_sqlite_store_keeps_the_contract_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("vis.db")).unwrap();
    contract(&mut *store);
    assert_eq!(store.location(), dir.path().join("vis.db"));
}

#[test]
fn the_postgres_store_keeps_the_contract() {
    let url = crate::support::postgres::database();
    let mut store = Store::open(std::path::Path::new(&url)).unwrap();
    contract(&mut *store);
    assert_eq!(store.location(), std::path::Path::new(&url));
}

#[test]
fn damaged_records_are_errors_not_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("vis.db");
    Store::open(&db)
        .unwrap()
        .ensure_session("s", &["/w".into()])
        .unwrap();
    Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE sessions SET workspace_roots = '[\"/w\"' WHERE id = 's'",
            [],
        )
        .unwrap();
    let before = std::fs::read(&db).unwrap();
    let store = Store::open(&db).unwrap();
    let err = store.session("s").unwrap_err().to_string();
    assert!(err.contains("workspace_roots"), "{err}");
    let err = store.list_sessions().unwrap_err().to_string();
    assert!(err.contains("workspace_roots"), "{err}");
    drop(store);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "reading changed nothing"
    );
}

/// What schema 6 added (finish reasons, input limits).
const ADDED_IN_6: &str = "
ALTER TABLE requests DROP COLUMN finish_reason;
ALTER TABLE sessions DROP COLUMN input_limit;
ALTER TABLE sessions DROP COLUMN input_limit_source;
";

/// What schemas 7-11 added: cost columns, forks and the log of definitions, sub-sessions,
/// leases, images.
const ADDED_AFTER_6: &str = "
ALTER TABLE sessions DROP COLUMN forked_from;
ALTER TABLE sessions DROP COLUMN cache_key;
DROP TABLE def_changes;
ALTER TABLE requests DROP COLUMN uncached_tokens;
ALTER TABLE requests DROP COLUMN cache_write_tokens;
ALTER TABLE requests DROP COLUMN weighted_tokens;
ALTER TABLE requests DROP COLUMN expected_cached_tokens;
ALTER TABLE requests DROP COLUMN cache_miss;
DROP TABLE images;
ALTER TABLE history DROP COLUMN images;
DROP TABLE session_leases;
DROP INDEX sessions_by_parent;
ALTER TABLE sessions DROP COLUMN parent_session;
ALTER TABLE sessions DROP COLUMN parent_turn;
ALTER TABLE sessions DROP COLUMN parent_iteration;
ALTER TABLE sessions DROP COLUMN sub_task;
ALTER TABLE sessions DROP COLUMN sub_status;
ALTER TABLE sessions DROP COLUMN sub_answer;
";

/// Leaves the SQLite file `db` as schema `version` (4, 5 or 6) had it, after running `rows`
/// (the old rows a test needs, written while the newer columns still exist).
fn downgrade(db: &std::path::Path, version: u32, rows: &str) {
    let added_in_6 = if version < 6 { ADDED_IN_6 } else { "" };
    Connection::open(db)
        .unwrap()
        .execute_batch(&format!(
            "{rows}{added_in_6}{ADDED_AFTER_6}PRAGMA user_version = {version};"
        ))
        .unwrap();
}

#[test]
fn a_schema_5_database_gains_finish_reasons_and_input_limits_keeping_its_requests() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("vis.db");
    {
        let mut store = Store::open(&db).unwrap();
        store.ensure_session("s", &["/w".into()]).unwrap();
        let turn = store.begin_turn("s", TurnKind::Chat, Some("hi")).unwrap();
        store
            .record_request(
                "s",
                &RequestRecord {
                    turn,
                    provider: "openai".into(),
                    model: "m".into(),
                    input_tokens: Some(10),
                    ..Default::default()
                },
            )
            .unwrap();
    }
    {
        // As schema 5 had it: no finish reasons, no input limits.
        downgrade(&db, 5, "");
    }
    let store = Store::open(&db).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        vis::store::latest_version()
    );
    let requests = store.requests("s").unwrap();
    assert_eq!(
        (
            requests.len(),
            requests[0].input_tokens,
            &requests[0].finish_reason
        ),
        (1, Some(10), &None)
    );
    assert_eq!(store.input_limit("s").unwrap(), None);
}

#[test]
fn a_schema_6_database_gains_the_cost_columns_keeping_its_requests_unpriced() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("vis.db");
    {
        let mut store = Store::open(&db).unwrap();
        store.ensure_session("s", &["/w".into()]).unwrap();
        let turn = store.begin_turn("s", TurnKind::Chat, Some("hi")).unwrap();
        store
            .record_request(
                "s",
                &RequestRecord {
                    turn,
                    provider: "anthropic".into(),
                    model: "m".into(),
                    input_tokens: Some(3000),
                    cached_tokens: Some(2000),
                    cache_creation_tokens: Some(700),
                    finish_reason: Some("end_turn".into()),
                    ..Default::default()
                },
            )
            .unwrap();
    }
    {
        // As schema 6 had it: no cost columns.
        downgrade(&db, 6, "");
    }
    let mut store = Store::open(&db).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        vis::store::latest_version()
    );
    let requests = store.requests("s").unwrap();
    let old = &requests[0];
    assert_eq!(
        (
            old.input_tokens,
            old.cached_tokens,
            old.cache_creation_tokens
        ),
        (Some(3000), Some(2000), Some(700))
    );
    assert_eq!(old.finish_reason.as_deref(), Some("end_turn"));
    // The new figures are unavailable, not zero.
    assert_eq!(
        (
            old.uncached_tokens,
            old.cache_write_tokens,
            old.weighted_tokens,
            old.expected_cached_tokens,
            old.cache_miss
        ),
        (None, None, None, None, None)
    );
    let totals = store.request_totals("s").unwrap();
    assert_eq!((totals.weighted_tokens, totals.cache_misses), (None, 0));
    // New rows carry them.
    store
        .record_request(
            "s",
            &RequestRecord {
                turn: 1,
                provider: "anthropic".into(),
                model: "m".into(),
                input_tokens: Some(3000),
                cached_tokens: Some(0),
                uncached_tokens: Some(3000),
                cache_write_tokens: Some(0),
                weighted_tokens: Some(3000.0),
                expected_cached_tokens: Some(2900),
                cache_miss: Some(true),
                ..Default::default()
            },
        )
        .unwrap();
    let new = &store.requests("s").unwrap()[1];
    assert_eq!(
        (
            new.weighted_tokens,
            new.expected_cached_tokens,
            new.cache_miss
        ),
        (Some(3000.0), Some(2900), Some(true))
    );
    let totals = store.request_totals("s").unwrap();
    assert_eq!(
        (totals.weighted_tokens, totals.cache_misses),
        (Some(3000.0), 1)
    );
}

#[test]
fn catalog_snapshots_stamped_in_seconds_are_brought_to_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("vis.db");
    let snap = render_catalog(&Manifest::new(vec![]).unwrap(), 100).unwrap();
    Store::open(&db)
        .unwrap()
        .save_catalog_snapshot(&snap)
        .unwrap();
    {
        // As a schema-4 database left it: seconds.
        downgrade(
            &db,
            4,
            "UPDATE catalog_snapshots SET created_at = 1764806400;",
        );
    }
    let store = Store::open(&db).unwrap();
    assert!(store.schema_version().unwrap() >= 5);
    let at: i64 = Connection::open(&db)
        .unwrap()
        .query_row("SELECT created_at FROM catalog_snapshots", [], |r| r.get(0))
        .unwrap();
    assert_eq!(at, 1_764_806_400_000);
    assert_eq!(store.catalog_snapshot(&snap.hash).unwrap(), Some(snap));
}

#[test]
fn a_schema_6_database_starts_its_log_of_definitions_with_those_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("vis.db");
    {
        let store = Store::open(&db).unwrap();
        store.ensure_session("s", &["/w".into()]).unwrap();
    }
    {
        // As schema 6 had it: no forks, no log of definition changes; one definition.
        downgrade(
            &db,
            6,
            "INSERT INTO turns (session_id, turn, kind, status, started_at) VALUES ('s', 1, 'exec', 'done', 0);
             INSERT INTO defs (session_id, name, kind, source, signature, doc, seq, turn, iteration)
                 VALUES ('s', 'f', 'function', 'def f(): pass', 'def f()', '', 1, 1, 1);",
        );
    }
    let mut store = Store::open(&db).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        vis::store::latest_version()
    );
    let roots = ["/w".to_string()];
    let copied = store
        .fork_session(&vis::store::ForkRequest {
            source: "s",
            through: 1,
            new_id: "s2",
            roots: &roots,
        })
        .unwrap();
    assert_eq!((copied.turns, copied.defs), (1, 1));
    assert_eq!(store.load_defs("s2").unwrap()[0].source, "def f(): pass");
}

#[test]
fn beginning_a_running_iteration_again_with_its_code_writes_nothing() {
    // `vis exec` records the code while the worker starts and the runner does again right
    // before it sends the block: that second call must not commit anything on the way.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("vis.db");
    let mut store = Store::open(&db).unwrap();
    store.ensure_session("s", &["/w".into()]).unwrap();
    let t = store.begin_turn("s", TurnKind::Exec, None).unwrap();
    store.begin_iteration("s", t, 1, "x = 1", 0).unwrap();
    // Another connection's `data_version` moves whenever this one commits a change.
    let watcher = Connection::open(&db).unwrap();
    let version = || -> i64 {
        watcher
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .unwrap()
    };
    let before = version();
    store.begin_iteration("s", t, 1, "x = 1", 0).unwrap();
    assert_eq!(version(), before, "the same code was written again");
    // Other code for the running iteration still replaces it.
    store.begin_iteration("s", t, 1, "x = 2", 0).unwrap();
    assert_ne!(version(), before);
    let rows = store.iterations("s").unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].code, "x = 2");
}
