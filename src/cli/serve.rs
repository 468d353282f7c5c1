//! `vis serve [--listen ADDR]`: the gateway as an HTTP service for many sessions.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::settings::{
    chat_settings, limits, load_config, provider_settings, serve_token, LimitArgs, ProviderArgs,
};
use super::term::errln;
use super::CliError;
use crate::serve::{ModelChoice, Registry, ServeOptions, SettingsError, SettingsFor};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:7878; config [serve] listen). Beyond loopback a
    /// bearer token is required (env VIS_SERVE_TOKEN or config [serve] token).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Default provider settings for new sessions (the same flags as `vis chat`).
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(args: ServeArgs, db: &Path) -> Result<i32, CliError> {
    let config = load_config()?;
    let listen_text = args
        .listen
        .clone()
        .or_else(|| config.serve.listen.clone())
        .unwrap_or_else(|| "127.0.0.1:7878".into());
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        CliError::usage(format!(
            "--listen '{listen_text}' is not an address like 127.0.0.1:7878 or [::1]:7878"
        ))
    })?;
    let token = serve_token(&config);
    let limits = limits(&args.limits, &config)?;
    // Fail early on bad defaults rather than on the first session.
    provider_settings(&args.provider, &config, None)?;
    let defaults = args.provider.clone();
    let settings_config = config.clone();
    let settings_for: SettingsFor = Arc::new(move |stored, choice: &ModelChoice, workspace| {
        let mut flags = defaults.clone();
        if choice.provider.is_some() {
            flags.provider = choice.provider.clone();
        }
        if choice.model.is_some() {
            flags.model = choice.model.clone();
        }
        if choice.base_url.is_some() {
            flags.base_url = choice.base_url.clone();
        }
        let provider = provider_settings(&flags, &settings_config, stored)
            .map_err(|e| SettingsError(e.message))?;
        chat_settings(
            provider,
            &settings_config,
            limits.clone(),
            Some(Path::new(workspace)),
        )
        .map_err(|e| SettingsError(e.message))
    });
    // Ensure the database is usable before listening.
    crate::store::Store::open(db)?;
    let hub_config = config.clone();
    let hub_db = db.to_path_buf();
    let hub_for: crate::serve::HubFor = Arc::new(move |workspace, id, store| {
        let hub = crate::mcp::hub_for(
            &hub_config,
            Path::new(workspace),
            crate::config::artifact_dir(&hub_db, id),
            store,
        )?;
        Ok((!hub.is_empty()).then_some(hub))
    });
    let registry = Arc::new(
        Registry::new(
            db.to_path_buf(),
            settings_for,
            config.serve.max_live_workers.unwrap_or(32),
            Duration::from_secs_f64(config.serve.idle_park_after.unwrap_or(900.0)),
        )
        .with_mcp(hub_for),
    );
    let opts = ServeOptions {
        listen,
        token,
        registry,
        grace: Duration::from_secs_f64(config.serve.shutdown_grace.unwrap_or(30.0)),
    };
    let events = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError {
            code: 1,
            message: format!("vis serve: cannot start the event loop: {e}"),
        })?;
    errln!("vis serve: listening on http://{listen} (API at /api/sessions, OpenAPI at /openapi.json, metrics at /metrics)");
    events
        .block_on(crate::serve::serve(opts))
        .map_err(|e| CliError {
            code: match e {
                crate::serve::ServeError::TokenRequired(_) => 2,
                _ => 1,
            },
            message: format!("vis serve: {e}"),
        })?;
    errln!("vis serve: stopped");
    Ok(0)
}
