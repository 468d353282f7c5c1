//! `[serve]` and `[serve.providers.NAME]`: `vis serve`'s settings and the checks serde cannot
//! make (host names, node ids, advertised addresses, lease times, named providers). They live
//! apart from the loader because they are the largest section and the only one whose values
//! are addresses and names other machines see.

use std::path::Path;

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
    #[serde(default, deserialize_with = "super::provider::tool_choice")]
    pub tool_choice: Option<crate::providers::ToolChoice>,
    /// As `[provider] stream`, for this provider.
    pub stream: Option<bool>,
    /// As `[provider] images`, for this provider.
    pub images: Option<bool>,
}

/// The shortest `[serve] lease_ttl`: half of it must cover interrupting a block (2 s).
pub const MIN_LEASE_TTL: f64 = 5.0;

impl ServeConfig {
    /// The checks serde cannot make; `at(path)` is `line N: ` for a key path under `[serve]`.
    pub(super) fn check(&self, at: impl Fn(&[&str]) -> String) -> Result<(), String> {
        for (key, value) in [
            ("idle_park_after", self.idle_park_after),
            ("shutdown_grace", self.shutdown_grace),
        ] {
            if let Some(v) = value.filter(|v| !(v.is_finite() && *v >= 0.0 && *v < 1e9)) {
                return Err(format!(
                    "{}`serve.{key}` must be a number of seconds, got {v}",
                    at(&[key])
                ));
            }
        }
        for (key, value) in [
            ("max_live_workers", self.max_live_workers.map(|n| n as u64)),
            ("max_connections", self.max_connections.map(|n| n as u64)),
            ("event_log_mb", self.event_log_mb),
        ] {
            if value == Some(0) {
                return Err(format!("{}`serve.{key}` must be at least 1", at(&[key])));
            }
        }
        if let Some(v) = self
            .header_timeout
            .filter(|v| !(v.is_finite() && *v > 0.0 && *v < 1e9))
        {
            return Err(format!(
                "{}`serve.header_timeout` must be a positive number of seconds, got {v}; e.g. header_timeout = 30",
                at(&["header_timeout"])
            ));
        }
        if let Some(id) = &self.node_id {
            validate_node_id(id).map_err(|why| {
                format!(
                    "{}`serve.node_id` is {id:?}: {why}; e.g. node_id = \"gw-1\"",
                    at(&["node_id"])
                )
            })?;
        }
        if let Some(address) = &self.advertise {
            validate_advertise(address).map_err(|why| {
                format!(
                    "{}`serve.advertise` is {address:?}: {why}; write the address other nodes reach this one at, e.g. advertise = \"http://10.0.0.5:7878\"",
                    at(&["advertise"])
                )
            })?;
        }
        if let Some(v) = self
            .lease_ttl
            .filter(|v| !(v.is_finite() && (MIN_LEASE_TTL..=3600.0).contains(v)))
        {
            return Err(format!(
                "{}`serve.lease_ttl` must be between {MIN_LEASE_TTL} and 3600 seconds, got {v}: a node stops a session it cannot renew after half of it, and that half must cover stopping a block; e.g. lease_ttl = 15",
                at(&["lease_ttl"])
            ));
        }
        if let Some(name) = &self.public_name {
            validate_public_name(name).map_err(|why| {
                format!(
                    "{}`serve.public_name` is {name:?}: {why}; write the host name clients use, e.g. public_name = \"vis.example.com\"",
                    at(&["public_name"])
                )
            })?;
        }
        for path in &self.workspaces {
            if !Path::new(path).is_absolute() {
                return Err(format!(
                    "{}`serve.workspaces` holds {path:?}, which is not an absolute path",
                    at(&["workspaces"])
                ));
            }
        }
        for (name, provider) in &self.providers {
            validate_serve_provider(name, provider).map_err(|why| {
                format!(
                    "{}`serve.providers.{name}`: {why}",
                    at(&["providers", name])
                )
            })?;
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::super::tests::parse;

    #[test]
    fn reads_the_serve_table_and_rejects_bad_values() {
        let c = parse(
            "[serve]\npublic_name = \"vis.example.com:8443\"\nworkspaces = [\"/src\"]\nmax_connections = 9\nheader_timeout = 2.5\nevent_log_mb = 3\n[serve.providers.fast]\nprovider = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"FAST_KEY\"\n",
        )
        .unwrap();
        assert_eq!(c.serve.public_name.as_deref(), Some("vis.example.com:8443"));
        assert_eq!(c.serve.workspaces, ["/src"]);
        assert_eq!(
            (
                c.serve.max_connections,
                c.serve.header_timeout,
                c.serve.event_log_mb
            ),
            (Some(9), Some(2.5), Some(3))
        );
        assert_eq!(c.serve.providers["fast"].provider, "anthropic");
        assert_eq!(
            c.serve.providers["fast"].api_key_env.as_deref(),
            Some("FAST_KEY")
        );
        for (text, needle) in [
            (
                "[serve]\npublic_name = \"http://x.example\"\n",
                "a URL, not a host name",
            ),
            ("[serve]\npublic_name = \"x y\"\n", "not a host name"),
            ("[serve]\nworkspaces = [\"src\"]\n", "not an absolute path"),
            (
                "[serve]\nmax_connections = 0\n",
                "`serve.max_connections` must be at least 1",
            ),
            (
                "[serve]\nevent_log_mb = 0\n",
                "`serve.event_log_mb` must be at least 1",
            ),
            (
                "[serve]\nheader_timeout = 0\n",
                "positive number of seconds",
            ),
            (
                "[serve.providers.default]\nprovider = \"openai\"\n",
                "give this one another name",
            ),
            (
                "[serve.providers.Fast]\nprovider = \"openai\"\n",
                "lowercase letters",
            ),
            (
                "[serve.providers.x]\nprovider = \"gemini\"\n",
                "`provider` must be \"openai\"",
            ),
            (
                "[serve.providers.x]\nprovider = \"openai\"\nbase_url = \"ftp://h\"\n",
                "http:// or https://",
            ),
            (
                "[serve.providers.x]\nprovider = \"openai\"\napi_key_env = \"my key\"\n",
                "environment variable name",
            ),
            (
                "[serve.providers.x]\nmodel = \"m\"\n",
                "missing field `provider`",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(e.contains("line "), "{text}: {e}");
        }
    }
}
