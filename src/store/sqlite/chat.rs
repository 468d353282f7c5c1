//! Chat sessions in the store: the fixed request prefix, the conversation in order, and one
//! health record per model request.
//!
//! The conversation (`history`) is append-only and ordered by `seq`. A tool result's text is
//! not copied into it: the row points at the iteration that holds the output, and both are
//! written in one transaction, so a completed iteration is always part of the conversation and
//! an interrupted one never half is.

use rusqlite::{params, OptionalExtension};

use super::{json_column, next_number, touch_session, SqliteStore};
use crate::protocol::{IterationRecord, Measurement};
use crate::store::api::{
    ChatPrefix, Conversation, FoldRecords, FoldRow, HistoryRow, InputLimit, NewHistoryItem,
    RequestRecord, RequestTotals, SessionModel, ToolAnswer, TurnRange,
};
use crate::store::decode::{fold_row, history_row, request_record};
use crate::store::{now_millis, Result, StoreError};

impl Conversation for SqliteStore {
    fn chat_prefix(&self, session_id: &str) -> Result<Option<ChatPrefix>> {
        Ok(self
            .conn
            .query_row(
                "SELECT system, tool, catalog_hash, agents_md, tokens FROM chat_prefix WHERE session_id = ?1",
                [session_id],
                |r| {
                    Ok(ChatPrefix {
                        system: r.get(0)?,
                        tool: r.get(1)?,
                        catalog_hash: r.get(2)?,
                        agents_md: r.get(3)?,
                        tokens: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    /// Records the prefix of a session's first request (a second call keeps the first).
    fn save_chat_prefix(&self, session_id: &str, prefix: &ChatPrefix) -> Result<()> {
        self.conn.execute(
            "INSERT OR IGNORE INTO chat_prefix (session_id, system, tool, catalog_hash, agents_md, tokens, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                session_id,
                prefix.system,
                prefix.tool,
                prefix.catalog_hash,
                prefix.agents_md,
                prefix.tokens,
                now_millis()
            ],
        )?;
        Ok(())
    }

    /// The provider, model and base URL the session last used.
    fn session_model(&self, session_id: &str) -> Result<Option<SessionModel>> {
        Ok(self
            .conn
            .query_row(
                "SELECT provider, model, base_url FROM sessions WHERE id = ?1 AND provider IS NOT NULL",
                [session_id],
                |r| {
                    Ok(SessionModel {
                        provider: r.get(0)?,
                        model: r.get(1)?,
                        base_url: r.get(2)?,
                    })
                },
            )
            .optional()?)
    }

    fn set_session_model(
        &self,
        session_id: &str,
        provider: &str,
        model: &str,
        base_url: &str,
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE sessions SET provider = ?2, model = ?3, base_url = ?4 WHERE id = ?1",
            params![session_id, provider, model, base_url],
        )?;
        Ok(())
    }

    fn input_limit(&self, session_id: &str) -> Result<Option<InputLimit>> {
        Ok(self
            .conn
            .query_row(
                "SELECT input_limit, input_limit_source FROM sessions
                 WHERE id = ?1 AND input_limit IS NOT NULL",
                [session_id],
                |r| {
                    Ok(InputLimit {
                        tokens: r.get(0)?,
                        source: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    })
                },
            )
            .optional()?)
    }

    fn set_input_limit(&self, session_id: &str, limit: &InputLimit) -> Result<()> {
        self.conn.execute(
            "UPDATE sessions SET input_limit = ?2, input_limit_source = ?3 WHERE id = ?1",
            params![session_id, limit.tokens, limit.source],
        )?;
        Ok(())
    }

    /// Appends one item; returns its `seq`.
    fn append_history(&mut self, session_id: &str, item: &NewHistoryItem<'_>) -> Result<i64> {
        let tx = self.fenced(session_id)?;
        let seq = next_number(&tx, "history", "seq", session_id)?;
        tx.execute(
            "INSERT INTO history (session_id, seq, turn, kind, body, tokens, meta)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                session_id,
                seq,
                item.turn,
                item.kind.as_str(),
                item.body,
                item.tokens,
                item.meta
            ],
        )?;
        touch_session(&tx, session_id)?;
        tx.commit()?;
        Ok(seq)
    }

    /// The whole conversation in order, tool results with their outputs.
    fn history_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<HistoryRow>> {
        self.rows(
            "SELECT h.seq, h.turn, h.kind, h.iteration, h.call_id,
                    CASE WHEN h.kind = 'tool_result' THEN i.output ELSE h.body END,
                    i.status, h.tokens, h.meta, h.images
             FROM history h
             LEFT JOIN iterations i
               ON h.kind = 'tool_result' AND i.session_id = h.session_id
              AND i.turn = h.turn AND i.iteration = h.iteration
             WHERE h.session_id = ?1 AND h.turn BETWEEN ?2 AND ?3 ORDER BY h.seq",
            params![session_id, range.first, range.last],
            |r| history_row(r),
        )
    }

    /// The most recently used chat session whose first workspace root is `root`.
    fn latest_chat_session(&self, root: &str) -> Result<Option<String>> {
        let mut stmt = self.conn.prepare(
            "SELECT s.id, s.workspace_roots FROM sessions s
             WHERE EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.kind = 'chat')
               AND s.parent_session IS NULL
             ORDER BY s.updated_at DESC, s.id",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let roots: Vec<String> = json_column(row, 1)?;
            if roots.first().map(String::as_str) == Some(root) {
                return Ok(Some(row.get(0)?));
            }
        }
        Ok(None)
    }

    /// Stores a request's health record; `seq` is assigned here and returned.
    fn record_request(&mut self, session_id: &str, rec: &RequestRecord) -> Result<i64> {
        let tx = self.fenced(session_id)?;
        let seq = next_number(&tx, "requests", "seq", session_id)?;
        tx.execute(
            "INSERT INTO requests (session_id, seq, turn, provider, model, started_at, latency_ms, ttft_ms, retries,
                input_tokens, cached_tokens, cache_creation_tokens, output_tokens, estimate_tokens, error_kind, error, fold_measurement,
                finish_reason, uncached_tokens, cache_write_tokens, weighted_tokens, expected_cached_tokens, cache_miss)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)",
            params![
                session_id,
                seq,
                rec.turn,
                rec.provider,
                rec.model,
                rec.started_at,
                rec.latency_ms,
                rec.ttft_ms,
                rec.retries,
                rec.input_tokens,
                rec.cached_tokens,
                rec.cache_creation_tokens,
                rec.output_tokens,
                rec.estimate_tokens,
                rec.error_kind,
                rec.error,
                rec.fold_measurement,
                rec.finish_reason,
                rec.uncached_tokens,
                rec.cache_write_tokens,
                rec.weighted_tokens,
                rec.expected_cached_tokens,
                rec.cache_miss
            ],
        )?;
        tx.commit()?;
        Ok(seq)
    }

    fn requests_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<RequestRecord>> {
        self.rows(
"SELECT seq, turn, provider, model, started_at, latency_ms, ttft_ms, retries, input_tokens,
                    cached_tokens, cache_creation_tokens, output_tokens, estimate_tokens, error_kind, error,
                    fold_measurement, finish_reason, uncached_tokens, cache_write_tokens, weighted_tokens,
                    expected_cached_tokens, cache_miss
             FROM requests WHERE session_id = ?1 AND turn BETWEEN ?2 AND ?3 ORDER BY seq",
params![session_id, range.first, range.last], |r| request_record(r),
)
    }

    /// Totals of a session's model requests: input, cached and output tokens (reported),
    /// requests, failed requests.
    fn request_totals(&self, session_id: &str) -> Result<RequestTotals> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(output_tokens), 0),
                    count(*), COALESCE(SUM(error IS NOT NULL), 0), SUM(weighted_tokens),
                    COALESCE(SUM(cache_miss), 0)
             FROM requests WHERE session_id = ?1",
            [session_id],
            |r| {
                Ok(RequestTotals {
                    input_tokens: r.get(0)?,
                    cached_tokens: r.get(1)?,
                    output_tokens: r.get(2)?,
                    requests: r.get(3)?,
                    failed: r.get(4)?,
                    weighted_tokens: r.get(5)?,
                    cache_misses: r.get(6)?,
                })
            },
        )?)
    }
}

impl FoldRecords for SqliteStore {
    /// Records a fold and marks the folds it absorbs, together.
    fn record_fold(&mut self, session_id: &str, fold: &FoldRow, absorbs: &[i64]) -> Result<()> {
        let tx = self.fenced(session_id)?;
        tx.execute(
            "INSERT INTO folds (session_id, id, turn, iteration, key, spans, gist, automatic, absorbed_by, receipt, group_id, measurement, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?10, ?11, ?12)",
            params![
                session_id,
                fold.id,
                fold.turn,
                fold.iteration,
                fold.key,
                to_json(&fold.spans)?,
                fold.gist,
                fold.automatic,
                to_json(&fold.receipt)?,
                fold.group_id,
                to_json(&fold.measurement)?,
                now_millis()
            ],
        )?;
        for old in absorbs {
            tx.execute(
                "UPDATE folds SET absorbed_by = ?3 WHERE session_id = ?1 AND id = ?2",
                params![session_id, old, fold.id],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Every fold of the session, absorbed ones included, by id.
    fn folds_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<FoldRow>> {
        self.rows(
"SELECT id, turn, iteration, key, spans, gist, automatic, absorbed_by, receipt, group_id, measurement
             FROM folds WHERE session_id = ?1 AND turn BETWEEN ?2 AND ?3 ORDER BY id",
params![session_id, range.first, range.last], |r| fold_row(r),
)
    }

    /// Sets the measurement of every fold of a group.
    fn set_fold_measurement(
        &self,
        session_id: &str,
        group_id: i64,
        measurement: &Measurement,
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE folds SET measurement = ?3 WHERE session_id = ?1 AND group_id = ?2",
            params![session_id, group_id, to_json(measurement)?],
        )?;
        Ok(())
    }
}

/// Marks iteration `rec` as the answer to `answer.call_id` and appends its place in the
/// conversation, inside the caller's transaction; returns the item's `seq`.
pub(super) fn answer_call(
    tx: &rusqlite::Transaction<'_>,
    rec: &IterationRecord<'_>,
    answer: &ToolAnswer,
) -> Result<i64> {
    let images = match answer.images.is_empty() {
        true => None,
        false => Some(to_json(&answer.images)?),
    };
    tx.execute(
        "UPDATE iterations SET call_id = ?4 WHERE session_id = ?1 AND turn = ?2 AND iteration = ?3",
        params![rec.session_id, rec.turn, rec.iteration, answer.call_id],
    )?;
    let seq = next_number(tx, "history", "seq", rec.session_id)?;
    tx.execute(
        "INSERT INTO history (session_id, seq, turn, kind, iteration, call_id, body, tokens, images)
         VALUES (?1, ?2, ?3, 'tool_result', ?4, ?5, '', ?6, ?7)",
        params![
            rec.session_id,
            seq,
            rec.turn,
            rec.iteration,
            answer.call_id,
            answer.tokens,
            images
        ],
    )?;
    Ok(seq)
}

/// A value for a JSON column.
fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| StoreError::CorruptRecord(e.to_string()))
}
