//! One call of `python_execution`: the block runs in the session's worker and is recorded as
//! an iteration of the connection's turn, with MCP tool calls answered by the hub meanwhile.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{ServeError, ServeOptions};
use crate::protocol::{TurnKind, TurnStatus, Utilization};
use crate::runtime::{BlockRunner, BlockSpec, NoConversation};
use crate::store::StoreError;

pub(super) struct Session {
    pub(super) runner: BlockRunner,
    pub(super) opts: ServeOptions,
    /// This connection's turn, begun at its first call.
    pub(super) turn: Option<i64>,
    pub(super) seen_manifest: u64,
}

/// How one call ended, as the client gets it.
pub(super) struct CallOutcome {
    pub(super) text: String,
    pub(super) failed: bool,
    /// The images the block showed (`show()`): MCP `image` content after the text.
    pub(super) images: Vec<crate::protocol::ShownImage>,
}

impl Session {
    pub(super) fn close(&mut self) -> Result<(), StoreError> {
        if let Some(turn) = self.turn.take() {
            self.runner.end_turn(turn, TurnStatus::Done)?;
        }
        Ok(())
    }

    pub(super) async fn run(
        &mut self,
        code: String,
        stop: CancellationToken,
    ) -> Result<CallOutcome, ServeError> {
        if let Err(e) = crate::runtime::validate_code(&code) {
            return Ok(CallOutcome {
                text: format!("[vis] {e}\n[vis] status: rejected"),
                failed: true,
                images: Vec::new(),
            });
        }
        let id = self.opts.session_id.clone();
        // A failure here leaves the previous tools in place; the block still runs and is told.
        let mcp_problem = self.runner.sync_tools().await.err().map(|e| {
            format!(
                "[vis] the MCP servers' tools could not be updated ({e}); the previous ones stay\n"
            )
        });
        let turn = match self.turn {
            Some(t) => t,
            None => {
                let t = self
                    .runner
                    .store_mut()
                    .begin_turn(&id, TurnKind::Mcp, None)?;
                self.turn = Some(t);
                t
            }
        };
        let iteration = self.runner.store().next_iteration(&id, turn)?;
        let spec = BlockSpec {
            turn,
            iteration,
            code,
            utilization: Utilization::without_requests(),
            live: None,
        };
        // The MCP client keeps the conversation, so Vis has none to fold.
        let mut no_conversation = NoConversation { what: "`vis mcp`" };
        let ran = self
            .runner
            .run_block(spec, &mut no_conversation, stop)
            .await?;
        let mut text = mcp_problem.unwrap_or_default();
        // Background jobs that ended unseen since the last call (the client keeps the
        // conversation, so the result carries the line a chat request would).
        for line in self.runner.supervisor().jobs().take_announcements() {
            text.push_str(&line);
            text.push('\n');
        }
        if ran.output.is_empty() {
            text.push_str("(no output)\n");
        } else {
            text.push_str(&ran.output);
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[vis] status: {} (t{turn}/i{iteration}, {})",
            ran.status.as_str(),
            millis(ran.wall)
        ));
        Ok(CallOutcome {
            text,
            failed: !ran.status.is_ok(),
            images: ran.images,
        })
    }
}

fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}
