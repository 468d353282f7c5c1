//! The web view: one page and its script, shipped inside the binary (no build step for users,
//! nothing loaded from elsewhere). It talks to the same API as every other client, with the
//! cookie it got for the one-time login link `vis serve` prints (or for the token typed into
//! the form it shows on a 401).
//!
//! The page's style is inlined under a per-response nonce. Its script is a set of ES modules
//! (`web/*.js`), served as they are written: the page loads `main.js` with that nonce, and the
//! modules it imports inherit it, so the Content-Security-Policy allows exactly them: no other
//! script, no inline handlers, no remote origin, and `fetch` only to this server.
//!
//! The modules are embedded with `include_str!` like the page, in one table ([`MODULES`]), and
//! each is served at its own fixed path under `/web/`: the router has one route per entry and
//! the access check makes exactly those paths public, so no part of a path a client sends
//! chooses what is read. They hold no data (the page gets everything through the API), and
//! are sent `no-store` like the page, so a browser always runs the modules of the binary that
//! serves it.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::header;
use axum::response::{IntoResponse, Response};

static TEMPLATE: &str = include_str!("web/index.html");
static STYLE: &str = include_str!("web/app.css");

/// One of the page's ES modules.
pub(super) struct Module {
    /// Where it is served: `/web/<file>`.
    pub(super) path: &'static str,
    pub(super) source: &'static str,
}

/// Each file at `/web/<file>`, embedded from `src/serve/web/<file>`.
macro_rules! modules {
    ($($file:literal),* $(,)?) => {
        &[$(Module {
            path: concat!("/web/", $file),
            source: include_str!(concat!("web/", $file)),
        }),*]
    };
}

/// Every module of the page; `main.js` is the one the page loads, the rest are its imports.
pub(super) static MODULES: &[Module] = modules![
    "main.js",
    "dom.js",
    "format.js",
    "state.js",
    "login.js",
    "api.js",
    "sse.js",
    "markdown.js",
    "highlight.js",
    "blocks.js",
    "folds.js",
    "transcript.js",
    "chart.js",
    "session-list.js",
    "session-view.js",
    "live.js",
    "session.js",
    "work.js",
];

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

/// The router with a `GET` route for each module, at its fixed path.
pub(super) fn with_modules<S>(router: axum::Router<S>) -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    MODULES.iter().fold(router, |router, module| {
        let source = module.source;
        router.route(
            module.path,
            axum::routing::get(move || async move { script(source) }),
        )
    })
}

/// Whether `path` is where a module is served (the access check lets these through without
/// the token, like the page: they hold no data).
pub(super) fn is_module_path(path: &str) -> bool {
    MODULES.iter().any(|module| module.path == path)
}

/// A module as JavaScript, never sniffed as anything else, and not kept by the browser.
fn script(source: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        source,
    )
        .into_response()
}

/// The page's one policy: its own inlined style and its modules (by nonce), API calls to this
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

    /// The `./x.js` names a module imports.
    fn imports(source: &str) -> Vec<&str> {
        source
            .lines()
            .filter(|line| line.starts_with("import "))
            .map(|line| {
                let from = line.split(" from '").nth(1).unwrap_or("");
                from.strip_suffix("';").unwrap_or(from)
            })
            .collect()
    }

    #[test]
    fn the_page_inlines_its_style_and_loads_its_script_under_the_policys_nonce() {
        let n = nonce();
        assert_eq!(n.len(), 32);
        assert_ne!(n, nonce(), "a nonce is never reused");
        let html = page(&n);
        assert!(html.contains(&format!(
            "<script type=\"module\" nonce=\"{n}\" src=\"/web/main.js\"></script>"
        )));
        assert_eq!(html.matches("<script").count(), 1, "one script element");
        assert!(html.contains(&format!("<style nonce=\"{n}\">")));
        assert!(!html.contains("{{"), "a placeholder was left");
        // Script only by the nonce: not even this origin's other answers.
        let policy = policy(&n);
        let script_src = policy.split("; ").find(|d| d.starts_with("script-src"));
        assert_eq!(script_src, Some(format!("script-src 'nonce-{n}'").as_str()));
        // Nothing from elsewhere, and no way to run other script.
        for bad in ["http:", "https:", "unsafe-inline", "unsafe-eval", "*"] {
            assert!(!policy.contains(bad), "{bad}");
        }
    }

    #[test]
    fn the_modules_build_nodes_and_load_nothing_from_elsewhere() {
        assert!(!STYLE.to_ascii_lowercase().contains("</style"));
        assert!(!STYLE.contains("{{"));
        for module in MODULES {
            // The page builds nodes, never HTML from strings, and runs no code from strings.
            for bad in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
                "import(",
            ] {
                assert!(!module.source.contains(bad), "{}: {bad}", module.path);
            }
        }
        // Nothing is loaded from the internet.
        let html = page("n");
        for bad in ["src=\"http", "href=\"http", "url(http", "@import"] {
            assert!(!html.contains(bad), "{bad}");
        }
    }

    #[test]
    fn every_import_is_a_module_the_server_ships() {
        for module in MODULES {
            for name in imports(module.source) {
                let path = name
                    .strip_prefix("./")
                    .map(|file| format!("/web/{file}"))
                    .unwrap_or_default();
                assert!(
                    is_module_path(&path),
                    "{} imports {name:?}, which is not in MODULES",
                    module.path
                );
            }
        }
        assert!(is_module_path("/web/main.js"), "the page's entry");
    }

    #[test]
    fn every_script_file_beside_the_page_is_shipped() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/serve/web");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".js"))
            .map(|name| format!("/web/{name}"))
            .collect();
        files.sort();
        let mut shipped: Vec<&str> = MODULES.iter().map(|m| m.path).collect();
        shipped.sort_unstable();
        assert_eq!(files, shipped);
    }

    #[test]
    fn only_the_exact_module_paths_are_modules() {
        assert!(is_module_path("/web/markdown.js"));
        for path in [
            "/web/",
            "/web",
            "/web/../web/main.js",
            "/web/main.js/",
            "/web/main.js?x",
            "/web//main.js",
            "/web/%6dain.js",
            "/web/app.js",
            "/web/index.html",
            "/main.js",
        ] {
            assert!(!is_module_path(path), "{path}");
        }
    }
}
