//! Request assembly: the stored prefix and the conversation, encoded once per item and joined.
//!
//! Encoded messages are cached, so a request costs one concatenation plus the encoding of
//! what is new since the last one (for Anthropic also the one or two messages that carry a
//! cache breakpoint). Nothing volatile goes into a request: no time, no directory listing, no
//! utilization figures; two gateways with the same history send the same bytes.

use std::ops::Range;

use super::history::Entry;
use crate::protocol::HistoryItem;
use crate::providers::ImagePolicy;
use crate::providers::{anthropic_request, openai_request};

/// Which provider's wire format to assemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic { keep_thinking: bool },
}

pub struct Assembler {
    wire: Wire,
    header: Vec<u8>,
    /// Whether images are sent, and the model named in the note when they are not.
    send_images: bool,
    model: String,
    /// OpenAI: one encoded message per entry, with whether it closed a run of tool results
    /// (then the run's images follow it, in the same bytes).
    messages: Vec<(bool, Vec<u8>)>,
    /// Anthropic: encoded groups (without breakpoints), by item range.
    groups: Vec<(Range<usize>, Vec<u8>)>,
}

impl Assembler {
    /// `header` is the provider's body up to the first message (see the providers'
    /// `header` functions).
    pub fn new(wire: Wire, header: Vec<u8>) -> Assembler {
        Assembler {
            wire,
            header,
            send_images: true,
            model: String::new(),
            messages: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Whether `model` gets images (else a note names it); images are sent by default.
    pub fn with_images(mut self, send: bool, model: &str) -> Assembler {
        self.send_images = send;
        self.model = model.to_string();
        self
    }

    fn image_policy(&self) -> ImagePolicy<'_> {
        ImagePolicy {
            send: self.send_images,
            model: &self.model,
        }
    }

    pub fn wire(&self) -> Wire {
        self.wire
    }

    /// Forgets what was encoded from item `index` on (the conversation changed there).
    pub fn invalidate_from(&mut self, index: usize) {
        self.messages.truncate(index);
        self.groups.retain(|(range, _)| range.end <= index);
    }

    /// The request body for `entries`.
    pub fn body(&mut self, entries: &[Entry]) -> Vec<u8> {
        match self.wire {
            Wire::OpenAi => self.openai_body(entries),
            Wire::Anthropic { keep_thinking } => self.anthropic_body(entries, keep_thinking),
        }
    }

    fn openai_body(&mut self, entries: &[Entry]) -> Vec<u8> {
        if self.messages.len() > entries.len() {
            self.messages.truncate(entries.len());
        }
        let items: Vec<&HistoryItem> = entries.iter().map(|e| &e.item).collect();
        // The newest cached tool result may have closed its run when it was encoded and no
        // longer does (another result followed): encode it again, without the images.
        while let Some((closed, _)) = self.messages.last() {
            let index = self.messages.len() - 1;
            if *closed == openai_request::closes_tool_run(&items, index) {
                break;
            }
            self.messages.pop();
        }
        let policy = ImagePolicy {
            send: self.send_images,
            model: &self.model,
        };
        for index in self.messages.len()..entries.len() {
            let mut bytes = openai_request::encode_item(items[index], &policy);
            if let Some(images) = openai_request::encode_images_after(&items, index, &policy) {
                bytes.push(b',');
                bytes.extend_from_slice(&images);
            }
            self.messages
                .push((openai_request::closes_tool_run(&items, index), bytes));
        }
        let size = self.header.len()
            + self
                .messages
                .iter()
                .map(|(_, m)| m.len() + 1)
                .sum::<usize>()
            + openai_request::FOOTER.len();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&self.header);
        for (_, message) in &self.messages {
            out.push(b',');
            out.extend_from_slice(message);
        }
        out.extend_from_slice(openai_request::FOOTER);
        out
    }

    fn anthropic_body(&mut self, entries: &[Entry], keep_thinking: bool) -> Vec<u8> {
        let ranges = groups(entries);
        let breakpoints = breakpoints(entries, &ranges);
        let mut encoded: Vec<(Range<usize>, Vec<u8>)> = Vec::with_capacity(ranges.len());
        let mut cached = std::mem::take(&mut self.groups).into_iter().peekable();
        let mut parts: Vec<Vec<u8>> = Vec::with_capacity(ranges.len());
        for (n, range) in ranges.iter().enumerate() {
            // Cached groups come in order; skip the ones that no longer match.
            while cached.peek().is_some_and(|(r, _)| r.start < range.start) {
                cached.next();
            }
            let plain = match cached.peek() {
                Some((r, _)) if r == range => cached.next().map(|(_, bytes)| bytes),
                _ => None,
            }
            .unwrap_or_else(|| encode(entries, range, false, keep_thinking, &self.image_policy()));
            if breakpoints.contains(&n) {
                parts.push(encode(
                    entries,
                    range,
                    true,
                    keep_thinking,
                    &self.image_policy(),
                ));
            } else {
                parts.push(plain.clone());
            }
            encoded.push((range.clone(), plain));
        }
        self.groups = encoded;
        let size = self.header.len()
            + parts.iter().map(|p| p.len() + 1).sum::<usize>()
            + anthropic_request::FOOTER.len();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&self.header);
        for (n, part) in parts.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(part);
        }
        out.extend_from_slice(anthropic_request::FOOTER);
        out
    }
}

fn groups(entries: &[Entry]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let side = entry.item.is_user_side();
        match out.last_mut() {
            Some(last) if entries[last.start].item.is_user_side() == side => last.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// The groups that carry a cache breakpoint: the newest, and the last user-side group before
/// the newest assistant message (the newest group of the previous request, in a normal turn).
/// Derived from the history alone, so a resumed gateway places them where an uninterrupted
/// one would have.
fn breakpoints(entries: &[Entry], ranges: &[Range<usize>]) -> Vec<usize> {
    let mut out = Vec::with_capacity(2);
    if ranges.is_empty() {
        return out;
    }
    let last = ranges.len() - 1;
    out.push(last);
    if let Some(assistant) = ranges
        .iter()
        .rposition(|r| !entries[r.start].item.is_user_side())
    {
        if let Some(user) = ranges[..assistant]
            .iter()
            .rposition(|r| entries[r.start].item.is_user_side())
        {
            if user != last {
                out.push(user);
            }
        }
    }
    out
}

fn encode(
    entries: &[Entry],
    range: &Range<usize>,
    breakpoint: bool,
    keep_thinking: bool,
    images: &ImagePolicy<'_>,
) -> Vec<u8> {
    let items: Vec<HistoryItem> = entries[range.clone()]
        .iter()
        .map(|e| e.item.clone())
        .collect();
    anthropic_request::encode_group(&items, breakpoint, keep_thinking, images)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AssistantMessage, ContentBlock, ToolCall, ToolSpec};
    use serde_json::{json, Value};

    fn entry(seq: i64, item: HistoryItem) -> Entry {
        Entry {
            seq,
            turn: 1,
            iteration: None,
            item,
            tokens: 1,
            meta: None,
        }
    }

    fn call(id: &str) -> HistoryItem {
        HistoryItem::Assistant(AssistantMessage {
            blocks: vec![ContentBlock::ToolCall(ToolCall {
                id: id.into(),
                name: "python_execution".into(),
                arguments: "{\"code\":\"1\"}".into(),
            })],
            reasoning: None,
        })
    }

    fn result(id: &str) -> HistoryItem {
        HistoryItem::ToolResult {
            call_id: id.into(),
            output: format!("out {id}"),
            is_error: false,
            images: Vec::new(),
        }
    }

    fn conversation(n: usize) -> Vec<Entry> {
        let mut entries = vec![entry(0, HistoryItem::User { text: "go".into() })];
        for i in 0..n {
            let id = format!("c{i}");
            entries.push(entry(entries.len() as i64, call(&id)));
            entries.push(entry(entries.len() as i64, result(&id)));
        }
        entries
    }

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "python_execution".into(),
            description: "d".into(),
            parameters: json!({}),
        }
    }

    #[test]
    fn cached_assembly_equals_a_fresh_encoding_for_both_providers() {
        let tool = tool();
        let oreq = openai_request::OpenAiRequest {
            model: "m",
            session_id: "s",
            system: "sys",
            tool: &tool,
            max_tokens: None,
            stream: true,
            tool_choice: None,
        };
        let areq = anthropic_request::AnthropicRequest {
            model: "m",
            system: "sys",
            tool: &tool,
            max_tokens: 100,
            thinking_budget: None,
            stream: true,
            tool_choice: None,
        };
        let mut openai = Assembler::new(Wire::OpenAi, openai_request::header(&oreq));
        let mut anthropic = Assembler::new(
            Wire::Anthropic {
                keep_thinking: false,
            },
            anthropic_request::header(&areq),
        );
        let all = conversation(6);
        for n in 1..=all.len() {
            let entries = &all[..n];
            let items: Vec<HistoryItem> = entries.iter().map(|e| e.item.clone()).collect();
            assert_eq!(
                openai.body(entries),
                openai_request::body(&oreq, &items, &ImagePolicy::SEND)
            );
            let body: Value = serde_json::from_slice(&anthropic.body(entries)).unwrap();
            assert!(body["messages"].is_array());
        }
        // Breakpoints: the newest message, and the newest user message of the previous request.
        let body: Value = serde_json::from_slice(&anthropic.body(&all)).unwrap();
        let marked: Vec<usize> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, m)| m.to_string().contains("cache_control"))
            .map(|(i, _)| i)
            .collect();
        let last = body["messages"].as_array().unwrap().len() - 1;
        assert_eq!(marked, [last - 2, last]);
    }
}
