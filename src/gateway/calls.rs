//! What a chat session answers for its running blocks: `fold_session` and `read_session` (the
//! conversation is the session's), within a budget per block, and what it adds to a block's
//! output when it ends (a spent budget, the context hint).

use super::fold::{hint, thousands, Limits};
use crate::protocol::{HistoryItem, HostReply, HostRequest, IterationStatus, ShownImage};
use crate::runtime::{Answered, HostCalls};
use crate::store::{Store, ToolAnswer};

use super::fold;
use super::history;
use super::{Conversation, FoldSettings};

/// Calls to `fold_session` and `read_session` one block may make.
pub const MAX_GATEWAY_CALLS_PER_BLOCK: usize = 256;
/// Bytes of text one block may send through those calls.
pub const MAX_GATEWAY_CALL_BYTES_PER_BLOCK: usize = 16 * 1024 * 1024;

/// What one block has asked of the gateway through `fold_session` and `read_session`. Each
/// call costs the host work even when it is refused (the frame is read, the call answered),
/// so a block that loops on them past the budget is stopped instead of keeping the host busy
/// until its timeout.
#[derive(Debug, Default)]
struct CallBudget {
    calls: usize,
    bytes: usize,
    spent: bool,
}

impl CallBudget {
    /// Counts one call; `false` once the budget is spent.
    fn charge(&mut self, bytes: usize) -> bool {
        // Counting stops where the budget was spent, so the block's note says what spent it
        // (calls already on their way when it is stopped are refused alike).
        if self.spent {
            return false;
        }
        self.calls += 1;
        self.bytes += bytes;
        if self.calls > MAX_GATEWAY_CALLS_PER_BLOCK || self.bytes > MAX_GATEWAY_CALL_BYTES_PER_BLOCK
        {
            self.spent = true;
            return false;
        }
        true
    }

    fn reason(&self) -> String {
        format!(
            "[vis] the block was stopped: it called fold_session/read_session {} times, sending {} bytes, more than one block may ({MAX_GATEWAY_CALLS_PER_BLOCK} calls, {} bytes); fold in a later block",
            self.calls,
            thousands(self.bytes as u64),
            thousands(MAX_GATEWAY_CALL_BYTES_PER_BLOCK as u64),
        )
    }
}

/// One block's calls into its chat session.
pub(super) struct ConversationCalls<'a> {
    pub conversation: &'a mut Conversation,
    pub session_id: &'a str,
    pub folding: &'a FoldSettings,
    pub limits: Limits,
    /// The model call the block answers (`None` for a block run without the model).
    pub call_id: Option<String>,
    /// The session's model when it takes no images: the result's images are kept with the
    /// line it reads instead of each ([`note_not_sent`]).
    pub images_not_sent_to: Option<String>,
    budget: CallBudget,
}

impl<'a> ConversationCalls<'a> {
    pub fn new(
        conversation: &'a mut Conversation,
        session_id: &'a str,
        folding: &'a FoldSettings,
        limits: Limits,
        call_id: Option<String>,
    ) -> Self {
        ConversationCalls {
            conversation,
            session_id,
            folding,
            limits,
            call_id,
            images_not_sent_to: None,
            budget: CallBudget::default(),
        }
    }
}

/// Notes on each of `images` the line `model` reads instead of it (`None`: the model takes
/// images): what the request carries, kept with the result for the views built from the store
/// (the same line `vis chat` and the web view show while the turn runs).
pub(super) fn note_not_sent(images: &mut [ShownImage], model: Option<&str>) {
    for image in images {
        image.meta.not_sent = model.map(|model| crate::providers::image_note(model, image));
    }
}

impl HostCalls for ConversationCalls<'_> {
    fn answer(&mut self, store: &mut Store, request: HostRequest) -> Answered {
        if !self.budget.charge(request.text_bytes()) {
            return Answered {
                reply: Err(self.budget.reason().into()),
                stop_block: true,
            };
        }
        let reply = match request {
            HostRequest::FoldSession { key, gist } => fold::fold(
                self.conversation,
                store,
                self.session_id,
                &key,
                &gist,
                false,
                self.folding,
            )
            .map(HostReply::Fold)
            .map_err(Into::into),
            HostRequest::ReadSession { key } => fold::read(
                self.conversation,
                store,
                self.session_id,
                &key,
                self.folding.introspection,
            )
            .map(HostReply::Read),
            other => Err(format!("the conversation answers no '{}' call", other.method()).into()),
        };
        reply.into()
    }

    fn finish(
        &mut self,
        output: &mut String,
        status: IterationStatus,
        images: &[ShownImage],
    ) -> Option<ToolAnswer> {
        // The model always gets something back.
        if output.is_empty() {
            output.push_str("(no output)");
        }
        if self.budget.spent {
            push_line(output, &self.budget.reason());
        }
        // While the context is high, every block's output says so (SPEC §7).
        let utilization = fold::utilization(self.conversation, self.limits);
        if let Some(line) = hint(&utilization) {
            push_line(output, &line);
        }
        let call_id = self.call_id.clone()?;
        let mut images = images.to_vec();
        note_not_sent(&mut images, self.images_not_sent_to.as_deref());
        let item = HistoryItem::ToolResult {
            call_id: call_id.clone(),
            output: output.clone(),
            is_error: !status.is_ok(),
            images,
        };
        let tokens = history::estimate_item(&item) as i64;
        let HistoryItem::ToolResult { images, .. } = item else {
            return None;
        };
        Some(ToolAnswer {
            call_id,
            tokens,
            images: images.into_iter().map(|i| i.meta).collect(),
        })
    }
}

/// Appends `line` to `output` on a line of its own.
fn push_line(output: &mut String, line: &str) {
    if !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(line);
    output.push('\n');
}
