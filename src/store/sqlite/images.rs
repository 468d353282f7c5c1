//! Images in the SQLite store (migration 11): one row per distinct image, keyed by the blake3
//! hash of its bytes, so a fork or a second showing of the same image adds nothing.

use rusqlite::{params, OptionalExtension};

use super::SqliteStore;
use crate::protocol::{ImageFormat, ImageRef};
use crate::store::api::ImageStore;
use crate::store::{now_millis, Result, StoreError};

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
        // Hashes are hex: anything else names no image (and never reaches the LIKE pattern).
        if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let row: Option<(String, Vec<u8>)> = self
            .conn
            .query_row(
                "SELECT media_type, data FROM images WHERE hash = ?1 AND EXISTS (
                     SELECT 1 FROM history WHERE session_id = ?2 AND images LIKE ?3)",
                params![hash, session_id, format!("%\"hash\":\"{hash}\"%")],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        row.map(|(media_type, data)| {
            ImageFormat::parse_media_type(&media_type)
                .map(|format| (format, data))
                .ok_or_else(|| {
                    StoreError::CorruptRecord(format!(
                        "image {hash} has the unknown media type {media_type:?}"
                    ))
                })
        })
        .transpose()
    }
}
