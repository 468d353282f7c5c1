//! Why a server could not be reached or listed.

use std::path::PathBuf;
use std::time::Duration;

use super::seconds;

/// Why a server could not be reached or listed. The text goes to `session["mcp"]` and, for a
/// call, to the block as a server error it can act on; it never ends the block.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum ServerError {
    #[error("MCP server `{name}` did not start within {}; check that `{launch}` runs and speaks MCP (a slow start needs a larger [mcp] startup_timeout)", seconds(*within))]
    StartTimeout {
        name: String,
        launch: String,
        within: Duration,
    },
    #[error(transparent)]
    Expand(#[from] crate::config::ExpandError),
    #[error("MCP server `{name}` could not start `{command}` in {}: {reason}; check `command` in {} (a program on PATH or a path)", dir.display(), file.display())]
    Spawn {
        name: String,
        command: String,
        dir: PathBuf,
        file: PathBuf,
        reason: String,
    },
    #[error("MCP server `{0}`: its pipes are missing")]
    PipesMissing(String),
    #[error(
        "MCP server `{name}` ({launch}) {how} before it finished the MCP handshake ({reason})"
    )]
    Handshake {
        name: String,
        launch: String,
        how: String,
        reason: String,
    },
    #[error("MCP server `{name}`: header `{header}` is not a valid HTTP header; fix it in {}", file.display())]
    BadHeader {
        name: String,
        header: String,
        file: PathBuf,
    },
    #[error("MCP server `{name}`: cannot build the HTTP client: {reason}")]
    HttpClient { name: String, reason: String },
    #[error("MCP server `{name}` at {url} did not answer the MCP handshake ({reason}); check that it runs and that `url` is its MCP endpoint")]
    HttpHandshake {
        name: String,
        url: String,
        reason: String,
    },
    #[error("MCP server `{name}` {how} while listing its tools ({reason})")]
    ListFailed {
        name: String,
        how: String,
        reason: String,
    },
    #[error("MCP server `{name}` did not list its tools within {}, so it was stopped", seconds(*within))]
    ListTimeout { name: String, within: Duration },
}
