//! Images from blocks (`show()`): checked, decoded and scaled down on the host.
//!
//! The bytes come from the worker, so they are untrusted: their size is capped before
//! anything reads them, the format is taken from the magic bytes (never a name), the header's
//! dimensions are capped before decoding (a decompression bomb is refused, not allocated), and
//! the whole image is decoded so a truncated or malformed file is refused here rather than by
//! the provider, which would fail every later request of the session. An image over the limits
//! is scaled down (aspect kept) and re-encoded: PNG, or JPEG for photographs and whenever PNG
//! stays over the byte cap. Encoding is deterministic and the result is what gets stored, so
//! every request sends the same bytes.

use std::io::Cursor;

use image::{DynamicImage, ImageEncoder, ImageReader, Limits};

use crate::protocol::{ImageFormat, ImageRef};

/// What `[images]` in config.toml sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Longest edge sent, in pixels (Anthropic recommends ≤ 1568; OpenAI scales to 2048 and
    /// then 768 on the short side, so larger buys nothing there either).
    pub max_edge: u32,
    /// Largest image sent, in bytes (Anthropic refuses over 5 MB of base64: 3.75 MB raw).
    pub max_bytes: u64,
    /// Images one block may show.
    pub max_per_block: usize,
}

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits {
            max_edge: 1568,
            max_bytes: 3_750_000,
            max_per_block: 8,
        }
    }
}

/// Largest input accepted from a block, before any scaling (the pipe carries it as base64).
pub const MAX_INPUT_BYTES: usize = 32 * 1024 * 1024;
/// Largest edge decoded (Anthropic's hard limit is 8000; anything above is refused).
pub const MAX_DECODED_EDGE: u32 = 16_384;
/// Memory the decoder may use.
const MAX_DECODE_ALLOC: u64 = 512 * 1024 * 1024;

/// An image ready to store and send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub meta: ImageRef,
    pub data: Vec<u8>,
}

/// Why an image was refused: the block sees the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("show(): the image is {size} bytes; the limit is {limit} bytes (save a smaller one, or crop it)")]
    TooLarge { size: usize, limit: usize },
    #[error("show(): not an image: the data starts with {start}; show() takes PNG, JPEG, GIF or WebP (a path, the bytes, or a Matplotlib figure)")]
    NotAnImage { start: String },
    #[error("show(): the {format} image is {width}×{height}; images larger than {max}×{max} pixels are refused (scale it down first)")]
    TooManyPixels {
        format: &'static str,
        width: u32,
        height: u32,
        max: u32,
    },
    #[error("show(): the {format} image is damaged or truncated ({detail}); nothing was attached")]
    Malformed {
        format: &'static str,
        detail: String,
    },
    #[error("show(): could not re-encode the scaled image: {0}")]
    Encode(String),
}

/// Checks, decodes and (when over `limits`) scales down `bytes`.
pub fn prepare(
    bytes: &[u8],
    caption: Option<String>,
    limits: &ImageLimits,
) -> Result<Prepared, ImageError> {
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(ImageError::TooLarge {
            size: bytes.len(),
            limit: MAX_INPUT_BYTES,
        });
    }
    let format = ImageFormat::sniff(bytes).ok_or_else(|| ImageError::NotAnImage {
        start: describe_start(bytes),
    })?;
    let label = format.label();
    let malformed = |e: image::ImageError| ImageError::Malformed {
        format: label,
        detail: crate::protocol::clip(&e.to_string(), 160),
    };
    let reader = || ImageReader::with_format(Cursor::new(bytes), codec(format));
    let (width, height) = reader().into_dimensions().map_err(malformed)?;
    if width == 0 || height == 0 {
        return Err(ImageError::Malformed {
            format: label,
            detail: "it has no pixels".into(),
        });
    }
    if width.max(height) > MAX_DECODED_EDGE {
        return Err(ImageError::TooManyPixels {
            format: label,
            width,
            height,
            max: MAX_DECODED_EDGE,
        });
    }
    let mut decoder = reader();
    let mut decode_limits = Limits::default();
    decode_limits.max_image_width = Some(MAX_DECODED_EDGE);
    decode_limits.max_image_height = Some(MAX_DECODED_EDGE);
    decode_limits.max_alloc = Some(MAX_DECODE_ALLOC);
    decoder.limits(decode_limits);
    let decoded = decoder.decode().map_err(malformed)?;
    let fits = width.max(height) <= limits.max_edge && bytes.len() as u64 <= limits.max_bytes;
    let (data, format, resized_from) = if fits {
        (bytes.to_vec(), format, None)
    } else {
        let (data, format) = shrink(&decoded, format, limits)?;
        (data, format, Some((width, height)))
    };
    let (width, height) = if resized_from.is_some() {
        ImageReader::with_format(Cursor::new(&data), codec(format))
            .into_dimensions()
            .map_err(|e| ImageError::Encode(e.to_string()))?
    } else {
        (width, height)
    };
    let meta = ImageRef {
        hash: blake3::hash(&data).to_hex().to_string(),
        format,
        width,
        height,
        bytes: data.len() as u64,
        caption,
        resized_from,
        // Said by the session that records the result (its model decides).
        not_sent: None,
    };
    Ok(Prepared { meta, data })
}

fn codec(format: ImageFormat) -> image::ImageFormat {
    match format {
        ImageFormat::Png => image::ImageFormat::Png,
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        ImageFormat::Gif => image::ImageFormat::Gif,
        ImageFormat::Webp => image::ImageFormat::WebP,
    }
}

/// Scales `image` to the edge limit and encodes it under the byte limit: PNG first (JPEG
/// first for a JPEG source), then JPEG, then smaller, until it fits.
fn shrink(
    image: &DynamicImage,
    source: ImageFormat,
    limits: &ImageLimits,
) -> Result<(Vec<u8>, ImageFormat), ImageError> {
    let mut edge = limits
        .max_edge
        .min(image.width().max(image.height()))
        .max(1);
    loop {
        let scaled = if image.width().max(image.height()) > edge {
            image.resize(edge, edge, image::imageops::FilterType::Lanczos3)
        } else {
            image.clone()
        };
        let tries: &[ImageFormat] = if source == ImageFormat::Jpeg {
            &[ImageFormat::Jpeg]
        } else {
            &[ImageFormat::Png, ImageFormat::Jpeg]
        };
        for &format in tries {
            let data = encode(&scaled, format)?;
            if data.len() as u64 <= limits.max_bytes {
                return Ok((data, format));
            }
        }
        if edge <= 16 {
            return Err(ImageError::Encode(format!(
                "it does not fit in {} bytes even at {edge} pixels; raise [images] max_bytes",
                limits.max_bytes
            )));
        }
        edge = edge * 3 / 4;
    }
}

fn encode(image: &DynamicImage, format: ImageFormat) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    let failed = |e: image::ImageError| ImageError::Encode(e.to_string());
    match format {
        ImageFormat::Jpeg => {
            let rgb = image.to_rgb8();
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85)
                .write_image(
                    rgb.as_raw(),
                    rgb.width(),
                    rgb.height(),
                    image::ExtendedColorType::Rgb8,
                )
                .map_err(failed)?;
        }
        _ => {
            let rgba = image.to_rgba8();
            image::codecs::png::PngEncoder::new(&mut out)
                .write_image(
                    rgba.as_raw(),
                    rgba.width(),
                    rgba.height(),
                    image::ExtendedColorType::Rgba8,
                )
                .map_err(failed)?;
        }
    }
    Ok(out)
}

/// The first bytes of data that is not an image, for the error: text as text, else hex.
fn describe_start(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "nothing (it is empty)".into();
    }
    let head = &bytes[..bytes.len().min(12)];
    if head
        .iter()
        .all(|b| b.is_ascii_graphic() || *b == b' ' || *b == b'\n')
    {
        format!("{:?}", String::from_utf8_lossy(head))
    } else {
        head.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = DynamicImage::ImageRgb8(image::RgbImage::from_fn(width, height, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x * y) % 256) as u8])
        }));
        encode(&image, ImageFormat::Png).unwrap()
    }

    #[test]
    fn a_small_png_is_kept_as_it_is() {
        let bytes = png(40, 30);
        let prepared = prepare(&bytes, Some("c".into()), &ImageLimits::default()).unwrap();
        assert_eq!(prepared.data, bytes);
        assert_eq!((prepared.meta.width, prepared.meta.height), (40, 30));
        assert_eq!(prepared.meta.format, ImageFormat::Png);
        assert_eq!(prepared.meta.resized_from, None);
        assert_eq!(
            prepared.meta.hash,
            blake3::hash(&bytes).to_hex().to_string()
        );
    }

    #[test]
    fn a_large_image_is_scaled_to_the_edge_and_the_result_is_deterministic() {
        let limits = ImageLimits {
            max_edge: 100,
            ..ImageLimits::default()
        };
        let bytes = png(400, 200);
        let a = prepare(&bytes, None, &limits).unwrap();
        let b = prepare(&bytes, None, &limits).unwrap();
        assert_eq!((a.meta.width, a.meta.height), (100, 50));
        assert_eq!(a.meta.resized_from, Some((400, 200)));
        assert_eq!(a.data, b.data);
        // Over the byte cap: re-encoded smaller until it fits.
        let tight = ImageLimits {
            max_edge: 400,
            max_bytes: 6_000,
            ..ImageLimits::default()
        };
        let small = prepare(&bytes, None, &tight).unwrap();
        assert!(small.data.len() <= 6_000);
    }

    #[test]
    fn bad_inputs_are_refused_with_the_cause() {
        let limits = ImageLimits::default();
        let e = prepare(b"hello world", None, &limits).unwrap_err();
        assert!(e.to_string().contains("PNG, JPEG, GIF or WebP"), "{e}");
        assert!(e.to_string().contains("\"hello world\""), "{e}");
        let bytes = png(64, 64);
        let e = prepare(&bytes[..bytes.len() / 2], None, &limits).unwrap_err();
        assert!(matches!(e, ImageError::Malformed { .. }), "{e}");
        assert!(e.to_string().contains("truncated"), "{e}");
    }
}
