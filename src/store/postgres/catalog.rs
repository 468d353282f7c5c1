//! Catalog snapshots ([`CatalogSnapshots`], content-addressed: `INSERT … ON CONFLICT DO
//! NOTHING`, a loaded row checked against its hash) and MCP records ([`McpRecords`]) in the
//! PostgreSQL store.

use super::{run, PostgresStore};
use crate::catalog::{RenderMode, Snapshot, SnapshotItem};
use crate::store::api::{CatalogSnapshots, McpRecords};
use crate::store::{now_millis, Result, StoreError};

impl CatalogSnapshots for PostgresStore {
    fn save_catalog_snapshot(&self, snapshot: &Snapshot) -> Result<bool> {
        let entries_json = serde_json::to_string(&snapshot.items).map_err(|e| {
            StoreError::CorruptRecord(format!("catalog snapshot entries cannot be encoded: {e}"))
        })?;
        run(async {
            let client = self.client().await?;
            let n = client
                .execute(
                    "INSERT INTO catalog_snapshots (hash, mode, body, entries_json, created_at)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (hash) DO NOTHING",
                    &[
                        &snapshot.hash,
                        &snapshot.mode.as_str(),
                        &snapshot.body,
                        &entries_json,
                        &now_millis(),
                    ],
                )
                .await?;
            Ok(n == 1)
        })
    }

    fn catalog_snapshot(&self, hash: &str) -> Result<Option<Snapshot>> {
        let row: Option<(String, String, String)> = run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT mode, body, entries_json FROM catalog_snapshots WHERE hash = $1",
                    &[&hash],
                )
                .await?;
            Ok(match row {
                Some(r) => Some((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)),
                None => None,
            })
        })?;
        let Some((mode, body, entries_json)) = row else {
            return Ok(None);
        };
        let corrupt = |reason: String| StoreError::CorruptSnapshot {
            hash: hash.to_string(),
            reason,
        };
        let mode = RenderMode::parse(&mode)
            .ok_or_else(|| corrupt(format!("unknown rendering mode `{mode}`")))?;
        let items: Vec<SnapshotItem> = serde_json::from_str(&entries_json)
            .map_err(|e| corrupt(format!("its entries are not valid JSON: {e}")))?;
        let snapshot = Snapshot::new(mode, body, items);
        if snapshot.hash != hash {
            return Err(corrupt(format!("its body hashes to `{}`", snapshot.hash)));
        }
        Ok(Some(snapshot))
    }
}

impl McpRecords for PostgresStore {
    fn approve_mcp_server(
        &self,
        workspace: &str,
        server: &str,
        fingerprint: &str,
        launch: &str,
    ) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO mcp_approvals (workspace, server, fingerprint, launch, approved_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (workspace, server, fingerprint)
                     DO UPDATE SET launch = excluded.launch, approved_at = excluded.approved_at",
                    &[&workspace, &server, &fingerprint, &launch, &now_millis()],
                )
                .await?;
            Ok(())
        })
    }

    fn mcp_server_approved(
        &self,
        workspace: &str,
        server: &str,
        fingerprint: &str,
    ) -> Result<bool> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT 1 FROM mcp_approvals WHERE workspace = $1 AND server = $2 AND fingerprint = $3",
                    &[&workspace, &server, &fingerprint],
                )
                .await?;
            Ok(row.is_some())
        })
    }

    fn cached_mcp_tools(&self, server: &str, fingerprint: &str) -> Result<Option<String>> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT tools FROM mcp_tools WHERE server = $1 AND fingerprint = $2",
                    &[&server, &fingerprint],
                )
                .await?;
            Ok(match row {
                Some(r) => Some(r.try_get(0)?),
                None => None,
            })
        })
    }

    fn cache_mcp_tools(&self, server: &str, fingerprint: &str, tools_json: &str) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO mcp_tools (server, fingerprint, tools, updated_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (server, fingerprint)
                     DO UPDATE SET tools = excluded.tools, updated_at = excluded.updated_at",
                    &[&server, &fingerprint, &tools_json, &now_millis()],
                )
                .await?;
            Ok(())
        })
    }
}
