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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_names_the_server_the_cause_and_the_fix() {
        let cases = [
            (
                ServerError::StartTimeout {
                    name: "gh".into(),
                    launch: "npx gh-mcp".into(),
                    within: Duration::from_millis(1500),
                },
                "MCP server `gh` did not start within 1.5 s; check that `npx gh-mcp` runs and speaks MCP (a slow start needs a larger [mcp] startup_timeout)",
            ),
            (
                ServerError::Spawn {
                    name: "gh".into(),
                    command: "gh-mcp".into(),
                    dir: PathBuf::from("/ws"),
                    file: PathBuf::from("/c/config.toml"),
                    reason: "No such file or directory (os error 2)".into(),
                },
                "MCP server `gh` could not start `gh-mcp` in /ws: No such file or directory (os error 2); check `command` in /c/config.toml (a program on PATH or a path)",
            ),
            (
                ServerError::Handshake {
                    name: "gh".into(),
                    launch: "gh-mcp".into(),
                    how: "exited with code 1".into(),
                    reason: "connection closed".into(),
                },
                "MCP server `gh` (gh-mcp) exited with code 1 before it finished the MCP handshake (connection closed)",
            ),
            (
                ServerError::ListTimeout {
                    name: "gh".into(),
                    within: Duration::from_secs(10),
                },
                "MCP server `gh` did not list its tools within 10 s, so it was stopped",
            ),
            (
                ServerError::ListFailed {
                    name: "gh".into(),
                    how: "closed the connection".into(),
                    reason: "transport closed".into(),
                },
                "MCP server `gh` closed the connection while listing its tools (transport closed)",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn an_expansion_error_reads_as_the_config_error_it_is() {
        let error = ServerError::from(crate::config::ExpandError::Unclosed {
            what: "[mcp.servers.gh] url".into(),
        });
        assert_eq!(
            error.to_string(),
            "[mcp.servers.gh] url: `${` without a closing `}`; write ${NAME} to use an environment variable"
        );
    }
}
