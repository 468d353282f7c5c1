//! What a person sees before a workspace's server may run: the command line, the directory,
//! and every environment variable (or HTTP header) the server will get, with secrets masked.
//!
//! `vis mcp approve` and `vis mcp list` print these lines. Values are shown as declared, before
//! `${NAME}` expansion (what the approval covers). A value that looks secret — by its name
//! (`*TOKEN*`, `*KEY*`, `*SECRET*`, `*PASSWORD*`, …) or by its shape (a known key prefix such as
//! `sk-` or `ghp_`, a JWT, a private key, credentials in a URL, a long random-looking string) —
//! is replaced by `<hidden: N characters>`. A `${NAME}` is never hidden: it is not a secret
//! itself, and it says which of the user's own variables (perhaps an API key) the server
//! receives, which is exactly what the person must notice.

use crate::config::{ServerSpec, Transport, INHERITED_ENV};

/// Words in a variable or header name that mark its value as secret.
const SECRET_NAME_PARTS: [&str; 9] = [
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
];
/// Prefixes of well-known secret formats (API keys, tokens, keys).
const SECRET_PREFIXES: [&str; 22] = [
    "sk-",
    "sk_",
    "rk_",
    "pk_live",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxs-",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "hf_",
    "npm_",
    "pypi-",
];
/// Literal text around `${NAME}`s that reveals nothing ("Bearer ${TOKEN}").
const HARMLESS_SCHEMES: [&str; 3] = ["bearer", "basic", "token"];

/// Whether a variable or header named `name` holds a secret, by its name.
pub fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
}

/// Whether `value` looks like a secret by its shape.
pub fn secret_value(value: &str) -> bool {
    let v = value.trim();
    if SECRET_PREFIXES.iter().any(|p| v.starts_with(p))
        || v.starts_with("eyJ")
        || v.contains("-----BEGIN")
        || credentials_in_url(v)
    {
        return true;
    }
    // A long random-looking word: no spaces, no path, letters and digits mixed, varied.
    v.len() >= 20
        && !v.starts_with(['/', '.', '~'])
        && !v.contains("://")
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_+/=.".contains(c))
        && v.chars().any(|c| c.is_ascii_digit())
        && v.chars().any(|c| c.is_ascii_alphabetic())
        && entropy_bits_per_char(v) >= 3.5
}

/// `scheme://user:password@host`.
fn credentials_in_url(v: &str) -> bool {
    let Some((_, rest)) = v.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .split_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

fn entropy_bits_per_char(v: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in v.bytes() {
        counts[b as usize] += 1;
    }
    let n = v.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// The `${NAME}`s of a declared value, in order.
fn references(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    out
}

/// `value` without its `${NAME}`s.
fn literal_part(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `NAME=VALUE` for people: the value as declared, hidden when it looks secret, and which of
/// the user's variables it takes (`sep` is `=` for variables, `: ` for headers).
pub fn shown_entry(name: &str, value: &str, sep: &str) -> String {
    let refs = references(value);
    let literal = literal_part(value);
    let literal_words: Vec<&str> = literal.split_whitespace().collect();
    let harmless = literal_words
        .iter()
        .all(|w| HARMLESS_SCHEMES.contains(&w.to_ascii_lowercase().as_str()) || w.len() <= 2);
    let hide = if !refs.is_empty() && harmless {
        None
    } else if secret_name(name) {
        Some("a secret by its name")
    } else if secret_value(&literal) {
        Some("it looks like a secret")
    } else {
        None
    };
    let mut line = match hide {
        None => format!("{name}{sep}{value}"),
        Some(why) => format!(
            "{name}{sep}<hidden: {} characters; {why}>",
            value.chars().count()
        ),
    };
    if !refs.is_empty() {
        let named: Vec<String> = refs
            .iter()
            .map(|r| {
                if secret_name(r) {
                    format!("{r} (a secret by its name)")
                } else {
                    (*r).to_string()
                }
            })
            .collect();
        line.push_str(&format!(
            "   <- from your environment: {}",
            named.join(", ")
        ));
    }
    line
}

/// The lines that describe what `spec` runs with, after its command line: its directory and
/// environment (stdio), or its headers (HTTP).
pub fn review_lines(spec: &ServerSpec) -> Vec<String> {
    match &spec.transport {
        Transport::Stdio { env, cwd, .. } => {
            let mut out = Vec::new();
            if let Some(dir) = cwd {
                out.push(format!(
                    "runs in {} (relative to the workspace)",
                    dir.display()
                ));
            }
            out.push(format!(
                "environment: {} from yours{}",
                INHERITED_ENV.join(", "),
                if env.is_empty() {
                    ", nothing else".to_string()
                } else {
                    ", and:".to_string()
                }
            ));
            out.extend(
                env.iter()
                    .map(|(k, v)| format!("  {}", shown_entry(k, v, "="))),
            );
            out
        }
        Transport::Http { headers, .. } => {
            let mut out = vec![if headers.is_empty() {
                "headers: none besides MCP's own".to_string()
            } else {
                "headers:".to_string()
            }];
            out.extend(
                headers
                    .iter()
                    .map(|(k, v)| format!("  {}", shown_entry(k, v, ": "))),
            );
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_by_name() {
        for name in [
            "GITHUB_TOKEN",
            "api_key",
            "OPENAI_API_KEY",
            "CLIENT_SECRET",
            "DB_PASSWORD",
            "Authorization",
            "AWS_SECRET_ACCESS_KEY",
            "X-Api-Key",
        ] {
            assert!(secret_name(name), "{name}");
        }
        for name in ["DEBUG", "PORT", "LOG_LEVEL", "HOME", "Accept-Language"] {
            assert!(!secret_name(name), "{name}");
        }
    }

    #[test]
    fn secrets_by_shape() {
        for value in [
            "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
            "xoxb-1234-5678-abcdefgh",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
            "-----BEGIN PRIVATE KEY-----\nMII",
            "postgres://admin:hunter2@db.example.com/app",
            "a8Kd93jfLq0ZxPw7Vb2mNc4Rt6Yh1Ue5",
        ] {
            assert!(secret_value(value), "{value}");
        }
        for value in [
            "1",
            "info",
            "/usr/local/lib/python3.11/site-packages",
            "https://api.example.com/v1",
            "en_US.UTF-8",
            "production",
            "some words with spaces in them",
            "postgres://db.example.com/app",
        ] {
            assert!(!secret_value(value), "{value}");
        }
    }

    #[test]
    fn entries_hide_secrets_and_name_the_variables_they_take() {
        for (name, value, separator, shown) in [
            ("DEBUG", "1", "=", "DEBUG=1"),
            (
                "API_TOKEN",
                "hunter2hunter2",
                "=",
                "API_TOKEN=<hidden: 14 characters; a secret by its name>",
            ),
            (
                "UPSTREAM",
                "sk-live-0123456789abcdef",
                "=",
                "UPSTREAM=<hidden: 24 characters; it looks like a secret>",
            ),
            // A reference is shown: which of the user's variables goes to the server.
            (
                "GITHUB_TOKEN",
                "${GITHUB_TOKEN}",
                "=",
                "GITHUB_TOKEN=${GITHUB_TOKEN}   <- from your environment: GITHUB_TOKEN (a secret by its name)",
            ),
            (
                "Authorization",
                "Bearer ${DOCS_TOKEN}",
                ": ",
                "Authorization: Bearer ${DOCS_TOKEN}   <- from your environment: DOCS_TOKEN (a secret by its name)",
            ),
            (
                "CONFIG",
                "${HOME}/.app/config",
                "=",
                "CONFIG=${HOME}/.app/config   <- from your environment: HOME",
            ),
            // A literal secret next to a reference stays hidden.
            (
                "MIXED_KEY",
                "abc123secret:${USER}",
                "=",
                "MIXED_KEY=<hidden: 20 characters; a secret by its name>   <- from your environment: USER",
            ),
        ] {
            assert_eq!(shown_entry(name, value, separator), shown, "{name}");
        }
    }
}
