//! The interactive `vis chat` program (see docs/chat.md for what a person sees).
//!
//! The loop: the prompt ([`editor`], reedline in raw mode) gives a line; a line starting with
//! `/` is a [`commands`] command, anything else a turn. While a turn runs the terminal is back
//! in cooked mode with echo off: the [`render`] task owns the output (spinner at the bottom,
//! Markdown above it), and Ctrl-C arrives as SIGINT, which cancels the turn's stop token (the
//! gateway interrupts the request or the block, and the prompt comes back). After each turn a
//! [`status`] line shows the tokens.
//!
//! SIGINT is caught for the whole run (a Ctrl-C between turns must not kill the program);
//! signals that arrive while no turn runs are dropped before the next turn starts.
//!
//! When stdin or stdout is not a terminal, lines are read from stdin and run as turns (or
//! commands) and the plain transcript of `vis chat -m` is printed: scripts pipe into it.

mod blocks;
mod commands;
mod editor;
mod highlight;
mod lines;
mod live;
mod markdown;
mod plain;
mod recap;
mod render;
mod screen;
mod status;
mod stream;
mod streamed;
mod style;
mod wrap;

use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};

use futures::FutureExt;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;

use super::{open_session, ChatArgs};
use crate::cli::term::{errln, escape_controls, print_styled, stdout_closed};
use crate::cli::CliError;
use crate::gateway::ChatSession;
use crate::protocol::TurnStatus;
use commands::{Flow, Parsed};
use editor::{Editor, Input};
use render::View;
use style::{ACCENT, BAD, DIM, WARN};

/// Prints `text` (escaped pieces and `style`'s colors) and a newline. A reader that went away
/// is noticed by the loops ([`stdout_closed`]).
fn show(text: &str) {
    let _ = print_styled(&format!("{text}\n"));
}

pub async fn run(args: ChatArgs, db: PathBuf) -> Result<i32, CliError> {
    let fancy = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) || !fancy {
        style::set_color(false);
    }
    let mut sigint = catch_ctrl_c()?;
    let config = crate::cli::settings::load_config()?;
    if fancy {
        ask_trust(&args, &config)?;
    }
    let (mut session, notes) = open_session(&args, &config, &db)?;
    let code = if fancy {
        for note in notes {
            show(&DIM.paint(&note));
        }
        if args.resume.is_some() {
            show_recap(&session);
        }
        interactive(&mut session, &db, &mut sigint).await
    } else {
        for note in notes {
            errln!("{note}");
        }
        piped(&mut session, &db, &mut sigint).await
    };
    session.shutdown().await;
    code
}

/// Ctrl-C as a signal stream: caught for the whole run, so it interrupts a turn and never
/// kills the program.
fn catch_ctrl_c() -> Result<Signal, CliError> {
    signal(SignalKind::interrupt()).map_err(|e| CliError {
        code: 1,
        message: format!("vis chat: cannot catch Ctrl-C: {e}"),
    })
}

/// Where a resumed session was: its last turns, then its status line.
fn show_recap(session: &ChatSession) {
    let width = crossterm::terminal::size().map_or(80, |(w, _)| w as usize);
    match recap::recap(session.store(), session.id(), width) {
        Ok(text) if text.is_empty() => {}
        Ok(text) => {
            let _ = print_styled(&text);
            show(&DIM.paint(&status::line(session)));
        }
        // The session opened: a recap it cannot read is no reason not to continue it.
        Err(e) => show(&WARN.paint(&format!(
            "vis: the last turns cannot be shown ({}); vis sessions show {} lists them",
            escape_controls(&e.to_string()),
            session.id()
        ))),
    }
}

/// Asks once whether to trust a workspace that carries its own code or instructions, before any
/// of it could load (as Codex and Claude Code ask), listing what trusting enables.
fn ask_trust(args: &ChatArgs, config: &crate::config::Config) -> Result<(), CliError> {
    let workspace = match &args.workspace {
        Some(w) => w.clone(),
        None => crate::cli::settings::current_dir()?,
    };
    let Ok(workspace) = workspace.canonicalize() else {
        return Ok(());
    };
    if crate::trust::is_trusted(config, &workspace) {
        return Ok(());
    }
    let items = crate::trust::workspace_items(&workspace);
    if items.is_empty() {
        return Ok(());
    }
    show(&WARN.paint(&format!(
        "This workspace is not trusted. It carries: {}.",
        items.join(", ")
    )));
    let _ = print_styled(&escape_controls(&crate::trust::enables_text()));
    let _ = print_styled(&format!(
        "Trust {}? Only do this for a repository you trust. [y/N] ",
        escape_controls(&workspace.to_string_lossy())
    ));
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
        crate::trust::trust(&config.dir, &workspace)
            .map_err(|e| CliError::usage(format!("vis chat: {e}")))?;
        show(&DIM.paint("trusted (undo with vis trust --revoke)"));
    } else {
        show(&DIM.paint(
            "not trusted: the session starts without any of that (vis trust DIR trusts it later)",
        ));
    }
    Ok(())
}

async fn interactive(
    session: &mut ChatSession,
    db: &Path,
    sigint: &mut Signal,
) -> Result<i32, CliError> {
    let provider = &session.settings().provider;
    show(&format!(
        "{} {}",
        ACCENT.bold().paint("vis chat"),
        DIM.paint(&format!(
            "· {}/{} · workspace {} · /help for commands, Ctrl-D to exit",
            provider.kind,
            provider.model,
            session.roots().join(", ")
        ))
    ));
    let history = history_path(db);
    let names = commands::COMMANDS
        .iter()
        .map(|(name, _, _)| name.to_string())
        .collect();
    let (mut editor, warning) = Editor::new(history, names);
    if let Some(warning) = warning {
        show(&DIM.paint(&warning));
    }
    let mut blocks = block_count(session);
    // Set by a Ctrl-C at the prompt: the next one on an empty line exits.
    let mut armed = false;
    loop {
        // Between two reads the terminal is in cooked mode, where a quick second Ctrl-C
        // becomes SIGINT: it counts as a Ctrl-C at the prompt.
        let input = if sigint.recv().now_or_never().is_some() {
            Input::Interrupt { had_text: false }
        } else {
            match tokio::task::block_in_place(|| editor.read()) {
                Ok(input) => input,
                Err(e) => {
                    return Err(CliError {
                        code: 1,
                        message: format!("vis chat: the terminal failed: {e}"),
                    })
                }
            }
        };
        let line = match input {
            Input::Eof => break,
            // The first Ctrl-C clears the line (reedline did) and arms; a second one on the
            // empty line exits.
            Input::Interrupt { had_text } => {
                if armed && !had_text {
                    break;
                }
                armed = true;
                show(&DIM.paint("(Ctrl-C again to exit, or Ctrl-D)"));
                continue;
            }
            Input::Line(line) => line,
            Input::Key(line) => {
                // The prompt line stays as it is: the output starts below it.
                show("");
                line
            }
        };
        armed = false;
        if line.trim().is_empty() {
            continue;
        }
        let text = match commands::parse(&line) {
            Parsed::Command { name, args } => match commands::run(name, args, session, db).await {
                Flow::Exit => break,
                Flow::Continue => continue,
            },
            Parsed::Message(text) => text.into_owned(),
        };
        {
            let _mode = TurnMode::enter();
            let outcome = turn(session, &text, View::new(true, blocks), sigint).await?;
            if let Some(e) = outcome.broken {
                // The session itself failed (store, worker); the program goes on.
                show(&BAD.paint(&format!("✗ vis chat: {}", escape_controls(&e))));
            }
        }
        blocks = block_count(session);
        show(&DIM.paint(&status::line(session)));
    }
    show(&DIM.paint(&format!(
        "session {} is saved; vis chat --resume {} continues it",
        session.id(),
        session.id()
    )));
    Ok(0)
}

/// `vis chat -m`: each message is a turn; the plain transcript goes to standard output, each
/// turn followed by the status line (as on piped stdin). Session notes go to standard error.
pub async fn messages(args: ChatArgs, db: PathBuf) -> Result<i32, CliError> {
    style::set_color(false);
    let mut sigint = catch_ctrl_c()?;
    let config = crate::cli::settings::load_config()?;
    let (mut session, notes) = open_session(&args, &config, &db)?;
    for note in notes {
        errln!("{note}");
    }
    let mut code = 0;
    let mut blocks = block_count(&session);
    for message in &args.messages {
        show(&escape_controls(&format!(
            "> {}",
            message.replace('\n', "\n> ")
        )));
        if stdout_closed() {
            break;
        }
        let view = View::new(false, blocks);
        let outcome = match turn(&mut session, message, view, &mut sigint).await {
            Ok(outcome) => outcome,
            Err(e) => {
                session.shutdown().await;
                return Err(e);
            }
        };
        if let Some(e) = outcome.broken {
            // The session itself failed (store, worker): a script stops here.
            session.shutdown().await;
            return Err(CliError {
                code: 1,
                message: format!("vis chat: {e}"),
            });
        }
        blocks = block_count(&session);
        show(&escape_controls(&status::line(&session)));
        if outcome.interrupted {
            code = 130;
            break;
        }
        if outcome.failed {
            code = 1;
        }
    }
    session.shutdown().await;
    Ok(code)
}

/// Stdin is not a terminal: each line (a trailing `\` continues it) is a turn or a command.
async fn piped(session: &mut ChatSession, db: &Path, sigint: &mut Signal) -> Result<i32, CliError> {
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    // A thread of its own: a blocking read of stdin must not hold up the runtime, and it may
    // outlive the loop (the process exits without waiting for it).
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut message = String::new();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if let Some(head) = line.strip_suffix('\\') {
                message.push_str(head);
                message.push('\n');
                continue;
            }
            message.push_str(&line);
            if tx.send(std::mem::take(&mut message)).is_err() {
                return;
            }
        }
        if !message.is_empty() {
            let _ = tx.send(message);
        }
    });
    let mut code = 0;
    let mut blocks = block_count(session);
    loop {
        let line = tokio::select! {
            line = lines.recv() => match line {
                Some(line) => line,
                None => break,
            },
            _ = sigint.recv() => return Ok(130),
        };
        if line.trim().is_empty() {
            continue;
        }
        let text = match commands::parse(&line) {
            Parsed::Command { name, args } => match commands::run(name, args, session, db).await {
                Flow::Exit => break,
                Flow::Continue if stdout_closed() => break,
                Flow::Continue => continue,
            },
            Parsed::Message(text) => text.into_owned(),
        };
        show(&escape_controls(&format!(
            "> {}",
            text.replace('\n', "\n> ")
        )));
        if stdout_closed() {
            break;
        }
        let outcome = turn(session, &text, View::new(false, blocks), sigint).await?;
        if let Some(e) = &outcome.broken {
            show(&format!("✗ vis chat: {}", escape_controls(e)));
        }
        blocks = block_count(session);
        show(&escape_controls(&status::line(session)));
        if stdout_closed() {
            // The reader went away (the turn was interrupted for it): end as SIGPIPE would.
            break;
        }
        // As with `-m`: Ctrl-C ends a script's run, a failed turn makes its exit code 1.
        if outcome.interrupted {
            return Ok(130);
        }
        if outcome.failed {
            code = 1;
        }
    }
    Ok(code)
}

/// How a turn went, for the caller's exit code.
struct Outcome {
    interrupted: bool,
    failed: bool,
    /// The session itself failed (store, worker); the interactive program and piped input go
    /// on after saying so, `-m` stops.
    broken: Option<String>,
}

/// Runs one turn with `view` drawing it; Ctrl-C (SIGINT) interrupts it.
async fn turn(
    session: &mut ChatSession,
    text: &str,
    view: View,
    sigint: &mut Signal,
) -> Result<Outcome, CliError> {
    // A Ctrl-C from before this turn is not meant for it.
    while sigint.recv().now_or_never().is_some() {}
    let stop = CancellationToken::new();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let drawing = tokio::spawn(view.run(rx, stop.clone()));
    let end = {
        let run = session.run_turn(text, &tx, &stop);
        tokio::pin!(run);
        loop {
            tokio::select! {
                end = &mut run => break end,
                _ = sigint.recv() => stop.cancel(),
            }
        }
    };
    drop(tx);
    drawing.await.map_err(|e| CliError {
        code: 1,
        message: format!("vis chat: the display failed: {e}"),
    })?;
    Ok(match end {
        Ok(end) => Outcome {
            interrupted: end.status == TurnStatus::Interrupted && stop.is_cancelled(),
            failed: end.status == TurnStatus::Failed,
            broken: None,
        },
        Err(e) => Outcome {
            interrupted: false,
            failed: true,
            broken: Some(e.to_string()),
        },
    })
}

/// The number of blocks the session had (blocks are numbered in the session's order).
fn block_count(session: &ChatSession) -> usize {
    session
        .store()
        .iterations(session.id())
        .map(|r| r.len())
        .unwrap_or(0)
}

/// The prompt history: `chat_history` beside the database (`$VIS_HOME` by default; a
/// PostgreSQL database's store dir).
fn history_path(db: &Path) -> PathBuf {
    crate::config::store_dir(db).join("chat_history")
}

/// The terminal while a turn runs: echo off (keys typed meanwhile wait for the prompt instead
/// of scribbling over the output) and the cursor hidden; restored on drop.
struct TurnMode {
    saved: Option<rustix::termios::Termios>,
}

impl TurnMode {
    fn enter() -> TurnMode {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(&stdin).ok();
        if let Some(saved) = &saved {
            let mut quiet = saved.clone();
            quiet.local_modes -= rustix::termios::LocalModes::ECHO;
            let _ =
                rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet);
        }
        let mut out = std::io::stdout();
        let _ = crossterm::execute!(out, crossterm::cursor::Hide);
        TurnMode { saved }
    }
}

impl Drop for TurnMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                saved,
            );
        }
        let mut out = std::io::stdout();
        let _ = crossterm::execute!(out, crossterm::cursor::Show);
    }
}

/// `1 turn`, `2 turns`.
pub fn plural(n: impl Into<i64>, word: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Runs `work` (rendering a pathological input) on a thread and gives its result, failing the
/// test if the thread has used more than a bound of CPU time: a super-linear renderer then
/// fails instead of hanging the suite. The inputs are chosen so the quadratic code took
/// minutes and the linear code takes about a second (debug build). The bound (20 s) is on the
/// thread's own CPU time, not the wall clock, so a machine busy with other work does not
/// trip it (under a load of 10 on 2 cores the wall time of this work was 7× its CPU time).
#[cfg(test)]
pub(crate) fn finishes<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    use std::sync::mpsc::RecvTimeoutError;
    const BOUND_CPU_SECS: f64 = 20.0;
    let (tx, rx) = std::sync::mpsc::channel();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tid_tx.send(rustix::thread::gettid().as_raw_nonzero().get());
        let value = work();
        let _ = tx.send(());
        value
    });
    let tid = tid_rx.recv().expect("the rendering thread starts");
    // utime + stime of one thread, from /proc (fields 14 and 15, in clock ticks of 1/100 s on
    // Linux), after the command name, which may hold spaces and is closed by the last `)`.
    let cpu_secs = || -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // After the `)`: state is field 3 of stat, so utime (14) and stime (15) are at 11, 12.
        (ticks(11) + ticks(12)) / 100.0
    };
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                return match worker.join() {
                    Ok(value) => value,
                    Err(panic) => std::panic::resume_unwind(panic),
                };
            }
            Err(RecvTimeoutError::Timeout) => {
                let used = cpu_secs();
                assert!(
                    used <= BOUND_CPU_SECS,
                    "the rendering used {used:.1} s of CPU without finishing: super-linear on this input?"
                );
            }
        }
    }
}
