//! The web view: one page, shipped inside the binary (no build step for users, nothing loaded
//! from elsewhere). It talks to the same API as every other client, with the bearer token the
//! person gives it (`?token=…` once, or the form the page shows on a 401).
//!
//! The page's style and script are inlined under a per-response nonce, so the
//! Content-Security-Policy allows exactly them: no other script, no inline handlers, no
//! remote origin, and `fetch` only to this server.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::header;
use axum::response::{IntoResponse, Response};

static TEMPLATE: &str = include_str!("web/index.html");
static STYLE: &str = include_str!("web/app.css");
static SCRIPT: &str = include_str!("web/app.js");

pub async fn index() -> Response {
    let nonce = nonce();
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::CONTENT_SECURITY_POLICY, policy(&nonce)),
            (header::CACHE_CONTROL, "no-store".to_string()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
            (header::X_FRAME_OPTIONS, "DENY".to_string()),
        ],
        page(&nonce),
    )
        .into_response()
}

/// The page's one policy: its own inlined style and script (by nonce), API calls to this
/// origin, images only inline.
fn policy(nonce: &str) -> String {
    format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
         connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    )
}

fn page(nonce: &str) -> String {
    TEMPLATE
        .replace("{{nonce}}", nonce)
        .replace("{{style}}", STYLE)
        .replace("{{script}}", SCRIPT)
}

/// 128 unpredictable bits per response, from the OS's random generator.
fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Not seen on a supported kernel; a keyed hash of a counter and the time still gives
        // a nonce no page can guess ahead of time.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let hash = blake3::hash(format!("{n}-{now}-{}", std::process::id()).as_bytes());
        bytes.copy_from_slice(&hash.as_bytes()[..16]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_inlines_its_style_and_script_under_the_policys_nonce() {
        let n = nonce();
        assert_eq!(n.len(), 32);
        assert_ne!(n, nonce(), "a nonce is never reused");
        let html = page(&n);
        assert!(html.contains(&format!("<script nonce=\"{n}\">")));
        assert!(html.contains(&format!("<style nonce=\"{n}\">")));
        assert!(!html.contains("{{"), "a placeholder was left");
        assert!(policy(&n).contains(&format!("script-src 'nonce-{n}'")));
        // Nothing from elsewhere, and no way to run other script.
        for bad in ["http:", "https:", "unsafe-inline", "unsafe-eval", "*"] {
            assert!(!policy(&n).contains(bad), "{bad}");
        }
    }

    #[test]
    fn the_inlined_files_cannot_end_their_element_early() {
        assert!(!SCRIPT.to_ascii_lowercase().contains("</script"));
        assert!(!STYLE.to_ascii_lowercase().contains("</style"));
        assert!(!SCRIPT.contains("{{") && !STYLE.contains("{{"));
        // The page builds nodes, never HTML from strings.
        for bad in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!SCRIPT.contains(bad), "{bad}");
        }
        // Nothing is loaded from the internet.
        let html = page("n");
        for bad in ["src=\"http", "href=\"http", "url(http", "@import"] {
            assert!(!html.contains(bad), "{bad}");
        }
    }
}
