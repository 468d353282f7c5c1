//! Numbered schema migrations of the PostgreSQL store. The numbers are SQLite's: a version
//! means the same tables in both backends. The first migration creates SQLite's version-8
//! schema in one step (there were no PostgreSQL databases before it); a later schema change
//! adds the same number to both lists. `vis_meta` holds `schema_version`; each migration runs
//! in one transaction with the version bump, under a transaction-scoped advisory lock, so
//! two processes starting on a new database at once migrate it once, and a failure leaves
//! the old schema.

use tokio_postgres::{Client, GenericClient};

use crate::store::{Result, StoreError};

/// The advisory lock key migrations hold (any constant; "vis\0schema" as an integer).
const MIGRATION_LOCK: i64 = 0x7669_7300_7363_6865;

/// (version, SQL). Append only: never edit a migration that has shipped.
pub const MIGRATIONS: &[(u32, &str)] = &[
    (
        8,
        r#"
CREATE TABLE vis_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO vis_meta (key, value) VALUES ('application', 'vis'), ('schema_version', '0');

CREATE TABLE sessions (
    id                 TEXT PRIMARY KEY,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    workspace_roots    TEXT NOT NULL,         -- JSON array of absolute paths
    provider           TEXT,
    model              TEXT,
    base_url           TEXT,
    input_limit        BIGINT,
    input_limit_source TEXT,
    forked_from        TEXT,                  -- 'ID at tN'; NULL: not a fork
    cache_key          TEXT                   -- prompt cache key; NULL: the session id
);
CREATE INDEX sessions_by_use ON sessions (updated_at DESC, id);

CREATE TABLE turns (
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    turn        BIGINT NOT NULL,
    kind        TEXT NOT NULL,
    user_text   TEXT,
    status      TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT,
    owner       TEXT,                         -- 'pid:start time@host' of the process running it
    PRIMARY KEY (session_id, turn)
);

CREATE TABLE iterations (
    session_id  TEXT NOT NULL,
    turn        BIGINT NOT NULL,
    iteration   BIGINT NOT NULL,
    code        TEXT NOT NULL,
    output      TEXT NOT NULL,
    status      TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    exec_us     BIGINT NOT NULL,
    artifact    TEXT,
    worker_exit TEXT,
    call_id     TEXT,
    PRIMARY KEY (session_id, turn, iteration),
    FOREIGN KEY (session_id, turn) REFERENCES turns(session_id, turn)
);

CREATE TABLE defs (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    source     TEXT NOT NULL,
    signature  TEXT NOT NULL,
    doc        TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    turn       BIGINT NOT NULL,
    iteration  BIGINT NOT NULL,
    PRIMARY KEY (session_id, name)
);

CREATE TABLE def_changes (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq        BIGINT NOT NULL,
    turn       BIGINT NOT NULL,
    iteration  BIGINT NOT NULL,
    name       TEXT NOT NULL,
    kind       TEXT,                          -- NULL: the definition was deleted
    source     TEXT,
    signature  TEXT,
    doc        TEXT,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE worker_events (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    at         BIGINT NOT NULL,
    event      TEXT NOT NULL,
    detail     TEXT NOT NULL
);
CREATE INDEX worker_events_by_session ON worker_events (session_id);

CREATE TABLE catalog_snapshots (
    hash         TEXT PRIMARY KEY,
    mode         TEXT NOT NULL,
    body         TEXT NOT NULL,
    entries_json TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE chat_prefix (
    session_id   TEXT PRIMARY KEY REFERENCES sessions(id),
    system       TEXT NOT NULL,
    tool         TEXT NOT NULL,
    catalog_hash TEXT NOT NULL,
    agents_md    TEXT,
    tokens       BIGINT NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE history (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq        BIGINT NOT NULL,
    turn       BIGINT NOT NULL,
    kind       TEXT NOT NULL,
    iteration  BIGINT,
    call_id    TEXT,
    body       TEXT NOT NULL,
    tokens     BIGINT NOT NULL,
    meta       TEXT,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE folds (
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    id          BIGINT NOT NULL,
    turn        BIGINT NOT NULL,
    iteration   BIGINT,
    key         TEXT NOT NULL,
    spans       TEXT NOT NULL,
    gist        TEXT NOT NULL,
    automatic   BOOLEAN NOT NULL,
    absorbed_by BIGINT,
    receipt     TEXT NOT NULL,
    group_id    BIGINT NOT NULL,
    measurement TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);

CREATE TABLE requests (
    session_id             TEXT NOT NULL REFERENCES sessions(id),
    seq                    BIGINT NOT NULL,
    turn                   BIGINT NOT NULL,
    provider               TEXT NOT NULL,
    model                  TEXT NOT NULL,
    started_at             BIGINT NOT NULL,
    latency_ms             BIGINT NOT NULL,
    ttft_ms                BIGINT,
    retries                BIGINT NOT NULL,
    input_tokens           BIGINT,
    cached_tokens          BIGINT,
    cache_creation_tokens  BIGINT,
    output_tokens          BIGINT,
    estimate_tokens        BIGINT NOT NULL,
    error_kind             TEXT,
    error                  TEXT,
    fold_measurement       TEXT,
    finish_reason          TEXT,
    uncached_tokens        BIGINT,
    cache_write_tokens     BIGINT,
    weighted_tokens        DOUBLE PRECISION,
    expected_cached_tokens BIGINT,
    cache_miss             BOOLEAN,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE mcp_approvals (
    workspace   TEXT NOT NULL,
    server      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    launch      TEXT NOT NULL,
    approved_at BIGINT NOT NULL,
    PRIMARY KEY (workspace, server, fingerprint)
);

CREATE TABLE mcp_tools (
    server      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    tools       TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (server, fingerprint)
);
"#,
    ),
    // Sub-sessions (issue 27 §3), as SQLite's migration 9.
    (
        9,
        r#"
ALTER TABLE sessions ADD COLUMN parent_session TEXT;
ALTER TABLE sessions ADD COLUMN parent_turn BIGINT;
ALTER TABLE sessions ADD COLUMN parent_iteration BIGINT;
ALTER TABLE sessions ADD COLUMN sub_task TEXT;
ALTER TABLE sessions ADD COLUMN sub_status TEXT;
ALTER TABLE sessions ADD COLUMN sub_answer TEXT;
CREATE INDEX sessions_by_parent ON sessions (parent_session);
"#,
    ),
    // Many nodes (issue 26 §2), as SQLite's migration 10; `expires_at` is in milliseconds on
    // the server's clock.
    (
        10,
        r#"
CREATE TABLE session_leases (
    session_id TEXT PRIMARY KEY,
    node_id    TEXT NOT NULL,
    instance   TEXT NOT NULL,
    address    TEXT NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX session_leases_instance ON session_leases (instance);
"#,
    ),
    // Images to the model (issue 27 §2), as SQLite's migration 11.
    (
        11,
        r#"
CREATE TABLE images (
    hash       TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    width      BIGINT NOT NULL,
    height     BIGINT NOT NULL,
    data       BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
ALTER TABLE history ADD COLUMN images TEXT;
"#,
    ),
];

pub fn latest_version() -> u32 {
    MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0)
}

/// The schema version recorded in the database (0: no Vis schema yet); refuses a database
/// whose tables are someone else's.
pub async fn read_version(client: &impl GenericClient, shown: &str) -> Result<u32> {
    // A scan of the catalog with this statement's snapshot, not `to_regclass` (a cached
    // lookup that takes no lock, so it can miss a table another process just committed while
    // we waited for the migration lock).
    // Both tables in one statement, so one snapshot: read apart, another process's first
    // migration could commit between them (`sessions` seen, `vis_meta` not: taken for foreign).
    let exists = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                    WHERE schemaname = current_schema() AND tablename = 'vis_meta'),
                  EXISTS (SELECT 1 FROM pg_catalog.pg_tables
                    WHERE schemaname = current_schema() AND tablename = 'sessions')";
    let row = client.query_one(exists, &[]).await?;
    let has_meta: bool = row.try_get(0)?;
    if !has_meta {
        let foreign: bool = row.try_get(1)?;
        if foreign {
            return Err(StoreError::NotVis { path: shown.into() });
        }
        return Ok(0);
    }
    let rows = client
        .query(
            "SELECT key, value FROM vis_meta WHERE key IN ('application', 'schema_version')",
            &[],
        )
        .await?;
    let value = |key: &str| {
        rows.iter()
            .find(|r| r.get::<_, &str>(0) == key)
            .map(|r| r.get::<_, String>(1))
    };
    if value("application").as_deref() != Some("vis") {
        return Err(StoreError::NotVis { path: shown.into() });
    }
    let version = value("schema_version").unwrap_or_default();
    version.parse().map_err(|_| {
        StoreError::CorruptRecord(format!(
            "vis_meta.schema_version holds `{version}`, not a version number"
        ))
    })
}

/// Brings the schema up to date, one transaction per migration; refuses a newer schema.
pub async fn migrate(client: &mut Client, shown: &str) -> Result<()> {
    let found = read_version(&*client, shown).await?;
    check_not_newer(found, shown)?;
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        // Another process may have migrated while we waited for the lock.
        let current = read_version(&tx, shown).await?;
        check_not_newer(current, shown)?;
        if current >= *version {
            continue;
        }
        tx.batch_execute(sql).await?;
        tx.execute(
            "UPDATE vis_meta SET value = $1 WHERE key = 'schema_version'",
            &[&version.to_string()],
        )
        .await?;
        tx.commit().await?;
    }
    Ok(())
}

fn check_not_newer(found: u32, shown: &str) -> Result<()> {
    if found > latest_version() {
        return Err(StoreError::TooNew {
            path: shown.into(),
            found,
            supported: latest_version(),
        });
    }
    Ok(())
}
