//! The PostgreSQL backend: the same five traits as SQLite, for a team that runs Vis on a
//! database server it already runs (`--db postgres://…`, `VIS_DB`).
//!
//! **Client.** `tokio-postgres` with a `deadpool-postgres` pool: the most used pure-Rust
//! PostgreSQL client, maintained with the `postgres-protocol` crates, no C library, and
//! built without TLS (the `runtime` feature only): Vis talks to a server on a Unix socket or
//! a trusted network. sqlx would bring a query macro layer and its own runtime abstraction
//! the store does not need: every statement here is written by hand, like SQLite's.
//!
//! **The bridge.** The store traits are synchronous and are called from plain threads and
//! from inside tokio runtimes (`vis serve`, `vis chat`). The backend owns one process-wide
//! runtime (a dedicated worker thread, `vis-postgres`) where every connection's I/O task
//! runs; a call enters that runtime's context (so sockets and timers register with it) and
//! waits for its future with `futures::executor::block_on` on the calling thread. Tokio's
//! `block_on` is never used, so a caller inside another runtime cannot hit "cannot start a
//! runtime from within a runtime"; and nothing a call waits for runs on the caller's
//! runtime, so blocking one of its worker threads (as a SQLite call blocks it) cannot
//! deadlock it. A caller's future borrows its arguments, so no copying into `'static` tasks.
//!
//! **The pool.** One pool per database URL in the process, shared by every store opened on
//! it (`vis serve` opens one per session). A pooled connection is checked (`Verified`) before
//! it is handed out, so after a server restart or a killed backend the next call gets a
//! fresh connection instead of the dead one; the call that was running when the connection
//! died fails with [`StoreError::ConnectionLost`] and its transaction is rolled back by the
//! server.
//!
//! **Numbering.** Turn, history, request and definition numbers are `MAX + 1` read after
//! `SELECT … FOR UPDATE` on the session's row, inside the transaction that inserts them: two
//! processes numbering one session serialize on that row, so numbers have no gaps and no
//! duplicates. Every multi-statement write is one transaction.
//!
//! Passwords never leave this module: the location shown in messages ([`redact`]) drops it.

mod catalog;
mod chat;
mod copy;
mod extras;
mod fork;
mod location;
mod migrations;
mod sessions;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::error::SqlState;

use super::{LeaseFence, Result, StoreError};
pub use location::{is_postgres_url, redact, state_key};

/// How many connections one process keeps to one database at most.
const POOL_SIZE: usize = 16;

/// A store on a PostgreSQL database.
pub struct PostgresStore {
    pool: Pool,
    /// The URL as given (it may hold a password): what [`location`](Self::location) returns, so
    /// callers can open the same database again.
    url: PathBuf,
    /// The URL without its password, for messages.
    shown: String,
    /// The lease this store's session writes are made under (`Leases::set_lease_fence`).
    fence: Mutex<Option<LeaseFence>>,
}

/// The runtime every connection's I/O runs on.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("vis-postgres")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| {
            StoreError::Postgres(format!("cannot start the database client's thread: {e}"))
        })
}

/// Runs `work` to completion on the calling thread, its I/O on the backend's runtime.
fn run<T>(work: impl Future<Output = Result<T>>) -> Result<T> {
    let _context = runtime()?.enter();
    futures::executor::block_on(work)
}

/// The pool for `url`, made on first use.
fn pool_for(url: &str, shown: &str) -> Result<Pool> {
    static POOLS: OnceLock<Mutex<Vec<(String, Pool)>>> = OnceLock::new();
    let pools = POOLS.get_or_init(|| Mutex::new(Vec::new()));
    let mut pools = pools.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, pool)) = pools.iter().find(|(u, _)| u == url) {
        return Ok(pool.clone());
    }
    let pool = build_pool(url, shown, POOL_SIZE)?;
    pools.push((url.to_string(), pool.clone()));
    Ok(pool)
}

/// A new pool for `url` with at most `size` connections, shared with no one.
fn build_pool(url: &str, shown: &str, size: usize) -> Result<Pool> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| StoreError::BadLocation {
        given: shown.to_string(),
        reason: format!("it is not a PostgreSQL connection URL ({e})"),
    })?;
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Verified,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(size)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .map_err(|e| StoreError::Postgres(format!("cannot set up the connection pool: {e}")))?;
    Ok(pool)
}

impl PostgresStore {
    /// Connects to the database at `url` and brings its schema up to date.
    pub fn open(url: &str) -> Result<PostgresStore> {
        let shown = redact(url);
        let pool = pool_for(url, &shown)?;
        PostgresStore::migrated(url, shown, pool)
    }

    /// Connects to the database at `url` over a pool of its own (one connection), shared
    /// with no other store: a node's lease renewals never wait behind its request path.
    pub fn open_private(url: &str) -> Result<PostgresStore> {
        let shown = redact(url);
        let pool = build_pool(url, &shown, 1)?;
        PostgresStore::migrated(url, shown, pool)
    }

    /// The store at `url` over `pool`, its schema brought up to date.
    fn migrated(url: &str, shown: String, pool: Pool) -> Result<PostgresStore> {
        let store = PostgresStore {
            pool,
            url: PathBuf::from(url),
            shown,
            fence: Mutex::new(None),
        };
        run(async {
            let mut client = store.client().await?;
            migrations::migrate(&mut client, &store.shown).await
        })?;
        Ok(store)
    }

    /// The URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The fence on writes to `session_id`, if this store has one for it.
    fn fence_for(&self, session_id: &str) -> Option<LeaseFence> {
        let fence = self.fence.lock().unwrap_or_else(|p| p.into_inner());
        fence.clone().filter(|f| f.guards() == session_id)
    }

    /// Runs one statement that writes to `session_id`: in a transaction with the fence
    /// checked first when this store is fenced for it, else as it is. The rows it changed.
    async fn fenced_execute(
        &self,
        session_id: &str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64> {
        let mut client = self.client().await?;
        let Some(fence) = self.fence_for(session_id) else {
            return Ok(client.execute(sql, params).await?);
        };
        let tx = client.transaction().await?;
        check_fence(&tx, Some(&fence)).await?;
        let changed = tx.execute(sql, params).await?;
        tx.commit().await?;
        Ok(changed)
    }

    /// A pooled connection, checked alive.
    async fn client(&self) -> Result<deadpool_postgres::Client> {
        self.pool
            .get()
            .await
            .map_err(|e| unreachable_error(&self.shown, e))
    }
}

/// A pool that could not hand out a connection: the server is down or refuses us.
fn unreachable_error(shown: &str, e: deadpool_postgres::PoolError) -> StoreError {
    let detail = match &e {
        deadpool_postgres::PoolError::Backend(e) => describe(e),
        other => other.to_string(),
    };
    StoreError::Unreachable {
        location: shown.to_string(),
        detail,
    }
}

/// A server error's message with its detail, or the client's own error.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_string(),
        },
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        }
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> StoreError {
        let code = e.code();
        if code == Some(&SqlState::QUERY_CANCELED) {
            return StoreError::StatementTimeout(describe(&e));
        }
        let lost = e.is_closed()
            || matches!(
                code,
                Some(c) if *c == SqlState::ADMIN_SHUTDOWN
                    || *c == SqlState::CRASH_SHUTDOWN
                    || *c == SqlState::CANNOT_CONNECT_NOW
            )
            || e.as_db_error().is_none()
                && std::error::Error::source(&e)
                    .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some());
        if lost {
            return StoreError::ConnectionLost(describe(&e));
        }
        StoreError::Postgres(describe(&e))
    }
}

/// Refuses the caller's transaction unless the lease row still has the fence's instance and
/// epoch and is unexpired. `FOR SHARE` holds the row until the transaction ends, so a takeover
/// (`UPDATE session_leases`) waits for these writes to commit: they were made under the lease.
/// The statement is prepared once per connection (its cache): a fenced write costs one round
/// trip more than an unfenced one, not two.
async fn check_fence(
    tx: &deadpool_postgres::Transaction<'_>,
    fence: Option<&LeaseFence>,
) -> Result<()> {
    let Some(fence) = fence else {
        return Ok(());
    };
    let statement = tx
        .prepare_cached(
            "SELECT 1 FROM session_leases
             WHERE session_id = $1 AND instance = $2 AND epoch = $3
               AND expires_at > (extract(epoch from clock_timestamp()) * 1000)::BIGINT
             FOR SHARE",
        )
        .await?;
    let held = tx
        .query_opt(
            &statement,
            &[&fence.session_id, &fence.instance, &fence.epoch],
        )
        .await?;
    match held {
        Some(_) => Ok(()),
        None => Err(StoreError::LeaseLost {
            session: fence.session_id.clone(),
            epoch: fence.epoch,
        }),
    }
}

impl PostgresStore {
    /// Runs a fenced single statement: `WITH fence AS (SELECT 1 FROM session_leases WHERE …
    /// FOR SHARE), … (the write, only WHERE EXISTS (SELECT 1 FROM fence)) SELECT EXISTS
    /// (SELECT 1 FROM fence)`. One round trip (prepared once per connection), no transaction
    /// around it; `LeaseLost` when the lease no longer holds (nothing written). `FOR SHARE`
    /// makes a takeover's `UPDATE session_leases` wait for the write to commit.
    async fn fenced_statement(
        &self,
        fence: &LeaseFence,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<()> {
        let client = self.client().await?;
        let statement = client.prepare_cached(sql).await?;
        let held: bool = client.query_one(&statement, params).await?.try_get(0)?;
        if held {
            return Ok(());
        }
        Err(StoreError::LeaseLost {
            session: fence.session_id.clone(),
            epoch: fence.epoch,
        })
    }
}

/// [`lock_session`], with the lease checked in the same statement when `fence` is set: one
/// round trip for both (prepared once per connection), so a fenced write costs no round trip
/// more than an unfenced one.
async fn fenced_lock(
    tx: &deadpool_postgres::Transaction<'_>,
    session_id: &str,
    fence: Option<&LeaseFence>,
) -> Result<()> {
    let Some(fence) = fence else {
        return lock_session(tx, session_id).await;
    };
    let statement = tx
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM session_leases
                 WHERE session_id = $2 AND instance = $3 AND epoch = $4
                   AND expires_at > (extract(epoch from clock_timestamp()) * 1000)::BIGINT
                 FOR SHARE)
             FROM sessions WHERE id = $1 FOR UPDATE OF sessions",
        )
        .await?;
    let row = tx
        .query_opt(
            &statement,
            &[
                &session_id,
                &fence.session_id,
                &fence.instance,
                &fence.epoch,
            ],
        )
        .await?;
    match row {
        Some(row) if row.try_get::<_, bool>(0)? => Ok(()),
        Some(_) => Err(StoreError::LeaseLost {
            session: fence.session_id.clone(),
            epoch: fence.epoch,
        }),
        // No such session: the write fails on its own; the lease still decides first.
        None => check_fence(tx, Some(fence)).await,
    }
}

/// Locks the session's row for the rest of the transaction: the numbers read after it stay
/// unallocated by anyone else until it commits.
async fn lock_session(tx: &tokio_postgres::Transaction<'_>, session_id: &str) -> Result<()> {
    tx.query(
        "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
        &[&session_id],
    )
    .await?;
    Ok(())
}

/// The number after the highest `column` of the session's rows in `table` (1 for none), read
/// after [`lock_session`] in the same transaction.
async fn next_number(
    tx: &tokio_postgres::Transaction<'_>,
    table: &str,
    column: &str,
    session_id: &str,
) -> Result<i64> {
    let row = tx
        .query_one(
            &format!("SELECT COALESCE(MAX({column}), 0) + 1 FROM {table} WHERE session_id = $1"),
            &[&session_id],
        )
        .await?;
    Ok(row.try_get(0)?)
}

/// Marks the session as used now, inside the caller's transaction.
async fn touch_session(tx: &tokio_postgres::Transaction<'_>, session_id: &str) -> Result<()> {
    tx.execute(
        "UPDATE sessions SET updated_at = $2 WHERE id = $1",
        &[&session_id, &super::now_millis()],
    )
    .await?;
    Ok(())
}

/// A column holding a name (a kind or a status), parsed; an unknown name is an error naming
/// the column and the value, never a default.
fn named<T>(row: &tokio_postgres::Row, idx: usize, parse: fn(&str) -> Option<T>) -> Result<T> {
    let text: String = row.try_get(idx)?;
    parse(&text).ok_or_else(|| {
        let name = row.columns().get(idx).map(|c| c.name()).unwrap_or("?");
        StoreError::CorruptRecord(format!(
            "column `{name}` holds `{text}`, which this vis does not know"
        ))
    })
}

/// A column holding JSON, parsed; a damaged value is an error naming the column.
fn json_column<T: serde::de::DeserializeOwned>(row: &tokio_postgres::Row, idx: usize) -> Result<T> {
    let text: String = row.try_get(idx)?;
    serde_json::from_str(&text).map_err(|e| {
        let name = row.columns().get(idx).map(|c| c.name()).unwrap_or("?");
        StoreError::CorruptRecord(format!(
            "column `{name}` does not hold the JSON it should ({e})"
        ))
    })
}

impl super::decode::Columns for tokio_postgres::Row {
    type Error = StoreError;

    fn get<T: super::decode::Column>(&self, idx: usize) -> Result<T> {
        Ok(self.try_get(idx)?)
    }

    fn named<T>(&self, idx: usize, parse: fn(&str) -> Option<T>) -> Result<T> {
        named(self, idx, parse)
    }

    fn json<T: serde::de::DeserializeOwned>(&self, idx: usize) -> Result<T> {
        json_column(self, idx)
    }
}

/// A value for a JSON column.
fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| StoreError::CorruptRecord(e.to_string()))
}
