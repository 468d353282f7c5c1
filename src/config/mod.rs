//! Where things live: `$VIS_HOME` (default `~/.local/share/vis`) holds `vis.db`, the
//! artifacts directory and `vis serve`'s token (`serve-token`); `--db PATH` moves the
//! database, and artifacts and the token go beside it. The user's
//! config directory ([`config_dir`]) holds `config.toml` ([`Config`]), `extensions/` and
//! `skills/`.
//!
//! This module owns every TOML file Vis reads: `config.toml` here, the `[mcp]` table and
//! `.vis/mcp.toml` in `mcp/` (the MCP hub takes the parsed values), where things live in
//! `paths.rs`, and errors that name the line in `errors.rs`.

use std::path::{Path, PathBuf};

mod checkpoints;
mod errors;
mod jobs;
mod mcp;
mod paths;
mod pricing;
mod provider;
mod spawn;
#[cfg(test)]
mod tests;

pub use checkpoints::CheckpointsConfig;
pub(crate) use errors::line_of_key;
pub use errors::ConfigError;
use errors::{line_number, plain_serde_message};
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

/// `[images]`: the images blocks show the model (`show()`); `None` keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
pub struct ImagesConfig {
    /// Longest edge sent, pixels (default 1568; larger images are scaled down).
    pub max_edge: Option<u32>,
    /// Largest image sent, bytes (default 3,750,000; larger ones are re-encoded smaller).
    pub max_bytes: Option<u64>,
    /// Images one block may show (default 8).
    pub max_per_block: Option<usize>,
}

impl ImagesConfig {
    /// The limits, defaults filled in.
    pub fn limits(&self) -> crate::images::ImageLimits {
        let default = crate::images::ImageLimits::default();
        crate::images::ImageLimits {
            max_edge: self.max_edge.unwrap_or(default.max_edge),
            max_bytes: self.max_bytes.unwrap_or(default.max_bytes),
            max_per_block: self.max_per_block.unwrap_or(default.max_per_block),
        }
    }
}

/// `[trust]`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
struct TrustConfig {
    #[serde(default)]
    workspaces: Vec<String>,
}

/// `[sandbox]`: the worker's sandbox (see `sandbox`).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct SandboxConfig {
    pub mode: Option<String>,
    pub network: Option<bool>,
    #[serde(default)]
    pub writable: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    pub require: Option<bool>,
    pub max_file_mb: Option<u64>,
    pub max_processes: Option<u64>,
    pub artifact_quota_mb: Option<u64>,
    /// More paths blocks may not see (empty in their view).
    #[serde(default)]
    pub hide: Vec<String>,
    /// Hidden paths blocks may read after all (never Vis's own directories).
    #[serde(default)]
    pub allow_read: Vec<String>,
    /// Let blocks create Unix sockets (off: a socket file outside the workspace could reach a
    /// program outside the sandbox).
    pub allow_unix_sockets: Option<bool>,
    /// The size cap of each of the worker's own tmpfs (`/tmp`, `/var/tmp`, `/dev/shm`).
    pub tmp_size_mb: Option<u64>,
}

/// `[serve]`: `vis serve`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct ServeConfig {
    pub listen: Option<String>,
    pub token: Option<String>,
    pub public_name: Option<String>,
    #[serde(default)]
    pub workspaces: Vec<String>,
    pub max_live_workers: Option<usize>,
    pub idle_park_after: Option<f64>,
    pub shutdown_grace: Option<f64>,
    pub max_connections: Option<usize>,
    pub header_timeout: Option<f64>,
    pub event_log_mb: Option<u64>,
    /// This node's id among the nodes sharing one store (default `HOSTNAME:PORT`).
    pub node_id: Option<String>,
    /// Where other nodes reach this one, `http://host:port` (default: the listening address).
    pub advertise: Option<String>,
    /// Seconds a session's lease lasts unless renewed (default 15).
    pub lease_ttl: Option<f64>,
    /// `[serve.providers.NAME]`, by name.
    #[serde(default)]
    pub providers: std::collections::BTreeMap<String, ServeProviderConfig>,
}

/// `[serve.providers.NAME]`: a provider a `vis serve` client may choose by name.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct ServeProviderConfig {
    /// `openai` or `anthropic`.
    pub provider: String,
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// The environment variable holding its key (default: the provider's usual one).
    pub api_key_env: Option<String>,
    /// As `[provider] tool_choice`, for this provider.
    #[serde(default, deserialize_with = "provider::tool_choice")]
    pub tool_choice: Option<crate::providers::ToolChoice>,
    /// As `[provider] stream`, for this provider.
    pub stream: Option<bool>,
    /// As `[provider] images`, for this provider.
    pub images: Option<bool>,
}

/// `[folding]`: context folding and its limits.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct FoldingConfig {
    pub introspection: Option<bool>,
    pub gist_max_tokens: Option<u64>,
    pub input_limit: Option<u64>,
    pub auto_compress_above: Option<u64>,
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
        let mut config = Config {
            dir: dir.to_path_buf(),
            ..Config::default()
        };
        for name in typed.permissions.deny.unwrap_or_default() {
            crate::catalog::validate_name(&name, crate::catalog::NameRule::Slug).map_err(|e| {
                invalid(format!(
                    "{}in `permissions.deny`: {e}",
                    at(&["permissions", "deny"])
                ))
            })?;
            config.deny.push(name);
        }
        if let Some(budget) = typed.catalog.budget {
            if budget <= 0 {
                return Err(invalid(format!(
                    "{}`catalog.budget` must be a positive whole number of tokens, got {budget}; e.g. budget = 2000",
                    at(&["catalog", "budget"])
                )));
            }
            config.catalog_budget = Some(budget as usize);
        }
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
        config.timeout = runtime_number("timeout", runtime.timeout, 0.001, "300")?;
        config.memory_limit_mb =
            runtime_number("memory_limit_mb", runtime.memory_limit_mb, 64.0, "4096")?
                .map(|n| n as u64);
        config.output_limit = runtime_number("output_limit", runtime.output_limit, 100.0, "20000")?
            .map(|n| n as usize);
        typed
            .provider
            .check(|key| at(&["provider", key]))
            .map_err(invalid)?;
        if typed.gateway.max_iterations == Some(0) {
            return Err(invalid(format!(
                "{}`gateway.max_iterations` must be at least 1",
                at(&["gateway", "max_iterations"])
            )));
        }
        for (key, value) in [
            ("gist_max_tokens", typed.folding.gist_max_tokens),
            ("input_limit", typed.folding.input_limit),
            ("auto_compress_above", typed.folding.auto_compress_above),
        ] {
            if value == Some(0) {
                return Err(invalid(format!(
                    "{}`folding.{key}` must be at least 1 token",
                    at(&["folding", key])
                )));
            }
        }
        if let (Some(a), Some(l)) = (typed.folding.auto_compress_above, typed.folding.input_limit) {
            if a > l {
                return Err(invalid(format!(
                    "{}`folding.auto_compress_above` ({a}) must not exceed `folding.input_limit` ({l})",
                    at(&["folding", "auto_compress_above"])
                )));
            }
        }
        config.mcp = parse_mcp_table(&table, text, path, ServerSource::Config)
            .map_err(|e| invalid(e.to_string()))?;
        config.provider = typed.provider;
        config.gateway = typed.gateway;
        config.checkpoints = typed.checkpoints;
        typed
            .spawn
            .check(|key| at(&["spawn", key]))
            .map_err(invalid)?;
        config.spawn = typed.spawn;
        typed
            .jobs
            .check(|key| at(&["jobs", key]))
            .map_err(invalid)?;
        config.jobs = typed.jobs;
        if let Some(edge) = typed.images.max_edge.filter(|e| !(16..=8000).contains(e)) {
            return Err(invalid(format!(
                "{}`images.max_edge` must be between 16 and 8000 pixels (Anthropic's hard limit), got {edge}",
                at(&["images", "max_edge"])
            )));
        }
        if let Some(bytes) = typed
            .images
            .max_bytes
            .filter(|b| !(1024..=20_000_000).contains(b))
        {
            return Err(invalid(format!(
                "{}`images.max_bytes` must be between 1024 and 20000000 bytes, got {bytes}",
                at(&["images", "max_bytes"])
            )));
        }
        if typed.images.max_per_block == Some(0) {
            return Err(invalid(format!(
                "{}`images.max_per_block` must be at least 1",
                at(&["images", "max_per_block"])
            )));
        }
        config.images = typed.images;
        for (key, value) in [
            ("idle_park_after", typed.serve.idle_park_after),
            ("shutdown_grace", typed.serve.shutdown_grace),
        ] {
            if let Some(v) = value.filter(|v| !(v.is_finite() && *v >= 0.0 && *v < 1e9)) {
                return Err(invalid(format!(
                    "{}`serve.{key}` must be a number of seconds, got {v}",
                    at(&["serve", key])
                )));
            }
        }
        for (key, value) in [
            (
                "max_live_workers",
                typed.serve.max_live_workers.map(|n| n as u64),
            ),
            (
                "max_connections",
                typed.serve.max_connections.map(|n| n as u64),
            ),
            ("event_log_mb", typed.serve.event_log_mb),
        ] {
            if value == Some(0) {
                return Err(invalid(format!(
                    "{}`serve.{key}` must be at least 1",
                    at(&["serve", key])
                )));
            }
        }
        if let Some(v) = typed
            .serve
            .header_timeout
            .filter(|v| !(v.is_finite() && *v > 0.0 && *v < 1e9))
        {
            return Err(invalid(format!(
                "{}`serve.header_timeout` must be a positive number of seconds, got {v}; e.g. header_timeout = 30",
                at(&["serve", "header_timeout"])
            )));
        }
        if let Some(id) = &typed.serve.node_id {
            validate_node_id(id).map_err(|why| {
                invalid(format!(
                    "{}`serve.node_id` is {id:?}: {why}; e.g. node_id = \"gw-1\"",
                    at(&["serve", "node_id"])
                ))
            })?;
        }
        if let Some(address) = &typed.serve.advertise {
            validate_advertise(address).map_err(|why| {
                invalid(format!(
                    "{}`serve.advertise` is {address:?}: {why}; write the address other nodes reach this one at, e.g. advertise = \"http://10.0.0.5:7878\"",
                    at(&["serve", "advertise"])
                ))
            })?;
        }
        if let Some(v) = typed
            .serve
            .lease_ttl
            .filter(|v| !(v.is_finite() && (MIN_LEASE_TTL..=3600.0).contains(v)))
        {
            return Err(invalid(format!(
                "{}`serve.lease_ttl` must be between {MIN_LEASE_TTL} and 3600 seconds, got {v}: a node stops a session it cannot renew after half of it, and that half must cover stopping a block; e.g. lease_ttl = 15",
                at(&["serve", "lease_ttl"])
            )));
        }
        if let Some(name) = &typed.serve.public_name {
            validate_public_name(name).map_err(|why| {
                invalid(format!(
                    "{}`serve.public_name` is {name:?}: {why}; write the host name clients use, e.g. public_name = \"vis.example.com\"",
                    at(&["serve", "public_name"])
                ))
            })?;
        }
        for path in &typed.serve.workspaces {
            if !Path::new(path).is_absolute() {
                return Err(invalid(format!(
                    "{}`serve.workspaces` holds {path:?}, which is not an absolute path",
                    at(&["serve", "workspaces"])
                )));
            }
        }
        for (name, provider) in &typed.serve.providers {
            validate_serve_provider(name, provider).map_err(|why| {
                invalid(format!(
                    "{}`serve.providers.{name}`: {why}",
                    at(&["serve", "providers", name])
                ))
            })?;
        }
        config.folding = typed.folding;
        config.serve = typed.serve;
        config.trusted_workspaces = typed.trust.workspaces;
        if let Some(mode) = &typed.sandbox.mode {
            crate::sandbox::Mode::parse(mode)
                .map_err(|e| invalid(format!("{}`sandbox.mode`: {e}", at(&["sandbox", "mode"]))))?;
        }
        let mut sandbox = typed.sandbox;
        for (key, paths) in [
            ("writable", &mut sandbox.writable),
            ("hide", &mut sandbox.hide),
            ("allow_read", &mut sandbox.allow_read),
        ] {
            for path in paths.iter_mut() {
                match expand_home(path) {
                    Some(absolute) => *path = absolute,
                    None => {
                        return Err(invalid(format!(
                            "{}`sandbox.{key}` holds {path:?}, which is not an absolute path (or one starting with ~/); write it in full",
                            at(&["sandbox", key])
                        )))
                    }
                }
            }
        }
        if sandbox.tmp_size_mb == Some(0) {
            return Err(invalid(format!(
                "{}`sandbox.tmp_size_mb` must be at least 1",
                at(&["sandbox", "tmp_size_mb"])
            )));
        }
        config.sandbox = sandbox;
        typed
            .pricing
            .check(|keys| {
                let mut path = vec!["pricing"];
                path.extend_from_slice(keys);
                at(&path)
            })
            .map_err(invalid)?;
        config.pricing = typed.pricing;
        Ok(config)
    }
}

/// `path` made absolute: as it is, or with a leading `~/` read as the home directory. `None`
/// for a relative path (or `~/` without a home).
fn expand_home(path: &str) -> Option<String> {
    if Path::new(path).is_absolute() {
        return Some(path.to_string());
    }
    let rest = path.strip_prefix("~/").or((path == "~").then_some(""))?;
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(
        PathBuf::from(home)
            .join(rest)
            .to_string_lossy()
            .into_owned(),
    )
}

/// A host name as clients write it in an address (`vis.example.com`, `vis.example.com:8443`,
/// `[2001:db8::1]`), not a URL.
fn validate_public_name(name: &str) -> Result<(), &'static str> {
    if name.contains("://") || name.contains('/') {
        return Err("a URL, not a host name");
    }
    let host = match name.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, port)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => {
                return match port {
                    "" => Ok(()),
                    p if p
                        .strip_prefix(':')
                        .is_some_and(|p| p.parse::<u16>().is_ok()) =>
                    {
                        Ok(())
                    }
                    _ => Err("not a host name with an optional :port"),
                };
            }
            _ => return Err("not a bracketed IPv6 address"),
        },
        None => match name.rsplit_once(':') {
            Some((host, port)) if port.parse::<u16>().is_ok() => host,
            Some(_) => return Err("not a host name with an optional :port"),
            None => name,
        },
    };
    let label_ok = |l: &str| {
        !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
        return Err("not a host name (letters, digits, '-' and '.')");
    }
    Ok(())
}

/// The shortest `[serve] lease_ttl`: half of it must cover interrupting a block (2 s).
pub const MIN_LEASE_TTL: f64 = 5.0;

/// `[serve] node_id`: 1–64 letters, digits, `.`, `_`, `:` or `-` (it is a metrics label and
/// a column, and shows in messages).
fn validate_node_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > 64 {
        return Err("it must be 1 to 64 characters long".into());
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(format!(
            "{c:?} is not allowed (only letters, digits, '.', '_', ':' and '-')"
        ));
    }
    Ok(())
}

/// `[serve] advertise`: `http://HOST:PORT` (or `https://`), nothing else.
fn validate_advertise(address: &str) -> Result<(), String> {
    let url = reqwest::Url::parse(address).map_err(|e| format!("it is not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "the scheme must be http or https, not {}",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("it names no host".into());
    }
    if url.port().is_none() {
        return Err("it names no port".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("it must not carry a user or password".into());
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err("it must be a bare address, without a path, query or fragment".into());
    }
    Ok(())
}

/// `[serve.providers.NAME]`: a name a client can send, a known provider, sensible fields.
fn validate_serve_provider(name: &str, p: &ServeProviderConfig) -> Result<(), String> {
    let name_ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(
            "the name must be 1 to 40 lowercase letters, digits, '-' or '_'; rename the table"
                .into(),
        );
    }
    if name == "default" {
        return Err("the name `default` is the server's own provider settings ([provider], flags and environment); give this one another name".into());
    }
    if p.provider
        .parse::<crate::providers::ProviderKind>()
        .is_err()
    {
        return Err(format!(
            "`provider` must be \"openai\" (any OpenAI-compatible server) or \"anthropic\", got {:?}",
            p.provider
        ));
    }
    if p.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err(
            "`model` is empty; name a model or drop the key for the provider's default".into(),
        );
    }
    if let Some(url) = &p.base_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "`base_url` {url:?} must start with http:// or https://"
            ));
        }
    }
    if let Some(var) = &p.api_key_env {
        let ok = !var.is_empty()
            && !var.as_bytes()[0].is_ascii_digit()
            && var
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(format!(
                "`api_key_env` {var:?} must be an environment variable name such as FAST_API_KEY"
            ));
        }
    }
    Ok(())
}
