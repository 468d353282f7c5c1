//! The worker's environment: an allow-list, not the host's environment minus what looks
//! secret. A block can read everything in its environment, and a deny list always misses
//! something (`DATABASE_URL=postgres://user:password@…`, `PGPASS`, a vendor's odd name), so
//! only variables that programs need to run are passed, plus the ones the user names in
//! `[sandbox] env`.

/// Passed through when set: what shells, compilers, test runners and Python need.
pub const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "TZ",
    "TMPDIR",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUNBUFFERED",
    "PYTHONIOENCODING",
    "PYTHONDONTWRITEBYTECODE",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "NODE_PATH",
    "NVM_DIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
    "PKG_CONFIG_PATH",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "NO_COLOR",
    "SOURCE_DATE_EPOCH",
];

/// True for variables passed to the worker by default (`LC_*` included).
pub fn is_allowed(name: &str) -> bool {
    ALLOWED.contains(&name) || name.starts_with("LC_")
}

/// The environment a worker gets: the allow-list, plus `extra` (names from `[sandbox] env`,
/// matched exactly: no patterns, so a credential passes only when the user names it).
pub fn worker_env(extra: &[String]) -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| is_allowed(k) || extra.iter().any(|e| e == k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_names_pass() {
        for name in ["PATH", "HOME", "LC_ALL", "VIRTUAL_ENV", "TERM"] {
            assert!(is_allowed(name), "{name}");
        }
        for name in [
            "OPENAI_API_KEY",
            "DATABASE_URL",
            "PGPASSWORD",
            "PGPASS",
            "GITHUB_TOKEN",
            "MY_APP_CONFIG",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(!is_allowed(name), "{name}");
        }
    }
}
