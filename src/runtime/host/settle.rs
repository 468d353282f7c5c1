//! **The status table**: how waiting for a block ended ([`Ending`]), why the host
//! interrupted it ([`Cause`]) and what the model is told ([`settle`]), in one place.

use super::options::WorkerOptions;
use super::spawn::WorkerProcess;
use crate::protocol::format_seconds;
use crate::protocol::{Block, BlockResult, ExitInfo, Status};
use crate::runtime::output::{cap_file, cap_output};

/// Why the host interrupted a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    Timeout,
    Stop,
}

/// How waiting for a block's result ended: facts only; [`settle`] decides what they mean.
#[derive(Debug)]
pub(super) enum Ending {
    /// The block was stopped before it was sent.
    NotSent,
    /// The worker sent the block's result (its status is one a worker may report).
    Reported(BlockResult),
    /// The worker broke the protocol and was killed; `captured` is what the block printed.
    ProtocolBroken {
        detail: String,
        exit: ExitInfo,
        captured: BlockResult,
    },
    /// The worker's pipe closed while the block ran: it died.
    Died {
        exit: ExitInfo,
        captured: BlockResult,
    },
    /// The block did not stop within the grace period after an interrupt: the worker was
    /// killed.
    Killed {
        exit: ExitInfo,
        captured: BlockResult,
    },
}

/// A block's result with its final status, the line the host adds to its output, and why
/// the next worker is started when this one was lost.
pub(super) struct Settled {
    pub result: BlockResult,
    pub trailer: Option<String>,
    pub lost_because: Option<String>,
}

/// **The one place a block's status is decided.** The worker's report is a claim about what
/// the interpreter saw (ok, error or interrupted: `wait_for_result` lets no other status
/// through); only the host knows whether it interrupted the block for its timeout or on
/// request, and whether the worker died, broke the protocol or had to be killed.
pub(super) fn settle(
    ending: Ending,
    cause: Option<Cause>,
    block: &Block,
    opts: &WorkerOptions,
) -> Settled {
    let lost = |mut captured: BlockResult, status, exit, trailer: String, because: String| {
        captured.status = status;
        captured.worker_lost = Some(exit);
        captured.ran = true;
        Settled {
            result: captured,
            trailer: Some(trailer),
            lost_because: Some(because),
        }
    };
    match ending {
        Ending::NotSent => {
            let mut result = BlockResult::new(Status::Interrupted);
            result.output =
                "[vis] interrupted before the block started; it did not run.\n".into();
            Settled {
                result,
                trailer: None,
                lost_because: None,
            }
        }
        Ending::Reported(mut result) => {
            result.ran = true;
            let trailer = match (result.status, cause) {
                // A block interrupted for its timeout ends in KeyboardInterrupt, or in another
                // error when its own code catches that and raises something else.
                (Status::Interrupted | Status::Error, Some(Cause::Timeout)) => {
                    result.status = Status::Timeout;
                    Some(format!(
                        "[vis] timeout: the block ran longer than {} and was interrupted; the worker and its variables are intact.",
                        format_seconds(block.timeout)
                    ))
                }
                (Status::Interrupted, _) => Some(
                    "[vis] interrupted: the block was stopped on request; the worker and its variables are intact.".into(),
                ),
                _ => None,
            };
            Settled {
                result,
                trailer,
                lost_because: None,
            }
        }
        Ending::ProtocolBroken {
            detail,
            exit,
            captured,
        } => lost(
            captured,
            Status::Crashed,
            exit,
            format!(
                "[vis] crashed: the worker sent a message that is not part of the protocol ({detail}), so it was killed; variables are lost and definitions are restored before the next block."
            ),
            "after the previous one broke the protocol".into(),
        ),
        Ending::Died { exit, captured } => {
            let mut trailer = format!(
                "[vis] crashed: the worker {exit} while running this block; variables are lost and definitions are restored before the next block."
            );
            if exit == ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()) {
                trailer.push_str(&format!(
                    " (SIGKILL often means memory ran out; the worker's limit is {} MiB.)",
                    opts.memory_limit_mb
                ));
            }
            lost(
                captured,
                Status::Crashed,
                exit,
                trailer,
                format!("after a crash: the previous one {exit}"),
            )
        }
        Ending::Killed { exit, captured } => {
            let (status, what, why) = match cause {
                Some(Cause::Timeout) => (
                    Status::Timeout,
                    format!(
                        "timeout: the block ran longer than {} and",
                        format_seconds(block.timeout)
                    ),
                    "timeout",
                ),
                _ => (
                    Status::Interrupted,
                    "interrupted: the block".to_string(),
                    "interrupt",
                ),
            };
            lost(
                captured,
                status,
                exit,
                format!(
                    "[vis] {what} did not stop within {} of the interrupt, so the worker was killed; variables are lost and definitions are restored before the next block.",
                    format_seconds(opts.interrupt_grace)
                ),
                format!("after a {why}: the previous one was killed"),
            )
        }
    }
}

/// What a block whose worker was lost printed before, capped (its status is settled later).
pub(super) fn captured_output(worker: &WorkerProcess, block: &Block) -> BlockResult {
    let (capped, saved) = cap_file(
        worker.capture(),
        block.output_limit,
        &block.artifact_path,
        block.artifact_quota,
    )
    .unwrap_or_else(|_| (cap_output(b"", block.output_limit, None), Ok(false)));
    let mut result = BlockResult::new(Status::Crashed);
    result.output = capped.text;
    result.cut_chars = capped.cut_chars;
    result.total_chars = capped.total_chars;
    result.artifact = matches!(saved, Ok(true)).then(|| block.artifact_path.clone());
    result
}

/// Appends `line` to `output` on a line of its own.
pub(super) fn push_line(output: &mut String, line: &str) {
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(line);
    output.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settle_block() -> Block {
        Block {
            code: "pass".into(),
            filename: "<t1/i1>".into(),
            session: crate::protocol::SessionInfo::new(
                "s",
                1,
                1,
                crate::protocol::SessionCounts::default(),
                crate::protocol::Utilization::without_requests(),
            ),
            workspace_roots: vec![],
            output_limit: 100,
            artifact_path: "/nowhere/a.txt".into(),
            artifact_dir: "/nowhere".into(),
            artifact_quota: 0,
            timeout: Duration::from_secs(3),
        }
    }

    fn reported(status: Status) -> Ending {
        let mut result = BlockResult::new(status);
        result.output = "out\n".into();
        Ending::Reported(result)
    }

    #[test]
    fn settle_decides_every_status_in_one_table() {
        let block = settle_block();
        let mut opts = WorkerOptions::new("vis".into());
        opts.memory_limit_mb = 64;
        let status = |ending, cause| settle(ending, cause, &block, &opts);
        // What the worker reports stands unless the host interrupted the block for its
        // timeout: then an interrupt or an error is the timeout.
        for (got, cause, want) in [
            (Status::Ok, None, Status::Ok),
            (Status::Error, None, Status::Error),
            (Status::Interrupted, None, Status::Interrupted),
            (Status::Interrupted, Some(Cause::Stop), Status::Interrupted),
            (Status::Error, Some(Cause::Stop), Status::Error),
            (Status::Interrupted, Some(Cause::Timeout), Status::Timeout),
            (Status::Error, Some(Cause::Timeout), Status::Timeout),
            (Status::Ok, Some(Cause::Timeout), Status::Ok),
        ] {
            let s = status(reported(got), cause);
            assert_eq!(s.result.status, want, "{got:?} {cause:?}");
            assert!(s.result.ran && s.lost_because.is_none() && s.result.worker_lost.is_none());
            assert_eq!(s.result.output, "out\n");
            let trailer = s.trailer.unwrap_or_default();
            match want {
                Status::Timeout => assert!(trailer.contains("longer than 3 s"), "{trailer}"),
                Status::Interrupted => assert!(trailer.contains("stopped on request"), "{trailer}"),
                _ => assert!(trailer.is_empty(), "{trailer}"),
            }
        }
        let s = status(Ending::NotSent, Some(Cause::Stop));
        assert_eq!(s.result.status, Status::Interrupted);
        assert!(!s.result.ran && s.result.output.contains("did not run"));
        // A lost worker: the host's verdict, whatever was printed before.
        let captured = || BlockResult::new(Status::Ok);
        let s = status(
            Ending::Died {
                exit: ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()),
                captured: captured(),
            },
            None,
        );
        assert_eq!(s.result.status, Status::Crashed);
        assert_eq!(
            s.result.worker_lost,
            Some(ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()))
        );
        assert!(s.trailer.unwrap().contains("limit is 64 MiB"));
        assert!(s.lost_because.unwrap().starts_with("after a crash"));
        let s = status(
            Ending::ProtocolBroken {
                detail: "a result with status `timeout`".into(),
                exit: ExitInfo::Code(0),
                captured: captured(),
            },
            Some(Cause::Timeout),
        );
        assert_eq!(s.result.status, Status::Crashed);
        assert!(s
            .trailer
            .unwrap()
            .contains("not part of the protocol (a result with status `timeout`)"));
        for (cause, want) in [
            (Some(Cause::Timeout), Status::Timeout),
            (Some(Cause::Stop), Status::Interrupted),
        ] {
            let s = status(
                Ending::Killed {
                    exit: ExitInfo::Signal(rustix::process::Signal::KILL.as_raw()),
                    captured: captured(),
                },
                cause,
            );
            assert_eq!(s.result.status, want);
            assert!(s.trailer.unwrap().contains("did not stop within"));
            assert!(s.lost_because.unwrap().contains("was killed"));
        }
    }
}
