//! Where things live: `$VIS_HOME` (default `~/.local/share/vis`) holds `vis.db`, the
//! artifacts directory and `vis serve`'s token (`serve-token`); `--db PATH` moves the
//! database, and artifacts and the token go beside it. The user's
//! config directory ([`config_dir`]) holds `config.toml` ([`Config`]), `extensions/` and
//! `skills/`.
//!
//! This module owns every TOML file Vis reads: `config.toml` here, the `[mcp]` table and
//! `.vis/mcp.toml` in `mcp/` (the MCP hub takes the parsed values), where things live in
//! `paths.rs`, and errors that name the line in `errors.rs`. This file reads `config.toml`
//! and checks the small scalar tables (`[permissions]`, `[catalog]`, `[runtime]`,
//! `[gateway]`); each larger section is a file of its own with its type and its checks
//! (`provider`, `serve`, `sandbox`, `folding`, `images`, `checkpoints`, `spawn`, `jobs`,
//! `pricing`), called here in one fixed order so the first bad value is the one reported.

use std::path::{Path, PathBuf};

mod checkpoints;
mod errors;
mod folding;
mod images;
mod jobs;
mod mcp;
mod paths;
mod pricing;
mod provider;
mod sandbox;
mod serve;
mod spawn;
#[cfg(test)]
mod tests;

pub use checkpoints::CheckpointsConfig;
pub(crate) use errors::line_of_key;
pub use errors::ConfigError;
use errors::{line_number, plain_serde_message};
pub use folding::FoldingConfig;
pub use images::ImagesConfig;
pub use jobs::{JobsConfig, MAX_JOBS_LIMIT};
pub use mcp::{
    expand_env, load_workspace_servers, parse_mcp_table, validate_server_name, ExpandError,
    McpConfig, McpConfigError, ServerNameError, ServerProblem, ServerSource, ServerSpec, Transport,
    DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_MESSAGE_MB, DEFAULT_STARTUP_TIMEOUT, INHERITED_ENV,
    MAX_MESSAGE_MB_LIMIT,
};
pub use paths::{
    artifact_dir, config_dir, db_path, serve_token_path, store_dir, store_files, vis_home,
};
pub use pricing::{matches_pattern, PriceOverrides, PricingConfig};
pub use provider::ProviderConfig;
pub use sandbox::SandboxConfig;
pub use serve::{ServeConfig, ServeProviderConfig, MIN_LEASE_TTL};
pub use spawn::{SpawnConfig, MAX_SPAWN_DEPTH, MAX_SPAWN_PARALLEL};

/// What Vis reads from `config.toml` so far (unknown tables and keys are ignored so configs
/// written for newer versions keep working):
///
/// ```toml
/// [permissions]
/// deny = ["git.blame", "tests"]   # names or namespaces; denied ones do not exist for the model
///
/// [catalog]
/// budget = 2000                   # o200k tokens for the catalog in the prompt
///
/// [runtime]
/// timeout = 300                   # block timeout, seconds
/// memory_limit_mb = 4096          # the worker's memory cap
/// output_limit = 20000            # block output cap, characters
///
/// [provider]
/// name = "anthropic"              # or "openai" (any OpenAI-compatible server)
/// model = "claude-sonnet-4-5"
/// base_url = "http://localhost:11434/v1"
/// api_key = "…"                   # prefer OPENAI_API_KEY / ANTHROPIC_API_KEY
/// max_output_tokens = 16000       # Anthropic's max_tokens
/// thinking_budget = 4000          # Anthropic extended thinking (off when absent)
/// request_timeout = 120           # seconds until the response starts
/// idle_timeout = 300              # seconds of silence allowed mid-stream
/// max_retries = 4
/// tool_choice = "auto"            # or "required", "none", "python_execution" (not sent
///                                 # when absent; llama-cpp-python needs it for tools)
/// stream = false                  # whole answers instead of streams (default true)
///
/// [gateway]
/// max_iterations = 100            # tool calls per turn
///
/// [serve]
/// listen = "127.0.0.1:7878"
/// token = "…"                     # or VIS_SERVE_TOKEN (16+ characters); default: generated
///                                 # at first start into serve-token beside the database
/// public_name = "vis.example.com" # a Host name accepted besides loopback names (host[:port])
/// workspaces = ["/home/me/src"]   # sessions only beneath these (default: anywhere but /,
///                                 # the home directory itself and Vis's own directories)
/// max_live_workers = 32
/// idle_park_after = 900           # seconds
/// shutdown_grace = 30             # seconds running blocks get at shutdown
/// max_connections = 256           # open HTTP connections; more are refused with 503
/// header_timeout = 30             # seconds a client has to send a request's headers
/// event_log_mb = 8                # events kept per session for replay (Last-Event-ID)
/// node_id = "gw-1"                # this node among those sharing one store (default
///                                 # HOSTNAME:PORT); see docs/serve.md, "Many nodes"
/// advertise = "http://10.0.0.5:7878"  # where other nodes reach this one (default: --listen)
/// lease_ttl = 15                  # seconds a node's hold on a session lasts unless renewed
/// [serve.providers.fast]          # providers a client may choose by name; the server's own
/// provider = "anthropic"          # settings ([provider], flags, env) are the one named
/// model = "claude-haiku-4-5"      # "default"
/// base_url = "https://…"          # optional
/// api_key_env = "FAST_API_KEY"    # optional; default OPENAI_API_KEY / ANTHROPIC_API_KEY
/// tool_choice = "auto"            # optional, as in [provider]; so is stream
///
/// [sandbox]
/// mode = "workspace-write"        # read-only | workspace-write | full-access | off (--sandbox)
/// network = false                 # on by default only in full-access and off (--network)
/// writable = ["/path"]            # more places blocks may write
/// env = ["MY_VAR"]                # more environment variables the worker gets
/// require = false                 # refuse to run when a layer is missing
/// max_file_mb = 8192              # largest file a block may write
/// max_processes = 4096            # processes of the user (RLIMIT_NPROC)
/// artifact_quota_mb = 1024        # full outputs kept per session
/// hide = ["~/work/secrets"]       # more paths blocks see empty (besides ~/.ssh, ~/.aws, …)
/// allow_read = ["~/.ssh/known_hosts"]  # hidden paths blocks may read after all
/// allow_unix_sockets = false      # let blocks create Unix sockets
/// tmp_size_mb = 1024              # size of the worker's own /tmp, /var/tmp and /dev/shm
///
/// [folding]
/// introspection = false           # read_session returns originals (also vis chat --introspection)
/// gist_max_tokens = 1000          # longer gists are rejected
/// input_limit = 168000            # override the model table (the hard limit)
/// auto_compress_above = 142800    # override where folding becomes required
///
/// [checkpoints]                  # what sessions record of their workspace (docs/checkpoints.md)
/// enabled = true
/// include_ignored = false         # also files .gitignore excludes, and .git/
/// budget_mb = 512                 # content kept per session
/// max_file_mb = 16                # larger files are recorded as changed, content not kept
/// max_watched_dirs = 4096        # inotify watches at most; larger trees are walked in full
///
/// [spawn]                         # sub-sessions from spawn() (docs/spawn.md)
/// max_depth = 2                   # nesting: 0 turns spawn() off, 1 children cannot spawn
/// max_parallel = 4                # children of one session running at once; more queue
/// models = ["gpt-4.1-mini"]       # models a child may name besides the session's own
/// model = "gpt-4.1-mini"          # children's model when spawn() names none (vis mcp too)
/// [jobs]                         # background jobs, sh.background (docs/jobs.md)
/// max = 8                         # running at once per session
/// output_mb = 64                  # output one job's artifact keeps
///
/// [pricing]                       # relative input prices (docs/providers.md); built-in
/// cache_read = 0.1                # table when absent. A cached token against an uncached one
/// cache_write = 1.25              # a token written to the cache
/// cache_lifetime = 300            # seconds a cached prefix lives idle
/// [pricing.models."gpt-4.1*"]     # models matching the pattern (`*`: any characters;
/// cache_read = 0.25               # the longest matching pattern wins)
///
/// [mcp]
/// call_timeout = 60               # seconds per MCP tool call
/// [mcp.servers.github]            # MCP servers become namespaces (see docs/mcp.md)
/// command = "npx"
/// args = ["-y", "@modelcontextprotocol/server-github"]
/// ```
///
/// Environment variables (`VIS_TIMEOUT`, `VIS_WORKER_MEMORY_MB`, `VIS_OUTPUT_LIMIT`,
/// `VIS_SANDBOX`, `VIS_PROVIDER`, `VIS_MODEL`, …) override the file, and command-line flags
/// override both; the command line layers them in one place (`cli::settings`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The directory the config came from (extensions and skills live there too).
    pub dir: PathBuf,
    /// `[permissions] deny`: validated dotted paths.
    pub deny: Vec<String>,
    /// `[catalog] budget`.
    pub catalog_budget: Option<usize>,
    /// `[runtime] timeout`, seconds.
    pub timeout: Option<f64>,
    /// `[runtime] memory_limit_mb`.
    pub memory_limit_mb: Option<u64>,
    /// `[runtime] output_limit`, characters.
    pub output_limit: Option<usize>,
    /// `[provider]`.
    pub provider: ProviderConfig,
    /// `[gateway]`.
    pub gateway: GatewayConfig,
    /// `[folding]`.
    pub folding: FoldingConfig,
    /// `[serve]`.
    pub serve: ServeConfig,
    /// `[trust] workspaces`: directories whose own code may load (see `trust`).
    pub trusted_workspaces: Vec<String>,
    /// `[sandbox]`.
    pub sandbox: SandboxConfig,
    /// `[mcp]` and `[mcp.servers.NAME]` (see `mcp::config`).
    pub mcp: McpConfig,
    /// `[checkpoints]`.
    pub checkpoints: CheckpointsConfig,
    /// `[jobs]`.
    pub jobs: JobsConfig,
    /// `[pricing]`: overrides of the built-in cache prices.
    pub pricing: PricingConfig,
    /// `[spawn]`: sub-sessions.
    pub spawn: SpawnConfig,
    /// `[images]`: what `show()` sends.
    pub images: ImagesConfig,
}

/// `[trust]`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
struct TrustConfig {
    #[serde(default)]
    workspaces: Vec<String>,
}

/// `[gateway]`: the agent loop.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct GatewayConfig {
    pub max_iterations: Option<u32>,
}

/// `[permissions]`.
#[derive(Debug, Default, serde::Deserialize)]
struct PermissionsConfig {
    deny: Option<Vec<String>>,
}

/// `[catalog]`.
#[derive(Debug, Default, serde::Deserialize)]
struct CatalogConfig {
    budget: Option<i64>,
}

/// `[runtime]` (numbers may be written as integers or floats).
#[derive(Debug, Default, serde::Deserialize)]
struct RuntimeConfig {
    timeout: Option<f64>,
    memory_limit_mb: Option<f64>,
    output_limit: Option<f64>,
}

/// The file as serde reads it: type errors carry toml's own positions; values are checked
/// afterwards, and those errors find their line through the parser's spans ([`line_of_key`]).
/// Unknown tables and keys are ignored.
#[derive(Debug, Default, serde::Deserialize)]
struct ConfigFile {
    #[serde(default)]
    permissions: PermissionsConfig,
    #[serde(default)]
    catalog: CatalogConfig,
    #[serde(default)]
    runtime: RuntimeConfig,
    #[serde(default)]
    provider: ProviderConfig,
    #[serde(default)]
    gateway: GatewayConfig,
    #[serde(default)]
    folding: FoldingConfig,
    #[serde(default)]
    serve: ServeConfig,
    #[serde(default)]
    trust: TrustConfig,
    #[serde(default)]
    sandbox: SandboxConfig,
    #[serde(default)]
    checkpoints: CheckpointsConfig,
    #[serde(default)]
    jobs: JobsConfig,
    #[serde(default)]
    pricing: PricingConfig,
    #[serde(default)]
    spawn: SpawnConfig,
    #[serde(default)]
    images: ImagesConfig,
}

impl Config {
    /// Loads `<dir>/config.toml`; a missing file is an empty config.
    pub fn load(dir: &Path) -> Result<Config, ConfigError> {
        let path = dir.join("config.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Config {
                    dir: dir.to_path_buf(),
                    ..Config::default()
                })
            }
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Config::parse(dir, &path, &text)
    }

    /// Loads the config of [`config_dir`].
    pub fn load_default() -> Result<Config, ConfigError> {
        Config::load(&config_dir())
    }

    fn parse(dir: &Path, path: &Path, text: &str) -> Result<Config, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let place = e
                .span()
                .map(|s| format!("line {}: ", line_number(text, s.start)))
                .unwrap_or_default();
            invalid(format!(
                "{place}{}; fix the TOML syntax",
                e.message().trim_end()
            ))
        })?;
        let typed: ConfigFile = toml::from_str(text).map_err(|e: toml::de::Error| {
            let place = e
                .span()
                .map(|s| {
                    let line = line_number(text, s.start);
                    let content = text.lines().nth(line - 1).unwrap_or_default().trim();
                    format!("line {line} (`{}`): ", crate::protocol::clip(content, 60))
                })
                .unwrap_or_default();
            invalid(format!(
                "{place}{}; see the documented keys in docs/gateway.md",
                plain_serde_message(e.message().trim_end())
            ))
        })?;
        let at = |path: &[&str]| line_of_key(text, path);
        // `line N: ` for a key of one table, and for a key path under one table.
        let key_in = |table: &'static str| move |key: &str| at(&[table, key]);
        let keys_in = |table: &'static str| {
            move |keys: &[&str]| {
                let path: Vec<&str> = std::iter::once(table).chain(keys.iter().copied()).collect();
                at(&path)
            }
        };
        let deny = typed.permissions.deny.unwrap_or_default();
        for name in &deny {
            crate::catalog::validate_name(name, crate::catalog::NameRule::Slug).map_err(|e| {
                invalid(format!(
                    "{}in `permissions.deny`: {e}",
                    at(&["permissions", "deny"])
                ))
            })?;
        }
        let catalog_budget = match typed.catalog.budget {
            Some(budget) if budget <= 0 => {
                return Err(invalid(format!(
                    "{}`catalog.budget` must be a positive whole number of tokens, got {budget}; e.g. budget = 2000",
                    at(&["catalog", "budget"])
                )));
            }
            budget => budget.map(|b| b as usize),
        };
        let runtime_number = |key: &str,
                              value: Option<f64>,
                              min: f64,
                              example: &str|
         -> Result<Option<f64>, ConfigError> {
            match value {
                    Some(n) if !(n.is_finite() && n >= min) => Err(invalid(format!(
                        "{}`runtime.{key}` must be a number of at least {min}, got {n}; e.g. {key} = {example}",
                        at(&["runtime", key])
                    ))),
                    other => Ok(other),
                }
        };
        let runtime = &typed.runtime;
        let timeout = runtime_number("timeout", runtime.timeout, 0.001, "300")?;
        let memory_limit_mb =
            runtime_number("memory_limit_mb", runtime.memory_limit_mb, 64.0, "4096")?
                .map(|n| n as u64);
        let output_limit = runtime_number("output_limit", runtime.output_limit, 100.0, "20000")?
            .map(|n| n as usize);
        typed.provider.check(key_in("provider")).map_err(invalid)?;
        if typed.gateway.max_iterations == Some(0) {
            return Err(invalid(format!(
                "{}`gateway.max_iterations` must be at least 1",
                at(&["gateway", "max_iterations"])
            )));
        }
        typed.folding.check(key_in("folding")).map_err(invalid)?;
        let mcp = parse_mcp_table(&table, text, path, ServerSource::Config)
            .map_err(|e| invalid(e.to_string()))?;
        typed.spawn.check(key_in("spawn")).map_err(invalid)?;
        typed.jobs.check(key_in("jobs")).map_err(invalid)?;
        typed.images.check(key_in("images")).map_err(invalid)?;
        typed.serve.check(keys_in("serve")).map_err(invalid)?;
        let sandbox = typed.sandbox.resolve(key_in("sandbox")).map_err(invalid)?;
        typed.pricing.check(keys_in("pricing")).map_err(invalid)?;
        Ok(Config {
            dir: dir.to_path_buf(),
            deny,
            catalog_budget,
            timeout,
            memory_limit_mb,
            output_limit,
            provider: typed.provider,
            gateway: typed.gateway,
            folding: typed.folding,
            serve: typed.serve,
            trusted_workspaces: typed.trust.workspaces,
            sandbox,
            mcp,
            checkpoints: typed.checkpoints,
            jobs: typed.jobs,
            pricing: typed.pricing,
            spawn: typed.spawn,
            images: typed.images,
        })
    }
}
