//! The token replay: a scripted coding session on a generated Python project, played through
//! the real gateway and worker against the fake provider, whose cached-token report follows
//! [`PrefixCache`]. Each turn locates a function with `grep` and reads only its lines with
//! `cat`, then edits one line by address with `patch` and runs the module's tests with
//! `sh('python3 -m pytest -q …')` in the same block; what differs is how the scripted model
//! folds (the [`Policy`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use vis::gateway::{ChatSession, ChatSettings};
use vis::providers::pricing::CachePrices;
use vis::providers::ProviderKind;
use vis::runtime::WorkerOptions;
use vis::store::Store;

use super::cache_model::{shared_prefix_len, PrefixCache, Usage};
use super::fake_provider::{FakeProvider, Reply};

/// Modules in the project (each turn edits the next function of the next module).
pub const MODULES: usize = 10;
/// Functions per module.
pub const FUNCTIONS: usize = 12;
/// The providers' cache lifetime (5 minutes), for the fake provider and the gateway alike.
pub const LIFETIME_SECS: u64 = 300;
/// The idle gap before a resumed session goes on: past the lifetime.
pub const IDLE_GAP_SECS: u64 = 600;

/// How the scripted model folds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    NoFolds,
    /// What the system prompt teaches: fold what `session['utilization']['fold_hint']` names.
    Taught,
    /// Each turn's first block folds the previous turn.
    PreviousTurn,
    /// While the context hint is up (75% of `auto_compress_above`), fold the oldest settled
    /// turn not yet folded (the hint of issue 8).
    OldestWhenHinted,
}

impl Policy {
    pub const ALL: [Policy; 4] = [
        Policy::NoFolds,
        Policy::Taught,
        Policy::PreviousTurn,
        Policy::OldestWhenHinted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::NoFolds => "no folds",
            Policy::Taught => "taught (follows the hints)",
            Policy::PreviousTurn => "fold previous turn",
            Policy::OldestWhenHinted => "fold oldest when hinted",
        }
    }
}

/// A session to replay.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub turns: usize,
    /// `[folding] input_limit` and `auto_compress_above`, when set.
    pub limits: Option<(u64, u64)>,
    /// After this turn the gateway stops; the session is resumed after [`IDLE_GAP_SECS`].
    pub resume_after: Option<usize>,
}

/// What a replay measured, per request.
#[derive(Debug, Default)]
pub struct Run {
    pub usages: Vec<Usage>,
    /// The request does not extend the one before it (a fold rewrote the conversation).
    pub after_fold: Vec<bool>,
    /// The first request after the idle gap (the cache expired).
    pub after_gap: Vec<bool>,
    pub folds: usize,
    pub automatic_folds: usize,
}

/// The source of module `m`: [`FUNCTIONS`] small functions with an accumulator each.
pub fn module_source(m: usize) -> String {
    let mut src = format!("\"\"\"Module {m}: arithmetic helpers.\"\"\"\n\n");
    for f in 0..FUNCTIONS {
        src.push_str(&format!(
            "def f{m}_{f}(items, limit={f}):\n    \"\"\"Sum the first {f} items above the limit.\"\"\"\n    total = 0\n    for item in items[:{f}]:\n        if item > limit:\n            total += item\n    return total + {m}\n\n"
        ));
    }
    src
}

/// A small Python project with tests: one test file per module.
pub fn make_project(ws: &Path) {
    std::fs::create_dir_all(ws.join("pkg")).unwrap();
    std::fs::create_dir_all(ws.join("tests")).unwrap();
    std::fs::write(ws.join("pkg/__init__.py"), "").unwrap();
    for m in 0..MODULES {
        std::fs::write(ws.join(format!("pkg/m{m}.py")), module_source(m)).unwrap();
        let mut test = format!("from pkg.m{m} import *\n\n");
        for f in 0..FUNCTIONS {
            test.push_str(&format!(
                "def test_f{m}_{f}():\n    assert f{m}_{f}([100] * 20) == 100 * {f} + {m}\n\n"
            ));
        }
        std::fs::write(ws.join(format!("tests/test_m{m}.py")), test).unwrap();
    }
}

/// The module and function turn `t` (1-based) edits.
pub fn target(t: usize) -> (usize, usize) {
    ((t - 1) % MODULES, ((t - 1) / MODULES) % FUNCTIONS)
}

/// What the scripted model keeps of a settled range, and how it follows a hint. Top-level
/// definitions survive a restart of the worker, so a resumed session still has them.
const HELPERS: &str = r#"def _gist(key):
    import re
    done, part = [], ''
    for k in key.split(','):
        m = re.match(r'-?t(\d+)', k.strip())
        t = int(m.group(1)) if m else 0
        mod, fn = (t - 1) % 10, ((t - 1) // 10) % 12
        if '/' in k:
            part = ' Turn %d so far: read pkg/m%d.py and found the accumulator of f%d_%d.' % (t, mod, mod, fn)
        else:
            done.append((t, 'f%d_%d (pkg/m%d.py)' % (mod, fn, mod)))
    if not done:
        return part.strip()
    if len(done) == 1:
        return 'Turn %d renamed the total accumulator in %s; its tests pass.%s' % (done[0][0], done[0][1], part)
    return 'Turns %d-%d renamed the total accumulator in %s; their tests pass.%s' % (
        done[0][0], done[-1][0], ', '.join(w for _, w in done), part)

def _follow():
    hint = session['utilization'].get('fold_hint') or {}
    if not hint.get('text'):
        return
    for c in hint['candidates'][:4]:
        try:
            fold_session(c['key'], _gist(c['key']))
        except RuntimeError:
            pass

def _oldest():
    from pathlib import Path
    if session['utilization']['level'] not in ('hint', 'urgent', 'required'):
        return
    p = Path('.folded')
    done = set(p.read_text().split()) if p.exists() else set()
    for t in range(1, session['turn']):
        if str(t) not in done:
            done.add(str(t))
            p.write_text(' '.join(sorted(done)))
            try:
                fold_session('t%d' % t, _gist('t%d' % t))
            except RuntimeError:
                pass
            return
"#;

/// The blocks of turn `t` (1-based) under `policy`: the work as the system prompt teaches it
/// ("read only the lines you need, batch a file's edits, run the tests"), two blocks a turn:
/// locate the function with `grep` and read only its lines with `cat`; then edit by address
/// with `patch` and run the module's tests in the same block. (The classic agent does the
/// same work with one tool call per step: a whole-file read, a grep, a `str_replace`, a test
/// run.)
pub fn turn_blocks(t: usize, policy: Policy) -> Vec<String> {
    let (m, f) = target(t);
    let mut blocks = vec![
        format!(
            "a = grep(r'^def f{m}_{f}\\(', 'pkg/m{m}.py').matches[0]\nprint(cat('pkg/m{m}.py', a.line, a.line + 6))"
        ),
        format!(
            "r = grep(r'^    total = 0$', 'pkg/m{m}.py')\nprint(patch('pkg/m{m}.py', [(r.matches[0].address, '    total = 0  # accumulator')]))\nprint(sh('python3 -m pytest -q tests/test_m{m}.py'))"
        ),
    ];
    match policy {
        Policy::NoFolds => {}
        Policy::PreviousTurn if t >= 2 => {
            blocks[0] = format!(
                "fold_session('t{}', _gist('t{}'))\n{}",
                t - 1,
                t - 1,
                blocks[0]
            );
        }
        Policy::PreviousTurn => {}
        Policy::Taught => {
            for b in &mut blocks {
                *b = format!("_follow()\n{b}");
            }
        }
        Policy::OldestWhenHinted => {
            for b in &mut blocks {
                *b = format!("_oldest()\n{b}");
            }
        }
    }
    if t == 1 && policy != Policy::NoFolds {
        blocks[0] = format!("{HELPERS}\n{}", blocks[0]);
    }
    blocks
}

fn settings(dir: &Path, fake: &FakeProvider, scenario: &Scenario) -> ChatSettings {
    let mut worker = WorkerOptions::new(std::path::PathBuf::from(env!("CARGO_BIN_EXE_vis-worker")));
    worker.workspace = Some(dir.join("ws"));
    worker.config_dir = Some(dir.join("config"));
    let mut provider = fake.settings(ProviderKind::OpenAi);
    provider.request_timeout = Duration::from_secs(60);
    let mut folding = vis::gateway::FoldSettings::default();
    if let Some((limit, compress)) = scenario.limits {
        folding.input_limit = Some(limit);
        folding.auto_compress_above = Some(compress);
    }
    ChatSettings {
        provider,
        worker,
        max_iterations: 10_000,
        max_output_tokens: 1000,
        thinking_budget: None,
        block_timeout: Duration::from_secs(60),
        output_limit: 20_000,
        catalog_budget: 2000,
        folding,
        // The hints price folds as Anthropic bills them (the dearer cache write).
        cache_prices: CachePrices {
            cache_read: 0.1,
            cache_write: 1.25,
            lifetime_secs: LIFETIME_SECS,
        },
        checkpoints: Default::default(),
        images: Default::default(),
    }
}

/// What the fake provider's responder keeps between requests.
struct State {
    /// (turn index, block index) of the script.
    at: (usize, usize),
    cache: PrefixCache,
    previous: Vec<u8>,
    gap_pending: bool,
    run: Run,
}

/// Replays `scenario` under `policy`.
pub fn replay(rt: &tokio::runtime::Runtime, scenario: &Scenario, policy: Policy) -> Run {
    let dir = tempfile::tempdir().unwrap();
    make_project(&dir.path().join("ws"));
    let fake = FakeProvider::start();
    let script: Vec<Vec<String>> = (1..=scenario.turns)
        .map(|t| turn_blocks(t, policy))
        .collect();
    let state = Arc::new(Mutex::new(State {
        at: (0, 0),
        cache: PrefixCache::new(LIFETIME_SECS as f64),
        previous: Vec::new(),
        gap_pending: false,
        run: Run::default(),
    }));
    let st = state.clone();
    fake.respond_with(move |req| {
        let body = req.body.to_vec();
        let mut s = st.lock().unwrap();
        let usage = s.cache.request(&body);
        let extends = s.previous.len() <= shared_prefix_len(&s.previous, &body) + 256;
        let gap = std::mem::take(&mut s.gap_pending);
        s.run.after_fold.push(!extends && !gap);
        s.run.after_gap.push(gap);
        s.run.usages.push(usage);
        s.previous = body;
        let (t, b) = s.at;
        let reported = vis::protocol::Usage {
            input_tokens: Some(usage.input),
            cached_tokens: Some(usage.cached),
            cache_creation_tokens: None,
            output_tokens: Some(40),
        };
        let blocks = &script[t];
        if b < blocks.len() {
            s.at.1 += 1;
            Reply::openai()
                .text(&format!("Step {}.", b + 1))
                .tool_call(
                    &format!("call_{t}_{b}"),
                    "python_execution",
                    &json!({"code": blocks[b]}).to_string(),
                )
                .usage(reported)
                .build()
        } else {
            s.at = (t + 1, 0);
            Reply::openai()
                .text("Done: the change is in and the tests pass.")
                .usage(reported)
                .build()
        }
    });
    let db = dir.path().join("vis.db");
    let id = "s-replay";
    let roots = vec![dir.path().join("ws").to_string_lossy().into_owned()];
    let open = |resume: bool| {
        let store = Store::open(&db).unwrap();
        let s = settings(dir.path(), &fake, scenario);
        if resume {
            ChatSession::open(store, &db, id, s).unwrap().0
        } else {
            ChatSession::create(store, &db, id, roots.clone(), s).unwrap()
        }
    };
    let mut session = open(false);
    for t in 1..=scenario.turns {
        rt.block_on(async {
            let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
            let end = session
                .run_turn(
                    &format!("Rename the accumulator in the next function (turn {t})."),
                    &tx,
                    &CancellationToken::new(),
                )
                .await
                .unwrap();
            assert_eq!(end.status, vis::protocol::TurnStatus::Done, "{end:?}");
        });
        if scenario.resume_after == Some(t) {
            rt.block_on(session.shutdown());
            drop(session);
            {
                let mut s = state.lock().unwrap();
                s.cache.advance(IDLE_GAP_SECS as f64);
                s.gap_pending = true;
            }
            session = open(true);
            session.advance_clock(IDLE_GAP_SECS);
        }
    }
    rt.block_on(session.shutdown());
    let folds = Store::open(&db).unwrap().folds(id).unwrap();
    let mut run = std::mem::take(&mut state.lock().unwrap().run);
    run.folds = folds.iter().filter(|f| !f.automatic).count();
    run.automatic_folds = folds.iter().filter(|f| f.automatic).count();
    run
}
