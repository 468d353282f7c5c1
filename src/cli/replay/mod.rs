//! `vis replay ID [--workspace DIR]`: re-runs a session's recorded blocks, in order, against
//! this build, in a scratch copy of its workspace as it was when the session started, and
//! reports per iteration whether the output and status are the same.
//!
//! No model: the recorded code is the script. The replay never writes to the original
//! workspace or to the session's records: it runs as a throwaway session (the same id, so
//! `session["id"]` and the tracebacks' `<tN/iM>` names match) in a temporary database, and
//! reads the original store only before it starts. Its blocks run in the normal sandbox with
//! the scratch copy as the workspace root, trusted exactly when the original workspace is.
//!
//! A new worker starts where the recording's did: before every `vis exec` turn (each was a
//! process of its own) and whenever the process that ran a turn changes (the turns record
//! their owner), so what was kept in memory between blocks, and the "new worker: restored …"
//! lines, are as they were. What cannot be replayed is said, not compared (`compare`,
//! `hosts`); what varies by nature is normalised first (`normalize`).

mod compare;
mod hosts;
mod normalize;
mod scratch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::settings::{limits, load_config, worker_options, LimitArgs};
use super::term::{errln, outln};
use super::CliError;
use crate::protocol::{
    IterationRecord, IterationRow, PersistedDef, TurnKind, TurnRow, TurnStatus, Utilization,
};
use crate::runtime::{BlockLimits, BlockRunner, BlockSpec, RunError, Supervisor, WorkerOptions};
use crate::store::Store;
use compare::{judge, skip_reason, Verdict};
use hosts::{ReplayCalls, ReplayTools, Unreplayable};
use normalize::Normalizer;
pub use scratch::{workspace_at, ScratchDir};

const AFTER_HELP: &str = "\
Per iteration it prints `same`, `different output` (with a short diff), `different status`,
`not replayable` (the block called fold_session, read_session or an MCP tool: a replay has no
conversation and starts no MCP server, so those calls fail with an error saying so, and the
iteration is not compared) or `skipped` (interrupted, rejected or unfinished in the recording:
not run again). Then one summary line. Exit status: 0 when nothing differs, 1 when an output
or a status differs (or the replay was stopped), 2 for a usage error, 3 when the database
cannot be used.

Before comparing, both outputs are normalised: the lines a conversation adds to a chat
block's output ([vis] context hints, a spent fold_session budget) are removed; the workspace
root (the recording's and the scratch copy's) becomes <workspace>; the artifact directories
<artifacts>; paths under /tmp, /var/tmp and /dev/shm <tmp>; memory addresses (0x and 6+ hex
digits) 0x…; dates with times and clock times <time>; Unix timestamps of this era
<timestamp>; durations (a number with ns, µs, us, ms, s, sec, seconds, min) <duration>; a
number after pid, PID or process <pid>. Everything else must match byte for byte. See
docs/checkpoints.md, \"Replay\".";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ReplayArgs {
    /// The session to replay.
    pub id: String,
    /// Put the scratch copy of the workspace in DIR (new or empty, outside the session's
    /// workspace) and keep it afterwards, to look at what the replay did; default: a
    /// temporary directory, removed at the end.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Everything read from the original store before the replay starts.
struct Recording {
    root: PathBuf,
    turns: Vec<TurnRow>,
    iterations: Vec<IterationRow>,
    owners: Vec<(i64, Option<String>)>,
    /// The recorded definition changes of the iterations a replay skips, by (turn, iteration).
    skipped_defs: HashMap<(i64, i64), (Vec<PersistedDef>, Vec<String>)>,
}

/// How many iterations got each verdict.
#[derive(Default)]
struct Tally {
    same: usize,
    different_output: usize,
    different_status: usize,
    not_replayable: usize,
    skipped: usize,
}

impl Tally {
    fn add(&mut self, verdict: &Verdict) {
        let count = match verdict {
            Verdict::Same => &mut self.same,
            Verdict::DifferentOutput { .. } => &mut self.different_output,
            Verdict::DifferentStatus { .. } => &mut self.different_status,
            Verdict::NotReplayable { .. } => &mut self.not_replayable,
            Verdict::Skipped { .. } => &mut self.skipped,
        };
        *count += 1;
    }
}

pub fn run(args: ReplayArgs, db: &Path) -> Result<i32, CliError> {
    crate::session::validate_session_id(&args.id)?;
    crate::cli::diff::require_database(db, &args.id)?;
    let config = load_config()?;
    let limits = limits(&args.limits, &config)?;
    let original = Store::open(db)?;
    let recording = read_recording(&*original, &args.id)?;
    let scratch = match &args.workspace {
        Some(dir) => ScratchDir::chosen(dir, &recording.root)?,
        None => ScratchDir::temporary("vis replay")?,
    };
    let scratch_path = scratch.path();
    let notes = workspace_at(
        db,
        &args.id,
        &recording.root,
        crate::checkpoints::Point::Start,
        &scratch_path,
    )
    .map_err(|e| CliError {
        message: format!("vis replay: {}", e.message),
        ..e
    })?;
    for note in notes {
        errln!("vis replay: {note}");
    }
    // The replay's own records: a throwaway database, removed at the end.
    let state = tempfile::Builder::new()
        .prefix("vis-replay-state-")
        .tempdir()
        .map_err(|e| CliError {
            code: 1,
            message: format!("vis replay: cannot make a temporary directory ({e}); set TMPDIR"),
        })?;
    let replay_db = state.path().join("vis.db");
    let store = Store::open(&replay_db)?;
    let scratch_root = scratch_path.to_string_lossy().into_owned();
    let roots = vec![scratch_root.clone()];
    store.ensure_session(&args.id, &roots)?;

    let mut opts = worker_options(&config, Some(&scratch_path))?;
    // The scratch copy is the same repository's code: trusted when the original is.
    opts.trusted = crate::trust::is_trusted(&config, &recording.root);
    opts.memory_limit_mb = limits.memory_limit_mb;
    opts.sandbox = limits.sandbox.clone();
    let artifact_dir = crate::config::artifact_dir(&replay_db, &args.id);
    opts.add_session(
        crate::config::store_files(&replay_db),
        &artifact_dir,
        &roots,
    );
    // The original database stays hidden from the replay's blocks like any session's.
    opts.sandbox.private.extend(crate::config::store_files(db));

    let noted = Unreplayable::default();
    let servers = crate::mcp::hub_for(&config, &recording.root, artifact_dir.clone(), &*original)?;
    for (name, fingerprint) in servers.fingerprints() {
        if let Some(tools) = original.cached_mcp_tools(&name, &fingerprint)? {
            servers.use_cached_tools(&name, &tools);
        }
    }
    let tools = (!servers.is_empty()).then(|| ReplayTools {
        servers,
        noted: noted.clone(),
    });
    drop(original);

    let original_artifacts = crate::config::artifact_dir(db, &args.id);
    let normalizer = Normalizer::new(
        &[&recording.root.to_string_lossy(), &scratch_root],
        &[
            &original_artifacts.to_string_lossy(),
            &artifact_dir.to_string_lossy(),
        ],
    );
    errln!(
        "vis replay: session {} ({} turns, {} iterations) in {}",
        args.id,
        recording.turns.len(),
        recording.iterations.len(),
        scratch_path.display()
    );
    let mut runner = BlockRunner::new(
        &args.id,
        store,
        Supervisor::new(opts.clone(), Vec::new()),
        artifact_dir,
        roots,
        BlockLimits {
            output_limit: limits.output_limit,
            timeout: limits.timeout,
            artifact_quota: limits.sandbox.artifact_quota,
            images: limits.images,
        },
    );
    // The scratch copy is thrown away: recording its changes would cost a scan and a hash
    // of every file for nothing.
    runner.set_checkpoint_settings(crate::checkpoints::CheckpointSettings {
        enabled: false,
        ..Default::default()
    });
    let mut replay = Replay {
        id: &args.id,
        runner,
        opts,
        calls: ReplayCalls {
            noted: noted.clone(),
            chat: false,
        },
        noted,
        normalizer,
        tally: Tally::default(),
    };
    if let Some(tools) = tools {
        replay.runner.set_tools(Arc::new(tools));
    }
    let events = super::event_loop("vis replay")?;
    let stopped = events.block_on(async {
        let stop = CancellationToken::new();
        let on_ctrl_c = stop.clone();
        let listener = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_ctrl_c.cancel();
            }
        });
        let replayed = replay.all(&recording, &stop).await;
        replay.runner.shutdown().await;
        listener.abort();
        replayed.map(|()| stop.is_cancelled())
    })?;
    let t = &replay.tally;
    outln!(
        "replay of {}: {} same, {} different output, {} different status, {} not replayable, {} skipped{}",
        args.id,
        t.same,
        t.different_output,
        t.different_status,
        t.not_replayable,
        t.skipped,
        if stopped { " (stopped before the end)" } else { "" }
    );
    if let ScratchDir::Kept(dir) = &scratch {
        errln!(
            "vis replay: the scratch workspace is kept in {}",
            dir.display()
        );
    }
    let differs = t.different_output + t.different_status > 0;
    Ok(if differs || stopped { 1 } else { 0 })
}

fn read_recording(store: &Store, id: &str) -> Result<Recording, CliError> {
    let session = store.require_session(id)?;
    let root = session.workspace_roots.first().ok_or_else(|| {
        CliError::usage(format!(
            "session '{id}' has no workspace recorded; there is nothing to make a scratch copy of"
        ))
    })?;
    let root = PathBuf::from(root);
    if !root.is_dir() {
        return Err(CliError::usage(format!(
            "the workspace {} of session '{id}' no longer exists; a replay copies it (as it was when the session started) to run in",
            root.display()
        )));
    }
    let iterations = store.iterations(id)?;
    let mut skipped_defs = HashMap::new();
    for it in iterations
        .iter()
        .filter(|i| skip_reason(i.status).is_some())
    {
        let changes = store.def_changes_of(id, it.turn, it.iteration)?;
        skipped_defs.insert((it.turn, it.iteration), changes);
    }
    Ok(Recording {
        root,
        turns: store.turns(id)?,
        iterations,
        owners: store.turn_owners(id)?,
        skipped_defs,
    })
}

/// A replay in progress.
struct Replay<'a> {
    id: &'a str,
    runner: BlockRunner,
    opts: WorkerOptions,
    calls: ReplayCalls,
    noted: Unreplayable,
    normalizer: Normalizer,
    tally: Tally,
}

impl Replay<'_> {
    /// Replays every turn in order, until the end or `stop`.
    async fn all(
        &mut self,
        recording: &Recording,
        stop: &CancellationToken,
    ) -> Result<(), CliError> {
        let owner_of = |turn: i64| {
            recording
                .owners
                .iter()
                .find(|(t, _)| *t == turn)
                .and_then(|(_, owner)| owner.clone())
        };
        let mut previous: Option<Option<String>> = None;
        for turn in &recording.turns {
            if stop.is_cancelled() {
                break;
            }
            let owner = owner_of(turn.turn);
            let new_process = match &previous {
                None => true,
                Some(before) => {
                    turn.kind == TurnKind::Exec
                        || (owner.is_some() && before.is_some() && owner != *before)
                }
            };
            if new_process {
                self.new_worker(previous.is_some()).await?;
            }
            previous = Some(owner);
            self.calls.chat = turn.kind == TurnKind::Chat;
            let number = self.runner.store_mut().begin_turn(
                self.id,
                turn.kind,
                turn.user_text.as_deref(),
            )?;
            for it in recording.iterations.iter().filter(|i| i.turn == turn.turn) {
                if stop.is_cancelled() {
                    break;
                }
                let skipped_defs = recording.skipped_defs.get(&(it.turn, it.iteration));
                let verdict = self.iteration(number, it, skipped_defs, stop).await?;
                report(it, &verdict);
                self.tally.add(&verdict);
            }
            self.runner.end_turn(number, TurnStatus::Done)?;
        }
        Ok(())
    }

    /// Starts a worker as a new process would: the replay's definitions restored.
    async fn new_worker(&mut self, replace: bool) -> Result<(), CliError> {
        if replace {
            self.runner.supervisor_mut().shutdown().await;
            let defs = self.runner.store().load_defs(self.id)?;
            *self.runner.supervisor_mut() = Supervisor::new(self.opts.clone(), defs);
        }
        self.runner.start(false).await.map_err(|e| CliError {
            code: 1,
            message: format!("vis replay: the worker could not start: {e}"),
        })
    }

    /// Replays (or skips) one recorded iteration in turn `number` of the replay.
    async fn iteration(
        &mut self,
        number: i64,
        it: &IterationRow,
        skipped_defs: Option<&(Vec<PersistedDef>, Vec<String>)>,
        stop: &CancellationToken,
    ) -> Result<Verdict, CliError> {
        if let Some(why) = skip_reason(it.status) {
            // Recorded as it was, with the definitions it made (an interrupted block keeps
            // those it finished), so the next blocks see the same numbers and definitions.
            let (set, deleted) = skipped_defs.map_or((&[][..], &[][..]), |(s, d)| (&s[..], &d[..]));
            let started_at = crate::store::now_millis();
            let record = IterationRecord {
                defs_set: set,
                defs_deleted: deleted,
                ..IterationRecord::not_run(
                    self.id,
                    number,
                    it.iteration,
                    &it.code,
                    &it.output,
                    it.status,
                    started_at,
                )
            };
            let store = self.runner.store_mut();
            store.begin_iteration(self.id, number, it.iteration, &it.code, started_at)?;
            store.finish_iteration(&record, None)?;
            return Ok(Verdict::Skipped { why });
        }
        let spec = BlockSpec {
            turn: number,
            iteration: it.iteration,
            code: it.code.clone(),
            utilization: Utilization::without_requests(),
            live: None,
        };
        let ran = self
            .runner
            .run_block(spec, &mut self.calls, stop.clone())
            .await
            .map_err(|e| match e {
                RunError::Store(e) => CliError::from(e),
                RunError::Runtime(e) => CliError {
                    code: 1,
                    message: format!("vis replay: {e}"),
                },
            })?;
        let calls = self.noted.take();
        if !calls.is_empty() {
            return Ok(Verdict::NotReplayable { calls });
        }
        Ok(judge(
            (&self.normalizer.apply(&it.output), it.status),
            (&self.normalizer.apply(&ran.output), ran.status),
        ))
    }
}

/// One iteration's line, and its diff indented below it.
fn report(it: &IterationRow, verdict: &Verdict) {
    let place = format!("t{}/i{}", it.turn, it.iteration);
    let indented = |diff: &str| -> String { diff.lines().map(|l| format!("    {l}\n")).collect() };
    match verdict {
        Verdict::Same => outln!("{place}  same"),
        Verdict::DifferentOutput { diff } => {
            outln!("{place}  different output");
            super::term::out!("{}", indented(diff));
        }
        Verdict::DifferentStatus {
            recorded,
            replayed,
            diff,
        } => {
            outln!("{place}  different status: {recorded} in the recording, {replayed} now");
            if let Some(diff) = diff {
                super::term::out!("{}", indented(diff));
            }
        }
        Verdict::NotReplayable { calls } => {
            outln!("{place}  not replayable: {}", calls.join(", "))
        }
        Verdict::Skipped { why } => outln!("{place}  skipped: {why}"),
    }
}
