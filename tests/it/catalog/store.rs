use rusqlite::Connection;
use vis::catalog::{
    load_snapshot, render_catalog, store_snapshot, CatalogError, Manifest, CATALOG_SNAPSHOTS_SQL,
};

use super::{big, sample};

fn db() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(CATALOG_SNAPSHOTS_SQL).unwrap();
    conn
}

#[test]
fn snapshot_roundtrip_and_idempotent_store() {
    let conn = db();
    for (entries, budget) in [(sample(), 2000), (big(500, 50), 2000), (vec![], 2000)] {
        let s = render_catalog(&Manifest::new(entries).unwrap(), budget).unwrap();
        assert!(store_snapshot(&conn, &s).unwrap());
        assert!(
            !store_snapshot(&conn, &s).unwrap(),
            "second store is a no-op"
        );
        let back = load_snapshot(&conn, &s.hash).unwrap().unwrap();
        assert_eq!(back, s);
        assert_eq!(back.tokens().unwrap(), s.tokens().unwrap());
    }
    assert!(load_snapshot(&conn, "0000").unwrap().is_none());
}

#[test]
fn corrupt_rows_are_detected() {
    let conn = db();
    let s = render_catalog(&Manifest::new(sample()).unwrap(), 2000).unwrap();
    store_snapshot(&conn, &s).unwrap();
    conn.execute("UPDATE catalog_snapshots SET body = body || 'x'", [])
        .unwrap();
    assert!(matches!(
        load_snapshot(&conn, &s.hash),
        Err(CatalogError::CorruptSnapshot { .. })
    ));
    conn.execute("UPDATE catalog_snapshots SET mode = 'weird'", [])
        .unwrap();
    let err = load_snapshot(&conn, &s.hash).unwrap_err();
    assert!(err.to_string().contains("unknown mode `weird`"), "{err}");
}
