//! Declaring MCP servers: `[mcp.servers.NAME]` tables in `config.toml` and in a workspace's
//! `.vis/mcp.toml` (the same shape), plus the `[mcp]` settings of the user's config.
//!
//! ```toml
//! [mcp]
//! call_timeout = 60          # seconds one tool call may take (default 60)
//! startup_timeout = 30       # seconds a server gets to start and list its tools (default 30)
//! max_message_mb = 16        # largest MCP message (a tool's answer; vis mcp's messages)
//!
//! [mcp.servers.github]       # a stdio server: vis starts the command
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
//! cwd = "."                  # relative to the workspace (the default)
//! timeout = 120              # this server's call timeout
//!
//! [mcp.servers.docs]         # a streamable HTTP server
//! url = "https://example.com/mcp"
//! headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
//! ```
//!
//! Design notes:
//! - A server's name becomes its Python namespace, so it must be one identifier (validated by
//!   the catalog's name rules, never sanitized); the error proposes a spelling.
//! - Unknown keys inside a server table are errors, unlike elsewhere in the config: a
//!   misspelled `env` or `args` would otherwise start a server silently misconfigured.
//! - `${VAR}` in `command`, `args`, `env`, `url` and `headers` is replaced from the host's
//!   environment when the server starts (so secrets need not be written into files). The
//!   approval of a workspace server covers the text as written, before expansion.
//! - Values from `env` and `headers` may be secrets: they go to the server process or its
//!   HTTP requests only, never to the worker, the store or `session["mcp"]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::catalog::{validate_name, NameRule};

mod errors;
pub use errors::{ExpandError, McpConfigError, ServerNameError, ServerProblem};

/// Default time one MCP tool call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a server gets to start and answer `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default largest MCP message, in MiB (`[mcp] max_message_mb`): an answer of an MCP server to
/// vis, and a message between `vis mcp` and its client, in either direction.
pub const DEFAULT_MAX_MESSAGE_MB: u64 = 16;
/// The largest `max_message_mb` accepted: an answer must still fit the worker's frames
/// (`runtime::MAX_FRAME_BYTES`, 64 MiB) once converted.
pub const MAX_MESSAGE_MB_LIMIT: u64 = 32;

/// Environment variables a stdio server inherits from the host (plus its own `env`); the
/// same idea as the official SDKs' default environment, so keys of the host never leak.
pub const INHERITED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
    "TZ",
];

/// Where a server was declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerSource {
    /// The user's `config.toml`: trusted as written.
    Config,
    /// The workspace's `.vis/mcp.toml`: runs only once approved (see `approval`).
    Workspace,
}

impl ServerSource {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerSource::Config => "config",
            ServerSource::Workspace => "workspace",
        }
    }
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Transport {
    /// A process vis starts; MCP over its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// One declared server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSpec {
    pub name: String,
    pub source: ServerSource,
    pub transport: Transport,
    /// This server's call timeout (else `[mcp] call_timeout`).
    pub timeout: Option<Duration>,
    /// The file that declared it (for messages).
    pub file: PathBuf,
}

impl ServerSpec {
    /// What the server runs, for people: the command line (quoted where needed) or the URL.
    /// Values of `env` and `headers` are never shown (they may be secrets); their names are.
    pub fn launch_line(&self) -> String {
        match &self.transport {
            Transport::Stdio {
                command, args, env, ..
            } => {
                let mut parts: Vec<String> = env.keys().map(|k| format!("{k}=…")).collect();
                parts.push(shell_quote(command));
                parts.extend(args.iter().map(|a| shell_quote(a)));
                parts.join(" ")
            }
            Transport::Http { url, headers } => {
                let mut line = url.clone();
                if !headers.is_empty() {
                    let names: Vec<&str> = headers.keys().map(String::as_str).collect();
                    line.push_str(&format!(" (headers: {})", names.join(", ")));
                }
                line
            }
        }
    }

    /// A stable hash of everything that decides what runs (command, args, env, cwd; or URL
    /// and headers), as written: the key of a workspace server's approval, so any change
    /// needs approval again.
    pub fn fingerprint(&self) -> String {
        let canonical = serde_json::to_string(&self.transport).unwrap_or_default();
        blake3::hash(canonical.as_bytes()).to_hex()[..32].to_string()
    }

    pub fn transport_kind(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,${}".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `[mcp]` of the user's config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpConfig {
    pub call_timeout: Option<Duration>,
    pub startup_timeout: Option<Duration>,
    /// `[mcp] max_message_mb`.
    pub max_message_mb: Option<u64>,
    /// `[mcp.servers.*]`, by name.
    pub servers: Vec<ServerSpec>,
}

impl McpConfig {
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout.unwrap_or(DEFAULT_CALL_TIMEOUT)
    }

    pub fn startup_timeout(&self) -> Duration {
        self.startup_timeout.unwrap_or(DEFAULT_STARTUP_TIMEOUT)
    }

    /// The largest MCP message, in bytes.
    pub fn max_message_bytes(&self) -> usize {
        let mb = self.max_message_mb.unwrap_or(DEFAULT_MAX_MESSAGE_MB);
        usize::try_from(mb.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
    }
}

/// A server table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerTable {
    /// Accepted for configs copied from other clients: "stdio", "http" or "streamable-http".
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    /// Read from the raw table (for the error message); listed so it is a known key.
    #[allow(dead_code)]
    timeout: Option<toml::Value>,
}

/// Headers the streamable HTTP transport manages itself.
const RESERVED_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

const SERVER_KEYS: &str =
    "command, args, env, cwd (a stdio server) or url, headers (streamable HTTP), and timeout";

fn line_of(text: &str, path: &[&str]) -> String {
    super::line_of_key(text, path)
}

fn positive_seconds(value: &toml::Value, what: &str, at: &str) -> Result<Duration, McpConfigError> {
    let n = value
        .as_float()
        .or_else(|| value.as_integer().map(|i| i as f64));
    match n {
        Some(n) if n.is_finite() && n > 0.0 && n <= 86_400.0 => Ok(Duration::from_secs_f64(n)),
        _ => Err(McpConfigError::NotSeconds {
            at: at.to_string(),
            what: what.to_string(),
            value: value.to_string(),
        }),
    }
}

/// Reads the `mcp` table of a parsed TOML file. `text` is the file's text (for line numbers);
/// `with_settings` reads `call_timeout`/`startup_timeout` too (the user's config only).
pub fn parse_mcp_table(
    root: &toml::Table,
    text: &str,
    file: &Path,
    source: ServerSource,
) -> Result<McpConfig, McpConfigError> {
    let mut out = McpConfig::default();
    let Some(mcp) = root.get("mcp") else {
        return Ok(out);
    };
    let mcp = mcp.as_table().ok_or_else(|| McpConfigError::McpNotTable {
        at: line_of(text, &["mcp"]),
    })?;
    for (key, value) in mcp {
        match key.as_str() {
            "servers" => {}
            "max_message_mb" if source == ServerSource::Config => {
                let at = line_of(text, &["mcp", key]);
                match value.as_integer() {
                    Some(n) if (1..=MAX_MESSAGE_MB_LIMIT as i64).contains(&n) => {
                        out.max_message_mb = Some(n as u64);
                    }
                    _ => {
                        return Err(McpConfigError::NotMegabytes {
                            at,
                            value: value.to_string(),
                        })
                    }
                }
            }
            "call_timeout" | "startup_timeout" if source == ServerSource::Config => {
                let d =
                    positive_seconds(value, &format!("mcp.{key}"), &line_of(text, &["mcp", key]))?;
                if key == "call_timeout" {
                    out.call_timeout = Some(d);
                } else {
                    out.startup_timeout = Some(d);
                }
            }
            // Settings other than servers are the user's to choose, not a workspace's; other
            // keys are ignored like unknown keys elsewhere in the config.
            _ => {}
        }
    }
    let Some(servers) = mcp.get("servers") else {
        return Ok(out);
    };
    let servers = servers
        .as_table()
        .ok_or_else(|| McpConfigError::ServersNotTable {
            at: line_of(text, &["mcp", "servers"]),
        })?;
    for (name, value) in servers {
        let at = line_of(text, &["mcp", "servers", name]);
        validate_server_name(name).map_err(|problem| McpConfigError::Name {
            at: at.clone(),
            problem,
        })?;
        let table = value
            .as_table()
            .ok_or_else(|| McpConfigError::ServerNotTable {
                at: at.clone(),
                name: name.clone(),
            })?;
        let parsed: ServerTable =
            toml::Value::Table(table.clone())
                .try_into()
                .map_err(|e: toml::de::Error| {
                    let message = e.message().trim_end().to_string();
                    let (at, name) = (at.clone(), name.clone());
                    if message.starts_with("unknown field") {
                        McpConfigError::UnknownKey { at, name, message }
                    } else {
                        McpConfigError::BadValue { at, name, message }
                    }
                })?;
        out.servers
            .push(build_server(name, parsed, &at, file, source, table)?);
    }
    Ok(out)
}

/// A server name is one namespace segment: a Python identifier, not a keyword, and not a
/// dunder (a namespace `__builtins__` would replace the block's builtins).
pub fn validate_server_name(name: &str) -> Result<(), ServerNameError> {
    if name.contains('.') {
        return Err(ServerNameError::Dotted {
            name: name.to_string(),
        });
    }
    if name.len() > 4 && name.starts_with("__") && name.ends_with("__") {
        return Err(ServerNameError::Dunder {
            name: name.to_string(),
        });
    }
    validate_name(name, NameRule::Identifier).map_err(|reason| ServerNameError::NotIdentifier {
        name: name.to_string(),
        reason: Box::new(reason),
    })
}

fn build_server(
    name: &str,
    t: ServerTable,
    at: &str,
    file: &Path,
    source: ServerSource,
    raw: &toml::Table,
) -> Result<ServerSpec, McpConfigError> {
    let here = |problem: ServerProblem| McpConfigError::Server {
        at: at.to_string(),
        name: name.to_string(),
        problem,
    };
    let timeout = match raw.get("timeout") {
        Some(v) => Some(positive_seconds(
            v,
            &format!("mcp.servers.{name}.timeout"),
            at,
        )?),
        None => None,
    };
    let transport = match (&t.command, &t.url) {
        (Some(_), Some(_)) => return Err(here(ServerProblem::CommandAndUrl)),
        (None, None) => return Err(here(ServerProblem::NeitherCommandNorUrl)),
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(here(ServerProblem::EmptyCommand));
            }
            if t.headers.is_some() {
                return Err(here(ServerProblem::HeadersOnStdio));
            }
            if let Some(kind) = &t.kind {
                if kind != "stdio" {
                    return Err(here(ServerProblem::TypeNotStdio(kind.clone())));
                }
            }
            Transport::Stdio {
                command: command.clone(),
                args: t.args.unwrap_or_default(),
                env: t.env.unwrap_or_default(),
                cwd: t.cwd,
            }
        }
        (None, Some(url)) => {
            let lower = url.to_ascii_lowercase();
            if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                return Err(here(ServerProblem::NotHttpUrl(url.clone())));
            }
            for (key, what) in [
                ("args", t.args.is_some()),
                ("env", t.env.is_some()),
                ("cwd", t.cwd.is_some()),
            ] {
                if what {
                    return Err(here(ServerProblem::StdioKeyOnHttp(key)));
                }
            }
            if let Some(kind) = &t.kind {
                if !matches!(
                    kind.as_str(),
                    "http" | "streamable-http" | "streamable_http"
                ) {
                    return Err(here(ServerProblem::TypeNotHttp(kind.clone())));
                }
            }
            let headers = t.headers.unwrap_or_default();
            for (k, v) in &headers {
                let ok_name = !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !ok_name || v.contains(['\r', '\n']) {
                    return Err(here(ServerProblem::BadHeader(k.clone())));
                }
                if RESERVED_HEADERS.iter().any(|r| r.eq_ignore_ascii_case(k)) {
                    return Err(here(ServerProblem::ReservedHeader(k.clone())));
                }
            }
            Transport::Http {
                url: url.clone(),
                headers,
            }
        }
    };
    Ok(ServerSpec {
        name: name.to_string(),
        source,
        transport,
        timeout,
        file: file.to_path_buf(),
    })
}

/// Reads a workspace's `.vis/mcp.toml` (no file: no servers).
pub fn load_workspace_servers(workspace: &Path) -> Result<Vec<ServerSpec>, McpConfigError> {
    let path = workspace.join(".vis").join("mcp.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(McpConfigError::Read { path, source }),
    };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let place = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                format!("line {line}: ")
            })
            .unwrap_or_default();
        McpConfigError::Syntax {
            path: path.clone(),
            place,
            message: e.message().trim_end().to_string(),
        }
    })?;
    parse_mcp_table(&table, &text, &path, ServerSource::Workspace)
        .map(|c| c.servers)
        .map_err(|e| McpConfigError::InFile {
            path: path.clone(),
            inner: Box::new(e),
        })
}

/// Replaces `${NAME}` with the host's environment variable `NAME`; `what` names the place
/// for the error (an unset variable is an error, not an empty string).
pub fn expand_env(value: &str, what: &str) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Unclosed {
                what: what.to_string(),
            });
        };
        let name = &after[..end];
        match std::env::var(name) {
            Ok(v) => out.push_str(&v),
            Err(_) => {
                return Err(ExpandError::Unset {
                    what: what.to_string(),
                    name: name.to_string(),
                })
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests;
