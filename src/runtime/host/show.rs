//! `show()`'s host side: the images one block attaches to its tool result.
//!
//! The worker sends the bytes as base64 in a `show_image` call. Everything about them is
//! checked here (`crate::images`: size, format, header, a full decode, scaling to the limits)
//! before one byte is stored; a refused image leaves nothing behind and the block gets the
//! reason as an exception. An accepted one is stored content-addressed at once (so the tool
//! result recorded after the block can name it) and kept in memory for the result.

use std::sync::Arc;

use base64::Engine;

use crate::images::{prepare, ImageLimits, MAX_INPUT_BYTES};
use crate::protocol::{clip, CallAnswer, CallError, HostReply, ShownImage};
use crate::store::Store;

/// Longest caption kept, in characters.
const MAX_CAPTION_CHARS: usize = 500;

/// The images of the running block.
#[derive(Debug, Default)]
pub struct ImageShelf {
    limits: ImageLimits,
    shown: Vec<ShownImage>,
}

impl ImageShelf {
    pub fn new(limits: ImageLimits) -> ImageShelf {
        ImageShelf {
            limits,
            shown: Vec::new(),
        }
    }

    /// Answers one `show_image` call.
    pub fn show(&mut self, store: &mut Store, data: &str, caption: Option<String>) -> CallAnswer {
        if self.shown.len() >= self.limits.max_per_block {
            return Err(CallError(format!(
                "show(): this block already showed {} images, the most one block may show ([images] max_per_block); show the rest in the next block, or combine them into one figure",
                self.shown.len()
            )));
        }
        // base64 is 4/3 of the bytes: refuse before decoding what is certainly too large.
        if data.len() / 4 * 3 > MAX_INPUT_BYTES + 3 {
            return Err(CallError(format!(
                "show(): the image is over {MAX_INPUT_BYTES} bytes; save a smaller one, or crop it"
            )));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| CallError(format!("show_image: `data` is not base64: {e}")))?;
        let caption = caption
            .map(|c| clip(c.trim(), MAX_CAPTION_CHARS))
            .filter(|c| !c.is_empty());
        // A full decode and a scaled re-encode can take long: where the runtime has other
        // worker threads, this one hands its other tasks to them meanwhile.
        let limits = &self.limits;
        let run = move || prepare(&bytes, caption, limits);
        let prepared = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(run)
            }
            _ => run(),
        }
        .map_err(|e| CallError(e.to_string()))?;
        store
            .put_image(&prepared.meta, &prepared.data)
            .map_err(|e| CallError(format!("show(): the image could not be stored: {e}")))?;
        let meta = prepared.meta.clone();
        self.shown.push(ShownImage {
            meta: prepared.meta,
            data: Arc::from(prepared.data),
        });
        Ok(HostReply::Image(meta))
    }

    /// What the block showed, in order.
    pub fn into_images(self) -> Vec<ShownImage> {
        self.shown
    }
}
