//! Each session's event log: every turn event gets an id, is kept (the newest
//! [`KEEP`]), and is broadcast to live listeners, so a client that reconnects with
//! `Last-Event-ID` gets exactly what it missed.
//!
//! Ids are `BOOT-N`: `BOOT` identifies this server process, `N` counts the session's events.
//! An id from an earlier process (or an unknown one) replays everything kept.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::broadcast;

use crate::protocol::Event;

/// Events kept per session for replay.
pub const KEEP: usize = 10_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub n: u64,
    pub event: Event,
}

pub struct EventLog {
    boot: String,
    inner: Mutex<Inner>,
    live: broadcast::Sender<Logged>,
}

struct Inner {
    next: u64,
    kept: VecDeque<Logged>,
}

impl EventLog {
    pub fn new(boot: &str) -> EventLog {
        let (live, _) = broadcast::channel(4096);
        EventLog {
            boot: boot.to_string(),
            inner: Mutex::new(Inner {
                next: 1,
                kept: VecDeque::new(),
            }),
            live,
        }
    }

    /// The SSE id of an event.
    pub fn id(&self, n: u64) -> String {
        format!("{}-{n}", self.boot)
    }

    /// The event number after which to replay, from a `Last-Event-ID`.
    pub fn after(&self, last_event_id: Option<&str>) -> u64 {
        last_event_id
            .and_then(|id| id.rsplit_once('-'))
            .filter(|(boot, _)| *boot == self.boot)
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0)
    }

    /// The number the next event will get.
    pub fn next(&self) -> u64 {
        self.inner.lock().map(|i| i.next).unwrap_or(1)
    }

    pub fn push(&self, event: Event) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let logged = Logged {
            n: inner.next,
            event,
        };
        inner.next += 1;
        inner.kept.push_back(logged.clone());
        if inner.kept.len() > KEEP {
            inner.kept.pop_front();
        }
        // Sent under the lock, so a subscriber's snapshot and its live feed never overlap
        // or leave a gap.
        let _ = self.live.send(logged);
    }

    /// The kept events after `after` and a receiver for everything that comes later.
    pub fn subscribe(&self, after: u64) -> (Vec<Logged>, broadcast::Receiver<Logged>) {
        match self.inner.lock() {
            Ok(inner) => {
                let rx = self.live.subscribe();
                let kept = inner.kept.iter().filter(|l| l.n > after).cloned().collect();
                (kept, rx)
            }
            Err(_) => (Vec::new(), self.live.subscribe()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_and_live_events_join_without_gaps() {
        let log = EventLog::new("b1");
        log.push(Event::TurnStarted { turn: 1 });
        log.push(Event::TextDelta { text: "a".into() });
        let after = log.after(Some("b1-1"));
        let (kept, mut rx) = log.subscribe(after);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].n, 2);
        log.push(Event::TextDelta { text: "b".into() });
        assert_eq!(rx.try_recv().unwrap().n, 3);
        assert_eq!(log.after(Some("other-5")), 0);
        assert_eq!(log.after(None), 0);
        assert_eq!(log.id(3), "b1-3");
    }
}
