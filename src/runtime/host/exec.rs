//! **The exec loop**: one block sent to the worker and waited for, in one `select!` over the
//! worker's messages, the timeout, the caller's stop signal and, once an interrupt went out,
//! the kill deadline; host calls go to the caller's [`HostCallSink`] while the loop goes on.
//! What the block defined is kept as the host's own cut of its source (`runtime::defs`).
//! A caller that watches the block ([`Supervisor::exec_watched`]) also gets its output as it
//! arrives (`tail`), read in the same loop.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::channel::{HostCallSink, Incoming};
use super::settle::{captured_output, push_line, settle, Cause, Ending, Settled};
use super::spawn::WorkerProcess;
use super::supervisor::Supervisor;
use super::tail::{OutputWatcher, Watching, LIVE_INTERVAL};
use crate::protocol::{Block, BlockResult, RestoreNotice};
use crate::runtime::defs::{keep_reported, Dialect};
use crate::runtime::wire::{HostMessage, WorkerMessage};
use crate::runtime::RuntimeError;

impl Supervisor {
    /// Runs one block. Host calls the block makes go to `calls` (answer each one; the block
    /// waits for it). Cancelling `stop` interrupts the block; if it was cancelled before the
    /// block could start, the block does not run.
    ///
    /// `Err` means the block could not be run at all (bad input, a worker that cannot start);
    /// everything that happens to a running block is an `Ok` result.
    pub async fn exec(
        &mut self,
        block: Block,
        calls: HostCallSink,
        stop: CancellationToken,
    ) -> Result<BlockResult, RuntimeError> {
        self.exec_watched(block, calls, stop, None).await
    }

    /// [`Supervisor::exec`], handing what the block prints to `watch` as it arrives (at most
    /// every [`LIVE_INTERVAL`]; nothing for a block that ends sooner). The result is the same
    /// as without a watcher.
    pub async fn exec_watched(
        &mut self,
        mut block: Block,
        calls: HostCallSink,
        stop: CancellationToken,
        watch: Option<OutputWatcher<'_>>,
    ) -> Result<BlockResult, RuntimeError> {
        validate_code(&block.code)?;
        if let Some(path) = block.paths().find(|p| p.to_str().is_none()) {
            return Err(RuntimeError::NonUtf8Path(path.to_path_buf()));
        }
        let started = std::time::Instant::now();
        self.start().await?;
        if stop.is_cancelled() {
            let mut result = settle(Ending::NotSent, None, &block, &self.opts).result;
            result.wall = started.elapsed();
            return Ok(result);
        }
        let notice = self.pending_notice.take();
        block.session.restored = notice.as_ref().map(RestoreNotice::to_json);
        block.session.sandbox = Some(
            self.isolation
                .session_json(self.opts.sandbox.network, self.opts.trusted),
        );
        block.session.jobs = Some(serde_json::json!({
            "max": self.jobs.max(),
            "next_id": self.jobs.next_id(),
            "output_bytes": self.opts.job_output_bytes,
        }));
        let id = self.next_exec_id;
        self.next_exec_id += 1;
        let grace = self.opts.interrupt_grace;
        let Some(worker) = self.worker.as_mut() else {
            return Err(RuntimeError::Worker("no worker".into()));
        };
        worker.channel.route_calls(calls);
        let mut watching = watch.map(Watching::new);
        let stale = || worker.capture().metadata().map_or(true, |m| m.len() > 0);
        if watching.is_some() && stale() {
            // The worker empties the capture as the block starts; emptied here first, the
            // previous block's output cannot pass for this one's before it does. (Only when
            // there is something: a truncation costs a few microseconds, the look one.)
            let _ = worker.capture().set_len(0);
        }
        worker.channel.send(HostMessage::Exec {
            id,
            block: Box::new(block.clone()),
        });
        let waited = wait_for_result(worker, id, &block, &stop, grace, watching.as_mut()).await;
        if let Some(watching) = &mut watching {
            watching.finish(worker.capture());
        }
        worker.channel.clear_calls();
        let (ending, cause) = match waited {
            Ok(w) => w,
            Err(e) => {
                // The worker's state is unknown after a protocol failure: replace it.
                self.kill_worker("after a protocol error").await;
                return Err(e);
            }
        };
        let Settled {
            mut result,
            trailer,
            lost_because,
        } = settle(ending, cause, &block, &self.opts);
        if let Some(reason) = lost_because {
            self.worker = None;
            self.lose_jobs(&reason);
            self.restart_reason = Some(reason);
        }
        // The worker is not trusted to say what the block defined: what is persisted is the
        // host's own cut of the block's source (a forged result could otherwise plant code
        // that runs in every new worker).
        for name in &result.defs_deleted {
            self.defs.retain(|d| &d.name != name);
        }
        let kept = keep_reported(&block.code, &result.defs_set, &self.defs, Dialect::linked());
        for def in &kept.defs {
            self.defs.retain(|d| d.name != def.name);
            self.defs.push(def.clone());
        }
        result.defs_set = kept.defs;
        if let Some(manifest) = result.manifest.take() {
            self.manifest = manifest;
            self.manifest_version += 1;
        }
        let mut output = String::new();
        for line in notice.iter().flat_map(RestoreNotice::lines) {
            output.push_str(&line);
            output.push('\n');
        }
        for line in self.jobs.tell_lost() {
            output.push_str(&line);
            output.push('\n');
        }
        output.push_str(&result.output);
        for note in &kept.notes {
            push_line(&mut output, note);
        }
        if let Some(trailer) = trailer {
            push_line(&mut output, &trailer);
        }
        result.output = output;
        result.restored = notice;
        result.wall = started.elapsed();
        Ok(result)
    }
}

/// Waits for block `id`'s result, interrupting it at its timeout or when `stop` is
/// cancelled, and killing the worker when it does not stop within `grace`; with `live`, reads
/// the block's new output every [`LIVE_INTERVAL`] and hands it to the watcher. Returns how the
/// wait ended and why the block was interrupted, if it was.
async fn wait_for_result(
    worker: &mut WorkerProcess,
    id: u64,
    block: &Block,
    stop: &CancellationToken,
    grace: Duration,
    mut live: Option<&mut Watching<'_>>,
) -> Result<(Ending, Option<Cause>), RuntimeError> {
    let timeout_at = Instant::now() + block.timeout;
    let mut read_at = Instant::now() + LIVE_INTERVAL;
    // Set once an interrupt (timeout or stop) went out: when the grace period ends.
    let mut kill_at: Option<Instant> = None;
    let mut cause = None;
    loop {
        // One timer: the deadline that comes next (the kill once an interrupt went out, else
        // the timeout), or a watched block's next read when that is sooner.
        let deadline = kill_at.unwrap_or(timeout_at);
        let wake_at = match live {
            Some(_) => deadline.min(read_at),
            None => deadline,
        };
        tokio::select! {
            incoming = worker.channel.recv() => match incoming {
                Incoming::Message(WorkerMessage::Result { id: got, result }) if got == id => {
                    if result.status.reportable_by_worker() {
                        return Ok((Ending::Reported(*result), cause));
                    }
                    let exit = worker.kill().await;
                    let detail = format!(
                        "a result with status `{}`, which only the host decides",
                        result.status.as_str()
                    );
                    let captured = captured_output(worker, block);
                    return Ok((Ending::ProtocolBroken { detail, exit, captured }, cause));
                }
                Incoming::Message(WorkerMessage::Fatal { message }) => {
                    return Err(RuntimeError::Worker(message));
                }
                // A result for another block, or a start-up message: not for now.
                Incoming::Message(_) => {}
                Incoming::Invalid(detail) => {
                    let exit = worker.kill().await;
                    let captured = captured_output(worker, block);
                    return Ok((Ending::ProtocolBroken { detail, exit, captured }, cause));
                }
                Incoming::Closed => {
                    let exit = worker.wait_exit().await;
                    let captured = captured_output(worker, block);
                    return Ok((Ending::Died { exit, captured }, cause));
                }
            },
            _ = stop.cancelled(), if kill_at.is_none() => {
                cause = Some(Cause::Stop);
                worker.channel.send(HostMessage::Interrupt { id });
                kill_at = Some(Instant::now() + grace);
            }
            _ = tokio::time::sleep_until(wake_at) => {
                let now = Instant::now();
                if now >= deadline {
                    if kill_at.is_some() {
                        let exit = worker.kill().await;
                        let captured = captured_output(worker, block);
                        return Ok((Ending::Killed { exit, captured }, cause));
                    }
                    cause = Some(Cause::Timeout);
                    worker.channel.send(HostMessage::Interrupt { id });
                    kill_at = Some(now + grace);
                } else if let Some(watching) = live.as_mut() {
                    watching.poll(worker.capture());
                    read_at = now + LIVE_INTERVAL;
                }
            }
        }
    }
}

/// Rejects blocks that cannot be meaningful code; the message is for the model or user.
pub fn validate_code(code: &str) -> Result<(), RuntimeError> {
    if code.trim().is_empty() {
        return Err(RuntimeError::InvalidBlock(
            "the block is empty: send Python code to run (for example `print(1)`)".into(),
        ));
    }
    if let Some(pos) = code.find('\0') {
        let line = code[..pos].matches('\n').count() + 1;
        return Err(RuntimeError::InvalidBlock(format!(
            "the block contains a NUL byte (line {line}, byte {pos}); remove it — Python source cannot hold NUL"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_nul_blocks_are_rejected_with_the_cause() {
        let e = validate_code("  \n\t").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = validate_code("x = 1\ny = '\0'").unwrap_err().to_string();
        assert!(e.contains("NUL byte (line 2"), "{e}");
        assert!(validate_code("print(1)").is_ok());
    }
}
