//! The providers a server offers: its own settings (named `default`) and
//! `[serve.providers.NAME]`. A client picks one by name when it creates a session; the
//! provider, model, base URL and key always come from the server's configuration, so no
//! client can point a session (and the server's key) at a URL of its choosing.
//!
//! A stored session continues with the configured provider it used (matched by provider,
//! model and base URL); when the configuration no longer offers that one, with `default`.

use crate::providers::ProviderSettings;
use crate::store::SessionModel;

/// The name of the server's own provider settings.
pub const DEFAULT_PROVIDER: &str = "default";

#[derive(Debug, Clone)]
pub struct OfferedProvider {
    pub name: String,
    pub settings: ProviderSettings,
}

/// What a client sees of a provider (never its URL or key).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ProviderInfo {
    pub name: String,
    /// `openai` or `anthropic`.
    pub provider: String,
    pub model: String,
}

/// The providers of a server, `default` first.
#[derive(Debug, Clone)]
pub struct ServeProviders {
    offered: Vec<OfferedProvider>,
}

/// A client named a provider the server does not offer.
#[derive(Debug, thiserror::Error)]
#[error("this server offers no provider named '{name}'; choose one of: {offered} (GET /api/providers lists them; [serve.providers.NAME] in the server's config adds one)")]
pub struct UnknownProvider {
    pub name: String,
    pub offered: String,
}

impl ServeProviders {
    /// `default` is the server's own settings; `named` come from `[serve.providers]`.
    pub fn new(default: ProviderSettings, named: Vec<(String, ProviderSettings)>) -> Self {
        let mut offered = vec![OfferedProvider {
            name: DEFAULT_PROVIDER.to_string(),
            settings: default,
        }];
        offered.extend(
            named
                .into_iter()
                .filter(|(name, _)| name != DEFAULT_PROVIDER)
                .map(|(name, settings)| OfferedProvider { name, settings }),
        );
        ServeProviders { offered }
    }

    /// The provider called `name` (`None`: the default).
    pub fn by_name(&self, name: Option<&str>) -> Result<&OfferedProvider, UnknownProvider> {
        let name = name.map(str::trim).unwrap_or(DEFAULT_PROVIDER);
        self.offered
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| UnknownProvider {
                name: crate::protocol::clip(name, 40),
                offered: self.names().join(", "),
            })
    }

    /// The provider a stored session continues with: the configured one it used, else the
    /// default (`true` when it is not the one it used).
    pub fn for_stored(&self, stored: Option<&SessionModel>) -> (&OfferedProvider, bool) {
        let Some(stored) = stored else {
            return (&self.offered[0], false);
        };
        let used = self.offered.iter().find(|p| {
            p.settings.kind.as_str() == stored.provider
                && p.settings.model == stored.model
                && stored.base_url.as_deref() == Some(p.settings.base_url.as_str())
        });
        match used {
            Some(p) => (p, false),
            None => (&self.offered[0], true),
        }
    }

    pub fn names(&self) -> Vec<&str> {
        self.offered.iter().map(|p| p.name.as_str()).collect()
    }

    pub fn list(&self) -> Vec<ProviderInfo> {
        self.offered
            .iter()
            .map(|p| ProviderInfo {
                name: p.name.clone(),
                provider: p.settings.kind.as_str().to_string(),
                model: p.settings.model.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::ProviderKind;

    fn settings(kind: ProviderKind, model: &str, url: &str) -> ProviderSettings {
        ProviderSettings::new(kind, model, url, None)
    }

    #[test]
    fn clients_choose_by_name_and_stored_sessions_keep_a_configured_one() {
        let p = ServeProviders::new(
            settings(ProviderKind::OpenAi, "m1", "http://a/v1"),
            vec![(
                "fast".into(),
                settings(ProviderKind::Anthropic, "m2", "http://b"),
            )],
        );
        assert_eq!(p.by_name(None).unwrap().name, "default");
        assert_eq!(p.by_name(Some("fast")).unwrap().settings.model, "m2");
        let e = p.by_name(Some("http://evil")).unwrap_err().to_string();
        assert!(
            e.contains("default, fast") && e.contains("no provider named"),
            "{e}"
        );
        let stored = |provider: &str, model: &str, url: &str| SessionModel {
            provider: provider.into(),
            model: model.into(),
            base_url: Some(url.into()),
        };
        let (chosen, changed) = p.for_stored(Some(&stored("anthropic", "m2", "http://b")));
        assert_eq!((chosen.name.as_str(), changed), ("fast", false));
        // A URL the configuration does not offer (say, set by an older server from a client's
        // request) is never used again.
        let (chosen, changed) = p.for_stored(Some(&stored("openai", "m1", "http://evil/v1")));
        assert_eq!((chosen.name.as_str(), changed), ("default", true));
        assert_eq!(chosen.settings.base_url, "http://a/v1");
        assert_eq!(p.list()[1].provider, "anthropic");
    }
}
