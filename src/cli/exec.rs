//! `vis exec`: one block, one new turn, no model.

use std::io::Read;
use std::path::Path;

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::settings::{
    limits, load_config, session_roots, worker_options, worker_program, LimitArgs, SessionTarget,
};
use super::term::{errln, escape_controls, print_styled};
use super::CliError;
use crate::protocol::{IterationStatus, Status, TurnKind, TurnStatus, Utilization};
use crate::runtime::{
    BlockLimits, BlockRunner, BlockSpec, Launched, NoConversation, Ran, RunError, RuntimeError,
    Supervisor, WorkerOptions,
};
use crate::store::{now_millis, Store, StoreError};

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub target: SessionTarget,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// The block's code, or `-` to read it from standard input.
    #[arg(value_name = "CODE")]
    pub code: Option<String>,
}

fn read_code(arg: Option<String>) -> Result<String, CliError> {
    match arg.as_deref() {
        None => Err(CliError::usage(
            "no code given: pass the block as an argument (vis exec 'print(1)') or '-' to read it from stdin",
        )),
        Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| CliError::usage(format!("cannot read the block from stdin: {e}")))?;
            String::from_utf8(bytes).map_err(|e| {
                CliError::usage(format!(
                    "the block on stdin is not UTF-8 (byte {}); save it as UTF-8",
                    e.utf8_error().valid_up_to()
                ))
            })
        }
        Some(code) => Ok(code.to_string()),
    }
}

/// `vis exec`'s event loop and worker process, started before the command line is parsed.
pub struct EarlyWorker {
    events: tokio::runtime::Runtime,
    launched: Option<Launched>,
}

/// When the command line is `vis [--db PATH] exec …`, starts the event loop and the worker's
/// process now: it execs and links while this process parses its command line, reads its
/// config, opens the store and reads the session, and gets its settings once they are known
/// (`WorkerProcess::start`). It has the environment of a config without `[sandbox] env`; with
/// one, it is not used (`Supervisor::adopt`). `None` for anything else, or when it cannot
/// start (then `run` starts one, or reports why).
pub fn launch_early() -> Option<EarlyWorker> {
    let mut args = std::env::args_os().skip(1);
    let command = loop {
        let arg = args.next()?;
        if arg == "--db" {
            args.next()?;
        } else if !arg.as_encoded_bytes().starts_with(b"--db=") {
            break arg;
        }
    };
    if command != "exec" {
        return None;
    }
    let events = super::event_loop("vis exec").ok()?;
    let opts = WorkerOptions::new(worker_program().ok()?);
    let launched = events.block_on(async { Launched::new(&opts) }).ok();
    Some(EarlyWorker { events, launched })
}

pub fn run(args: ExecArgs, db: &Path, early: Option<EarlyWorker>) -> Result<i32, CliError> {
    let code = read_code(args.code.clone())?;
    crate::runtime::validate_code(&code).map_err(|e| CliError::usage(e.to_string()))?;
    let (events, launched) = match early {
        Some(early) => (early.events, early.launched),
        None => {
            let events = super::event_loop("vis exec")?;
            let opts = WorkerOptions::new(worker_program()?);
            let launched = events.block_on(async { Launched::new(&opts) }).ok();
            (events, launched)
        }
    };
    let config = load_config()?;
    let limits = limits(&args.limits, &config)?;
    let (workspace, session_id, created) = args.target.resolve()?;

    let mut store = Store::open(db)?;
    let roots = session_roots(&*store, &session_id, workspace.as_deref())?;
    if created {
        errln!("vis: new session {session_id} (continue it with --session {session_id})");
    }

    let defs = store.load_defs(&session_id)?;
    let mut opts = worker_options(&config, roots.first().map(Path::new))?;
    opts.memory_limit_mb = limits.memory_limit_mb;
    opts.sandbox = limits.sandbox.clone();
    let artifact_dir = crate::config::artifact_dir(db, &session_id);
    opts.add_session(crate::config::store_files(db), &artifact_dir, &roots);
    // This process ends after its block: the change feed's teardown (milliseconds of kernel
    // time) is left to a child that outlives it, not to this process's exit.
    crate::release::close_in_a_child_process();
    // Made before the worker starts: the checkpoints directory then exists, so the sandbox
    // hides it.
    let mut recorder = crate::checkpoints::Recorder::new(
        db,
        &session_id,
        &roots,
        super::settings::checkpoint_settings(&config),
    );
    let mut supervisor = Supervisor::new(opts, defs);
    if let Some(launched) = launched {
        supervisor.adopt(launched);
    }
    let turn_plan = TurnPlan {
        session_id: &session_id,
        code: &code,
        roots: &roots,
        artifact_dir: &artifact_dir,
        config: &config,
    };

    let (ran, mut runner) = events.block_on(async {
        // Ctrl-C interrupts the block (also while the worker is still starting: then the
        // block does not run), not the program.
        let stop = CancellationToken::new();
        let on_ctrl_c = stop.clone();
        let listener = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_ctrl_c.cancel();
            }
        });
        // The worker's start (an interpreter, the prelude, the restored definitions) is most
        // of a cold start and needs nothing from the turn's records: it runs while they are
        // written (the database work runs whenever the start waits on the worker).
        // Once the turn is numbered, its scan for changes made outside Vis (or the session's
        // baseline) starts on a thread of its own, also while the worker starts; the block
        // waits for it.
        // `biased`: the start is polled first, and its first poll sends the worker its settings.
        let (started, prepared) = tokio::join!(biased; supervisor.start(), async {
            // Reading the session's checkpoint log takes tens of milliseconds on a large
            // workspace: it starts before the turn is numbered, and its scan once it is; but
            // after the worker's settings are out, so that on two cores its thread does not
            // delay them.
            recorder.read_ahead();
            let prepared = turn_plan.record(&mut store);
            if let Ok(p) = &prepared {
                recorder.prepare_turn(p.turn);
            }
            prepared
        });
        let prepared = prepared?;
        let mut runner = BlockRunner::new(
            &session_id,
            store,
            supervisor,
            artifact_dir.clone(),
            roots.clone(),
            BlockLimits {
                output_limit: limits.output_limit,
                timeout: limits.timeout,
                artifact_quota: limits.sandbox.artifact_quota,
                images: limits.images,
            },
        );
        runner.set_checkpoints(recorder);
        if let Some(hub) = prepared.hub {
            runner.set_tools(std::sync::Arc::new(hub));
        }
        let spec = BlockSpec {
            turn: prepared.turn,
            iteration: prepared.iteration,
            code: code.clone(),
            utilization: Utilization::without_requests(),
            live: None,
        };
        let ran = match started {
            // MCP servers never seen before start now, once, so their tools are known.
            Ok(()) => match runner.start(false).await {
                Ok(()) => {
                    let mut no_conversation = NoConversation {
                        what: "`vis exec`, which runs blocks without a model",
                    };
                    let ran = runner.run_block(spec, &mut no_conversation, stop).await;
                    // Servers a block started: their tool lists are kept for the next run.
                    let _ = runner.sync_tools().await;
                    ran.map(Ok).map_err(|e| match e {
                        RunError::Store(e) => CliError::from(e),
                        RunError::Runtime(e) => CliError {
                            code: 1,
                            message: format!("vis exec: {e}"),
                        },
                    })
                }
                Err(e) => Ok(Err(e)),
            },
            Err(e) => Ok(Err(e)),
        };
        // The worker is done: it is killed now, so the kernel ends it while the turn is
        // closed, and the shutdown below only reaps it.
        runner.supervisor_mut().stop_worker();
        let ended = match &ran {
            Ok(Ok(_)) | Ok(Err(_)) => runner.end_turn(prepared.turn, TurnStatus::Done),
            Err(_) => Ok(()),
        };
        if let Ok(Err(e)) = &ran {
            let message = format!("[vis] the block could not run: {e}");
            let _ = runner.record_not_run(
                prepared.turn,
                prepared.iteration,
                &code,
                &message,
                Status::Crashed.into(),
                None,
            );
        }
        runner.settle_checkpoints();
        if let Some(recorder) = runner.take_checkpoints() {
            recorder.leave_at_exit();
        }
        listener.abort();
        Ok::<_, CliError>((ran.map(|ran| (ran, ended)), runner))
    })?;
    // The block is recorded: its output is shown while the kernel ends the killed worker,
    // and only then is it reaped (and the MCP servers a block started stopped).
    let outcome = report(ran);
    events.block_on(runner.shutdown());
    outcome
}

/// A block as `vis exec` ran it: what the worker did and whether closing its turn was
/// recorded (`Err`: the store failed before the block could run).
type Outcome = Result<(Result<Ran, RuntimeError>, Result<(), StoreError>), CliError>;

/// What `vis exec` prints and exits with, once its block is recorded.
fn report(ran: Outcome) -> Result<i32, CliError> {
    let (ran, ended) = ran?;
    let ran = match ran {
        Ok(ran) => ran,
        Err(e) => {
            let code = if matches!(e, RuntimeError::InvalidBlock(_)) {
                2
            } else {
                1
            };
            return Err(CliError {
                code,
                message: format!("vis exec: {e}"),
            });
        }
    };
    if ran.status == IterationStatus::Rejected {
        return Err(CliError {
            code: 2,
            message: format!(
                "vis exec: {}",
                ran.output.trim_start_matches("[vis] ").trim_end()
            ),
        });
    }
    let mut out = ran.output.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    print_output(&out);
    if let Some(e) = ran.unrecorded.or(ended.err()) {
        // The block ran: its output is shown above; what failed is recording it.
        return Err(CliError {
            code: 1,
            message: format!("vis exec: the block ran, but recording it failed: {e}"),
        });
    }
    Ok(if ran.status.is_ok() { 0 } else { 1 })
}

/// Prints the block's output: as is into a pipe or a file (it is exactly what the model would
/// get, for scripts), escaped on a terminal. It is printed after the block was recorded, so a
/// reader that went away (which ends the process, as SIGPIPE would) loses nothing.
fn print_output(out: &str) {
    use std::io::IsTerminal;
    let _ = if std::io::stdout().is_terminal() {
        print_styled(&escape_controls(out))
    } else {
        print_styled(out)
    };
}

/// What `vis exec` records before its block runs.
struct TurnPlan<'a> {
    session_id: &'a str,
    code: &'a str,
    roots: &'a [String],
    artifact_dir: &'a Path,
    config: &'a crate::config::Config,
}

/// The turn recorded for the block, and the session's MCP servers.
struct PreparedTurn {
    turn: i64,
    iteration: i64,
    hub: Option<crate::mcp::McpHub>,
}

impl TurnPlan<'_> {
    /// Settles the store's log, closes turns a stopped process left running, begins the turn
    /// and its iteration (the code is stored before the worker sees it) and learns the MCP
    /// servers, all while the worker is still starting.
    fn record(&self, store: &mut Box<Store>) -> Result<PreparedTurn, CliError> {
        let session_id = self.session_id;
        // First: the checkpoint copies the previous runs' log into the database, so the next
        // write starts the log over, which syncs its header (an fsync, milliseconds on a busy
        // disk). That write is this turn's, while the worker starts, and the iteration's
        // record after the block is a plain append (`synchronous = NORMAL`: no fsync).
        // A log that cannot be settled now is settled by a later run or SQLite itself.
        let _ = store.settle_log();
        let closed = store.close_dangling_turns(session_id)?;
        if closed > 0 {
            errln!("vis: closed {closed} turn(s) of session {session_id} left running by a process that stopped (recorded as interrupted)");
        }
        let turn = store.begin_turn(session_id, TurnKind::Exec, None)?;
        let iteration = store.next_iteration(session_id, turn)?;
        // MCP servers become namespaces; they start only when a block calls one (or, the
        // first time, to learn their tools), since `vis exec` is one short process.
        let hub = crate::mcp::hub_for(
            self.config,
            Path::new(&self.roots[0]),
            self.artifact_dir.to_path_buf(),
            &**store,
        )?;
        for note in hub.notices() {
            errln!("{note}");
        }
        for (name, fingerprint) in hub.fingerprints() {
            if let Some(tools) = store.cached_mcp_tools(&name, &fingerprint)? {
                hub.use_cached_tools(&name, &tools);
            }
        }
        let hub = (!hub.is_empty()).then_some(hub);
        store.begin_iteration(session_id, turn, iteration, self.code, now_millis())?;
        Ok(PreparedTurn {
            turn,
            iteration,
            hub,
        })
    }
}
