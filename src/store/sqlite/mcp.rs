//! MCP in the store: approvals of workspace-declared servers, and the last tool list each
//! server reported (so `vis exec` can offer a server's tools without starting it).
//!
//! An approval is keyed by the workspace, the server's name and the fingerprint of what it
//! runs (command line, environment, working directory; or URL and headers) as written, so a
//! changed command line needs approval again. This is deliberately small: a later "trust"
//! feature will generalize it.

use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::store::api::McpRecords;
use crate::store::{now_millis, Result};

/// The tables (migration 4).
pub const MCP_SQL: &str = r#"
-- Workspace-declared MCP servers (.vis/mcp.toml) the user approved (vis mcp approve).
CREATE TABLE mcp_approvals (
    workspace   TEXT NOT NULL,             -- canonical workspace directory
    server      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,             -- hash of what runs, as written
    launch      TEXT NOT NULL,             -- the command line or URL, for listings
    approved_at INTEGER NOT NULL,
    PRIMARY KEY (workspace, server, fingerprint)
);

-- The tools/list a server last answered, per what it runs.
CREATE TABLE mcp_tools (
    server      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    tools       TEXT NOT NULL,             -- JSON array of MCP tool objects
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (server, fingerprint)
);
"#;

impl McpRecords for SqliteStore {
    /// Records the approval of a workspace server as it is declared now.
    fn approve_mcp_server(
        &self,
        workspace: &str,
        server: &str,
        fingerprint: &str,
        launch: &str,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO mcp_approvals (workspace, server, fingerprint, launch, approved_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![workspace, server, fingerprint, launch, now_millis()],
        )?;
        Ok(())
    }

    /// Whether exactly this declaration of `server` was approved for `workspace`.
    fn mcp_server_approved(
        &self,
        workspace: &str,
        server: &str,
        fingerprint: &str,
    ) -> Result<bool> {
        let hit: Option<i64> = self
            .conn
            .query_row(
                "SELECT 1 FROM mcp_approvals WHERE workspace = ?1 AND server = ?2 AND fingerprint = ?3",
                params![workspace, server, fingerprint],
                |r| r.get(0),
            )
            .optional()?;
        Ok(hit.is_some())
    }

    /// The tool list `server` (running what `fingerprint` says) last reported, as JSON.
    fn cached_mcp_tools(&self, server: &str, fingerprint: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT tools FROM mcp_tools WHERE server = ?1 AND fingerprint = ?2",
                params![server, fingerprint],
                |r| r.get(0),
            )
            .optional()?)
    }

    fn cache_mcp_tools(&self, server: &str, fingerprint: &str, tools_json: &str) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO mcp_tools (server, fingerprint, tools, updated_at)
             VALUES (?1, ?2, ?3, ?4)",
            params![server, fingerprint, tools_json, now_millis()],
        )?;
        Ok(())
    }
}
