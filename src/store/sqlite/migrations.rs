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
    // Rendered catalogs, content-addressed (see `sqlite::catalog`).
    (2, super::catalog::CATALOG_SNAPSHOTS_SQL),
    // Chat sessions: the stable request prefix, the conversation in order, request health.
    (
        3,
        r#"
ALTER TABLE sessions ADD COLUMN provider TEXT;
ALTER TABLE sessions ADD COLUMN model TEXT;
ALTER TABLE sessions ADD COLUMN base_url TEXT;
ALTER TABLE iterations ADD COLUMN call_id TEXT;  -- the tool call this iteration answered
ALTER TABLE turns ADD COLUMN owner TEXT;          -- 'pid:start time' of the process running it

-- Fixed at a chat session's first request and never changed, so every later request (also
-- after a restart, with a newer vis) starts with the same bytes.
CREATE TABLE chat_prefix (
    session_id   TEXT PRIMARY KEY REFERENCES sessions(id),
    system       TEXT NOT NULL,            -- system prompt, catalog and AGENTS.md as sent
    tool         TEXT NOT NULL,            -- JSON: name, description, parameters
    catalog_hash TEXT NOT NULL,            -- the catalog snapshot the prefix shows
    agents_md    TEXT,                     -- the AGENTS.md the prefix shows
    tokens       INTEGER NOT NULL,         -- o200k estimate of system + tool
    created_at   INTEGER NOT NULL
);

-- The conversation in the order it is sent.
CREATE TABLE history (
    session_id   TEXT NOT NULL REFERENCES sessions(id),
    seq          INTEGER NOT NULL,
    turn         INTEGER NOT NULL,
    kind         TEXT NOT NULL,            -- user, assistant, tool_result, notice
    iteration    INTEGER,                  -- tool_result: the iteration holding the output
    call_id      TEXT,                     -- tool_result: the call it answers
    body         TEXT NOT NULL,            -- user/notice text; assistant message JSON; '' for tool_result
    tokens       INTEGER NOT NULL,         -- o200k estimate of what the item adds to a request
    meta         TEXT,                     -- notice: JSON of what it brings the conversation to
                                           -- ({"catalog_hash": …} or {"agents_md": …})
    PRIMARY KEY (session_id, seq)
);

-- Folds (SPEC §4, §7): which ranges of the conversation a gist replaces in requests. The
-- originals stay in `history` and `iterations`.
CREATE TABLE folds (
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    id          INTEGER NOT NULL,          -- fold number within the session
    turn        INTEGER NOT NULL,          -- where it was made
    iteration   INTEGER,                   -- the block that made it (NULL: the person, or automatic)
    key         TEXT NOT NULL,             -- the key as given
    spans       TEXT NOT NULL,             -- JSON: [{first_seq, last_seq, label, text}]
    gist        TEXT NOT NULL,
    automatic   INTEGER NOT NULL,
    absorbed_by INTEGER,                   -- a later fold that took this one in
    receipt     TEXT NOT NULL,             -- JSON, as returned to the caller
    group_id    INTEGER NOT NULL,          -- folds between two model requests share it
    measurement TEXT NOT NULL,             -- JSON: pending, measured or unavailable
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
);

-- One row per model request (SPEC §9).
CREATE TABLE requests (
    session_id            TEXT NOT NULL REFERENCES sessions(id),
    seq                   INTEGER NOT NULL,
    turn                  INTEGER NOT NULL,
    provider              TEXT NOT NULL,
    model                 TEXT NOT NULL,
    started_at            INTEGER NOT NULL,
    latency_ms            INTEGER NOT NULL,
    ttft_ms               INTEGER,
    retries               INTEGER NOT NULL,
    input_tokens          INTEGER,         -- NULL: the provider did not say
    cached_tokens         INTEGER,
    cache_creation_tokens INTEGER,
    output_tokens         INTEGER,
    estimate_tokens       INTEGER NOT NULL,-- local o200k estimate of the request
    error_kind            TEXT,
    error                 TEXT,
    fold_measurement      TEXT,            -- JSON, see the folding docs
    PRIMARY KEY (session_id, seq)
);
"#,
    ),
    // MCP: approvals of workspace-declared servers, last tool lists (see `sqlite::mcp`).
    (4, super::mcp::MCP_SQL),
    // One timestamp unit: catalog snapshots were stamped in seconds, everything else in
    // milliseconds. A value below 10^11 cannot be milliseconds of this century.
    (
        5,
        "UPDATE catalog_snapshots SET created_at = created_at * 1000 WHERE created_at < 100000000000;",
    ),
    // Real servers (issue 23): why each answer ended, and the input limit a chat session ran
    // with and where that figure came from (a table, the config, the server, or a guess).
    (
        6,
        r#"
ALTER TABLE requests ADD COLUMN finish_reason TEXT;     -- as the provider sent it; NULL: none
ALTER TABLE sessions ADD COLUMN input_limit INTEGER;    -- tokens; NULL: not run since v6
ALTER TABLE sessions ADD COLUMN input_limit_source TEXT;
"#,
    ),
    // The cost model (issue 24 §1): each request's input split by price and weighed, what
    // should have come from the cache, and whether it fell far short (a prefix bug). NULL:
    // unavailable (the provider did not say, or the row predates v7).
    (
        7,
        r#"
ALTER TABLE requests ADD COLUMN uncached_tokens INTEGER;        -- input at the full price
ALTER TABLE requests ADD COLUMN cache_write_tokens INTEGER;     -- 0 where writes are free
ALTER TABLE requests ADD COLUMN weighted_tokens REAL;           -- in uncached-token units
ALTER TABLE requests ADD COLUMN expected_cached_tokens INTEGER; -- local estimate
ALTER TABLE requests ADD COLUMN cache_miss INTEGER;             -- 1: reads far below expected
"#,
    ),
    // Forks (issue 25 §2): which session and turn a session was forked from, the prompt cache
    // key a fork shares with its original (their requests start alike), and every change
    // to a session's definitions in order, so a fork gets the definitions as they were at its
    // turn (the `defs` table holds only the latest). Existing definitions start the log.
    (
        8,
        r#"
ALTER TABLE sessions ADD COLUMN forked_from TEXT;       -- 'ID at tN'; NULL: not a fork
ALTER TABLE sessions ADD COLUMN cache_key TEXT;         -- prompt cache key; NULL: the session id
CREATE TABLE def_changes (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq        INTEGER NOT NULL,           -- order of the changes within the session
    turn       INTEGER NOT NULL,
    iteration  INTEGER NOT NULL,
    name       TEXT NOT NULL,
    kind       TEXT,                       -- NULL: the definition was deleted
    source     TEXT,
    signature  TEXT,
    doc        TEXT,
    PRIMARY KEY (session_id, seq)
);
INSERT INTO def_changes (session_id, seq, turn, iteration, name, kind, source, signature, doc)
    SELECT session_id, seq, turn, iteration, name, kind, source, signature, doc FROM defs;
"#,
    ),
    // Sub-sessions (issue 27 §3): a session a block started with `spawn()` names the session,
    // turn and iteration that started it, its task, how it stands and its final answer.
    (
        9,
        r#"
ALTER TABLE sessions ADD COLUMN parent_session TEXT;    -- NULL: not a sub-session
ALTER TABLE sessions ADD COLUMN parent_turn INTEGER;
ALTER TABLE sessions ADD COLUMN parent_iteration INTEGER;
ALTER TABLE sessions ADD COLUMN sub_task TEXT;
ALTER TABLE sessions ADD COLUMN sub_status TEXT;        -- queued, running, done, failed: …, cancelled, iteration limit, interrupted
ALTER TABLE sessions ADD COLUMN sub_answer TEXT;
CREATE INDEX sessions_by_parent ON sessions(parent_session);
"#,
    ),
    // Many nodes (issue 26 §2): which `vis serve` node runs each session, until when.
    (10, super::leases::LEASES_SQL),
    // Images to the model (issue 27 §2): the bytes of each image a block showed, once per
    // content (blake3), and the images of each tool result (a JSON list of references).
    (
        11,
        r#"
CREATE TABLE images (
    hash       TEXT PRIMARY KEY,            -- blake3 of data, hex
    media_type TEXT NOT NULL,               -- image/png, image/jpeg, image/gif, image/webp
    width      INTEGER NOT NULL,
    height     INTEGER NOT NULL,
    data       BLOB NOT NULL,               -- the bytes as sent to the model
    created_at INTEGER NOT NULL
);
ALTER TABLE history ADD COLUMN images TEXT;   -- JSON [ImageRef]; NULL: none
"#,
    ),
];

pub fn latest_version() -> u32 {
    MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0)
}
