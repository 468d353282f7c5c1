//! Catalog snapshots ([`CatalogSnapshots`], content-addressed: `INSERT … ON CONFLICT DO
//! NOTHING`, a loaded row checked against its hash) and MCP records ([`McpRecords`]) in the
//! PostgreSQL store.

use super::{run, PostgresStore};
use crate::catalog::Snapshot;
use crate::store::addressed::{checked_snapshot, entries_json};
use crate::store::api::{CatalogSnapshots, McpRecords};
use crate::store::{now_millis, Result};

impl CatalogSnapshots for PostgresStore {
    fn save_catalog_snapshot(&self, snapshot: &Snapshot) -> Result<bool> {
        let entries_json = entries_json(snapshot)?;
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
        checked_snapshot(hash, &mode, body, &entries_json).map(Some)
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
