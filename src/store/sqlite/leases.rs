//! Session leases in SQLite (migration 10): which `vis serve` node runs a session.
//!
//! Each operation is one statement, a compare-and-set on the row's expiry, instance and
//! epoch, so the PostgreSQL version is a straight port (`INSERT … ON CONFLICT DO NOTHING`,
//! `UPDATE … RETURNING`). Expiries are judged on one clock, the store's: here the machine's
//! own (every process sharing an SQLite file runs on this machine), in PostgreSQL the
//! server's `clock_timestamp()`. Nodes never compare their clocks with each other.

use std::time::Duration;

use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::store::api::claim_or_holder;
use crate::store::api::{LeaseClaim, LeaseFence, LeaseHolder, LeaseNode, Leases};
use crate::store::decode::lease_holder;
use crate::store::{now_millis, Result};

/// The table (migration 10). `expires_at` is in milliseconds on the store's clock; a released
/// lease keeps its row (and its epoch, so epochs only grow) with `expires_at = 0`.
pub const LEASES_SQL: &str = "CREATE TABLE session_leases (
    session_id TEXT PRIMARY KEY,
    node_id    TEXT NOT NULL,
    instance   TEXT NOT NULL,   -- the node process: a restarted node is another instance
    address    TEXT NOT NULL,   -- where other nodes reach it (its advertised address)
    epoch      INTEGER NOT NULL,-- grows by one at every change of holder (a fencing token)
    expires_at INTEGER NOT NULL
);
CREATE INDEX session_leases_instance ON session_leases(instance);";

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

impl Leases for SqliteStore {
    fn acquire_lease(
        &self,
        session_id: &str,
        me: &LeaseNode<'_>,
        ttl: Duration,
        replacing_epoch: Option<i64>,
    ) -> Result<LeaseClaim> {
        let now = now_millis();
        let expires = now.saturating_add(millis(ttl));
        let inserted = self.conn.execute(
            "INSERT INTO session_leases (session_id, node_id, instance, address, epoch, expires_at)
             VALUES (?1, ?2, ?3, ?4, 1, ?5) ON CONFLICT (session_id) DO NOTHING",
            params![session_id, me.node_id, me.instance, me.address, expires],
        )?;
        if inserted == 1 {
            return Ok(LeaseClaim::Granted { epoch: 1 });
        }
        // Ours already (renewed, same epoch), expired or released (a new epoch), or the
        // holder the caller knows to be gone (`replacing_epoch`, a new epoch).
        let granted: Option<i64> = self
            .conn
            .query_row(
                "UPDATE session_leases
                 SET node_id = ?2, address = ?4, expires_at = ?5,
                     epoch = CASE WHEN instance = ?3 AND expires_at > ?6 THEN epoch ELSE epoch + 1 END,
                     instance = ?3
                 WHERE session_id = ?1
                   AND ((instance = ?3 AND expires_at > ?6) OR expires_at <= ?6 OR epoch = ?7)
                 RETURNING epoch",
                params![
                    session_id,
                    me.node_id,
                    me.instance,
                    me.address,
                    expires,
                    now,
                    replacing_epoch.unwrap_or(-1)
                ],
                |r| r.get(0),
            )
            .optional()?;
        claim_or_holder(self, granted, session_id, me, ttl)
    }

    fn renew_leases(&self, instance: &str, ttl: Duration) -> Result<Vec<(String, i64)>> {
        let now = now_millis();
        let mut stmt = self.conn.prepare(
            "UPDATE session_leases SET expires_at = ?2
             WHERE instance = ?1 AND expires_at > ?3
             RETURNING session_id, epoch",
        )?;
        let rows = stmt.query_map(
            params![instance, now.saturating_add(millis(ttl)), now],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn release_lease(&self, session_id: &str, instance: &str, epoch: i64) -> Result<bool> {
        let n = self.conn.execute(
            "UPDATE session_leases SET expires_at = 0
             WHERE session_id = ?1 AND instance = ?2 AND epoch = ?3",
            params![session_id, instance, epoch],
        )?;
        Ok(n == 1)
    }

    fn lease_holder(&self, session_id: &str) -> Result<Option<LeaseHolder>> {
        let now = now_millis();
        Ok(self
            .conn
            .query_row(
                "SELECT node_id, instance, address, epoch, expires_at - ?2 FROM session_leases
                 WHERE session_id = ?1 AND expires_at > ?2",
                params![session_id, now],
                |r| lease_holder(r),
            )
            .optional()?)
    }

    fn set_lease_fence(&self, fence: Option<LeaseFence>) {
        *self.fence.lock().unwrap_or_else(|p| p.into_inner()) = fence;
    }

    fn lease_fence(&self) -> Option<LeaseFence> {
        self.fence.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node<'a>(id: &'a str, instance: &'a str) -> LeaseNode<'a> {
        LeaseNode {
            node_id: id,
            instance,
            address: "http://127.0.0.1:1",
        }
    }

    #[test]
    fn one_holder_at_a_time_and_epochs_grow_at_each_change_of_holder() {
        let store = SqliteStore::open_in_memory().unwrap();
        let ttl = Duration::from_secs(60);
        let a = node("a", "a-1");
        let b = node("b", "b-1");
        assert_eq!(
            store.acquire_lease("s", &a, ttl, None).unwrap(),
            LeaseClaim::Granted { epoch: 1 }
        );
        // Taking it again (the holder itself) keeps the epoch.
        assert_eq!(
            store.acquire_lease("s", &a, ttl, None).unwrap(),
            LeaseClaim::Granted { epoch: 1 }
        );
        let LeaseClaim::Held(h) = store.acquire_lease("s", &b, ttl, None).unwrap() else {
            panic!("b took a live lease")
        };
        assert_eq!((h.node_id.as_str(), h.epoch), ("a", 1));
        assert!(h.expires_in_ms > 0 && h.expires_in_ms <= 60_000);
        // A wrong epoch to replace is no licence.
        assert!(matches!(
            store.acquire_lease("s", &b, ttl, Some(7)).unwrap(),
            LeaseClaim::Held(_)
        ));
        assert_eq!(store.renew_leases("a-1", ttl).unwrap(), [("s".into(), 1)]);
        assert!(store.renew_leases("b-1", ttl).unwrap().is_empty());
        // Released: the next node gets it, with the next epoch; the old holder cannot release
        // or renew it any more.
        assert!(store.release_lease("s", "a-1", 1).unwrap());
        assert!(store.lease_holder("s").unwrap().is_none());
        assert_eq!(
            store.acquire_lease("s", &b, ttl, None).unwrap(),
            LeaseClaim::Granted { epoch: 2 }
        );
        assert!(!store.release_lease("s", "a-1", 1).unwrap());
        assert!(store.renew_leases("a-1", ttl).unwrap().is_empty());
        // Replacing a holder known to be gone, by its epoch.
        let a2 = node("a", "a-2");
        assert_eq!(
            store.acquire_lease("s", &a2, ttl, Some(2)).unwrap(),
            LeaseClaim::Granted { epoch: 3 }
        );
        assert_eq!(store.lease_holder("s").unwrap().unwrap().instance, "a-2");
    }

    #[test]
    fn an_expired_lease_goes_to_the_next_claimant() {
        let store = SqliteStore::open_in_memory().unwrap();
        let a = node("a", "a-1");
        let b = node("b", "b-1");
        store
            .acquire_lease("s", &a, Duration::from_millis(1), None)
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(store.lease_holder("s").unwrap().is_none());
        assert!(store
            .renew_leases("a-1", Duration::from_secs(60))
            .unwrap()
            .is_empty());
        assert_eq!(
            store
                .acquire_lease("s", &b, Duration::from_secs(60), None)
                .unwrap(),
            LeaseClaim::Granted { epoch: 2 }
        );
    }
}
