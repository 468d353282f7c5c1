//! The parts of a block's output that vary by nature, replaced by placeholders before a
//! recorded output and a replayed one are compared. The rules (also in `docs/checkpoints.md`,
//! "Replay", and `vis replay --help`), applied in this order:
//!
//! 1. the lines the conversation adds to a chat block's output are removed (a replay has no
//!    conversation): `[vis] context hint: …`, `[vis] context urgent: …`, `[vis] context over
//!    the limit: …` and `[vis] the block was stopped: it called fold_session/read_session …`;
//! 2. the workspace root, the recording's and the scratch copy's → `<workspace>`;
//! 3. the artifact directory, the recording's and the replay's → `<artifacts>`;
//! 4. paths under `/tmp`, `/var/tmp` and `/dev/shm` → `<tmp>`;
//! 5. memory addresses, `0x` and at least 6 hex digits → `0x…`;
//! 6. dates with a time (`2026-12-05 13:17:17`, ISO 8601 with `T`, fractions, zones) and
//!    clock times (`13:17:17`) → `<time>`;
//! 7. Unix timestamps of this era (10 digits from 1.5e9, with a fraction, or 13 digits of
//!    milliseconds) → `<timestamp>`;
//! 8. durations: a number with `ns`, `µs`, `us`, `ms`, `s`, `sec`, `secs`, `second(s)`,
//!    `min` → `<duration>`;
//! 9. process ids: a number after `pid`, `PID` or `process` → `<pid>`.
//!
//! Everything else must match byte for byte: line endings, whitespace, the order of lines.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// One rule: a pattern and its placeholder (`$1` keeps a captured prefix).
struct Rule {
    pattern: Regex,
    placeholder: &'static str,
}

fn rule(pattern: &str, placeholder: &'static str) -> Option<Rule> {
    // The patterns are constants, tested below; one that failed to compile would be left out
    // rather than stop a replay.
    Regex::new(pattern).ok().map(|pattern| Rule {
        pattern,
        placeholder,
    })
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        rule(
            r#"(?:/tmp|/var/tmp|/dev/shm)(?:/[^\s'"(){}\[\]<>,:;]*)?"#,
            "<tmp>",
        ),
        rule(r"\b0x[0-9a-fA-F]{6,}\b", "0x…"),
        rule(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?",
            "<time>",
        ),
        rule(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
        rule(r"\b(?:1[5-9]\d{8}(?:\.\d+)?|1[5-9]\d{11})\b", "<timestamp>"),
        rule(
            r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|min)\b",
            "<duration>",
        ),
        rule(r"\b(pid|PID|process)([ =:#]*)\d+\b", "$1$2<pid>"),
    ]
    .into_iter()
    .flatten()
    .collect()
});

/// The lines a conversation adds to a chat block's output (`gateway::calls`), whole.
static CONVERSATION_LINES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^\[vis\] (?:context hint: |context urgent: |context over the limit: |the block was stopped: it called fold_session/read_session )[^\n]*(?:\n|$)",
    )
    .ok()
});

/// The normalisation of one replay: its paths, then the fixed rules.
pub struct Normalizer {
    /// (path, placeholder), longest path first, so a path inside another is replaced whole.
    paths: Vec<(String, &'static str)>,
}

impl Normalizer {
    /// `workspaces`: the recording's root and the scratch copy's; `artifacts`: the
    /// recording's artifact directory and the replay's.
    pub fn new(workspaces: &[&str], artifacts: &[&str]) -> Normalizer {
        let mut paths: Vec<(String, &'static str)> = workspaces
            .iter()
            .map(|p| (p.trim_end_matches('/').to_string(), "<workspace>"))
            .chain(
                artifacts
                    .iter()
                    .map(|p| (p.trim_end_matches('/').to_string(), "<artifacts>")),
            )
            .filter(|(p, _)| !p.is_empty())
            .collect();
        paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Normalizer { paths }
    }

    pub fn apply(&self, text: &str) -> String {
        let mut out = match CONVERSATION_LINES.as_ref().map(|r| r.replace_all(text, "")) {
            Some(Cow::Owned(kept)) => kept,
            _ => text.to_string(),
        };
        for (path, placeholder) in &self.paths {
            if out.contains(path.as_str()) {
                out = out.replace(path.as_str(), placeholder);
            }
        }
        for rule in RULES.iter() {
            if let Cow::Owned(changed) = rule.pattern.replace_all(&out, rule.placeholder) {
                out = changed;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Normalizer {
        Normalizer::new(&[], &[])
    }

    #[test]
    fn every_rule_compiles() {
        assert_eq!(RULES.len(), 7);
        assert!(CONVERSATION_LINES.is_some());
    }

    #[test]
    fn workspace_and_artifact_paths_become_placeholders() {
        let n = Normalizer::new(
            &["/home/a/project", "/tmp/vis-replay-x/workspace/"],
            &[
                "/home/a/.vis/artifacts/s1",
                "/tmp/vis-replay-x/artifacts/s1",
            ],
        );
        assert_eq!(
            n.apply("/home/a/project/src/lib.rs and /tmp/vis-replay-x/workspace/src/lib.rs"),
            "<workspace>/src/lib.rs and <workspace>/src/lib.rs"
        );
        assert_eq!(
            n.apply("full output: /tmp/vis-replay-x/artifacts/s1/t3-i1.txt"),
            n.apply("full output: /home/a/.vis/artifacts/s1/t3-i1.txt")
        );
    }

    #[test]
    fn temp_paths_addresses_and_pids() {
        let n = plain();
        assert_eq!(
            n.apply("wrote /tmp/tmpab12_x/out.txt, '/var/tmp/q'"),
            "wrote <tmp>, '<tmp>'"
        );
        assert_eq!(
            n.apply("<object object at 0x7f3a9c2b1e40>"),
            "<object object at 0x…>"
        );
        assert_eq!(
            n.apply("0x1f and 0xff"),
            "0x1f and 0xff",
            "short hex is data"
        );
        assert_eq!(
            n.apply("pid 4242, PID=17, process 9"),
            "pid <pid>, PID=<pid>, process <pid>"
        );
    }

    #[test]
    fn times_timestamps_and_durations() {
        let n = plain();
        assert_eq!(n.apply("at 2026-12-05 13:17:17.123"), "at <time>");
        assert_eq!(n.apply("2026-12-05T13:17:17+01:00 done"), "<time> done");
        assert_eq!(n.apply("started 09:05:01"), "started <time>");
        assert_eq!(n.apply("now 1764940637.5512"), "now <timestamp>");
        assert_eq!(n.apply("ms 1764940637551"), "ms <timestamp>");
        assert_eq!(
            n.apply("took 0.52s, 12 ms, 3 seconds, 40µs"),
            "took <duration>, <duration>, <duration>, <duration>"
        );
        // Numbers that are data stay.
        assert_eq!(
            n.apply("42 items, 7 sessions, 2026"),
            "42 items, 7 sessions, 2026"
        );
        assert_eq!(n.apply("1234567"), "1234567");
    }

    #[test]
    fn the_conversations_lines_are_removed() {
        let n = plain();
        assert_eq!(
            n.apply("42\n[vis] context hint: 800 of 1,000 tokens (80%); fold settled work — t1.\n"),
            "42\n"
        );
        assert_eq!(
            n.apply(
                "x\n[vis] the block was stopped: it called fold_session/read_session 9 times\n"
            ),
            "x\n"
        );
        assert_eq!(
            n.apply("print('[vis] context')\n"),
            "print('[vis] context')\n"
        );
    }

    #[test]
    fn equal_after_normalisation_only_when_the_rest_is_equal() {
        let n = plain();
        assert_eq!(
            n.apply("x at 0x7f00aa11bb22\n"),
            n.apply("x at 0x55d0c0ffee00\n")
        );
        assert_ne!(n.apply("x = 1\n"), n.apply("x = 2\n"));
        assert_ne!(n.apply("a\n"), n.apply("a\r\n"));
    }
}
