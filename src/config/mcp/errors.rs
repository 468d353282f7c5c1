//! Why a declaration of MCP servers cannot be used: one line each, naming the place and the
//! fix.

use std::path::PathBuf;

use super::SERVER_KEYS;

/// A declaration of MCP servers that cannot be used. `at` is where (`line 7: `, possibly
/// empty); every message names the fix.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("{at}`{what}` must be a positive number of seconds (at most a day), got {value}; e.g. {} = 60", what.rsplit('.').next().unwrap_or(what))]
    NotSeconds {
        at: String,
        what: String,
        value: String,
    },
    #[error("{at}`mcp.max_message_mb` must be a whole number of MiB from 1 to {}, got {value}; e.g. max_message_mb = 16", super::MAX_MESSAGE_MB_LIMIT)]
    NotMegabytes { at: String, value: String },
    #[error("{at}`mcp` must be a table ([mcp])")]
    McpNotTable { at: String },
    #[error("{at}`mcp.servers` must hold one table per server, e.g. [mcp.servers.github]")]
    ServersNotTable { at: String },
    #[error("{at}{problem}")]
    Name {
        at: String,
        problem: ServerNameError,
    },
    #[error("{at}`mcp.servers.{name}` must be a table: write [mcp.servers.{name}] with command = \"…\" or url = \"…\" under it")]
    ServerNotTable { at: String, name: String },
    #[error("{at}[mcp.servers.{name}]: {message}; the keys are {SERVER_KEYS}")]
    UnknownKey {
        at: String,
        name: String,
        message: String,
    },
    #[error("{at}[mcp.servers.{name}]: {message}; see the documented keys in docs/mcp.md")]
    BadValue {
        at: String,
        name: String,
        message: String,
    },
    /// What is wrong inside one server's table.
    #[error("{at}[mcp.servers.{name}]{problem}")]
    Server {
        at: String,
        name: String,
        problem: ServerProblem,
    },
    #[error("cannot read {}: {source}; fix its permissions or remove it", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid {}: {place}{message}; fix the TOML syntax", path.display())]
    Syntax {
        path: PathBuf,
        place: String,
        message: String,
    },
    /// A problem in a workspace's `.vis/mcp.toml`, named with the file.
    #[error("invalid {}: {inner}", path.display())]
    InFile {
        path: PathBuf,
        inner: Box<McpConfigError>,
    },
}

/// What is wrong with one server's declaration (shown after `[mcp.servers.NAME]`).
#[derive(Debug, thiserror::Error)]
pub enum ServerProblem {
    #[error(" has both `command` and `url`; keep `command` for a server vis starts, or `url` for a streamable HTTP server")]
    CommandAndUrl,
    #[error(" needs `command` (a server vis starts, e.g. command = \"npx\") or `url` (a streamable HTTP server, e.g. url = \"http://127.0.0.1:8000/mcp\")")]
    NeitherCommandNorUrl,
    #[error(": `command` is empty; name the program to run, e.g. command = \"npx\"")]
    EmptyCommand,
    #[error(": `headers` applies to HTTP servers (url = …) only; remove it or use `env` for the process")]
    HeadersOnStdio,
    #[error(
        ": type = \"{0}\" does not fit `command`; a server with a command is type = \"stdio\""
    )]
    TypeNotStdio(String),
    #[error(": url = \"{0}\" is not an http:// or https:// URL; write the server's full MCP endpoint, e.g. \"http://127.0.0.1:8000/mcp\"")]
    NotHttpUrl(String),
    #[error(": `{0}` applies to servers vis starts (command = …) only; remove it")]
    StdioKeyOnHttp(&'static str),
    #[error(": type = \"{0}\" does not fit `url`; vis speaks streamable HTTP (type = \"http\")")]
    TypeNotHttp(String),
    #[error(": header `{0}` is not a valid HTTP header (name or value); fix it in `headers`")]
    BadHeader(String),
    #[error(": header `{0}` is set by the MCP transport itself; remove it from `headers`")]
    ReservedHeader(String),
}

/// A server name that cannot be a namespace.
#[derive(Debug, thiserror::Error)]
pub enum ServerNameError {
    #[error("MCP server name `{name}` must be one identifier (it becomes the namespace `{name}`), without `.`; rename it, e.g. [mcp.servers.{}]", name.replace('.', "_"))]
    Dotted { name: String },
    #[error("MCP server name `{name}` is reserved: names of the form __name__ are Python's own (a block's `__builtins__`, `__name__`, …); rename the table, e.g. [mcp.servers.{}_mcp]", name.trim_matches('_'))]
    Dunder { name: String },
    #[error("MCP server name `{name}` is not a valid namespace: {reason}; rename the table")]
    NotIdentifier {
        name: String,
        reason: Box<crate::catalog::CatalogError>,
    },
}

/// `${NAME}` in a server's declaration that cannot be expanded; `what` is the place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error(
        "{what}: `${{` without a closing `}}`; write ${{NAME}} to use an environment variable"
    )]
    Unclosed { what: String },
    #[error("{what} uses ${{{name}}}, but the environment variable {name} is not set; set it or write the value")]
    Unset { what: String, name: String },
}
