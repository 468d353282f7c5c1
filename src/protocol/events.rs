//! What a turn reports as it runs: the one stream `vis chat` renders, `vis serve` sends as
//! server-sent events, and tests assert on.

use serde::{Deserialize, Serialize};

use super::Usage;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    TurnStarted {
        turn: i64,
    },
    /// A model request goes out (`n` counts the turn's requests from 1).
    RequestStarted {
        turn: i64,
        n: u32,
    },
    TextDelta {
        text: String,
    },
    ReasoningDelta {
        text: String,
    },
    /// The provider's attempt failed and is retried: discard what this attempt streamed.
    Retrying {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
    /// A response arrived in full.
    ResponseFinished {
        turn: i64,
        n: u32,
        usage: Usage,
        estimate_tokens: u64,
        latency_ms: u64,
        ttft_ms: Option<u64>,
        retries: u32,
    },
    BlockStarted {
        turn: i64,
        iteration: i64,
        code: String,
    },
    BlockFinished {
        turn: i64,
        iteration: i64,
        /// `ok`, `error`, `timeout`, `interrupted`, `crashed`, or `rejected` (a call that was
        /// not a valid `python_execution` call).
        status: String,
        output: String,
        wall_ms: u64,
    },
    /// Something the person should know that is not model output (a catalog update was
    /// sent, the provider changed on resume, …).
    Notice {
        text: String,
    },
    /// The turn ends because of this error (already one clear line).
    Error {
        kind: String,
        message: String,
    },
    TurnFinished {
        turn: i64,
        /// `done`, `interrupted`, `failed` or `iteration_limit`.
        status: String,
        /// The model's final answer (empty when the turn did not finish normally).
        text: String,
    },
}

/// How a turn ended, as stored and as `TurnFinished` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Running,
    Done,
    Interrupted,
    Failed,
    IterationLimit,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Done => "done",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
            TurnStatus::IterationLimit => "iteration_limit",
        }
    }
}
