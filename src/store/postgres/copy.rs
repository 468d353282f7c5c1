//! Every row of a PostgreSQL store as backend-neutral values, and back ([`RecordCopy`], for
//! `vis store copy`). Columns are read from the catalog; a value is converted to the column's
//! type on the way in (SQLite keeps booleans as integers).

use tokio_postgres::types::{ToSql, Type};

use super::{run, PostgresStore};
use crate::store::api::{RecordCopy, StoredValue, TableRows, SESSION_TABLES, SHARED_TABLES};
use crate::store::{Result, StoreError};

fn stored(row: &tokio_postgres::Row, i: usize) -> Result<StoredValue> {
    let ty = row.columns()[i].type_().clone();
    let value = if ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map(StoredValue::Int)
    } else if ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?
            .map(|v| StoredValue::Int(v.into()))
    } else if ty == Type::BOOL {
        row.try_get::<_, Option<bool>>(i)?
            .map(|v| StoredValue::Int(v.into()))
    } else if ty == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?.map(StoredValue::Real)
    } else if ty == Type::TEXT {
        row.try_get::<_, Option<String>>(i)?.map(StoredValue::Text)
    } else if ty == Type::BYTEA {
        row.try_get::<_, Option<Vec<u8>>>(i)?
            .map(StoredValue::Bytes)
    } else {
        return Err(StoreError::CorruptRecord(format!(
            "column `{}` has type {ty}, which Vis does not store",
            row.columns()[i].name()
        )));
    };
    Ok(value.unwrap_or(StoredValue::Null))
}

/// `value` as the column type `data_type` (as `information_schema` names it) wants it.
fn typed(
    value: &StoredValue,
    data_type: &str,
    column: &str,
) -> Result<Box<dyn ToSql + Sync + Send>> {
    let mismatch = || {
        StoreError::CorruptRecord(format!(
            "column `{column}` ({data_type}) cannot hold {value:?}"
        ))
    };
    Ok(match (data_type, value) {
        ("bigint", StoredValue::Null) => Box::new(None::<i64>),
        ("bigint", StoredValue::Int(i)) => Box::new(Some(*i)),
        ("boolean", StoredValue::Null) => Box::new(None::<bool>),
        ("boolean", StoredValue::Int(i)) => Box::new(Some(*i != 0)),
        ("double precision", StoredValue::Null) => Box::new(None::<f64>),
        ("double precision", StoredValue::Real(r)) => Box::new(Some(*r)),
        ("double precision", StoredValue::Int(i)) => Box::new(Some(*i as f64)),
        ("text", StoredValue::Null) => Box::new(None::<String>),
        ("text", StoredValue::Text(t)) => Box::new(Some(t.clone())),
        ("bytea", StoredValue::Null) => Box::new(None::<Vec<u8>>),
        ("bytea", StoredValue::Bytes(b)) => Box::new(Some(b.clone())),
        _ => return Err(mismatch()),
    })
}

impl RecordCopy for PostgresStore {
    fn export_rows(&self, session: Option<&str>) -> Result<Vec<TableRows>> {
        let tables = if session.is_some() {
            SESSION_TABLES
        } else {
            SHARED_TABLES
        };
        run(async {
            let client = self.client().await?;
            let mut out = Vec::new();
            for table in tables {
                let key = if *table == "sessions" {
                    "id"
                } else {
                    "session_id"
                };
                let order = if *table == "worker_events" {
                    " ORDER BY at"
                } else {
                    ""
                };
                let rows = match session {
                    Some(id) => {
                        client
                            .query(
                                &format!("SELECT * FROM {table} WHERE {key} = $1{order}"),
                                &[&id],
                            )
                            .await?
                    }
                    None => client.query(&format!("SELECT * FROM {table}"), &[]).await?,
                };
                let columns = match rows.first() {
                    Some(r) => r.columns().iter().map(|c| c.name().to_string()).collect(),
                    None => Vec::new(),
                };
                let mut values = Vec::with_capacity(rows.len());
                for row in &rows {
                    values.push(
                        (0..row.len())
                            .map(|i| stored(row, i))
                            .collect::<Result<Vec<_>>>()?,
                    );
                }
                out.push(TableRows {
                    table: table.to_string(),
                    columns,
                    rows: values,
                });
            }
            Ok(out)
        })
    }

    fn import_rows(&mut self, tables: &[TableRows]) -> Result<()> {
        run(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            for t in tables.iter().filter(|t| !t.rows.is_empty()) {
                let shared = SHARED_TABLES.contains(&t.table.as_str());
                if !shared && !SESSION_TABLES.contains(&t.table.as_str()) {
                    return Err(StoreError::CorruptRecord(format!(
                        "no table `{}` to copy into",
                        t.table
                    )));
                }
                let types: Vec<(String, String)> = tx
                    .query(
                        "SELECT column_name::TEXT, data_type::TEXT FROM information_schema.columns
                         WHERE table_schema = current_schema() AND table_name = $1",
                        &[&t.table],
                    )
                    .await?
                    .iter()
                    .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                    .collect::<Result<_>>()?;
                let mut column_types = Vec::with_capacity(t.columns.len());
                for column in &t.columns {
                    let ty = types.iter().find(|(name, _)| name == column).ok_or_else(|| {
                        StoreError::CorruptRecord(format!(
                            "the target has no column `{}.{column}`: its schema is older than the source's (run the newer vis on it first)",
                            t.table
                        ))
                    })?;
                    column_types.push(ty.1.clone());
                }
                let columns: Vec<String> = t.columns.iter().map(|c| format!("\"{c}\"")).collect();
                let marks: Vec<String> = (1..=t.columns.len()).map(|i| format!("${i}")).collect();
                let conflict = if shared {
                    " ON CONFLICT DO NOTHING"
                } else {
                    ""
                };
                let sql = format!(
                    "INSERT INTO {} ({}) VALUES ({}){conflict}",
                    t.table,
                    columns.join(", "),
                    marks.join(", ")
                );
                let statement = tx.prepare(&sql).await?;
                for row in &t.rows {
                    let values = row
                        .iter()
                        .zip(&column_types)
                        .zip(&t.columns)
                        .map(|((v, ty), column)| typed(v, ty, column))
                        .collect::<Result<Vec<_>>>()?;
                    let params: Vec<&(dyn ToSql + Sync)> = values
                        .iter()
                        .map(|v| v.as_ref() as &(dyn ToSql + Sync))
                        .collect();
                    tx.execute(&statement, &params).await?;
                }
            }
            tx.commit().await?;
            Ok(())
        })
    }
}
