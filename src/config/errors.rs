//! [`ConfigError`]: what is wrong with `config.toml`, where, and how to fix it; and the
//! helpers that find the line a key is on.

use std::path::PathBuf;

/// A problem with `config.toml`; the message names the file, the place and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}; fix its permissions or remove it")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// serde's type names in words a user knows ("expected f64" is "expected a number").
pub(super) fn plain_serde_message(message: &str) -> String {
    let mut out = message.to_string();
    for (rust, plain) in [
        ("expected f64", "expected a number"),
        ("expected i64", "expected a whole number"),
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected usize", "expected a whole number"),
        ("expected a sequence", "expected a list"),
        ("expected a boolean", "expected true or false"),
    ] {
        out = out.replace(rust, plain);
    }
    out
}

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_number(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// `line N: ` for the key at `path` in a TOML document, found through the parser's own spans,
/// so a key is looked up in its own table (`[serve] mode` is never taken for `[sandbox] mode`).
/// When the last keys of the path are absent it points at the deepest part present; it is
/// empty when nothing of the path is there or the text does not parse.
pub(crate) fn line_of_key(text: &str, path: &[&str]) -> String {
    use toml::de::{DeTable, DeValue};
    let Ok(root) = DeTable::parse(text) else {
        return String::new();
    };
    let mut table = root.get_ref();
    let mut found = None;
    for part in path {
        let Some((key, value)) = table.iter().find(|(k, _)| k.get_ref() == part) else {
            break;
        };
        found = Some(key.span().start);
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    found
        .map(|start| format!("line {}: ", line_number(text, start)))
        .unwrap_or_default()
}
