//! Restoring a session's persisted definitions in a new worker: what is sent, what is cached,
//! and how a definition that breaks the worker is skipped without locking the session out.
//!
//! The exchange, after the worker's `ready`:
//! 1. the host sends `restore {defs, skipped, cached, progress}`: the definitions within the
//!    size limits ([`RestorePlan`]), those it skips (listed by `defs()` as not restored, never
//!    run), their compiled code when its cache file holds it for exactly these definitions
//!    (names, kinds and sources, in order: the host checks, the worker only unmarshals), and
//!    whether to say where it is;
//! 2. the worker checks every definition with Python's parser and compiles it (or takes the
//!    code sent, when its Python reads that bytecode), then sends `compiled {magic, code}`
//!    **before any definition runs**: nothing a definition does can change it. The host writes
//!    the cache file from the first `compiled` only, with its own copy of the definitions'
//!    names, kinds and sources;
//! 3. the worker runs them in order, then sends `restored {ok, failed, unkept}`. With
//!    `progress`, it says `restoring {index}` before compiling and before running each.
//!
//! The cache file lives in the workers' own cache directory (their workspace's, see
//! `runtime::cache`). The host reads it while the worker starts, so the worker neither reads
//! nor parses it.
//!
//! A worker that dies, hangs past the restore timeout or breaks the protocol while restoring
//! is killed, and a new one restores the same definitions carefully: compiled rather than
//! loaded from the cache file (which may be what broke the first), saying where it is. If
//! that one is lost too, the definition it was on is skipped (reported with why) and the
//! others are restored in a new worker, up to [`MAX_RESTORE_ATTEMPTS`] careful workers, after
//! which none are. Progress costs a message per definition, so only a careful worker sends it.
//! Everything after step 2 comes from a worker that ran the session's code: the report and the
//! progress only steer which definitions the host reports and skips, never what it stores.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::channel::Incoming;
use super::spawn::WorkerProcess;
use crate::protocol::{ExitInfo, PersistedDef, RestoreReport};
use crate::runtime::cache::{self, CacheWrite};
use crate::runtime::defs::{MAX_DEFINITION_BYTES, MAX_SESSION_DEFINITION_BYTES};
use crate::runtime::wire::{CachedCode, HostMessage, WorkerMessage};

/// How many careful workers one restore may lose: each skips the definition it was on.
pub const MAX_RESTORE_ATTEMPTS: usize = 3;

/// What a new worker is asked to restore.
#[derive(Debug, Clone)]
pub(crate) struct RestorePlan {
    /// The definitions to restore, in definition order.
    restore: Vec<PersistedDef>,
    /// Those not restored, with why (over a size limit, or they stopped a worker before).
    skipped: Vec<(PersistedDef, String)>,
    /// The cache file for the code of `restore` (relative to the workers' cache directory).
    cache: String,
    /// Once a worker was lost restoring: the next ones compile (a damaged cache file must not
    /// lose every later worker too; the file is written again from what they compile) and say
    /// which definition they are on.
    careful: bool,
    workspace: Option<String>,
}

impl RestorePlan {
    /// Everything in `defs` within the size limits, in order (a session stored before the
    /// limits existed may hold more).
    pub fn new(defs: &[PersistedDef], workspace: Option<&Path>) -> RestorePlan {
        let workspace = workspace.map(|w| w.to_string_lossy().into_owned());
        let mut restore = Vec::new();
        let mut skipped = Vec::new();
        let mut total = 0;
        for def in defs {
            let size = def.source.len();
            if size > MAX_DEFINITION_BYTES {
                skipped.push((def.clone(), format!(
                    "its source is {} bytes, over the {} limit for one definition; it was not restored (it is still stored): define it again smaller, keeping data in files, or drop it (`{} = None`)",
                    crate::runtime::group_thousands(size),
                    crate::runtime::group_thousands(MAX_DEFINITION_BYTES),
                    def.name
                )));
            } else if total + size > MAX_SESSION_DEFINITION_BYTES {
                skipped.push((def.clone(), format!(
                    "the session's definitions are over the {} limit in all; it was not restored (it is still stored): drop definitions no longer needed (`name = None`)",
                    crate::runtime::group_thousands(MAX_SESSION_DEFINITION_BYTES)
                )));
            } else {
                total += size;
                restore.push(def.clone());
            }
        }
        let cache = cache::restore_path(workspace.as_deref(), &restore);
        RestorePlan {
            restore,
            skipped,
            cache,
            careful: false,
            workspace,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.restore.is_empty() && self.skipped.is_empty()
    }

    /// The `restore` message (`None` when the session has no definitions), with the code
    /// cached under `cache_dir` (the workers' cache directory) unless the plan is careful.
    pub fn message(&self, cache_dir: Option<&Path>) -> Option<HostMessage> {
        (!self.is_empty()).then(|| HostMessage::Restore {
            defs: self.restore.clone(),
            skipped: self
                .skipped
                .iter()
                .map(|(d, _)| PersistedDef {
                    source: String::new(),
                    ..d.clone()
                })
                .collect(),
            cached: match cache_dir {
                Some(dir) if !self.careful => self.cached_code(dir),
                _ => None,
            },
            progress: self.careful,
        })
    }

    /// The code the cache file under `dir` holds for exactly the definitions of `restore`
    /// (names, kinds and sources, in order), or `None` (no file, another format, other
    /// definitions, or anything malformed: the worker compiles them, and the file is
    /// written again from what it compiled).
    fn cached_code(&self, dir: &Path) -> Option<CachedCode> {
        let file = cache::read(dir, &self.cache)?;
        if file.get("version")?.as_u64()? != cache::RESTORE_FORMAT || self.restore.is_empty() {
            return None;
        }
        let magic = file.get("magic")?.as_str()?;
        if !well_formed_magic(magic) {
            return None;
        }
        let entries = file.get("defs")?.as_array()?;
        if entries.len() != self.restore.len() {
            return None;
        }
        let mut code = Vec::with_capacity(entries.len());
        for (def, entry) in self.restore.iter().zip(entries) {
            let [name, kind, source, marshalled] = entry.as_array()?.as_slice() else {
                return None;
            };
            if name.as_str()? != def.name
                || kind.as_str()? != def.kind
                || source.as_str()? != def.source
            {
                return None;
            }
            // Decoded by the worker (one that is not base64 makes it compile them all).
            let marshalled = marshalled.as_str()?;
            if !is_base64(marshalled) {
                return None;
            }
            code.push(marshalled.to_string());
        }
        Some(CachedCode {
            magic: magic.to_string(),
            code,
        })
    }

    pub fn is_careful(&self) -> bool {
        self.careful
    }

    /// From now on workers compile the definitions and say which one they are on.
    pub fn be_careful(&mut self) {
        self.careful = true;
    }

    /// Skips the definition at `index` of those restored (or all of them, when it is not
    /// known or `all`), saying `why`.
    pub fn skip(&mut self, index: Option<usize>, all: bool, why: &str) {
        let chosen: Vec<PersistedDef> = match index.filter(|&i| i < self.restore.len() && !all) {
            Some(i) => vec![self.restore.remove(i)],
            None => std::mem::take(&mut self.restore),
        };
        self.skipped
            .extend(chosen.into_iter().map(|d| (d, why.to_string())));
        self.cache = cache::restore_path(self.workspace.as_deref(), &self.restore);
    }

    /// The worker's report with the skipped definitions added to `failed`, in definition
    /// order.
    pub fn report(&self, mut report: RestoreReport, all: &[PersistedDef]) -> RestoreReport {
        report.failed.extend(
            self.skipped
                .iter()
                .map(|(d, why)| (d.name.clone(), why.clone())),
        );
        let order = |name: &str| all.iter().position(|d| d.name == name);
        report.failed.sort_by_key(|(name, _)| order(name));
        report
    }

    /// Writes the cache file of the restored definitions' code, from the worker's `compiled`
    /// message and the host's own copy of their names, kinds and sources.
    fn write_cache(&self, dir: &Path, magic: &str, code: &[String]) {
        let well_formed = code.len() == self.restore.len()
            && well_formed_magic(magic)
            && code.iter().all(|c| is_base64(c));
        if !well_formed || self.restore.is_empty() {
            return;
        }
        let entries: Vec<_> = self
            .restore
            .iter()
            .zip(code)
            .map(|(d, c)| json!([d.name, d.kind, d.source, c]))
            .collect();
        cache::write_all(
            dir,
            &[CacheWrite {
                path: self.cache.clone(),
                content: json!({"version": cache::RESTORE_FORMAT, "magic": magic, "defs": entries}),
            }],
        );
    }
}

/// Non-empty and only base64's characters (whether it decodes is the worker's to find out).
fn is_base64(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

/// A bytecode magic number as the cache keeps it: 1 to 16 hex digits.
fn well_formed_magic(magic: &str) -> bool {
    !magic.is_empty() && magic.len() <= 16 && magic.bytes().all(|b| b.is_ascii_hexdigit())
}

/// How waiting for a restore ended.
pub(crate) enum Outcome {
    /// The worker's report (a claim: it ran the session's code).
    Restored(RestoreReport),
    /// The worker stopped before reporting: which definition it was on (an index into those
    /// restored), if it said, and what happened.
    Stopped { during: Option<usize>, what: Stop },
}

pub(crate) enum Stop {
    /// The pipe closed: the worker died.
    Died,
    /// No report within the restore timeout.
    Hung(Duration),
    /// A message that is not part of the protocol.
    Broken(String),
}

impl Stop {
    /// Why a definition was skipped, once the worker ended with `exit`.
    pub fn why(&self, exit: ExitInfo) -> String {
        match self {
            Stop::Died => format!("restoring definitions stopped the worker ({exit}) while this one ran; it was skipped (define it again, or drop it with `name = None`)"),
            Stop::Hung(limit) => format!(
                "restoring definitions took longer than {} s while this one ran; it was skipped (define it again, or drop it with `name = None`)",
                limit.as_secs()
            ),
            Stop::Broken(detail) => format!(
                "the worker broke the protocol ({detail}) while this one was restored; it was skipped (define it again, or drop it with `name = None`)"
            ),
        }
    }

    /// Why every definition left was skipped (which one the worker was on is not known, or
    /// too many workers were lost).
    pub fn why_all(&self, exit: ExitInfo) -> String {
        match self {
            Stop::Died => {
                format!("restoring definitions stopped the worker ({exit}); none restored")
            }
            Stop::Hung(limit) => format!(
                "restoring definitions took longer than {} s; none restored",
                limit.as_secs()
            ),
            Stop::Broken(detail) => {
                format!("the worker broke the protocol ({detail}) while restoring; none restored")
            }
        }
    }
}

/// Waits for the worker's answer to the plan's `restore`, writing the code cache under
/// `cache_dir` from its `compiled` message.
pub(crate) async fn await_restored(
    worker: &mut WorkerProcess,
    plan: &RestorePlan,
    cache_dir: Option<&Path>,
    timeout: Duration,
) -> Outcome {
    let deadline = Instant::now() + timeout;
    let mut during = None;
    let mut compiled = false;
    loop {
        let incoming = match tokio::time::timeout_at(deadline, worker.channel.recv()).await {
            Ok(incoming) => incoming,
            Err(_) => {
                return Outcome::Stopped {
                    during,
                    what: Stop::Hung(timeout),
                }
            }
        };
        let stop = |what| Outcome::Stopped { during, what };
        match incoming {
            Incoming::Message(WorkerMessage::Restoring { index }) => {
                during = (index < plan.restore.len()).then_some(index);
            }
            Incoming::Message(WorkerMessage::Compiled { magic, code }) => {
                // Only the first: it is sent before any definition runs. Whatever comes
                // later may come from a definition.
                if !compiled {
                    compiled = true;
                    if let (Some(dir), Some(code)) = (cache_dir, code) {
                        plan.write_cache(dir, &magic, &code);
                    }
                }
            }
            Incoming::Message(WorkerMessage::Restored { report }) => {
                return Outcome::Restored(report)
            }
            Incoming::Message(WorkerMessage::Fatal { message }) => {
                let detail: String = message.chars().take(200).collect();
                return stop(Stop::Broken(format!("it failed: {detail}")));
            }
            // Nothing else belongs to a restore.
            Incoming::Message(_) => {}
            Incoming::Invalid(detail) => return stop(Stop::Broken(detail)),
            Incoming::Closed => return stop(Stop::Died),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, size: usize) -> PersistedDef {
        PersistedDef {
            name: name.into(),
            kind: "function".into(),
            source: format!("def {name}(): '{}'\n", "x".repeat(size)),
            signature: format!("def {name}()"),
            doc: String::new(),
        }
    }

    #[test]
    fn definitions_over_the_limits_are_skipped_not_sent() {
        let defs = vec![
            def("small", 10),
            def("huge", 30 * 1024 * 1024),
            def("a", 60 * 1024),
        ];
        let mut many = defs.clone();
        many.extend((0..10).map(|i| def(&format!("f{i}"), 60 * 1024)));
        let plan = RestorePlan::new(&many, None);
        let sent: Vec<&str> = plan.restore.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            sent,
            ["small", "a", "f0", "f1", "f2", "f3", "f4", "f5", "f6"]
        );
        let skipped: Vec<&str> = plan.skipped.iter().map(|(d, _)| d.name.as_str()).collect();
        assert_eq!(skipped, ["huge", "f7", "f8", "f9"]);
        assert!(plan.skipped[0].1.starts_with("its source is 31,457,2"));
        assert!(plan.skipped[1].1.contains("over the 524,288 limit in all"));
        // The skipped go to the worker without their source, to be listed as not restored.
        let Some(HostMessage::Restore { skipped, .. }) = plan.message(None) else {
            panic!("no restore message");
        };
        assert!(skipped.iter().all(|d| d.source.is_empty()));
        // The report lists them as failed, in definition order.
        let report = plan.report(
            RestoreReport {
                ok: vec!["small".into()],
                failed: vec![("a".into(), "NameError".into())],
                unkept: vec![],
            },
            &many,
        );
        let failed: Vec<&str> = report.failed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(failed, ["huge", "a", "f7", "f8", "f9"]);
    }

    #[test]
    fn skipping_one_definition_changes_the_cache_file() {
        let defs = vec![def("a", 1), def("b", 1), def("c", 1)];
        let mut plan = RestorePlan::new(&defs, Some(Path::new("/w")));
        let before = plan.cache.clone();
        assert_ne!(before, RestorePlan::new(&defs, Some(Path::new("/v"))).cache);
        plan.skip(Some(1), false, "it hung");
        assert_ne!(plan.cache, before);
        let names: Vec<&str> = plan.restore.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        plan.skip(None, false, "the worker died");
        assert!(plan.restore.is_empty());
        assert_eq!(plan.skipped.len(), 3);
        assert!(!plan.is_empty());
        assert!(matches!(
            plan.message(None),
            Some(HostMessage::Restore {
                progress: false,
                ..
            })
        ));
        plan.be_careful();
        assert!(matches!(
            plan.message(None),
            Some(HostMessage::Restore { progress: true, .. })
        ));
    }

    /// The code `plan.message(dir)` sends, if any.
    fn sent_code(plan: &RestorePlan, dir: &Path) -> Option<CachedCode> {
        match plan.message(Some(dir)) {
            Some(HostMessage::Restore { cached, .. }) => cached,
            _ => None,
        }
    }

    #[test]
    fn the_code_is_sent_only_for_exactly_the_cached_definitions() {
        let dir = tempfile::tempdir().unwrap();
        let defs = vec![def("a", 1), def("b", 1)];
        let mut plan = RestorePlan::new(&defs, Some(Path::new("/w")));
        assert_eq!(sent_code(&plan, dir.path()), None, "no file yet");
        plan.write_cache(dir.path(), "a70d0d0a", &["AAA=".into(), "BBA=".into()]);
        let sent = sent_code(&plan, dir.path()).unwrap();
        assert_eq!(sent.magic, "a70d0d0a");
        assert_eq!(sent.decode(), Some(vec![vec![0, 0], vec![4, 16]]));
        // The file's entries must be the plan's definitions: another source, kind or order,
        // a code that is not base64, another format or magic, and nothing is sent.
        let path = dir.path().join(&plan.cache);
        let good: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let damaged = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut v = good.clone();
            change(&mut v);
            v
        };
        for bad in [
            damaged(&|v| v["defs"][0][2] = json!("def a(): return 2\n")),
            damaged(&|v| v["defs"][1][1] = json!("class")),
            damaged(&|v| v["defs"].as_array_mut().unwrap().reverse()),
            damaged(&|v| v["defs"].as_array_mut().unwrap().truncate(1)),
            damaged(&|v| v["defs"][0][3] = json!("%%%")),
            damaged(&|v| v["defs"][0][3] = json!({"code": "AAA="})),
            damaged(&|v| v["defs"][0][3] = json!("")),
            damaged(&|v| v["defs"][0] = json!(["a", "function"])),
            damaged(&|v| v["version"] = json!(1)),
            damaged(&|v| v["magic"] = json!("not hex")),
            json!([]),
        ] {
            std::fs::write(&path, bad.to_string()).unwrap();
            assert_eq!(sent_code(&plan, dir.path()), None, "{bad}");
        }
        std::fs::write(&path, "{\"defs\": [").unwrap();
        assert_eq!(sent_code(&plan, dir.path()), None);
        // A careful worker compiles: it gets no code even when the file is good.
        std::fs::write(&path, good.to_string()).unwrap();
        assert!(sent_code(&plan, dir.path()).is_some());
        plan.be_careful();
        assert_eq!(sent_code(&plan, dir.path()), None);
    }

    #[test]
    fn the_cache_file_is_built_from_the_hosts_definitions() {
        let dir = tempfile::tempdir().unwrap();
        let defs = vec![def("a", 1), def("b", 1)];
        let plan = RestorePlan::new(&defs, None);
        // Malformed answers write nothing.
        for (magic, code) in [
            ("a70d0d0a", vec!["AAA=".to_string()]),
            ("not hex", vec!["AAA=".into(), "AAA=".into()]),
            ("a70d0d0a", vec!["AAA=".into(), "{\"x\": 1}".into()]),
        ] {
            plan.write_cache(dir.path(), magic, &code);
            assert!(!dir.path().join(&plan.cache).exists(), "{magic} {code:?}");
        }
        plan.write_cache(dir.path(), "a70d0d0a", &["AAA=".into(), "BBB=".into()]);
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(&plan.cache)).unwrap()).unwrap();
        assert_eq!(
            written,
            json!({"version": cache::RESTORE_FORMAT, "magic": "a70d0d0a", "defs": [
                ["a", "function", defs[0].source, "AAA="],
                ["b", "function", defs[1].source, "BBB="],
            ]})
        );
    }
}
