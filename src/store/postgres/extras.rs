//! Sub-sessions ([`ChildRecords`], migration 9), session leases ([`Leases`], migration 10) and
//! images ([`ImageStore`], migration 11) in the PostgreSQL store: the same statements as
//! `sqlite/children.rs`, `sqlite/leases.rs` and `sqlite/images.rs`, with one difference that
//! matters: lease expiries are judged on the database server's clock (`clock_timestamp()`),
//! the one clock every node shares, never on a node's own.

use std::time::Duration;

use super::{run, PostgresStore};
use crate::protocol::{ImageFormat, ImageRef};
use crate::store::addressed::{image_pattern, stored_image};
use crate::store::api::claim_or_holder;
use crate::store::api::{
    ChildLink, ChildRecords, ChildRow, ImageStore, LeaseClaim, LeaseFence, LeaseHolder, LeaseNode,
    Leases,
};
use crate::store::decode::{child_row, lease_holder};
use crate::store::{now_millis, Result, StoreError};

const CHILD_COLUMNS: &str = "s.id, s.parent_session, s.parent_turn, s.parent_iteration, s.sub_task,
    s.sub_status, s.sub_answer,
    (SELECT COALESCE(SUM(input_tokens), 0)::BIGINT FROM requests r WHERE r.session_id = s.id),
    (SELECT COALESCE(SUM(output_tokens), 0)::BIGINT FROM requests r WHERE r.session_id = s.id),
    (SELECT count(*) FROM requests r WHERE r.session_id = s.id)";

impl ChildRecords for PostgresStore {
    fn link_child(&self, link: &ChildLink) -> Result<()> {
        let changed = run(self.fenced_execute(
            &link.child,
            "UPDATE sessions SET parent_session = $2, parent_turn = $3,
                parent_iteration = $4, sub_task = $5, sub_status = 'queued',
                sub_answer = NULL WHERE id = $1",
            &[
                &link.child,
                &link.parent,
                &link.turn,
                &link.iteration,
                &link.task,
            ],
        ))?;
        if changed == 0 {
            return Err(StoreError::UnknownSession(link.child.clone()));
        }
        Ok(())
    }

    fn set_child_state(&self, child: &str, status: &str, answer: Option<&str>) -> Result<()> {
        run(self.fenced_execute(
            child,
            "UPDATE sessions SET sub_status = $2, sub_answer = COALESCE($3, sub_answer)
             WHERE id = $1 AND parent_session IS NOT NULL",
            &[&child, &status, &answer],
        ))?;
        Ok(())
    }

    fn children_of(&self, parent: &str) -> Result<Vec<ChildRow>> {
        let sql = format!(
            "SELECT {CHILD_COLUMNS} FROM sessions s WHERE s.parent_session = $1
             ORDER BY s.created_at, s.id"
        );
        run(async {
            let client = self.client().await?;
            let rows = client.query(sql.as_str(), &[&parent]).await?;
            rows.iter().map(child_row).collect()
        })
    }

    fn child(&self, child: &str) -> Result<Option<ChildRow>> {
        let sql = format!(
            "SELECT {CHILD_COLUMNS} FROM sessions s WHERE s.id = $1 AND s.parent_session IS NOT NULL"
        );
        run(async {
            let client = self.client().await?;
            let row = client.query_opt(sql.as_str(), &[&child]).await?;
            row.as_ref().map(child_row).transpose()
        })
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

/// The server's clock in milliseconds, as SQL (the same expression in every statement).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::BIGINT";

impl Leases for PostgresStore {
    fn acquire_lease(
        &self,
        session_id: &str,
        me: &LeaseNode<'_>,
        ttl: Duration,
        replacing_epoch: Option<i64>,
    ) -> Result<LeaseClaim> {
        let ttl_ms = millis(ttl);
        let replacing = replacing_epoch.unwrap_or(-1);
        let insert = format!(
            "INSERT INTO session_leases (session_id, node_id, instance, address, epoch, expires_at)
             VALUES ($1, $2, $3, $4, 1, {NOW_MS} + $5) ON CONFLICT (session_id) DO NOTHING"
        );
        // Ours already (renewed, same epoch), expired or released (a new epoch), or the holder
        // the caller knows to be gone (`replacing_epoch`, a new epoch).
        let update = format!(
            "UPDATE session_leases
             SET node_id = $2, address = $4, expires_at = {NOW_MS} + $5,
                 epoch = CASE WHEN instance = $3 AND expires_at > {NOW_MS} THEN epoch ELSE epoch + 1 END,
                 instance = $3
             WHERE session_id = $1
               AND ((instance = $3 AND expires_at > {NOW_MS}) OR expires_at <= {NOW_MS} OR epoch = $6)
             RETURNING epoch"
        );
        let granted: Option<i64> = run(async {
            let client = self.client().await?;
            let inserted = client
                .execute(
                    insert.as_str(),
                    &[&session_id, &me.node_id, &me.instance, &me.address, &ttl_ms],
                )
                .await?;
            if inserted == 1 {
                return Ok(Some(1));
            }
            let row = client
                .query_opt(
                    update.as_str(),
                    &[
                        &session_id,
                        &me.node_id,
                        &me.instance,
                        &me.address,
                        &ttl_ms,
                        &replacing,
                    ],
                )
                .await?;
            Ok(match row {
                Some(r) => Some(r.try_get(0)?),
                None => None,
            })
        })?;
        claim_or_holder(self, granted, session_id, me, ttl)
    }

    fn renew_leases(&self, instance: &str, ttl: Duration) -> Result<Vec<(String, i64)>> {
        let ttl_ms = millis(ttl);
        let sql = format!(
            "UPDATE session_leases SET expires_at = {NOW_MS} + $2
             WHERE instance = $1 AND expires_at > {NOW_MS}
             RETURNING session_id, epoch"
        );
        run(async {
            let client = self.client().await?;
            let rows = client.query(sql.as_str(), &[&instance, &ttl_ms]).await?;
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect()
        })
    }

    fn release_lease(&self, session_id: &str, instance: &str, epoch: i64) -> Result<bool> {
        run(async {
            let client = self.client().await?;
            let n = client
                .execute(
                    "UPDATE session_leases SET expires_at = 0
                     WHERE session_id = $1 AND instance = $2 AND epoch = $3",
                    &[&session_id, &instance, &epoch],
                )
                .await?;
            Ok(n == 1)
        })
    }

    fn lease_holder(&self, session_id: &str) -> Result<Option<LeaseHolder>> {
        let sql = format!(
            "SELECT node_id, instance, address, epoch, expires_at - {NOW_MS} FROM session_leases
             WHERE session_id = $1 AND expires_at > {NOW_MS}"
        );
        run(async {
            let client = self.client().await?;
            let row = client.query_opt(sql.as_str(), &[&session_id]).await?;
            row.as_ref().map(lease_holder).transpose()
        })
    }

    fn set_lease_fence(&self, fence: Option<LeaseFence>) {
        *self.fence.lock().unwrap_or_else(|p| p.into_inner()) = fence;
    }

    fn lease_fence(&self) -> Option<LeaseFence> {
        self.fence.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ImageStore for PostgresStore {
    fn put_image(&mut self, meta: &ImageRef, data: &[u8]) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO images (hash, media_type, width, height, data, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (hash) DO NOTHING",
                    &[
                        &meta.hash,
                        &meta.format.media_type(),
                        &i64::from(meta.width),
                        &i64::from(meta.height),
                        &data,
                        &now_millis(),
                    ],
                )
                .await?;
            Ok(())
        })
    }

    fn image(&self, session_id: &str, hash: &str) -> Result<Option<(ImageFormat, Vec<u8>)>> {
        // Hashes are hex: anything else names no image (and never reaches the LIKE pattern).
        let Some(pattern) = image_pattern(hash) else {
            return Ok(None);
        };
        let row: Option<(String, Vec<u8>)> = run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT media_type, data FROM images WHERE hash = $1 AND EXISTS (
                         SELECT 1 FROM history WHERE session_id = $2 AND images LIKE $3)",
                    &[&hash, &session_id, &pattern],
                )
                .await?;
            Ok(match row {
                Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
                None => None,
            })
        })?;
        row.map(|(media_type, data)| stored_image(hash, &media_type, data))
            .transpose()
    }
}
