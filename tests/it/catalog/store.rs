//! Catalog snapshots kept by the store: content-addressed, idempotent, checked on load.

use vis::catalog::{render_catalog, Manifest};
use vis::store::{Store, StoreError};

use super::{big, sample};

#[test]
fn snapshot_roundtrip_and_idempotent_store() {
    let store = Store::open_in_memory().unwrap();
    for (entries, budget) in [(sample(), 2000), (big(500, 50), 2000), (vec![], 2000)] {
        let s = render_catalog(&Manifest::new(entries).unwrap(), budget).unwrap();
        assert!(store.save_catalog_snapshot(&s).unwrap());
        assert!(
            !store.save_catalog_snapshot(&s).unwrap(),
            "second store is a no-op"
        );
        let back = store.catalog_snapshot(&s.hash).unwrap().unwrap();
        assert_eq!(back, s);
        assert_eq!(back.tokens().unwrap(), s.tokens().unwrap());
    }
    assert!(store.catalog_snapshot("0000").unwrap().is_none());
}

#[test]
fn corrupt_rows_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("vis.db");
    let s = render_catalog(&Manifest::new(sample()).unwrap(), 2000).unwrap();
    Store::open(&db).unwrap().save_catalog_snapshot(&s).unwrap();
    let raw = rusqlite::Connection::open(&db).unwrap();
    raw.execute("UPDATE catalog_snapshots SET body = body || 'x'", [])
        .unwrap();
    let err = Store::open(&db)
        .unwrap()
        .catalog_snapshot(&s.hash)
        .unwrap_err();
    assert!(matches!(err, StoreError::CorruptSnapshot { .. }), "{err}");
    assert!(err.to_string().contains("hashes to"), "{err}");
    raw.execute("UPDATE catalog_snapshots SET mode = 'weird'", [])
        .unwrap();
    let err = Store::open(&db)
        .unwrap()
        .catalog_snapshot(&s.hash)
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown rendering mode `weird`"),
        "{err}"
    );
    raw.execute(
        "UPDATE catalog_snapshots SET mode = 'full', entries_json = '{'",
        [],
    )
    .unwrap();
    let err = Store::open(&db)
        .unwrap()
        .catalog_snapshot(&s.hash)
        .unwrap_err();
    assert!(err.to_string().contains("not valid JSON"), "{err}");
}
