//! What a turn reports as it runs: the one stream `vis chat` renders, `vis serve` sends as
//! server-sent events, and tests assert on.

use serde::{Deserialize, Serialize};

use super::{IterationStatus, RequestCost, Usage};

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
        /// The cost model's figures for this request (absent in events of older servers).
        #[serde(default)]
        cost: RequestCost,
    },
    BlockStarted {
        turn: i64,
        iteration: i64,
        code: String,
    },
    /// What the running block printed since the previous `BlockOutput` (for display only:
    /// the model gets `BlockFinished`'s output). Sent at most about ten times a second while
    /// the block runs; when it printed more than one event carries, `text` is the newest part
    /// and `skipped_bytes` counts the bytes before it that were not sent. The worker's text,
    /// untrusted: escape it before showing it.
    BlockOutput {
        turn: i64,
        iteration: i64,
        text: String,
        skipped_bytes: u64,
    },
    BlockFinished {
        turn: i64,
        iteration: i64,
        /// How the block ended (`ok`, `error`, `timeout`, `interrupted`, `crashed` on the
        /// wire), or `rejected`: the call was not a valid `python_execution` call.
        status: IterationStatus,
        output: String,
        wall_ms: u64,
        /// The call's code when it did not run (rejected, or cut off by an interrupt), so no
        /// `block_started` showed it: for a rejected call, its arguments as the model sent them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// The images the block showed (`show()`); the web view fetches each by its hash.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<super::ImageRef>,
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
    /// A block started a sub-session (`spawn`): `child` is its session id, `task` the first
    /// line of its task (the block's text, untrusted).
    ChildStarted {
        turn: i64,
        iteration: i64,
        child: String,
        task: String,
    },
    /// A sub-session ended: `status` is `done`, `failed: …`, `cancelled` or `iteration
    /// limit`; `answer` is its final answer's first line.
    ChildFinished {
        child: String,
        status: String,
        answer: String,
    },
    /// A background job (`sh.background`) started. `command` and `artifact` are the
    /// worker's text, untrusted: escape them before showing them.
    JobStarted {
        id: u32,
        command: String,
        artifact: String,
    },
    /// A background job ended, or was lost with its worker (`lost`); `line` is what the
    /// model is told (`[vis] job 3 finished: exit 0, …`). Sent between turns too.
    JobFinished {
        id: u32,
        line: String,
        exit_code: Option<i32>,
        lost: bool,
    },
    TurnFinished {
        turn: i64,
        /// `done`, `interrupted`, `failed`, `iteration_limit` or `output_limit` on the wire.
        status: TurnStatus,
        /// The model's final answer (empty when the turn did not finish normally).
        text: String,
    },
}

impl Event {
    /// The event's name: its serde tag (`"type"` in the JSON), which is also the SSE event name
    /// `vis serve` sends, read without serializing the event.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::TurnStarted { .. } => "turn_started",
            Event::RequestStarted { .. } => "request_started",
            Event::TextDelta { .. } => "text_delta",
            Event::ReasoningDelta { .. } => "reasoning_delta",
            Event::Retrying { .. } => "retrying",
            Event::ResponseFinished { .. } => "response_finished",
            Event::BlockStarted { .. } => "block_started",
            Event::BlockOutput { .. } => "block_output",
            Event::BlockFinished { .. } => "block_finished",
            Event::Notice { .. } => "notice",
            Event::Error { .. } => "error",
            Event::ChildStarted { .. } => "child_started",
            Event::ChildFinished { .. } => "child_finished",
            Event::TurnFinished { .. } => "turn_finished",
            Event::JobStarted { .. } => "job_started",
            Event::JobFinished { .. } => "job_finished",
        }
    }
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
    /// The answer was cut at the output limit (`finish_reason: "length"`, Anthropic's
    /// `max_tokens`); calls it carried did not run.
    OutputLimit,
}

impl TurnStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::Done => "done",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
            TurnStatus::IterationLimit => "iteration_limit",
            TurnStatus::OutputLimit => "output_limit",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of_each() -> Vec<Event> {
        let text = || "t".to_string();
        vec![
            Event::TurnStarted { turn: 1 },
            Event::RequestStarted { turn: 1, n: 1 },
            Event::TextDelta { text: text() },
            Event::ReasoningDelta { text: text() },
            Event::Retrying {
                attempt: 1,
                delay_ms: 0,
                reason: text(),
            },
            Event::ResponseFinished {
                turn: 1,
                n: 1,
                usage: Usage::default(),
                estimate_tokens: 0,
                latency_ms: 0,
                ttft_ms: None,
                retries: 0,
                cost: RequestCost::default(),
            },
            Event::BlockStarted {
                turn: 1,
                iteration: 1,
                code: text(),
            },
            Event::BlockOutput {
                turn: 1,
                iteration: 1,
                text: text(),
                skipped_bytes: 0,
            },
            Event::BlockFinished {
                turn: 1,
                iteration: 1,
                status: IterationStatus::Rejected,
                output: text(),
                wall_ms: 0,
                code: Some(text()),
                images: Vec::new(),
            },
            Event::Notice { text: text() },
            Event::Error {
                kind: text(),
                message: text(),
            },
            Event::ChildStarted {
                turn: 1,
                iteration: 1,
                child: text(),
                task: text(),
            },
            Event::ChildFinished {
                child: text(),
                status: text(),
                answer: text(),
            },
            Event::JobStarted {
                id: 1,
                command: text(),
                artifact: text(),
            },
            Event::JobFinished {
                id: 1,
                line: text(),
                exit_code: Some(0),
                lost: false,
            },
            Event::TurnFinished {
                turn: 1,
                status: TurnStatus::Done,
                text: text(),
            },
        ]
    }

    /// Every tag serde knows, read from its own answer to an unknown one ("unknown variant
    /// `?`, expected one of `a`, `b`, …"), so a variant added later is not missed here.
    fn serde_tags() -> Vec<String> {
        let err = serde_json::from_str::<Event>(r#"{"type": "?"}"#).unwrap_err();
        let message = err.to_string();
        let expected = message.split("expected one of").nth(1).unwrap();
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn kind_is_the_serialized_tag_of_every_variant() {
        let events = one_of_each();
        for event in &events {
            let json = serde_json::to_value(event).unwrap();
            assert_eq!(json["type"], event.kind(), "{event:?}");
        }
        let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
        let tags = serde_tags();
        assert_eq!(kinds, tags, "one_of_each lists every variant, in order");
    }

    #[test]
    fn statuses_travel_as_their_names_and_come_back_typed() {
        use crate::protocol::Status;
        let block = Event::BlockFinished {
            turn: 2,
            iteration: 1,
            status: IterationStatus::Ended(Status::Timeout),
            output: String::new(),
            wall_ms: 5,
            code: None,
            images: Vec::new(),
        };
        let json = serde_json::to_value(&block).unwrap();
        assert_eq!(json["status"], "timeout");
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), block);
        let turn = Event::TurnFinished {
            turn: 2,
            status: TurnStatus::IterationLimit,
            text: String::new(),
        };
        let json = serde_json::to_value(&turn).unwrap();
        assert_eq!(json["status"], "iteration_limit");
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), turn);
        let bad = serde_json::json!({"type": "block_finished", "turn": 1, "iteration": 1,
            "status": "fine", "output": "", "wall_ms": 0});
        let e = serde_json::from_value::<Event>(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown iteration status `fine`"), "{e}");
    }
}
