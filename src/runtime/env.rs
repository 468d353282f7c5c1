//! The worker's environment: the host's, minus anything that looks like a secret.

/// True for variables that hold credentials (`OPENAI_API_KEY`, `GITHUB_TOKEN`, …). The test
/// is deliberately broad: a block that needs a credential can be given it explicitly, while a
/// leaked key cannot be taken back.
pub fn is_secret_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const MARKERS: [&str; 8] = [
        "API_KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PRIVATE_KEY",
    ];
    MARKERS.iter().any(|m| upper.contains(m))
        || upper.ends_with("_KEY")
        || upper == "AWS_ACCESS_KEY_ID"
}

/// The environment a worker gets.
pub fn worker_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| !is_secret_env(k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_recognized() {
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "gh_token",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "DB_PASSWORD",
            "SSH_PRIVATE_KEY",
            "STRIPE_KEY",
        ] {
            assert!(is_secret_env(name), "{name}");
        }
        for name in ["PATH", "HOME", "VIRTUAL_ENV", "KEYBOARD", "LANG", "TERM"] {
            assert!(!is_secret_env(name), "{name}");
        }
    }
}
