//! Settings from flags, the environment and `config.toml`, in that order of precedence
//! (SPEC §1: later sources win, flags last), shared by every command: the one place the
//! command line loads the config and layers a setting.
//!
//! A flag and its environment variable are one clap argument (`env = "VIS_…"`), so clap does
//! flag-over-environment; what is left here puts both over the config file and the default.
//! Variables without a flag are read here too: the provider's base URL (its name depends on
//! the provider), API keys and the serve token (secrets never go on a command line). An empty
//! variable counts as not set.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::CliError;
use crate::config::Config;
use crate::gateway::{
    ChatSettings, FoldSettings, DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_OUTPUT_TOKENS,
};
use crate::providers::{ProviderKind, ProviderSettings};
use crate::runtime::{WorkerOptions, DEFAULT_OUTPUT_LIMIT};
use crate::store::SessionModel;

/// Loads the user's config; errors are usage errors (exit 2). Every command loads it here,
/// once.
pub fn load_config() -> Result<Config, CliError> {
    Config::load_default().map_err(|e| CliError::usage(format!("vis: {e}")))
}

/// A value parser for a setting that a flag or an environment variable gives (clap reads the
/// variable when the flag is absent, and does not say which one the value came from, so the
/// message names both).
fn number<T: std::str::FromStr>(
    flag: &'static str,
    env: &'static str,
    what: &'static str,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |text| {
        text.trim()
            .parse()
            .map_err(|_| format!("{flag} or {env} must be {what}, got '{text}'"))
    }
}

fn timeout_seconds(text: &str) -> Result<f64, String> {
    number("--timeout", "VIS_TIMEOUT", "a number of seconds")(text)
}

fn memory_mib(text: &str) -> Result<u64, String> {
    number(
        "--memory-limit",
        "VIS_WORKER_MEMORY_MB",
        "a whole number of MiB",
    )(text)
}

fn output_chars(text: &str) -> Result<usize, String> {
    number(
        "--output-limit",
        "VIS_OUTPUT_LIMIT",
        "a whole number of characters",
    )(text)
}

/// An empty value (`VIS_MODEL=`) counts as not set, as for the other variables Vis reads.
fn given(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.trim().is_empty())
}

/// The runtime's limits: block timeout, output cap, worker memory. Each comes from the flag,
/// else its environment variable (clap reads both), else the config file, else the default.
#[derive(Debug, Clone, Default, Args)]
pub struct LimitArgs {
    /// Block timeout in seconds (default 300; config [runtime] timeout).
    #[arg(long, env = "VIS_TIMEOUT", value_name = "SECONDS", value_parser = timeout_seconds)]
    pub timeout: Option<f64>,
    /// Cap on the worker's memory, in MiB (default 4096; config [runtime] memory_limit_mb).
    #[arg(long, env = "VIS_WORKER_MEMORY_MB", value_name = "MIB", value_parser = memory_mib)]
    pub memory_limit: Option<u64>,
    /// Output cap in characters (default 20000; config [runtime] output_limit).
    #[arg(long, env = "VIS_OUTPUT_LIMIT", value_name = "CHARS", value_parser = output_chars)]
    pub output_limit: Option<usize>,
    /// The sandbox: read-only, workspace-write (default), full-access or off (config [sandbox]
    /// mode).
    #[arg(long, env = "VIS_SANDBOX", value_name = "MODE")]
    pub sandbox: Option<String>,
    /// Let blocks reach the network (config [sandbox] network; on by default only in
    /// full-access).
    #[arg(long)]
    pub network: bool,
}

impl LimitArgs {
    /// The limits the environment sets, for a command that has no limit flags of its own
    /// (`vis context`): the same variables, read by the same parser.
    pub fn from_env() -> Result<LimitArgs, CliError> {
        #[derive(clap::Parser)]
        struct EnvOnly {
            #[command(flatten)]
            limits: LimitArgs,
        }
        <EnvOnly as clap::Parser>::try_parse_from(["vis"])
            .map(|parsed| parsed.limits)
            .map_err(|e| CliError::usage(e.to_string().trim_end().to_string()))
    }
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub timeout: Duration,
    pub output_limit: usize,
    pub memory_limit_mb: u64,
    pub sandbox: crate::sandbox::Policy,
    /// `[images]`.
    pub images: crate::images::ImageLimits,
}

pub fn limits(args: &LimitArgs, config: &Config) -> Result<Limits, CliError> {
    let timeout = args
        .timeout
        .or(config.timeout)
        .unwrap_or(crate::runtime::DEFAULT_TIMEOUT.as_secs_f64());
    // Beyond a year a timeout means "never" and would overflow the clock.
    if !(timeout.is_finite() && timeout > 0.0 && timeout <= 366.0 * 86_400.0) {
        return Err(CliError::usage(format!(
            "--timeout must be a positive number of seconds (at most a year), got {timeout}"
        )));
    }
    let output_limit = args
        .output_limit
        .or(config.output_limit)
        .unwrap_or(DEFAULT_OUTPUT_LIMIT);
    if output_limit < 100 {
        return Err(CliError::usage(format!(
            "--output-limit must be at least 100 characters, got {output_limit}"
        )));
    }
    let memory_limit_mb = args
        .memory_limit
        .or(config.memory_limit_mb)
        .unwrap_or(crate::runtime::DEFAULT_MEMORY_LIMIT_MB);
    let mode_text = given(&args.sandbox).or_else(|| config.sandbox.mode.clone());
    let mode = match mode_text {
        Some(m) => {
            crate::sandbox::Mode::parse(&m).map_err(|e| CliError::usage(format!("vis: {e}")))?
        }
        None => crate::sandbox::Mode::WorkspaceWrite,
    };
    let mut sandbox = crate::sandbox::Policy::for_mode(mode);
    if args.network {
        sandbox.network = true;
    } else if let Some(n) = config.sandbox.network {
        sandbox.network = n;
    }
    sandbox.writable = config.sandbox.writable.iter().map(PathBuf::from).collect();
    sandbox.require = config.sandbox.require.unwrap_or(false);
    if mode == crate::sandbox::Mode::Off {
        if !sandbox.network {
            return Err(CliError::usage(
                "vis: the sandbox mode off has no network namespace, so the network cannot be switched off; drop `[sandbox] network = false` or choose another mode".to_string(),
            ));
        }
        if sandbox.require {
            return Err(CliError::usage(
                "vis: `[sandbox] require = true` refuses to run without the sandbox, and the mode is off; choose another mode or drop require".to_string(),
            ));
        }
    }
    if let Some(mb) = config.sandbox.max_file_mb {
        sandbox.max_file_bytes = mb.saturating_mul(1024 * 1024);
    }
    if let Some(n) = config.sandbox.max_processes {
        sandbox.max_processes = n;
    }
    sandbox.hide = config.sandbox.hide.iter().map(PathBuf::from).collect();
    sandbox.allow_read = config
        .sandbox
        .allow_read
        .iter()
        .map(PathBuf::from)
        .collect();
    sandbox.unix_sockets = config.sandbox.allow_unix_sockets.unwrap_or(false);
    if let Some(mb) = config.sandbox.tmp_size_mb {
        sandbox.tmp_bytes = mb.saturating_mul(1024 * 1024);
    }
    if let Some(mb) = config.sandbox.artifact_quota_mb {
        sandbox.artifact_quota = mb.saturating_mul(1024 * 1024);
    }
    Ok(Limits {
        timeout: Duration::from_secs_f64(timeout),
        output_limit,
        memory_limit_mb,
        sandbox,
        images: config.images.limits(),
    })
}

/// Worker options for `workspace` with the config's extensions, skills and deny list.
pub fn worker_options(
    config: &Config,
    workspace: Option<&Path>,
) -> Result<WorkerOptions, CliError> {
    let mut opts = WorkerOptions::new(worker_program()?);
    opts.workspace = workspace.map(Path::to_path_buf);
    opts.config_dir = Some(config.dir.clone());
    opts.deny = config.deny.clone();
    opts.trusted = workspace.is_some_and(|w| crate::trust::is_trusted(config, w));
    opts.env = config.sandbox.env.clone();
    opts.data_dir = Some(crate::config::vis_home());
    if let Some(max) = config.jobs.max {
        opts.jobs_max = max as u32;
    }
    if let Some(mb) = config.jobs.output_mb {
        opts.job_output_bytes = mb as u64 * 1024 * 1024;
    }
    Ok(opts)
}

/// `[spawn]` with its defaults.
pub fn spawn_settings(config: &Config) -> crate::gateway::SpawnSettings {
    let defaults = crate::gateway::SpawnSettings::default();
    crate::gateway::SpawnSettings {
        max_depth: config.spawn.max_depth.unwrap_or(defaults.max_depth),
        max_parallel: config.spawn.max_parallel.unwrap_or(defaults.max_parallel),
        models: config.spawn.models.clone().unwrap_or_default(),
        model: config.spawn.model.clone(),
    }
}

/// `[checkpoints]` with its defaults.
pub fn checkpoint_settings(config: &Config) -> crate::checkpoints::CheckpointSettings {
    let defaults = crate::checkpoints::CheckpointSettings::default();
    let c = &config.checkpoints;
    crate::checkpoints::CheckpointSettings {
        enabled: c.enabled.unwrap_or(defaults.enabled),
        include_ignored: c.include_ignored.unwrap_or(defaults.include_ignored),
        budget_bytes: c
            .budget_mb
            .map_or(defaults.budget_bytes, |mb| mb.saturating_mul(1024 * 1024)),
        max_file_bytes: c
            .max_file_mb
            .map_or(defaults.max_file_bytes, |mb| mb.saturating_mul(1024 * 1024)),
        max_watched_dirs: c.max_watched_dirs.unwrap_or(defaults.max_watched_dirs),
    }
}

/// The worker binary, installed beside `vis` (`cargo install` puts them side by side).
pub const WORKER_BINARY: &str = "vis-worker";

/// The program workers run: `vis-worker` beside this binary, opened the first time it is asked
/// for (`run` asks first thing) and run through `/proc/self/fd/N`, which names that very file
/// even after it was replaced or removed: an upgrade under a running `vis serve` must neither
/// change what its new workers run nor break them. Without `/proc`, the path itself.
pub fn worker_program() -> Result<PathBuf, CliError> {
    static PROGRAM: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    PROGRAM
        .get_or_init(pin_worker_program)
        .clone()
        .map_err(CliError::usage)
}

fn pin_worker_program() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the vis binary: {e}"))?;
    let path = exe.with_file_name(WORKER_BINARY);
    let file = std::fs::File::open(&path).map_err(|e| {
        format!(
            "cannot open {}: {e}; vis runs each session's Python in the {WORKER_BINARY} binary installed beside it: reinstall vis so that both are there",
            path.display()
        )
    })?;
    if Path::new("/proc/self/fd").is_dir() {
        // Open for the life of the process (close-on-exec: nothing it starts inherits it).
        let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
        return Ok(PathBuf::from(format!("/proc/self/fd/{fd}")));
    }
    Ok(path)
}

/// The session a command runs in and its workspace (`vis exec`, `vis mcp`).
#[derive(Debug, Args)]
pub struct SessionTarget {
    /// Session (created if it does not exist; default: a new session).
    #[arg(long)]
    pub session: Option<String>,
    /// Workspace directory (default: the session's, or the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

impl SessionTarget {
    /// The workspace named (made absolute), the session's id and whether it is new.
    pub fn resolve(&self) -> Result<(Option<PathBuf>, String, bool), CliError> {
        let workspace = resolve_workspace(self.workspace.as_deref())?;
        let (session_id, created) = session_id(self.session.as_deref())?;
        Ok((workspace, session_id, created))
    }
}

/// An existing directory, made absolute (before anything changes directory).
pub fn resolve_workspace(flag: Option<&Path>) -> Result<Option<PathBuf>, CliError> {
    let Some(dir) = flag else { return Ok(None) };
    let unusable = |why: String| {
        CliError::usage(format!(
            "workspace {} is not usable: it does not exist or is not a directory ({why}); pass an existing directory with --workspace DIR",
            dir.display()
        ))
    };
    let canonical = dir.canonicalize().map_err(|e| unusable(e.to_string()))?;
    if !canonical.is_dir() {
        return Err(unusable("a file".into()));
    }
    Ok(Some(canonical))
}

/// The workspace the flag names, else the current directory, made absolute.
pub fn workspace_or_current(flag: Option<&Path>) -> Result<PathBuf, CliError> {
    match resolve_workspace(flag)? {
        Some(dir) => Ok(dir),
        None => current_dir()?
            .canonicalize()
            .map_err(|e| CliError::usage(format!("cannot resolve the current directory: {e}"))),
    }
}

/// The current directory, or a usage error.
pub fn current_dir() -> Result<PathBuf, CliError> {
    std::env::current_dir()
        .map_err(|e| CliError::usage(format!("cannot read the current directory: {e}")))
}

/// Which model to talk to.
#[derive(Debug, Clone, Default, Args)]
pub struct ProviderArgs {
    /// `openai` (any OpenAI-compatible server) or `anthropic` (config [provider] name).
    #[arg(long, env = "VIS_PROVIDER", value_name = "P")]
    pub provider: Option<String>,
    /// The model (config [provider] model).
    #[arg(long, env = "VIS_MODEL", value_name = "M")]
    pub model: Option<String>,
    /// The API's base URL, e.g. http://localhost:11434/v1 for Ollama (env OPENAI_BASE_URL or
    /// ANTHROPIC_BASE_URL; config [provider] base_url).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
}

/// The default model of each provider.
pub fn default_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "gpt-5",
        ProviderKind::Anthropic => "claude-sonnet-4-5",
    }
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The token `vis serve` requires, and where it came from: `VIS_SERVE_TOKEN`, else config
/// `[serve] token`, else the `serve-token` file beside the database (made at the first start).
pub fn serve_token(
    config: &Config,
    db: &Path,
) -> Result<(crate::serve::ServeToken, String), CliError> {
    use crate::serve::ServeToken;
    let usage = |e: crate::serve::TokenError| CliError::usage(format!("vis serve: {e}"));
    if let Some(text) = env_nonempty("VIS_SERVE_TOKEN") {
        let token = ServeToken::explicit(&text, "VIS_SERVE_TOKEN").map_err(usage)?;
        return Ok((token, "VIS_SERVE_TOKEN".into()));
    }
    if let Some(text) = config
        .serve
        .token
        .as_deref()
        .filter(|t| !t.trim().is_empty())
    {
        let origin = format!(
            "[serve] token in {}",
            config.dir.join("config.toml").display()
        );
        let token = ServeToken::explicit(text, &origin).map_err(usage)?;
        return Ok((token, origin));
    }
    let path = crate::config::serve_token_path(db);
    let token = ServeToken::load_or_create(&path).map_err(usage)?;
    Ok((token, path.display().to_string()))
}

/// The provider, model, base URL and key: flags, then the environment (clap reads
/// `VIS_PROVIDER` and `VIS_MODEL` into the flags; the base URL's variable depends on the
/// provider, and keys have no flag), then what a resumed session used (`stored`), then the
/// config file. When nothing names a provider, a set
/// `ANTHROPIC_API_KEY` without `OPENAI_API_KEY` picks Anthropic.
pub fn provider_settings(
    args: &ProviderArgs,
    config: &Config,
    stored: Option<&SessionModel>,
) -> Result<ProviderSettings, CliError> {
    let name = given(&args.provider)
        .or_else(|| stored.map(|s| s.provider.clone()))
        .or_else(|| config.provider.name.clone());
    let kind = match name {
        Some(name) => name
            .parse::<ProviderKind>()
            .map_err(|e| CliError::usage(format!("vis: {e}")))?,
        None if env_nonempty("ANTHROPIC_API_KEY").is_some()
            && env_nonempty("OPENAI_API_KEY").is_none() =>
        {
            ProviderKind::Anthropic
        }
        None => ProviderKind::OpenAi,
    };
    // What the session used applies only while it stays with the same provider.
    let stored = stored.filter(|s| s.provider == kind.as_str());
    let model = given(&args.model)
        .or_else(|| stored.map(|s| s.model.clone()))
        .or_else(|| config.provider.model.clone())
        .unwrap_or_else(|| default_model(kind).to_string());
    if model.trim().is_empty() {
        return Err(CliError::usage(
            "the model name is empty (config.toml [provider] model): set a name there, or pass --model NAME",
        ));
    }
    let base_env = match kind {
        ProviderKind::OpenAi => "OPENAI_BASE_URL",
        ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
    };
    let base_url = given(&args.base_url)
        .or_else(|| env_nonempty(base_env))
        .or_else(|| stored.and_then(|s| s.base_url.clone()))
        .or_else(|| config.provider.base_url.clone())
        .unwrap_or_else(|| ProviderSettings::default_base_url(kind).to_string());
    let api_key =
        env_nonempty(ProviderSettings::key_env(kind)).or_else(|| config.provider.api_key.clone());
    let mut settings = ProviderSettings::new(kind, model, base_url, api_key);
    apply_request_limits(&mut settings, config);
    settings.tool_choice = config.provider.tool_choice.clone();
    settings.stream = config.provider.stream.unwrap_or(true);
    settings.images = config.provider.images;
    Ok(settings)
}

/// The provider sub-sessions run with in a host that has no model of its own (`vis mcp`):
/// only one the person named (`--provider`/`--model` or `VIS_PROVIDER`/`VIS_MODEL`,
/// `[provider] name` or `model`, `[spawn] model`), never a default, so that no block spends
/// on a model nobody chose. `None` when nothing names one.
pub fn sub_session_provider(
    args: &ProviderArgs,
    config: &Config,
) -> Result<Option<ProviderSettings>, CliError> {
    let model_named = given(&args.model).is_some() || config.provider.model.is_some();
    let named = model_named
        || given(&args.provider).is_some()
        || config.provider.name.is_some()
        || config.spawn.model.is_some();
    if !named {
        return Ok(None);
    }
    let mut settings = provider_settings(args, config, None)?;
    // `[spawn] model` alone is the model, rather than the provider's default.
    if let (false, Some(model)) = (model_named, &config.spawn.model) {
        settings.model = model.clone();
    }
    Ok(Some(settings))
}

/// `[provider] request_timeout`, `idle_timeout` and `max_retries`, where the config sets them.
pub(super) fn apply_request_limits(settings: &mut ProviderSettings, config: &Config) {
    if let Some(t) = config.provider.request_timeout {
        settings.request_timeout = Duration::from_secs_f64(t);
    }
    if let Some(t) = config.provider.idle_timeout {
        settings.idle_timeout = Duration::from_secs_f64(t);
    }
    if let Some(n) = config.provider.max_retries {
        settings.max_retries = n;
    }
}

/// Everything a chat session needs.
pub fn chat_settings(
    provider: ProviderSettings,
    config: &Config,
    limits: Limits,
    workspace: Option<&Path>,
) -> Result<ChatSettings, CliError> {
    let forced = provider
        .tool_choice
        .as_ref()
        .is_some_and(|c| c.forces_a_call());
    if provider.kind == ProviderKind::Anthropic
        && forced
        && config.provider.thinking_budget.is_some()
    {
        return Err(CliError::usage(
            "vis: [provider] tool_choice forces a tool call, which Anthropic refuses while thinking_budget turns extended thinking on; use tool_choice = \"auto\" or drop thinking_budget",
        ));
    }
    // The provider and model this session runs with (`vis serve` sessions choose theirs).
    let cache_prices = config.pricing.prices(provider.kind, &provider.model);
    let mut worker = worker_options(config, workspace)?;
    worker.memory_limit_mb = limits.memory_limit_mb;
    worker.sandbox = limits.sandbox.clone();
    Ok(ChatSettings {
        provider,
        worker,
        max_iterations: config
            .gateway
            .max_iterations
            .unwrap_or(DEFAULT_MAX_ITERATIONS),
        max_output_tokens: config
            .provider
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        thinking_budget: config.provider.thinking_budget,
        block_timeout: limits.timeout,
        output_limit: limits.output_limit,
        catalog_budget: config
            .catalog_budget
            .unwrap_or(crate::catalog::DEFAULT_BUDGET_TOKENS),
        folding: FoldSettings {
            introspection: config.folding.introspection.unwrap_or(false),
            gist_max_tokens: config
                .folding
                .gist_max_tokens
                .unwrap_or(crate::gateway::DEFAULT_GIST_MAX_TOKENS),
            input_limit: config.folding.input_limit,
            auto_compress_above: config.folding.auto_compress_above,
        },
        cache_prices,
        checkpoints: checkpoint_settings(config),
        images: limits.images,
    })
}

/// The session `--session` names (checked), or a new one: its id and whether it is new.
pub fn session_id(flag: Option<&str>) -> Result<(String, bool), CliError> {
    match flag {
        Some(id) => {
            crate::session::validate_session_id(id)?;
            Ok((id.to_string(), false))
        }
        None => Ok((crate::session::new_session_id(), true)),
    }
}

/// The workspace roots of session `id`, made in the store if it is new: `--workspace` (else
/// the current directory for a new session) moves it there; a root that no longer exists is
/// a usage error that says how to move the session.
pub fn session_roots(
    store: &dyn crate::store::SessionStore,
    id: &str,
    workspace: Option<&Path>,
) -> Result<Vec<String>, CliError> {
    let default_root = match workspace {
        Some(w) => w.to_path_buf(),
        None => current_dir()?,
    };
    let root_strings = vec![default_root.to_string_lossy().into_owned()];
    let row = store.ensure_session(id, &root_strings)?;
    let roots = if workspace.is_some() && row.workspace_roots != root_strings {
        store.set_workspace_roots(id, &root_strings)?;
        root_strings
    } else {
        row.workspace_roots
    };
    if let Some(missing) = roots.iter().find(|r| !Path::new(r).is_dir()) {
        return Err(CliError::usage(format!(
            "the workspace {missing} of session '{id}' no longer exists; pass --workspace DIR to move the session"
        )));
    }
    Ok(roots)
}
