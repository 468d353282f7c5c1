//! Settings from flags, the environment and `config.toml`, in that order of precedence
//! (SPEC §1: later sources win, flags last), shared by every command.

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

/// Loads the user's config; errors are usage errors (exit 2).
pub fn load_config() -> Result<Config, CliError> {
    Config::load_default().map_err(|e| CliError::usage(format!("vis: {e}")))
}

/// A setting from the flag, else the environment variable, else the config file, else the
/// default.
pub fn setting<T: std::str::FromStr>(
    flag: Option<T>,
    env: &str,
    config: Option<T>,
    default: T,
    what: &str,
) -> Result<T, CliError> {
    if let Some(v) = flag {
        return Ok(v);
    }
    match std::env::var(env) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| CliError::usage(format!("{env} must be {what}, got '{v}'"))),
        Err(_) => Ok(config.unwrap_or(default)),
    }
}

/// The runtime's limits: block timeout, output cap, worker memory.
#[derive(Debug, Clone, Default, Args)]
pub struct LimitArgs {
    /// Block timeout in seconds (default 300; env VIS_TIMEOUT; config [runtime] timeout).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Cap on the worker's memory, in MiB (default 4096; env VIS_WORKER_MEMORY_MB; config
    /// [runtime] memory_limit_mb).
    #[arg(long, value_name = "MIB")]
    pub memory_limit: Option<u64>,
    /// Output cap in characters (default 20000; env VIS_OUTPUT_LIMIT; config [runtime]
    /// output_limit).
    #[arg(long, value_name = "CHARS")]
    pub output_limit: Option<usize>,
    /// The sandbox: read-only, workspace-write (default), full-access or off (env
    /// VIS_SANDBOX; config [sandbox] mode).
    #[arg(long, value_name = "MODE")]
    pub sandbox: Option<String>,
    /// Let blocks reach the network (config [sandbox] network; on by default only in
    /// full-access).
    #[arg(long)]
    pub network: bool,
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub timeout: Duration,
    pub output_limit: usize,
    pub memory_limit_mb: u64,
    pub sandbox: crate::sandbox::Policy,
}

pub fn limits(args: &LimitArgs, config: &Config) -> Result<Limits, CliError> {
    let timeout = setting(
        args.timeout,
        "VIS_TIMEOUT",
        config.timeout,
        crate::runtime::DEFAULT_TIMEOUT.as_secs_f64(),
        "a number of seconds",
    )?;
    // Beyond a year a timeout means "never" and would overflow the clock.
    if !(timeout.is_finite() && timeout > 0.0 && timeout <= 366.0 * 86_400.0) {
        return Err(CliError::usage(format!(
            "--timeout must be a positive number of seconds (at most a year), got {timeout}"
        )));
    }
    let output_limit = setting(
        args.output_limit,
        "VIS_OUTPUT_LIMIT",
        config.output_limit,
        DEFAULT_OUTPUT_LIMIT,
        "a whole number of characters",
    )?;
    if output_limit < 100 {
        return Err(CliError::usage(format!(
            "--output-limit must be at least 100 characters, got {output_limit}"
        )));
    }
    let memory_limit_mb = setting(
        args.memory_limit,
        "VIS_WORKER_MEMORY_MB",
        config.memory_limit_mb,
        crate::runtime::DEFAULT_MEMORY_LIMIT_MB,
        "a whole number of MiB",
    )?;
    let mode_text = args
        .sandbox
        .clone()
        .or_else(|| std::env::var("VIS_SANDBOX").ok().filter(|v| !v.is_empty()))
        .or_else(|| config.sandbox.mode.clone());
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
    if let Some(mb) = config.sandbox.artifact_quota_mb {
        sandbox.artifact_quota = mb.saturating_mul(1024 * 1024);
    }
    Ok(Limits {
        timeout: Duration::from_secs_f64(timeout),
        output_limit,
        memory_limit_mb,
        sandbox,
    })
}

/// Worker options for `workspace` with the config's extensions, skills and deny list.
pub fn worker_options(
    config: &Config,
    workspace: Option<&Path>,
) -> Result<WorkerOptions, CliError> {
    let program = std::env::current_exe()
        .map_err(|e| CliError::usage(format!("cannot locate the vis binary: {e}")))?;
    let mut opts = WorkerOptions::new(program);
    opts.workspace = workspace.map(Path::to_path_buf);
    opts.config_dir = Some(config.dir.clone());
    opts.deny = config.deny.clone();
    opts.trusted = workspace.is_some_and(|w| crate::trust::is_trusted(config, w));
    opts.env = config.sandbox.env.clone();
    Ok(opts)
}

/// An existing directory, made absolute (before anything changes directory).
pub fn resolve_workspace(flag: Option<&Path>) -> Result<Option<PathBuf>, CliError> {
    let Some(dir) = flag else { return Ok(None) };
    let canonical = dir.canonicalize().map_err(|e| {
        CliError::usage(format!(
            "workspace {} is not usable: {e}; pass an existing directory",
            dir.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(CliError::usage(format!(
            "workspace {} is not a directory",
            dir.display()
        )));
    }
    Ok(Some(canonical))
}

/// The current directory, or a usage error.
pub fn current_dir() -> Result<PathBuf, CliError> {
    std::env::current_dir()
        .map_err(|e| CliError::usage(format!("cannot read the current directory: {e}")))
}

/// Which model to talk to.
#[derive(Debug, Clone, Default, Args)]
pub struct ProviderArgs {
    /// `openai` (any OpenAI-compatible server) or `anthropic` (env VIS_PROVIDER; config
    /// [provider] name).
    #[arg(long, value_name = "P")]
    pub provider: Option<String>,
    /// The model (env VIS_MODEL; config [provider] model).
    #[arg(long, value_name = "M")]
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

/// The provider, model, base URL and key: flags, then the environment, then what a resumed
/// session used (`stored`), then the config file. When nothing names a provider, a set
/// `ANTHROPIC_API_KEY` without `OPENAI_API_KEY` picks Anthropic.
pub fn provider_settings(
    args: &ProviderArgs,
    config: &Config,
    stored: Option<&SessionModel>,
) -> Result<ProviderSettings, CliError> {
    let name = args
        .provider
        .clone()
        .or_else(|| env_nonempty("VIS_PROVIDER"))
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
    let model = args
        .model
        .clone()
        .or_else(|| env_nonempty("VIS_MODEL"))
        .or_else(|| stored.map(|s| s.model.clone()))
        .or_else(|| config.provider.model.clone())
        .unwrap_or_else(|| default_model(kind).to_string());
    if model.trim().is_empty() {
        return Err(CliError::usage(
            "the model name is empty: pass --model NAME or set VIS_MODEL",
        ));
    }
    let base_env = match kind {
        ProviderKind::OpenAi => "OPENAI_BASE_URL",
        ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
    };
    let base_url = args
        .base_url
        .clone()
        .or_else(|| env_nonempty(base_env))
        .or_else(|| stored.and_then(|s| s.base_url.clone()))
        .or_else(|| config.provider.base_url.clone())
        .unwrap_or_else(|| ProviderSettings::default_base_url(kind).to_string());
    let api_key =
        env_nonempty(ProviderSettings::key_env(kind)).or_else(|| config.provider.api_key.clone());
    let mut settings = ProviderSettings::new(kind, model, base_url, api_key);
    if let Some(t) = config.provider.request_timeout {
        settings.request_timeout = Duration::from_secs_f64(t);
    }
    if let Some(t) = config.provider.idle_timeout {
        settings.idle_timeout = Duration::from_secs_f64(t);
    }
    if let Some(n) = config.provider.max_retries {
        settings.max_retries = n;
    }
    Ok(settings)
}

/// Everything a chat session needs.
pub fn chat_settings(
    provider: ProviderSettings,
    config: &Config,
    limits: Limits,
    workspace: Option<&Path>,
) -> Result<ChatSettings, CliError> {
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
    })
}
