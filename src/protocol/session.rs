//! Turns and iterations as recorded: what the store keeps, the gateway and the commands
//! write, and `vis sessions` / `vis serve` show. Statuses are enums here; their names (the
//! strings stored and serialized) never change, so old databases and API clients read the same.

use serde::{Deserialize, Serialize, Serializer};

use super::block::{PersistedDef, Status};
use super::events::TurnStatus;

/// What started a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnKind {
    /// `vis exec` or `POST /exec`: one block, no model.
    Exec,
    /// A person's message to a model (`vis chat`, `vis serve`).
    Chat,
    /// The blocks of one `vis mcp` connection.
    Mcp,
}

impl TurnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnKind::Exec => "exec",
            TurnKind::Chat => "chat",
            TurnKind::Mcp => "mcp",
        }
    }

    pub fn parse(s: &str) -> Option<TurnKind> {
        Some(match s {
            "exec" => TurnKind::Exec,
            "chat" => TurnKind::Chat,
            "mcp" => TurnKind::Mcp,
            _ => return None,
        })
    }
}

impl TurnStatus {
    pub fn parse(s: &str) -> Option<TurnStatus> {
        Some(match s {
            "running" => TurnStatus::Running,
            "done" => TurnStatus::Done,
            "interrupted" => TurnStatus::Interrupted,
            "failed" => TurnStatus::Failed,
            "iteration_limit" => TurnStatus::IterationLimit,
            "output_limit" => TurnStatus::OutputLimit,
            _ => return None,
        })
    }
}

/// Where an iteration stands: running, ended with a block status, or rejected (the model's
/// call was not a valid `python_execution` call and got a correction instead of a run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IterationStatus {
    Running,
    Rejected,
    Ended(Status),
}

impl IterationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            IterationStatus::Running => "running",
            IterationStatus::Rejected => "rejected",
            IterationStatus::Ended(status) => status.as_str(),
        }
    }

    pub fn parse(s: &str) -> Option<IterationStatus> {
        Some(match s {
            "running" => IterationStatus::Running,
            "rejected" => IterationStatus::Rejected,
            other => IterationStatus::Ended(Status::parse(other)?),
        })
    }

    /// True only for a block that ran to its end without raising.
    pub fn is_ok(self) -> bool {
        self == IterationStatus::Ended(Status::Ok)
    }
}

impl From<Status> for IterationStatus {
    fn from(status: Status) -> Self {
        IterationStatus::Ended(status)
    }
}

/// The statuses display as their names.
macro_rules! display_as_name {
    ($($ty:ty),*) => {$(
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}
display_as_name!(TurnKind, TurnStatus, IterationStatus);

/// A status equals its stored name, so reports and tests can compare against text.
macro_rules! eq_name {
    ($($ty:ty),*) => {$(
        impl PartialEq<&str> for $ty {
            fn eq(&self, name: &&str) -> bool {
                self.as_str() == *name
            }
        }
    )*};
}
eq_name!(TurnKind, TurnStatus, IterationStatus);

/// The statuses serialize as their names.
macro_rules! serialize_as_name {
    ($($ty:ty),*) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    )*};
}
serialize_as_name!(TurnKind, IterationStatus);

/// An iteration's status reads back from its name; an unknown one is an error that names it.
impl<'de> Deserialize<'de> for IterationStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        IterationStatus::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown iteration status `{name}`: expected running, rejected, ok, error, timeout, interrupted or crashed"
            ))
        })
    }
}

/// A turn as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct TurnRow {
    pub turn: i64,
    pub kind: TurnKind,
    pub user_text: Option<String>,
    pub status: TurnStatus,
    pub started_at: i64,
    pub finished_at: Option<i64>,
}

/// An iteration (one block, or one rejected call) as recorded.
#[derive(Debug, Clone, Serialize)]
pub struct IterationRow {
    pub turn: i64,
    pub iteration: i64,
    pub code: String,
    /// Exactly what the model got back.
    pub output: String,
    pub status: IterationStatus,
    pub started_at: i64,
    pub duration_ms: i64,
    pub exec_us: i64,
    pub artifact: Option<String>,
    pub worker_exit: Option<String>,
}

/// Everything recorded for one completed iteration, with the definition changes it made.
#[derive(Debug, Clone)]
pub struct IterationRecord<'a> {
    pub session_id: &'a str,
    pub turn: i64,
    pub iteration: i64,
    pub code: &'a str,
    pub output: &'a str,
    pub status: IterationStatus,
    pub started_at: i64,
    pub duration_ms: i64,
    pub exec_us: i64,
    pub artifact: Option<&'a str>,
    pub worker_exit: Option<&'a str>,
    pub defs_set: &'a [PersistedDef],
    pub defs_deleted: &'a [String],
}

impl<'a> IterationRecord<'a> {
    /// An iteration that did not run a block (a rejected call, one cut off by a restart or
    /// an interrupt): its code and what the model is told instead, taking no time.
    pub fn not_run(
        session_id: &'a str,
        turn: i64,
        iteration: i64,
        code: &'a str,
        output: &'a str,
        status: IterationStatus,
        started_at: i64,
    ) -> IterationRecord<'a> {
        IterationRecord {
            session_id,
            turn,
            iteration,
            code,
            output,
            status,
            started_at,
            duration_ms: 0,
            exec_us: 0,
            artifact: None,
            worker_exit: None,
            defs_set: &[],
            defs_deleted: &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for kind in [TurnKind::Exec, TurnKind::Chat, TurnKind::Mcp] {
            assert_eq!(TurnKind::parse(kind.as_str()), Some(kind));
        }
        for s in [
            "running",
            "done",
            "interrupted",
            "failed",
            "iteration_limit",
            "output_limit",
        ] {
            assert_eq!(TurnStatus::parse(s).map(TurnStatus::as_str), Some(s));
        }
        for s in [
            "running",
            "rejected",
            "ok",
            "error",
            "timeout",
            "interrupted",
            "crashed",
        ] {
            assert_eq!(
                IterationStatus::parse(s).map(IterationStatus::as_str),
                Some(s)
            );
        }
        assert_eq!(TurnKind::parse("Exec"), None);
        assert_eq!(TurnStatus::parse("ok"), None);
        assert_eq!(IterationStatus::parse("done"), None);
        assert_eq!(
            serde_json::to_string(&IterationStatus::Ended(Status::Timeout)).unwrap(),
            "\"timeout\""
        );
        assert!(IterationStatus::Ended(Status::Ok).is_ok());
        assert!(!IterationStatus::Rejected.is_ok());
    }
}
