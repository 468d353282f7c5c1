//! Session ids: checking the ones users choose and making fresh ones. The `session` dict
//! itself is `protocol::SessionInfo`; fold keys and model limits are the gateway's
//! (`gateway/fold/`).

/// A session id that is not allowed (it would appear in paths and commands).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid session id '{0}': use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit")]
pub struct InvalidSessionId(pub String);

/// Checks a user-chosen session id: 1–64 characters of `[A-Za-z0-9_.-]`, starting with a
/// letter or digit (ids appear in paths and commands, so nothing else is allowed).
pub fn validate_session_id(id: &str) -> Result<(), InvalidSessionId> {
    let ok_start = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    let ok_chars = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if id.is_empty() || id.len() > 64 || !ok_start || !ok_chars {
        return Err(InvalidSessionId(id.to_string()));
    }
    Ok(())
}

/// A fresh session id, e.g. `s-k3v9x2qa`: 40 bits from the OS's random generator.
pub fn new_session_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";
    // The OS generator does not fail on a supported kernel; if it ever does, the time and the
    // pid still make an id that is unique on this machine (ids are not secrets).
    let mut n = getrandom::u64().unwrap_or_else(|_| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let hash = blake3::hash(format!("{nanos}-{}", std::process::id()).as_bytes());
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&hash.as_bytes()[..8]);
        u64::from_le_bytes(seed)
    });
    let mut id = String::from("s-");
    for _ in 0..8 {
        id.push(ALPHABET[(n % 32) as usize] as char);
        n /= 32;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids() {
        for ok in ["a", "s-123", "Project_1.x"] {
            assert!(validate_session_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "a/b", "a b", &"x".repeat(65), "é"] {
            let e = validate_session_id(bad).unwrap_err().to_string();
            assert!(e.contains("invalid session id"), "{e}");
        }
        let id = new_session_id();
        assert!(validate_session_id(&id).is_ok());
        assert_ne!(id, new_session_id());
    }
}
