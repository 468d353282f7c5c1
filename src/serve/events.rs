//! Each session's event log: every turn event gets an id and is kept — the newest ones, up to a
//! budget of bytes per session (`[serve] event_log_mb`) — so a client that reconnects with
//! `Last-Event-ID` gets what it missed. The log goes with its session's slot (on delete).
//!
//! Events are serialized once, when pushed; listeners are woken through a `watch` of the
//! newest number and read from the kept log, so no event is held twice in memory, and a
//! listener that stops reading holds nothing but its position.
//!
//! A running block's live output (`block_output`) is kept within a budget of its own
//! ([`LIVE_OUTPUT_BYTES`]): the oldest of it goes first, so a block printing for hours leaves
//! the newest of its output and does not push the turn's other events out of the log. (A
//! reader behind by more than that skips to the newest: numbers then have gaps.)
//!
//! Ids are `BOOT-N`: `BOOT` identifies this server process, `N` counts the session's events.
//! An id from an earlier process, or one that is not an id, replays everything kept; one from
//! the future counts as "now".

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::protocol::Event;

/// The default budget of kept events per session, in bytes.
pub const DEFAULT_LOG_BYTES: usize = 8 * 1024 * 1024;

/// Fixed cost counted per event besides its JSON (the record and its place in the queue).
const EVENT_OVERHEAD: usize = 64;

/// The most of the log's budget `block_output` events keep (each carries at most 8 KiB of
/// text, so this is the last 30-odd updates).
pub const LIVE_OUTPUT_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub n: u64,
    pub event: Event,
    /// `event` as JSON (the SSE `data`).
    pub json: String,
}

impl Logged {
    fn size(&self) -> usize {
        self.json.len() + EVENT_OVERHEAD
    }
}

pub struct EventLog {
    boot: String,
    budget: usize,
    inner: Mutex<Inner>,
    newest: watch::Sender<u64>,
    /// The bytes every log of the server keeps, for `/metrics`.
    total: Arc<AtomicU64>,
}

struct Inner {
    next: u64,
    kept: VecDeque<Arc<Logged>>,
    bytes: usize,
    /// The numbers of the `block_output` events kept, oldest first, and their bytes.
    live: VecDeque<u64>,
    live_bytes: usize,
    /// The number of the newest `turn_finished` (0: none yet).
    last_turn_end: u64,
}

impl EventLog {
    /// A log keeping at most `budget` bytes (the newest event is kept whatever its size);
    /// `total` adds up what all logs keep.
    pub fn new(boot: &str, budget: usize, total: Arc<AtomicU64>) -> EventLog {
        EventLog {
            boot: boot.to_string(),
            budget,
            inner: Mutex::new(Inner {
                next: 1,
                kept: VecDeque::new(),
                bytes: 0,
                live: VecDeque::new(),
                live_bytes: 0,
                last_turn_end: 0,
            }),
            newest: watch::channel(0).0,
            total,
        }
    }

    /// The SSE id of an event.
    pub fn id(&self, n: u64) -> String {
        format!("{}-{n}", self.boot)
    }

    /// The event number after which to replay, from a `Last-Event-ID`: 0 (everything kept) for
    /// an unknown id, never beyond the newest event.
    pub fn after(&self, last_event_id: Option<&str>) -> u64 {
        let n = last_event_id
            .and_then(|id| id.rsplit_once('-'))
            .filter(|(boot, _)| *boot == self.boot)
            .and_then(|(_, n)| n.parse::<u64>().ok())
            .unwrap_or(0);
        n.min(self.next() - 1)
    }

    /// The number the next event will get.
    pub fn next(&self) -> u64 {
        self.inner.lock().map(|i| i.next).unwrap_or(1)
    }

    pub fn push(&self, event: Event) {
        let json = serde_json::to_string(&event).unwrap_or_default();
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let logged = Arc::new(Logged {
            n: inner.next,
            event,
            json,
        });
        inner.next += 1;
        if matches!(logged.event, Event::TurnFinished { .. }) {
            inner.last_turn_end = logged.n;
        }
        let size = logged.size();
        inner.bytes += size;
        self.total.fetch_add(size as u64, Ordering::Relaxed);
        inner.kept.push_back(logged.clone());
        if matches!(logged.event, Event::BlockOutput { .. }) {
            inner.live.push_back(logged.n);
            inner.live_bytes += size;
            while inner.live_bytes > LIVE_OUTPUT_BYTES && inner.live.len() > 1 {
                let Some(oldest) = inner.live.front().copied() else {
                    break;
                };
                let at = inner.kept.partition_point(|l| l.n < oldest);
                self.drop_kept(&mut inner, at);
            }
        }
        while inner.bytes > self.budget && inner.kept.len() > 1 {
            self.drop_kept(&mut inner, 0);
        }
        // Under the lock, so a reader that saw the number finds the event kept.
        self.newest.send_replace(logged.n);
    }

    /// Removes the kept event at `at`, and its bytes from the counts.
    fn drop_kept(&self, inner: &mut Inner, at: usize) {
        let Some(old) = inner.kept.remove(at) else {
            return;
        };
        inner.bytes -= old.size();
        self.total.fetch_sub(old.size() as u64, Ordering::Relaxed);
        if inner.live.front() == Some(&old.n) {
            inner.live.pop_front();
            inner.live_bytes -= old.size();
        }
    }

    /// The kept events after `after`.
    pub fn since(&self, after: u64) -> Vec<Arc<Logged>> {
        match self.inner.lock() {
            Ok(inner) => {
                // Numbers grow (with gaps where live output was dropped): find the first one
                // wanted by bisection.
                let skip = inner.kept.partition_point(|l| l.n <= after);
                inner.kept.iter().skip(skip).cloned().collect()
            }
            Err(_) => Vec::new(),
        }
    }

    /// Wakes when an event newer than the ones seen through it is pushed.
    pub fn listen(&self) -> watch::Receiver<u64> {
        self.newest.subscribe()
    }

    /// The number of the newest `turn_finished` pushed (kept or not; 0: none yet).
    pub fn last_turn_end(&self) -> u64 {
        self.inner.lock().map(|i| i.last_turn_end).unwrap_or(0)
    }

    /// Bytes kept now.
    pub fn bytes(&self) -> usize {
        self.inner.lock().map(|i| i.bytes).unwrap_or(0)
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        self.total.fetch_sub(self.bytes() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(budget: usize) -> (EventLog, Arc<AtomicU64>) {
        let total = Arc::new(AtomicU64::new(0));
        (EventLog::new("b1", budget, total.clone()), total)
    }

    #[test]
    fn replay_picks_up_after_an_id_and_bogus_ids_are_bounded() {
        let (log, _) = log(DEFAULT_LOG_BYTES);
        log.push(Event::TurnStarted { turn: 1 });
        log.push(Event::TextDelta { text: "a".into() });
        let mut rx = log.listen();
        assert_eq!(*rx.borrow_and_update(), 2);
        let after = log.after(Some("b1-1"));
        let kept = log.since(after);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].n, 2);
        assert_eq!(kept[0].json, r#"{"type":"text_delta","text":"a"}"#);
        log.push(Event::TextDelta { text: "b".into() });
        assert!(rx.has_changed().unwrap());
        assert_eq!(log.since(2)[0].n, 3);
        assert_eq!(log.after(Some("other-5")), 0);
        assert_eq!(log.after(Some("b1-x")), 0);
        assert_eq!(log.after(None), 0);
        assert_eq!(log.after(Some("b1-999999999999")), 3, "the future is now");
        assert_eq!(log.id(3), "b1-3");
    }

    #[test]
    fn the_log_keeps_to_its_byte_budget_and_gives_it_back() {
        let (log, total) = log(10_000);
        for _ in 0..100 {
            log.push(Event::BlockStarted {
                turn: 1,
                iteration: 1,
                code: "x".repeat(1000),
            });
        }
        assert!(log.bytes() <= 10_000, "{}", log.bytes());
        assert_eq!(total.load(Ordering::Relaxed), log.bytes() as u64);
        let kept = log.since(0);
        assert_eq!(kept.last().unwrap().n, 100);
        assert!(kept.len() < 10 && kept.len() > 5, "{}", kept.len());
        // One event over the budget is still kept, alone.
        log.push(Event::TextDelta {
            text: "y".repeat(20_000),
        });
        assert_eq!(log.since(0).len(), 1);
        drop(log);
        assert_eq!(total.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn live_output_keeps_to_its_own_budget_and_leaves_the_turn_alone() {
        let (log, total) = log(DEFAULT_LOG_BYTES);
        log.push(Event::TurnStarted { turn: 1 });
        log.push(Event::BlockStarted {
            turn: 1,
            iteration: 1,
            code: "flood()".into(),
        });
        let output = |i: usize| Event::BlockOutput {
            turn: 1,
            iteration: 1,
            text: format!("{i:08}\n").repeat(900),
            skipped_bytes: 1_000_000,
        };
        for i in 0..1000 {
            log.push(output(i));
        }
        log.push(Event::TextDelta {
            text: "after".into(),
        });
        let kept = log.since(0);
        let live: Vec<&Arc<Logged>> = kept
            .iter()
            .filter(|l| l.event.kind() == "block_output")
            .collect();
        let live_bytes: usize = live.iter().map(|l| l.size()).sum();
        assert!(live_bytes <= LIVE_OUTPUT_BYTES, "{live_bytes}");
        assert!(live.len() > 10, "{}", live.len());
        // The newest output is what stays; the turn's start is still there to replay.
        assert_eq!(live.last().unwrap().event, output(999));
        assert_eq!(kept[0].event.kind(), "turn_started");
        assert_eq!(kept[1].event.kind(), "block_started");
        assert_eq!(kept.last().unwrap().n, 1003);
        assert_eq!(total.load(Ordering::Relaxed), log.bytes() as u64);
        // Replays after any number, kept or dropped, start at the next one kept.
        let first_live = live[0].n;
        assert_eq!(log.since(2)[0].n, first_live);
        assert_eq!(log.since(first_live - 1)[0].n, first_live);
        assert_eq!(log.since(first_live)[0].n, first_live + 1);
        assert_eq!(log.since(1003).len(), 0);
    }
}
