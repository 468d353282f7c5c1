//! Step marks for benchmarks: where the time of a path goes, step by step, on the wall clock
//! (so a mark can be set beside a time the worker's Python took with `time.time()`).
//!
//! Off unless a benchmark turns it on (`benches/spawn.rs` with `SPAWN_TRACE=1` prints a
//! sub-session's start from `spawn()` to its first request); a mark then costs one atomic
//! load. Nothing in the product reads the marks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

static ON: AtomicBool = AtomicBool::new(false);
static MARKS: Mutex<Vec<Mark>> = Mutex::new(Vec::new());

/// One step reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// What the step belongs to (a sub-session's id).
    pub key: String,
    pub step: &'static str,
    /// Seconds since the Unix epoch.
    pub at: f64,
}

/// Turns marking on or off (off: marks are dropped, nothing is kept).
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// True while marks are kept.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The wall clock now, in seconds since the Unix epoch.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Notes that `key` reached `step` now.
pub fn mark(key: &str, step: &'static str) {
    if enabled() {
        mark_at(key, step, now());
    }
}

/// Notes that `key` reached `step` at `at` (a time taken before the key was known).
pub fn mark_at(key: &str, step: &'static str, at: f64) {
    if enabled() {
        let mut marks = MARKS.lock().unwrap_or_else(|p| p.into_inner());
        marks.push(Mark {
            key: key.to_string(),
            step,
            at,
        });
    }
}

/// The marks kept so far, in the order they were noted; none are kept after.
pub fn take() -> Vec<Mark> {
    std::mem::take(&mut *MARKS.lock().unwrap_or_else(|p| p.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_kept_only_while_on() {
        mark("k", "off");
        enable(true);
        mark("k", "first");
        mark_at("k", "second", 5.0);
        enable(false);
        mark("k", "off again");
        let marks: Vec<_> = take().into_iter().filter(|m| m.key == "k").collect();
        assert_eq!(
            marks.iter().map(|m| m.step).collect::<Vec<_>>(),
            ["first", "second"]
        );
        assert_eq!(marks[1].at, 5.0);
        assert!(marks[0].at > 1e9);
    }
}
