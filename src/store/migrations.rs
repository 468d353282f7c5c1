//! Numbered schema migrations. `PRAGMA user_version` holds the number of the last one applied;
//! each runs in the same transaction as the version bump, so a failure leaves the old schema.

/// (version, SQL). Append only: never edit a migration that has shipped.
pub const MIGRATIONS: &[(u32, &str)] = &[
    (
        1,
        r#"
CREATE TABLE vis_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO vis_meta (key, value) VALUES ('application', 'vis');

CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    workspace_roots TEXT NOT NULL          -- JSON array of absolute paths
);

CREATE TABLE turns (
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    turn        INTEGER NOT NULL,
    kind        TEXT NOT NULL,             -- 'exec' (no model) or 'chat'
    user_text   TEXT,
    status      TEXT NOT NULL,             -- 'running', 'done'
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    PRIMARY KEY (session_id, turn)
);

CREATE TABLE iterations (
    session_id  TEXT NOT NULL,
    turn        INTEGER NOT NULL,
    iteration   INTEGER NOT NULL,
    code        TEXT NOT NULL,
    output      TEXT NOT NULL,             -- exactly what the model got back
    status      TEXT NOT NULL,             -- ok, error, timeout, interrupted, crashed
    started_at  INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,          -- wall time, worker start included
    exec_us     INTEGER NOT NULL,          -- time inside the worker
    artifact    TEXT,                      -- full output, when it was cut
    worker_exit TEXT,                      -- how the worker died during this block, if it did
    PRIMARY KEY (session_id, turn, iteration),
    FOREIGN KEY (session_id, turn) REFERENCES turns(session_id, turn)
);

CREATE TABLE defs (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    name       TEXT NOT NULL,
    kind       TEXT NOT NULL,              -- function, class, import
    source     TEXT NOT NULL,
    signature  TEXT NOT NULL,
    doc        TEXT NOT NULL,
    seq        INTEGER NOT NULL,           -- definition order; restore runs in this order
    turn       INTEGER NOT NULL,
    iteration  INTEGER NOT NULL,
    PRIMARY KEY (session_id, name)
);

CREATE TABLE worker_events (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    at         INTEGER NOT NULL,
    event      TEXT NOT NULL,              -- start, restart, crash, kill
    detail     TEXT NOT NULL
);
"#,
    ),
    // Rendered catalogs, content-addressed (see `catalog::store`).
    (2, crate::catalog::CATALOG_SNAPSHOTS_SQL),
];

pub fn latest_version() -> u32 {
    MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0)
}
