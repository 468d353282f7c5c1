//! Sub-sessions in the SQLite store ([`ChildRecords`]): the parent link and state columns of
//! `sessions` (migration 9).

use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::store::api::{ChildLink, ChildRecords, ChildRow};
use crate::store::decode::child_row;
use crate::store::{Result, StoreError};

const CHILD_COLUMNS: &str = "s.id, s.parent_session, s.parent_turn, s.parent_iteration, s.sub_task,
    s.sub_status, s.sub_answer,
    (SELECT COALESCE(SUM(input_tokens), 0) FROM requests r WHERE r.session_id = s.id),
    (SELECT COALESCE(SUM(output_tokens), 0) FROM requests r WHERE r.session_id = s.id),
    (SELECT count(*) FROM requests r WHERE r.session_id = s.id)";

impl ChildRecords for SqliteStore {
    fn link_child(&self, link: &ChildLink) -> Result<()> {
        let changed = self.fenced_write(&link.child, |conn| {
            Ok(conn.execute(
                "UPDATE sessions SET parent_session = ?2, parent_turn = ?3, parent_iteration = ?4,
                    sub_task = ?5, sub_status = 'queued', sub_answer = NULL WHERE id = ?1",
                params![
                    link.child,
                    link.parent,
                    link.turn,
                    link.iteration,
                    link.task
                ],
            )?)
        })?;
        if changed == 0 {
            return Err(StoreError::UnknownSession(link.child.clone()));
        }
        Ok(())
    }

    fn set_child_state(&self, child: &str, status: &str, answer: Option<&str>) -> Result<()> {
        self.fenced_write(child, |conn| {
            conn.execute(
                "UPDATE sessions SET sub_status = ?2, sub_answer = COALESCE(?3, sub_answer)
                 WHERE id = ?1 AND parent_session IS NOT NULL",
                params![child, status, answer],
            )?;
            Ok(())
        })
    }

    fn children_of(&self, parent: &str) -> Result<Vec<ChildRow>> {
        let sql = format!(
            "SELECT {CHILD_COLUMNS} FROM sessions s WHERE s.parent_session = ?1
             ORDER BY s.created_at, s.id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([parent], |r| child_row(r))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn child(&self, child: &str) -> Result<Option<ChildRow>> {
        let sql = format!(
            "SELECT {CHILD_COLUMNS} FROM sessions s WHERE s.id = ?1 AND s.parent_session IS NOT NULL"
        );
        Ok(self
            .conn
            .query_row(&sql, [child], |r| child_row(r))
            .optional()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionRecords;

    #[test]
    fn a_child_is_linked_listed_and_updated() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("vis.db")).unwrap();
        store.ensure_session("p", &["/w".into()]).unwrap();
        store.ensure_session("c", &["/w".into()]).unwrap();
        let link = ChildLink {
            child: "c".into(),
            parent: "p".into(),
            turn: 2,
            iteration: 3,
            task: "review a.py".into(),
        };
        store.link_child(&link).unwrap();
        let rows = store.children_of("p").unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].link, link);
        assert_eq!(rows[0].status, "queued");
        store.set_child_state("c", "done", Some("fine")).unwrap();
        let row = store.child("c").unwrap().unwrap();
        assert_eq!(
            (row.status.as_str(), row.answer.as_deref()),
            ("done", Some("fine"))
        );
        assert!(store.child("p").unwrap().is_none());
        let listed = store.list_sessions().unwrap();
        let c = listed.iter().find(|s| s.id == "c").unwrap();
        assert_eq!(c.parent_session.as_deref(), Some("p"));
        // An unknown child is refused, not created.
        let ghost = ChildLink {
            child: "ghost".into(),
            ..link
        };
        assert!(matches!(
            store.link_child(&ghost),
            Err(StoreError::UnknownSession(_))
        ));
    }
}
