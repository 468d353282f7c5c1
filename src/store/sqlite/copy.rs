//! Every row of a SQLite store as backend-neutral values, and back ([`RecordCopy`], for
//! `vis store copy`). Columns are read from the tables themselves, so a column a later
//! migration adds travels too.

use rusqlite::types::{Value, ValueRef};
use rusqlite::TransactionBehavior;

use super::SqliteStore;
use crate::store::api::{RecordCopy, StoredValue, TableRows, SESSION_TABLES, SHARED_TABLES};
use crate::store::{Result, StoreError};

fn stored(value: ValueRef<'_>) -> Result<StoredValue> {
    Ok(match value {
        ValueRef::Null => StoredValue::Null,
        ValueRef::Integer(i) => StoredValue::Int(i),
        ValueRef::Real(r) => StoredValue::Real(r),
        ValueRef::Text(t) => StoredValue::Text(
            String::from_utf8(t.to_vec())
                .map_err(|e| StoreError::CorruptRecord(format!("text that is not UTF-8: {e}")))?,
        ),
        ValueRef::Blob(b) => StoredValue::Bytes(b.to_vec()),
    })
}

fn sqlite_value(value: &StoredValue) -> Value {
    match value {
        StoredValue::Null => Value::Null,
        StoredValue::Int(i) => Value::Integer(*i),
        StoredValue::Real(r) => Value::Real(*r),
        StoredValue::Text(t) => Value::Text(t.clone()),
        StoredValue::Bytes(b) => Value::Blob(b.clone()),
    }
}

impl RecordCopy for SqliteStore {
    fn export_rows(&self, session: Option<&str>) -> Result<Vec<TableRows>> {
        let tables = if session.is_some() {
            SESSION_TABLES
        } else {
            SHARED_TABLES
        };
        let mut out = Vec::new();
        for table in tables {
            let key = if *table == "sessions" {
                "id"
            } else {
                "session_id"
            };
            let sql = match session {
                Some(_) => format!("SELECT * FROM {table} WHERE {key} = ?1 ORDER BY rowid"),
                None => format!("SELECT * FROM {table} ORDER BY rowid"),
            };
            let mut stmt = self.conn.prepare(&sql)?;
            let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
            let mut rows = match session {
                Some(id) => stmt.query([id])?,
                None => stmt.query([])?,
            };
            let mut values = Vec::new();
            while let Some(row) = rows.next()? {
                let mut one = Vec::with_capacity(columns.len());
                for i in 0..columns.len() {
                    one.push(stored(row.get_ref(i)?)?);
                }
                values.push(one);
            }
            out.push(TableRows {
                table: table.to_string(),
                columns,
                rows: values,
            });
        }
        Ok(out)
    }

    fn import_rows(&mut self, tables: &[TableRows]) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        // A backend may give an empty table without its columns: nothing to write.
        for t in tables.iter().filter(|t| !t.rows.is_empty()) {
            if !SESSION_TABLES.contains(&t.table.as_str())
                && !SHARED_TABLES.contains(&t.table.as_str())
            {
                return Err(StoreError::CorruptRecord(format!(
                    "no table `{}` to copy into",
                    t.table
                )));
            }
            let verb = if SHARED_TABLES.contains(&t.table.as_str()) {
                "INSERT OR IGNORE"
            } else {
                "INSERT"
            };
            let columns: Vec<String> = t.columns.iter().map(|c| format!("\"{c}\"")).collect();
            let marks: Vec<String> = (1..=t.columns.len()).map(|i| format!("?{i}")).collect();
            let sql = format!(
                "{verb} INTO {} ({}) VALUES ({})",
                t.table,
                columns.join(", "),
                marks.join(", ")
            );
            let mut stmt = tx.prepare(&sql)?;
            for row in &t.rows {
                let values: Vec<Value> = row.iter().map(sqlite_value).collect();
                stmt.execute(rusqlite::params_from_iter(values))?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}
