//! PostgreSQL URLs as Vis shows and keys them: without their password.

/// True for a `postgres://` or `postgresql://` URL (any case of the scheme).
pub fn is_postgres_url(text: &str) -> bool {
    let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The URL with its password (in the user part, or a `password=` parameter) replaced by `***`:
/// what messages, logs and listings show.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The authority ends at the first '/', '?' or '#'; its user part ends at its last '@'.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _password)) => format!("{name}:***@{host}"),
            None => format!("{user}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|param| match param.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => {
                        format!("{key}=***")
                    }
                    _ => param.to_string(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// A name for the database a URL points at, safe as a directory name and free of the
/// password: `<database>-<16 hex digits of blake3(redacted URL)>`. Files Vis keeps for it on
/// this machine (checkpoints, artifacts, the serve token) live under it.
pub fn state_key(url: &str) -> String {
    let shown = redact(url);
    let hash = blake3::hash(shown.as_bytes()).to_hex();
    let database = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split_once('/'))
        .map(|(_, path)| path.split(['?', '#']).next().unwrap_or(""))
        .unwrap_or("");
    let database: String = database
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .take(40)
        .collect();
    let database = if database.is_empty() {
        "postgres".to_string()
    } else {
        database
    };
    format!("{database}-{}", &hash.as_str()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_wherever_they_are() {
        assert_eq!(
            redact("postgres://vis:s3cret@db.example:5432/vis"),
            "postgres://vis:***@db.example:5432/vis"
        );
        assert_eq!(
            redact("postgresql://vis:p@ss@db/vis?sslmode=disable"),
            "postgresql://vis:***@db/vis?sslmode=disable"
        );
        assert_eq!(
            redact("postgres:///vis?host=/run/pg&password=s3cret&user=x"),
            "postgres:///vis?host=/run/pg&password=***&user=x"
        );
        assert_eq!(redact("postgres://db/vis"), "postgres://db/vis");
        assert!(!redact("postgres://u:hunter2@h/d?password=hunter2").contains("hunter2"));
    }

    #[test]
    fn the_state_key_names_the_database_without_the_password() {
        let key = state_key("postgres://vis:s3cret@db/team_vis?x=1");
        assert!(key.starts_with("team_vis-"), "{key}");
        assert!(!key.contains("s3cret"));
        assert_eq!(
            key,
            state_key("postgres://vis:other@db/team_vis?x=1"),
            "a changed password is the same database"
        );
        assert_ne!(key, state_key("postgres://vis@db2/team_vis?x=1"));
        assert!(state_key("postgres://h/../..").starts_with("postgres-"));
    }

    #[test]
    fn schemes_are_recognized_in_any_case() {
        assert!(is_postgres_url("postgres://x"));
        assert!(is_postgres_url("PostgreSQL://x"));
        assert!(!is_postgres_url("postgres:x"));
        assert!(!is_postgres_url("/tmp/postgres://x"));
    }
}
