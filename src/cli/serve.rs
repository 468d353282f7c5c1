//! `vis serve [--listen ADDR]`: the gateway as an HTTP service for many sessions.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::settings::{
    chat_settings, default_model, limits, load_config, provider_settings, serve_token, LimitArgs,
    ProviderArgs,
};
use super::term::errln;
use super::CliError;
use crate::config::Config;
use crate::providers::{ProviderKind, ProviderSettings};
use crate::serve::{
    Access, ConnectionLimits, NodeConfig, Registry, RegistryOptions, ServeOptions, ServeProviders,
    SettingsError, SettingsFor, WorkspacePolicy,
};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:7878; config [serve] listen). Every request
    /// needs the token (generated into serve-token beside the database; or VIS_SERVE_TOKEN, or
    /// config [serve] token); the web view logs in through the one-time URL printed at start.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The server's default provider (the one named `default`; the same flags as `vis chat`).
    /// Clients choose among the configured providers by name, never a URL.
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
    let limits = limits(&args.limits, &config)?;
    // Fail early on bad provider settings rather than on the first session.
    let providers = ServeProviders::new(
        provider_settings(&args.provider, &config, None)?,
        offered_providers(&config)?,
    );
    let settings_config = config.clone();
    let settings_for: SettingsFor = Arc::new(move |provider, workspace| {
        chat_settings(
            provider,
            &settings_config,
            limits.clone(),
            Some(Path::new(workspace)),
        )
        .map_err(|e| SettingsError(e.message))
    });
    // The token first: a token file that cannot be trusted stops the start before anything
    // is written. Then ensure the database is usable before listening.
    let (token, token_origin) = serve_token(&config, db)?;
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
        Registry::new(RegistryOptions {
            db: db.to_path_buf(),
            providers,
            settings_for,
            workspaces: WorkspacePolicy::for_server(&config.serve.workspaces, db),
            max_live_workers: config.serve.max_live_workers.unwrap_or(32),
            idle_park_after: Duration::from_secs_f64(config.serve.idle_park_after.unwrap_or(900.0)),
            event_log_bytes: config
                .serve
                .event_log_mb
                .map_or(crate::serve::DEFAULT_LOG_BYTES, |mb| {
                    usize::try_from(mb.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
                }),
        })
        .with_mcp(hub_for)
        .with_spawn(super::settings::spawn_settings(&config)),
    );
    let defaults = ConnectionLimits::default();
    let connection_limits = ConnectionLimits {
        max_connections: config
            .serve
            .max_connections
            .unwrap_or(defaults.max_connections),
        header_timeout: config
            .serve
            .header_timeout
            .map_or(defaults.header_timeout, Duration::from_secs_f64),
    };
    let grace = Duration::from_secs_f64(config.serve.shutdown_grace.unwrap_or(30.0));
    let node = NodeConfig {
        id: config.serve.node_id.clone(),
        advertise: config.serve.advertise.clone(),
        lease_ttl: config
            .serve
            .lease_ttl
            .map_or(crate::serve::DEFAULT_LEASE_TTL, Duration::from_secs_f64),
    };
    let public_name = config.serve.public_name.clone();
    let events = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError {
            code: 1,
            message: format!("vis serve: cannot start the event loop: {e}"),
        })?;
    events.block_on(async move {
        let listener = crate::serve::bind(listen).await.map_err(|e| CliError {
            code: 1,
            message: format!("vis serve: {e}"),
        })?;
        let bound = listener.local_addr().unwrap_or(listen);
        let access = Arc::new(Access::new(token, public_name.as_deref(), bound.port()));
        let base = base_url(bound, public_name.as_deref());
        let login = access.login_url(&base).map_err(|e| CliError {
            code: 1,
            message: format!("vis serve: {e}"),
        })?;
        errln!("vis serve: listening on http://{bound} (API at /api/sessions, OpenAPI at /openapi.json, metrics at /metrics)");
        errln!("vis serve: every request needs the token from {token_origin}, sent as `Authorization: Bearer <token>`");
        errln!("vis serve: open the web view with this one-time login link: {login}");
        if !bound.ip().is_loopback() && public_name.is_none() {
            errln!("vis serve: note: only loopback names and this machine's addresses are accepted in Host; set [serve] public_name to the name clients use");
        }
        let opts = ServeOptions {
            access,
            registry,
            grace,
            limits: connection_limits,
            node,
        };
        crate::serve::serve_on(listener, opts, crate::serve::shutdown_signal()).await;
        Ok::<(), CliError>(())
    })?;
    errln!("vis serve: stopped");
    Ok(0)
}

/// `[serve.providers.NAME]` as provider settings: the model and base URL as configured (or
/// the provider's defaults), the key from the named variable (or the provider's usual one),
/// the timeouts and retries of `[provider]`.
fn offered_providers(config: &Config) -> Result<Vec<(String, ProviderSettings)>, CliError> {
    let mut out = Vec::new();
    for (name, p) in &config.serve.providers {
        let kind: ProviderKind = p
            .provider
            .parse()
            .map_err(|e| CliError::usage(format!("vis: [serve.providers.{name}] provider: {e}")))?;
        let key_env = p
            .api_key_env
            .clone()
            .unwrap_or_else(|| ProviderSettings::key_env(kind).to_string());
        let api_key = std::env::var(&key_env)
            .ok()
            .filter(|k| !k.trim().is_empty());
        let mut settings = ProviderSettings::new(
            kind,
            p.model
                .clone()
                .unwrap_or_else(|| default_model(kind).into()),
            p.base_url
                .clone()
                .unwrap_or_else(|| ProviderSettings::default_base_url(kind).into()),
            api_key,
        );
        super::settings::apply_request_limits(&mut settings, config);
        settings.tool_choice = p.tool_choice.clone();
        settings.stream = p.stream.unwrap_or(true);
        settings.images = p.images;
        out.push((name.clone(), settings));
    }
    Ok(out)
}

/// Where a person on this machine (or, with a public name, anywhere) opens the server.
fn base_url(bound: SocketAddr, public_name: Option<&str>) -> String {
    match public_name {
        Some(name) if !bound.ip().is_loopback() => {
            let has_port = name.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
            if has_port {
                format!("http://{name}")
            } else {
                format!("http://{name}:{}", bound.port())
            }
        }
        _ => {
            let ip = match bound.ip() {
                IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
                ip => ip,
            };
            format!("http://{}", SocketAddr::new(ip, bound.port()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_login_base_is_an_address_a_browser_can_open() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            base_url(at("127.0.0.1:7878"), None),
            "http://127.0.0.1:7878"
        );
        assert_eq!(base_url(at("0.0.0.0:7878"), None), "http://127.0.0.1:7878");
        assert_eq!(base_url(at("[::]:7878"), None), "http://[::1]:7878");
        assert_eq!(
            base_url(at("0.0.0.0:7878"), Some("vis.example.com")),
            "http://vis.example.com:7878"
        );
        assert_eq!(
            base_url(at("0.0.0.0:7878"), Some("vis.example.com:80")),
            "http://vis.example.com:80"
        );
        assert_eq!(
            base_url(at("127.0.0.1:7878"), Some("vis.example.com")),
            "http://127.0.0.1:7878"
        );
    }
}
