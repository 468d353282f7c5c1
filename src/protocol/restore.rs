//! What a new worker brought back of a session's definitions ([`RestoreReport`]) and what the
//! first block after a (re)start is told about it ([`RestoreNotice`]).

use pyo3::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Which persisted definitions came back in a new worker (the runner's `restore` returns it
/// as `{"ok": [names], "failed": [(name, error), …], "unkept": [(name, [globals]), …]}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, FromPyObject)]
#[pyo3(from_item_all)]
pub struct RestoreReport {
    pub ok: Vec<String>,
    /// `(name, error)` for each definition that failed to come back.
    pub failed: Vec<(String, String)>,
    /// `(name, globals)` for each restored definition that reads module-level names the new
    /// worker does not have (they were not kept: not a definition, import or simple constant),
    /// so calling it raises `NameError` until they are defined again.
    pub unkept: Vec<(String, Vec<String>)>,
}

/// What the first block after a (re)start is told about the new worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreNotice {
    /// Why there is a new worker: `None` for a first start, else e.g. "after a crash".
    pub restart_reason: Option<String>,
    pub report: RestoreReport,
    /// Set when the worker could only start without the non-bundled extensions: why.
    pub extensions_skipped: Option<String>,
}

impl RestoreNotice {
    /// `session["restored"]`.
    pub fn to_json(&self) -> Value {
        json!({
            "restart_reason": self.restart_reason,
            "ok": self.report.ok,
            "failed": self.report.failed.iter()
                .map(|(n, e)| json!({"name": n, "error": e}))
                .collect::<Vec<_>>(),
            "unkept": self.report.unkept.iter()
                .map(|(n, g)| json!({"name": n, "reads": g}))
                .collect::<Vec<_>>(),
            "extensions_skipped": self.extensions_skipped,
        })
    }

    /// What the first block after a start is told, one line each (maybe nothing).
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.line().into_iter().collect();
        if let Some(why) = &self.extensions_skipped {
            lines.push(format!(
                "[vis] only the bundled extensions are loaded: the worker did not start with the others ({}); fix or remove the extension, and the next new worker loads them again",
                why.trim()
            ));
        }
        lines
    }

    /// The one line shown at the top of the block's output, if there is anything to say.
    pub fn line(&self) -> Option<String> {
        let total = self.report.ok.len() + self.report.failed.len();
        let reason = match &self.restart_reason {
            Some(r) => format!(" ({r})"),
            None if total == 0 => return None,
            None => String::new(),
        };
        let mut line = format!("[vis] new worker{reason}: ");
        if total == 0 {
            line.push_str("no definitions to restore; variables from earlier blocks are gone");
        } else {
            let noun = if self.report.ok.len() == 1 {
                "definition"
            } else {
                "definitions"
            };
            line.push_str(&format!("restored {} {noun}", self.report.ok.len()));
            if !self.report.ok.is_empty() {
                line.push_str(": ");
                line.push_str(&short_list(&self.report.ok, 12));
            }
            if !self.report.failed.is_empty() {
                let failed: Vec<String> = self
                    .report
                    .failed
                    .iter()
                    .map(|(n, e)| format!("{n} ({e})"))
                    .collect();
                line.push_str(&format!(
                    "; {} failed: {}",
                    failed.len(),
                    short_list(&failed, 5)
                ));
            }
            if !self.report.unkept.is_empty() {
                let unkept: Vec<String> = self
                    .report
                    .unkept
                    .iter()
                    .map(|(n, g)| format!("{n} reads {}", short_list(g, 5)))
                    .collect();
                line.push_str(&format!(
                    "; not kept across the restart: {} (define them again before calling)",
                    short_list(&unkept, 5)
                ));
            }
        }
        Some(line)
    }
}

fn short_list(items: &[String], max: usize) -> String {
    let mut out = items
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > max {
        out.push_str(&format!(", +{} more", items.len() - max));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_notice_lines() {
        let quiet = RestoreNotice {
            restart_reason: None,
            report: RestoreReport::default(),
            extensions_skipped: None,
        };
        assert_eq!(quiet.line(), None);
        let n = RestoreNotice {
            restart_reason: Some("after a crash".into()),
            report: RestoreReport {
                ok: vec!["a".into(), "b".into()],
                failed: vec![("c".into(), "NameError: x".into())],
                unkept: vec![],
            },
            extensions_skipped: None,
        };
        assert_eq!(
            n.line().unwrap(),
            "[vis] new worker (after a crash): restored 2 definitions: a, b; 1 failed: c (NameError: x)"
        );
        let many: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        let n = RestoreNotice {
            restart_reason: None,
            report: RestoreReport {
                ok: many,
                failed: vec![],
                unkept: vec![],
            },
            extensions_skipped: Some("the worker exited with code 7".into()),
        };
        assert!(n.line().unwrap().ends_with("f11, +8 more"));
        let lines = n.lines();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].starts_with("[vis] only the bundled extensions are loaded: the worker did not start with the others (the worker exited with code 7)"));
        assert_eq!(quiet.lines(), Vec::<String>::new());
        let n = RestoreNotice {
            restart_reason: None,
            report: RestoreReport {
                ok: vec!["nums".into()],
                failed: vec![],
                unkept: vec![("nums".into(), vec!["cache".into(), "seen".into()])],
            },
            extensions_skipped: None,
        };
        assert_eq!(
            n.line().unwrap(),
            "[vis] new worker: restored 1 definition: nums; not kept across the restart: nums reads cache, seen (define them again before calling)"
        );
    }
}
