//! Images a block shows the model (`show()`): what the conversation keeps of one.
//!
//! The bytes are stored once, content-addressed (blake3 of the bytes as sent), in the store's
//! `images` table; history items carry [`ImageRef`]s and, in memory, the bytes they name, so
//! a request encodes them without a store lookup and a resumed session sends the same bytes.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The formats a model accepts (and `show()` takes), detected by magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageFormat {
    pub const ALL: [ImageFormat; 4] = [
        ImageFormat::Png,
        ImageFormat::Jpeg,
        ImageFormat::Gif,
        ImageFormat::Webp,
    ];

    /// The format `bytes` start like, if any.
    pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageFormat::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(ImageFormat::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageFormat::Gif)
        } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            Some(ImageFormat::Webp)
        } else {
            None
        }
    }

    /// The MIME type (what HTTP responses and provider requests name).
    pub fn media_type(self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Gif => "image/gif",
            ImageFormat::Webp => "image/webp",
        }
    }

    pub fn parse_media_type(text: &str) -> Option<ImageFormat> {
        ImageFormat::ALL
            .into_iter()
            .find(|f| f.media_type() == text)
    }

    /// The short name people read (`PNG`).
    pub fn label(self) -> &'static str {
        match self {
            ImageFormat::Png => "PNG",
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Gif => "GIF",
            ImageFormat::Webp => "WebP",
        }
    }
}

/// One shown image as history keeps it: the stored bytes' hash and what is known of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRef {
    /// blake3 of the bytes as sent, hex.
    pub hash: String,
    pub format: ImageFormat,
    pub width: u32,
    pub height: u32,
    /// Size of the bytes as sent.
    pub bytes: u64,
    /// The block's caption (untrusted text: escape it before showing it on a terminal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// The size before it was scaled down to the limits, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resized_from: Option<(u32, u32)>,
    /// The line the model read instead of the image, when the session's model took no images
    /// as the block ran (`[vis] image not sent: MODEL does not accept images (…)`): kept with
    /// the result, so a view built from the store says what the request said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_sent: Option<String>,
}

impl ImageRef {
    /// The placeholder line terminals and the model's text output show:
    /// `[image 812×600 PNG 48 KB: caption]` (the caption as given; escape it for terminals).
    pub fn placeholder(&self) -> String {
        let mut line = format!(
            "[image {}×{} {} {}",
            self.width,
            self.height,
            self.format.label(),
            human_size(self.bytes)
        );
        if let Some((w, h)) = self.resized_from {
            line.push_str(&format!(", resized from {w}×{h}"));
        }
        if let Some(caption) = self.caption.as_deref().filter(|c| !c.is_empty()) {
            line.push_str(": ");
            line.push_str(caption);
        }
        line.push(']');
        line
    }

    /// Anthropic's estimate of the image's input tokens: width × height / 750.
    pub fn anthropic_tokens(&self) -> u64 {
        (u64::from(self.width) * u64::from(self.height)).div_ceil(750)
    }

    /// OpenAI's (`detail: auto` at high detail): fit in 2048×2048, shortest side down to 768,
    /// then 170 per 512-pixel tile plus 85.
    pub fn openai_tokens(&self) -> u64 {
        let (mut w, mut h) = (f64::from(self.width), f64::from(self.height));
        let fit = (2048.0 / w.max(h)).min(1.0);
        (w, h) = (w * fit, h * fit);
        let short = (768.0 / w.min(h)).min(1.0);
        (w, h) = (w * short, h * short);
        let tiles = (w / 512.0).ceil() as u64 * (h / 512.0).ceil() as u64;
        85 + 170 * tiles
    }

    /// What the conversation's estimate counts for the image: the larger of the two, so the
    /// utilization never understates it whichever provider the session moves to.
    pub fn estimated_tokens(&self) -> u64 {
        self.anthropic_tokens().max(self.openai_tokens())
    }
}

/// An image with its bytes, as a tool result carries it in memory (the bytes are shared, not
/// copied, between the conversation and the assembler). Serialized as its [`ImageRef`] only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownImage {
    #[serde(flatten)]
    pub meta: ImageRef,
    #[serde(skip)]
    pub data: Arc<[u8]>,
}

/// `48 KB`, `1.2 MB`, `812 B`.
pub fn human_size(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} B")
    } else if bytes < 1024 * 1024 {
        format!("{} KB", bytes.div_ceil(1024))
    } else {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(width: u32, height: u32) -> ImageRef {
        ImageRef {
            hash: "h".into(),
            format: ImageFormat::Png,
            width,
            height,
            bytes: 48 * 1024,
            caption: Some("plot".into()),
            resized_from: None,
            not_sent: None,
        }
    }

    #[test]
    fn formats_are_sniffed_by_magic_bytes() {
        assert_eq!(
            ImageFormat::sniff(b"\x89PNG\r\n\x1a\nrest"),
            Some(ImageFormat::Png)
        );
        assert_eq!(
            ImageFormat::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]),
            Some(ImageFormat::Jpeg)
        );
        assert_eq!(ImageFormat::sniff(b"GIF89a.."), Some(ImageFormat::Gif));
        assert_eq!(
            ImageFormat::sniff(b"RIFF\0\0\0\0WEBPVP8 "),
            Some(ImageFormat::Webp)
        );
        assert_eq!(ImageFormat::sniff(b"<svg"), None);
        assert_eq!(ImageFormat::sniff(b""), None);
    }

    #[test]
    fn token_estimates_follow_the_providers_formulas() {
        // Anthropic: 1092×1092 is about 1,590 tokens.
        assert_eq!(meta(1092, 1092).anthropic_tokens(), 1590);
        // OpenAI's worked examples: 1024×1024 is 765 tokens, 2048×4096 is 1,105.
        assert_eq!(meta(1024, 1024).openai_tokens(), 765);
        assert_eq!(meta(2048, 4096).openai_tokens(), 1105);
        assert_eq!(meta(1024, 1024).estimated_tokens(), 1399);
        assert_eq!(
            meta(812, 600).placeholder(),
            "[image 812×600 PNG 48 KB: plot]"
        );
    }
}
