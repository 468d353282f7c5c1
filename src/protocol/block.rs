//! Blocks: how one ended, and the definitions that outlive the worker.

use serde::{Deserialize, Serialize};

/// A top-level definition persisted with the session and re-created on worker start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedDef {
    pub name: String,
    /// `function`, `class` or `import`.
    pub kind: String,
    pub source: String,
    #[serde(default)]
    pub signature: String,
    #[serde(default)]
    pub doc: String,
}

/// Which persisted definitions came back in a new worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreReport {
    pub ok: Vec<String>,
    /// `(name, error)` for each definition that failed to come back.
    pub failed: Vec<(String, String)>,
}

/// How a block ended. `Timeout` and `Crashed` are decided by the host; the worker itself
/// only ever reports `Ok`, `Error` or `Interrupted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Error,
    Timeout,
    Interrupted,
    Crashed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Interrupted => "interrupted",
            Status::Crashed => "crashed",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "ok" => Status::Ok,
            "error" => Status::Error,
            "timeout" => Status::Timeout,
            "interrupted" => Status::Interrupted,
            "crashed" => Status::Crashed,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_their_names() {
        for s in ["ok", "error", "timeout", "interrupted", "crashed"] {
            assert_eq!(Status::parse(s).unwrap().as_str(), s);
        }
        assert!(Status::parse("nope").is_none());
    }
}
