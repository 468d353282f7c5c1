//! A stored record read from a result row, written once for both backends.
//!
//! SQLite and PostgreSQL hand back rows of different types with different errors, but a
//! record's columns are the same in both: each backend's `SELECT` lists them in the order a
//! decoder here reads them (the order is in each decoder's doc), and implements [`Columns`]
//! for its row type. A backend keeps its own errors (SQLite's conversion errors, PostgreSQL's
//! `CorruptRecord`), so what a damaged record reports is unchanged.

use serde::de::DeserializeOwned;

use super::{
    ChildLink, ChildRow, FoldRow, HistoryKind, HistoryRow, LeaseHolder, RequestRecord,
    SessionSummary,
};
use crate::protocol::{IterationRow, IterationStatus, TurnKind, TurnRow, TurnStatus};

/// A value both backends can read from a column.
pub(super) trait Column:
    rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>
{
}

impl<T> Column for T where T: rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a> {}

/// A result row, as the decoders read it.
pub(super) trait Columns {
    type Error;
    /// Column `idx` as a `T`.
    fn get<T: Column>(&self, idx: usize) -> Result<T, Self::Error>;
    /// Column `idx` holding one of a fixed set of names (a status, a kind), parsed; a name
    /// this Vis does not know is an error naming the column.
    fn named<T>(&self, idx: usize, parse: fn(&str) -> Option<T>) -> Result<T, Self::Error>;
    /// Column `idx` holding JSON, parsed; damaged JSON is an error naming the column.
    fn json<T: DeserializeOwned>(&self, idx: usize) -> Result<T, Self::Error>;
}

/// `turn, kind, user_text, status, started_at, finished_at`.
pub(super) fn turn_row<R: Columns>(r: &R) -> Result<TurnRow, R::Error> {
    Ok(TurnRow {
        turn: r.get(0)?,
        kind: r.named(1, TurnKind::parse)?,
        user_text: r.get(2)?,
        status: r.named(3, TurnStatus::parse)?,
        started_at: r.get(4)?,
        finished_at: r.get(5)?,
    })
}

/// `turn, iteration, code, output, status, started_at, duration_ms, exec_us, artifact,
/// worker_exit`.
pub(super) fn iteration_row<R: Columns>(r: &R) -> Result<IterationRow, R::Error> {
    Ok(IterationRow {
        turn: r.get(0)?,
        iteration: r.get(1)?,
        code: r.get(2)?,
        output: r.get(3)?,
        status: r.named(4, IterationStatus::parse)?,
        started_at: r.get(5)?,
        duration_ms: r.get(6)?,
        exec_us: r.get(7)?,
        artifact: r.get(8)?,
        worker_exit: r.get(9)?,
    })
}

/// `id, created_at, updated_at, workspace_roots` (JSON), then the counts of turns,
/// iterations and definitions, then `parent_session`.
pub(super) fn session_summary<R: Columns>(r: &R) -> Result<SessionSummary, R::Error> {
    Ok(SessionSummary {
        id: r.get(0)?,
        created_at: r.get(1)?,
        updated_at: r.get(2)?,
        workspace_roots: r.json(3)?,
        turns: r.get(4)?,
        iterations: r.get(5)?,
        defs: r.get(6)?,
        parent_session: r.get(7)?,
    })
}

/// `seq, turn, provider, model, started_at, latency_ms, ttft_ms, retries, input_tokens,
/// cached_tokens, cache_creation_tokens, output_tokens, estimate_tokens, error_kind, error,
/// fold_measurement, finish_reason, uncached_tokens, cache_write_tokens, weighted_tokens,
/// expected_cached_tokens, cache_miss`.
pub(super) fn request_record<R: Columns>(r: &R) -> Result<RequestRecord, R::Error> {
    Ok(RequestRecord {
        seq: r.get(0)?,
        turn: r.get(1)?,
        provider: r.get(2)?,
        model: r.get(3)?,
        started_at: r.get(4)?,
        latency_ms: r.get(5)?,
        ttft_ms: r.get(6)?,
        retries: r.get(7)?,
        input_tokens: r.get(8)?,
        cached_tokens: r.get(9)?,
        cache_creation_tokens: r.get(10)?,
        output_tokens: r.get(11)?,
        estimate_tokens: r.get(12)?,
        error_kind: r.get(13)?,
        error: r.get(14)?,
        fold_measurement: r.get(15)?,
        finish_reason: r.get(16)?,
        uncached_tokens: r.get(17)?,
        cache_write_tokens: r.get(18)?,
        weighted_tokens: r.get(19)?,
        expected_cached_tokens: r.get(20)?,
        cache_miss: r.get(21)?,
    })
}

/// `id, turn, iteration, key, spans, gist, automatic, absorbed_by, receipt, group_id,
/// measurement` (`spans`, `receipt` and `measurement` JSON).
pub(super) fn fold_row<R: Columns>(r: &R) -> Result<FoldRow, R::Error> {
    Ok(FoldRow {
        id: r.get(0)?,
        turn: r.get(1)?,
        iteration: r.get(2)?,
        key: r.get(3)?,
        spans: r.json(4)?,
        gist: r.get(5)?,
        automatic: r.get(6)?,
        absorbed_by: r.get(7)?,
        receipt: r.json(8)?,
        group_id: r.get(9)?,
        measurement: r.json(10)?,
    })
}

/// `id, parent_session, parent_turn, parent_iteration, sub_task, sub_status, sub_answer` of
/// the child's session, then its requests' input and output tokens and their count.
pub(super) fn child_row<R: Columns>(r: &R) -> Result<ChildRow, R::Error> {
    Ok(ChildRow {
        link: ChildLink {
            child: r.get(0)?,
            parent: r.get(1)?,
            turn: r.get(2)?,
            iteration: r.get(3)?,
            task: r.get::<Option<String>>(4)?.unwrap_or_default(),
        },
        status: r
            .get::<Option<String>>(5)?
            .unwrap_or_else(|| "queued".into()),
        answer: r.get(6)?,
        input_tokens: r.get(7)?,
        output_tokens: r.get(8)?,
        requests: r.get(9)?,
    })
}

/// `node_id, instance, address, epoch`, then the milliseconds until the lease expires.
pub(super) fn lease_holder<R: Columns>(r: &R) -> Result<LeaseHolder, R::Error> {
    Ok(LeaseHolder {
        node_id: r.get(0)?,
        instance: r.get(1)?,
        address: r.get(2)?,
        epoch: r.get(3)?,
        expires_in_ms: r.get(4)?,
    })
}

/// `seq, turn, kind, iteration, call_id`, the body (a tool result's is its iteration's
/// output), the iteration's status (tool results only), `tokens, meta, images` (JSON, NULL
/// for none).
pub(super) fn history_row<R: Columns>(r: &R) -> Result<HistoryRow, R::Error> {
    Ok(HistoryRow {
        seq: r.get(0)?,
        turn: r.get(1)?,
        kind: r.named(2, HistoryKind::parse)?,
        iteration: r.get(3)?,
        call_id: r.get(4)?,
        body: r.get::<Option<String>>(5)?.unwrap_or_default(),
        status: match r.get::<Option<String>>(6)? {
            Some(_) => Some(r.named(6, IterationStatus::parse)?),
            None => None,
        },
        tokens: r.get(7)?,
        meta: r.get(8)?,
        images: match r.get::<Option<String>>(9)? {
            None => Vec::new(),
            Some(_) => r.json(9)?,
        },
    })
}
