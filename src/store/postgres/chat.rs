//! Chat sessions in the PostgreSQL store ([`Conversation`], [`FoldRecords`]): the fixed
//! request prefix, the conversation in order, request health and folds. Same rules as
//! `sqlite::chat`: a tool result's text stays in its iteration, written in one transaction
//! with its place in the conversation.

use tokio_postgres::Transaction;

use super::{
    check_fence, fenced_lock, json_column, next_number, run, to_json, touch_session, PostgresStore,
};
use crate::protocol::{IterationRecord, Measurement};
use crate::store::api::{
    ChatPrefix, Conversation, FoldRecords, FoldRow, HistoryRow, InputLimit, NewHistoryItem,
    RequestRecord, RequestTotals, SessionModel, ToolAnswer, TurnRange,
};
use crate::store::decode::{fold_row, history_row, request_record};
use crate::store::{now_millis, Result};

impl Conversation for PostgresStore {
    fn chat_prefix(&self, session_id: &str) -> Result<Option<ChatPrefix>> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT system, tool, catalog_hash, agents_md, tokens FROM chat_prefix WHERE session_id = $1",
                    &[&session_id],
                )
                .await?;
            row.map(|r| {
                Ok(ChatPrefix {
                    system: r.try_get(0)?,
                    tool: r.try_get(1)?,
                    catalog_hash: r.try_get(2)?,
                    agents_md: r.try_get(3)?,
                    tokens: r.try_get(4)?,
                })
            })
            .transpose()
        })
    }

    fn save_chat_prefix(&self, session_id: &str, prefix: &ChatPrefix) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO chat_prefix (session_id, system, tool, catalog_hash, agents_md, tokens, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (session_id) DO NOTHING",
                    &[
                        &session_id,
                        &prefix.system,
                        &prefix.tool,
                        &prefix.catalog_hash,
                        &prefix.agents_md,
                        &prefix.tokens,
                        &now_millis(),
                    ],
                )
                .await?;
            Ok(())
        })
    }

    fn session_model(&self, session_id: &str) -> Result<Option<SessionModel>> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT provider, model, base_url FROM sessions WHERE id = $1 AND provider IS NOT NULL",
                    &[&session_id],
                )
                .await?;
            row.map(|r| {
                Ok(SessionModel {
                    provider: r.try_get(0)?,
                    model: r.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                    base_url: r.try_get(2)?,
                })
            })
            .transpose()
        })
    }

    fn set_session_model(
        &self,
        session_id: &str,
        provider: &str,
        model: &str,
        base_url: &str,
    ) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "UPDATE sessions SET provider = $2, model = $3, base_url = $4 WHERE id = $1",
                    &[&session_id, &provider, &model, &base_url],
                )
                .await?;
            Ok(())
        })
    }

    fn input_limit(&self, session_id: &str) -> Result<Option<InputLimit>> {
        run(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT input_limit, input_limit_source FROM sessions
                     WHERE id = $1 AND input_limit IS NOT NULL",
                    &[&session_id],
                )
                .await?;
            row.map(|r| {
                Ok(InputLimit {
                    tokens: r.try_get(0)?,
                    source: r.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
                })
            })
            .transpose()
        })
    }

    fn set_input_limit(&self, session_id: &str, limit: &InputLimit) -> Result<()> {
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "UPDATE sessions SET input_limit = $2, input_limit_source = $3 WHERE id = $1",
                    &[&session_id, &limit.tokens, &limit.source],
                )
                .await?;
            Ok(())
        })
    }

    fn latest_chat_session(&self, root: &str) -> Result<Option<String>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT s.id, s.workspace_roots FROM sessions s
                     WHERE EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND t.kind = 'chat')
                       AND s.parent_session IS NULL
                     ORDER BY s.updated_at DESC, s.id",
                    &[],
                )
                .await?;
            for row in &rows {
                let roots: Vec<String> = json_column(row, 1)?;
                if roots.first().map(String::as_str) == Some(root) {
                    return Ok(Some(row.try_get(0)?));
                }
            }
            Ok(None)
        })
    }

    fn append_history(&mut self, session_id: &str, item: &NewHistoryItem<'_>) -> Result<i64> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            fenced_lock(&tx, session_id, self.fence_for(session_id).as_ref()).await?;
            let seq = next_number(&tx, "history", "seq", session_id).await?;
            tx.execute(
                "INSERT INTO history (session_id, seq, turn, kind, body, tokens, meta)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &session_id,
                    &seq,
                    &item.turn,
                    &item.kind.as_str(),
                    &item.body,
                    &item.tokens,
                    &item.meta,
                ],
            )
            .await?;
            touch_session(&tx, session_id).await?;
            tx.commit().await?;
            Ok(seq)
        })
    }

    fn history_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<HistoryRow>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT h.seq, h.turn, h.kind, h.iteration, h.call_id,
                            CASE WHEN h.kind = 'tool_result' THEN i.output ELSE h.body END,
                            i.status, h.tokens, h.meta, h.images
                     FROM history h
                     LEFT JOIN iterations i
                       ON h.kind = 'tool_result' AND i.session_id = h.session_id
                      AND i.turn = h.turn AND i.iteration = h.iteration
                     WHERE h.session_id = $1 AND h.turn BETWEEN $2 AND $3 ORDER BY h.seq",
                    &[&session_id, &range.first, &range.last],
                )
                .await?;
            rows.iter().map(history_row).collect()
        })
    }

    fn record_request(&mut self, session_id: &str, rec: &RequestRecord) -> Result<i64> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            fenced_lock(&tx, session_id, self.fence_for(session_id).as_ref()).await?;
            let seq = next_number(&tx, "requests", "seq", session_id).await?;
            tx.execute(
                "INSERT INTO requests (session_id, seq, turn, provider, model, started_at, latency_ms, ttft_ms, retries,
                    input_tokens, cached_tokens, cache_creation_tokens, output_tokens, estimate_tokens, error_kind, error, fold_measurement,
                    finish_reason, uncached_tokens, cache_write_tokens, weighted_tokens, expected_cached_tokens, cache_miss)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)",
                &[
                    &session_id,
                    &seq,
                    &rec.turn,
                    &rec.provider,
                    &rec.model,
                    &rec.started_at,
                    &rec.latency_ms,
                    &rec.ttft_ms,
                    &rec.retries,
                    &rec.input_tokens,
                    &rec.cached_tokens,
                    &rec.cache_creation_tokens,
                    &rec.output_tokens,
                    &rec.estimate_tokens,
                    &rec.error_kind,
                    &rec.error,
                    &rec.fold_measurement,
                    &rec.finish_reason,
                    &rec.uncached_tokens,
                    &rec.cache_write_tokens,
                    &rec.weighted_tokens,
                    &rec.expected_cached_tokens,
                    &rec.cache_miss,
                ],
            )
            .await?;
            tx.commit().await?;
            Ok(seq)
        })
    }

    fn requests_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<RequestRecord>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT seq, turn, provider, model, started_at, latency_ms, ttft_ms, retries, input_tokens,
                            cached_tokens, cache_creation_tokens, output_tokens, estimate_tokens, error_kind, error,
                            fold_measurement, finish_reason, uncached_tokens, cache_write_tokens, weighted_tokens,
                            expected_cached_tokens, cache_miss
                     FROM requests WHERE session_id = $1 AND turn BETWEEN $2 AND $3 ORDER BY seq",
                    &[&session_id, &range.first, &range.last],
                )
                .await?;
            rows.iter().map(request_record).collect()
        })
    }

    fn request_totals(&self, session_id: &str) -> Result<RequestTotals> {
        run(async {
            let client = self.client().await?;
            let r = client
                .query_one(
                    "SELECT COALESCE(SUM(input_tokens), 0)::BIGINT, COALESCE(SUM(cached_tokens), 0)::BIGINT,
                            COALESCE(SUM(output_tokens), 0)::BIGINT, count(*),
                            count(*) FILTER (WHERE error IS NOT NULL), SUM(weighted_tokens),
                            count(*) FILTER (WHERE cache_miss)
                     FROM requests WHERE session_id = $1",
                    &[&session_id],
                )
                .await?;
            Ok(RequestTotals {
                input_tokens: r.try_get(0)?,
                cached_tokens: r.try_get(1)?,
                output_tokens: r.try_get(2)?,
                requests: r.try_get(3)?,
                failed: r.try_get(4)?,
                weighted_tokens: r.try_get(5)?,
                cache_misses: r.try_get(6)?,
            })
        })
    }
}

impl FoldRecords for PostgresStore {
    fn record_fold(&mut self, session_id: &str, fold: &FoldRow, absorbs: &[i64]) -> Result<()> {
        let spans = to_json(&fold.spans)?;
        let receipt = to_json(&fold.receipt)?;
        let measurement = to_json(&fold.measurement)?;
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            check_fence(&tx, self.fence_for(session_id).as_ref()).await?;
            tx.execute(
                "INSERT INTO folds (session_id, id, turn, iteration, key, spans, gist, automatic, absorbed_by, receipt, group_id, measurement, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, $9, $10, $11, $12)",
                &[
                    &session_id,
                    &fold.id,
                    &fold.turn,
                    &fold.iteration,
                    &fold.key,
                    &spans,
                    &fold.gist,
                    &fold.automatic,
                    &receipt,
                    &fold.group_id,
                    &measurement,
                    &now_millis(),
                ],
            )
            .await?;
            for old in absorbs {
                tx.execute(
                    "UPDATE folds SET absorbed_by = $3 WHERE session_id = $1 AND id = $2",
                    &[&session_id, old, &fold.id],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn folds_in(&self, session_id: &str, range: TurnRange) -> Result<Vec<FoldRow>> {
        run(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT id, turn, iteration, key, spans, gist, automatic, absorbed_by, receipt, group_id, measurement
                     FROM folds WHERE session_id = $1 AND turn BETWEEN $2 AND $3 ORDER BY id",
                    &[&session_id, &range.first, &range.last],
                )
                .await?;
            rows.iter().map(fold_row).collect()
        })
    }

    fn set_fold_measurement(
        &self,
        session_id: &str,
        group_id: i64,
        measurement: &Measurement,
    ) -> Result<()> {
        let measurement = to_json(measurement)?;
        run(async {
            let client = self.client().await?;
            client
                .execute(
                    "UPDATE folds SET measurement = $3 WHERE session_id = $1 AND group_id = $2",
                    &[&session_id, &group_id, &measurement],
                )
                .await?;
            Ok(())
        })
    }
}

/// Marks iteration `rec` as the answer to `answer.call_id` and appends its place in the
/// conversation, inside the caller's transaction (which holds the session's row); returns
/// the item's `seq`.
pub(super) async fn answer_call(
    tx: &Transaction<'_>,
    rec: &IterationRecord<'_>,
    answer: &ToolAnswer,
) -> Result<i64> {
    tx.execute(
        "UPDATE iterations SET call_id = $4 WHERE session_id = $1 AND turn = $2 AND iteration = $3",
        &[&rec.session_id, &rec.turn, &rec.iteration, &answer.call_id],
    )
    .await?;
    let images = match answer.images.is_empty() {
        true => None,
        false => Some(to_json(&answer.images)?),
    };
    let seq = next_number(tx, "history", "seq", rec.session_id).await?;
    tx.execute(
        "INSERT INTO history (session_id, seq, turn, kind, iteration, call_id, body, tokens, images)
         VALUES ($1, $2, $3, 'tool_result', $4, $5, '', $6, $7)",
        &[
            &rec.session_id,
            &seq,
            &rec.turn,
            &rec.iteration,
            &answer.call_id,
            &answer.tokens,
            &images,
        ],
    )
    .await?;
    Ok(seq)
}
