//! Images in requests: which models take them, and their encodings on each wire.
//!
//! Anthropic takes an `image` block (base64 source) inside a `tool_result`; OpenAI-compatible
//! Chat Completions tool messages carry only text, so the images of a run of tool messages go
//! in one `user` message right after them (the official API allows a user message there). A
//! model that does not take images gets a one-line note in the tool result instead, so the
//! request stays valid for that server. Encodings are pure functions of the stored bytes:
//! every request of a session sends the same bytes for an image (prefix caching).

use base64::Engine;
use serde_json::{json, Value};

use super::ProviderKind;
use crate::protocol::ShownImage;

/// Whether a request may carry images, and the model named in the note when it may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImagePolicy<'a> {
    pub send: bool,
    pub model: &'a str,
}

impl ImagePolicy<'_> {
    /// Sends images (tests and callers that know the model takes them).
    pub const SEND: ImagePolicy<'static> = ImagePolicy {
        send: true,
        model: "",
    };
}

/// The default for `[provider] images` when it is not set: whether `model` is of a family
/// known to take image input. Anthropic's models since Claude 3 all do; among OpenAI-compatible
/// models only the known vision families do (a text-only server refuses `image_url` parts,
/// which would fail every later request of the session).
pub fn model_accepts_images(kind: ProviderKind, model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    match kind {
        ProviderKind::Anthropic => {
            !(name.starts_with("claude-2") || name.starts_with("claude-instant"))
        }
        ProviderKind::OpenAi => {
            const PREFIXES: &[&str] = &[
                "gpt-4o",
                "chatgpt-4o",
                "gpt-4.1",
                "gpt-4.5",
                "gpt-4-turbo",
                "gpt-4-vision",
                "gpt-5",
                "o1",
                "o3",
                "o4",
                "claude-3",
                "claude-sonnet",
                "claude-opus",
                "claude-haiku",
                "gemini",
                "pixtral",
                "llava",
                "bakllava",
                "moondream",
                "minicpm-v",
                "internvl",
                "llama-4",
                "llama4",
                "grok-4",
                "grok-2-vision",
            ];
            const INFIXES: &[&str] = &["vision", "-vl", "_vl", "vl-", "gemma-3", "gemma3", "qvq"];
            let text_only = ["o1-mini", "o1-preview", "o3-mini"]
                .iter()
                .any(|p| name.starts_with(p));
            !text_only
                && (PREFIXES.iter().any(|p| name.starts_with(p))
                    || INFIXES.iter().any(|i| name.contains(i)))
        }
    }
}

/// The line a model without image input reads instead of an image.
pub fn note(model: &str, image: &ShownImage) -> String {
    let meta = &image.meta;
    let mut line = format!(
        "[vis] image not sent: {model} does not accept images ({} {}×{}",
        meta.format.label(),
        meta.width,
        meta.height
    );
    if let Some(caption) = meta.caption.as_deref().filter(|c| !c.is_empty()) {
        line.push_str(", ");
        line.push_str(&crate::protocol::clip(caption, 200));
    }
    line.push(')');
    line
}

/// A tool result's text with the notes for images that are not sent.
pub fn text_with_notes(output: &str, images: &[ShownImage], policy: &ImagePolicy<'_>) -> String {
    if policy.send || images.is_empty() {
        return output.to_string();
    }
    let mut text = output.to_string();
    for image in images {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note(policy.model, image));
    }
    text
}

fn base64(image: &ShownImage) -> String {
    base64::engine::general_purpose::STANDARD.encode(&image.data)
}

/// Anthropic: `{"type": "image", "source": {"type": "base64", …}}`.
pub fn anthropic_block(image: &ShownImage) -> Value {
    json!({
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": image.meta.format.media_type(),
            "data": base64(image),
        }
    })
}

/// OpenAI: the user message after a run of tool messages, holding their images, each after
/// the line that names it (the placeholder the block printed).
pub fn openai_message(images: &[&ShownImage]) -> Value {
    let mut parts = vec![json!({
        "type": "text",
        "text": "[vis] the images shown by the python_execution result(s) above:",
    })];
    for image in images {
        parts.push(json!({"type": "text", "text": image.meta.placeholder()}));
        parts.push(json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{};base64,{}", image.meta.format.media_type(), base64(image))},
        }));
    }
    json!({"role": "user", "content": parts})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_families_take_images_and_text_only_models_do_not() {
        use ProviderKind::*;
        assert!(model_accepts_images(Anthropic, "claude-sonnet-4-5"));
        assert!(!model_accepts_images(Anthropic, "claude-2.1"));
        assert!(model_accepts_images(OpenAi, "gpt-4o-mini"));
        assert!(model_accepts_images(OpenAi, "openai/gpt-5"));
        assert!(model_accepts_images(OpenAi, "Qwen/Qwen2.5-VL-7B-Instruct"));
        assert!(!model_accepts_images(OpenAi, "o3-mini"));
        assert!(!model_accepts_images(OpenAi, "qwen2.5-coder-32b"));
        assert!(!model_accepts_images(OpenAi, "llama-3.1-8b-instruct"));
    }
}
