//! Images in the SQLite store (migration 11): one row per distinct image, keyed by the blake3
//! hash of its bytes, so a fork or a second showing of the same image adds nothing.

use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::protocol::{ImageFormat, ImageRef};
use crate::store::addressed::{image_pattern, stored_image};
use crate::store::api::ImageStore;
use crate::store::{now_millis, Result};

impl ImageStore for SqliteStore {
    fn put_image(&mut self, meta: &ImageRef, data: &[u8]) -> Result<()> {
        self.conn.execute(
            "INSERT OR IGNORE INTO images (hash, media_type, width, height, data, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                meta.hash,
                meta.format.media_type(),
                meta.width,
                meta.height,
                data,
                now_millis()
            ],
        )?;
        Ok(())
    }

    fn image(&self, session_id: &str, hash: &str) -> Result<Option<(ImageFormat, Vec<u8>)>> {
        let Some(pattern) = image_pattern(hash) else {
            return Ok(None);
        };
        let row: Option<(String, Vec<u8>)> = self
            .conn
            .query_row(
                "SELECT media_type, data FROM images WHERE hash = ?1 AND EXISTS (
                     SELECT 1 FROM history WHERE session_id = ?2 AND images LIKE ?3)",
                params![hash, session_id, pattern],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        row.map(|(media_type, data)| stored_image(hash, &media_type, data))
            .transpose()
    }
}
