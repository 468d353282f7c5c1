//! The content-addressed records, as both backends store and check them: catalog snapshots
//! (their entries encoded as JSON; a row read back checked against its key, the blake3 hash
//! of its body) and images (looked up by a hex hash only; a stored media type checked). A
//! damaged record is refused the same way whichever backend held it.

use super::{Result, StoreError};
use crate::catalog::{RenderMode, Snapshot, SnapshotItem};
use crate::protocol::ImageFormat;

/// The `entries_json` column of `snapshot`.
pub(super) fn entries_json(snapshot: &Snapshot) -> Result<String> {
    serde_json::to_string(&snapshot.items).map_err(|e| {
        StoreError::CorruptRecord(format!("catalog snapshot entries cannot be encoded: {e}"))
    })
}

/// The snapshot stored under `hash` as `mode`, `body` and `entries_json`, checked: an
/// unknown mode, unreadable entries or a body that does not hash to `hash` is
/// [`StoreError::CorruptSnapshot`].
pub(super) fn checked_snapshot(
    hash: &str,
    mode: &str,
    body: String,
    entries_json: &str,
) -> Result<Snapshot> {
    let corrupt = |reason: String| StoreError::CorruptSnapshot {
        hash: hash.to_string(),
        reason,
    };
    let mode = RenderMode::parse(mode)
        .ok_or_else(|| corrupt(format!("unknown rendering mode `{mode}`")))?;
    let items: Vec<SnapshotItem> = serde_json::from_str(entries_json)
        .map_err(|e| corrupt(format!("its entries are not valid JSON: {e}")))?;
    let snapshot = Snapshot::new(mode, body, items);
    if snapshot.hash != hash {
        return Err(corrupt(format!("its body hashes to `{}`", snapshot.hash)));
    }
    Ok(snapshot)
}

/// The `LIKE` pattern that finds image `hash` in a history item's image list, or `None` when
/// `hash` is not hex (it names no image, and never reaches the pattern).
pub(super) fn image_pattern(hash: &str) -> Option<String> {
    if hash.is_empty() || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(format!("%\"hash\":\"{hash}\"%"))
}

/// Image `hash` as stored (`media_type`, `data`), its format read from the media type; an
/// unknown one is [`StoreError::CorruptRecord`].
pub(super) fn stored_image(
    hash: &str,
    media_type: &str,
    data: Vec<u8>,
) -> Result<(ImageFormat, Vec<u8>)> {
    ImageFormat::parse_media_type(media_type)
        .map(|format| (format, data))
        .ok_or_else(|| {
            StoreError::CorruptRecord(format!(
                "image {hash} has the unknown media type {media_type:?}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_hex_hash_makes_a_pattern() {
        assert_eq!(image_pattern(""), None);
        assert_eq!(image_pattern("ab%_"), None);
        assert_eq!(
            image_pattern("00ff").as_deref(),
            Some("%\"hash\":\"00ff\"%")
        );
    }

    #[test]
    fn an_unknown_media_type_is_a_damaged_record() {
        let e = stored_image("00ff", "image/tiff", vec![1]).unwrap_err();
        assert_eq!(
            e.to_string(),
            StoreError::CorruptRecord(
                "image 00ff has the unknown media type \"image/tiff\"".into()
            )
            .to_string()
        );
        assert!(stored_image("00ff", "image/png", vec![1]).is_ok());
    }
}
