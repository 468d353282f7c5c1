//! Slash commands at the prompt. A line that starts with `/` is a command; `//` sends the rest
//! of the line, starting with `/`, as a message. Every command prints and returns to the
//! prompt, except `/exit`.

use std::path::Path;

use super::blocks::full_block;
use super::status;
use super::style::{Style, ACCENT, DIM, WARN};
use super::{plural, show};
use crate::cli::term::{escape_controls, print_styled};
use crate::cli::{context, format_time};
use crate::gateway::ChatSession;

/// Name, arguments, what it does (what `/help` prints, in this order).
pub const COMMANDS: &[(&str, &str, &str)] = &[
    ("/help", "", "this list, and the keys"),
    (
        "/status",
        "",
        "session, model, turns, tokens, cached share, utilization, worker",
    ),
    (
        "/defs",
        "",
        "the definitions the session keeps across restarts",
    ),
    (
        "/sessions",
        "",
        "recent sessions (resume one with vis chat --resume ID)",
    ),
    (
        "/jobs",
        "",
        "the session's background jobs (sh.background): running, finished, lost",
    ),
    (
        "/context",
        "",
        "the next model request: system, tool, messages (as vis context prints it)",
    ),
    (
        "/expand",
        "[K]",
        "block K of the session in full (default: the last one); Ctrl-O too",
    ),
    (
        "/fold",
        "KEY GIST",
        "replace settled steps (t2, t2/i1-i6, -t3) with your gist in later requests",
    ),
    (
        "/rewind",
        "tN",
        "files back to before turn N, conversation cut there (--code-only keeps it; --force)",
    ),
    (
        "/diff",
        "[tN[/iK]]",
        "what the session (or a turn, an iteration) changed in the workspace, as a diff",
    ),
    (
        "/fork",
        "tN [--workspace DIR]",
        "a new session with the conversation through turn N (and a copy of the files then)",
    ),
    (
        "/replay",
        "[--workspace DIR]",
        "re-run this session's blocks in a scratch copy of its workspace; report what differs",
    ),
    ("/exit", "", "leave (also /quit, Ctrl-D, or Ctrl-C twice)"),
];

const KEYS: &[(&str, &str)] = &[
    ("Enter", "send"),
    (
        "Alt-Enter, or \\ at the end",
        "new line (Shift-Enter too where the terminal tells it apart)",
    ),
    ("Up / Down, Ctrl-R", "history (kept beside the database)"),
    (
        "Ctrl-C",
        "interrupt the running request or block; at the prompt clear the line, twice to exit",
    ),
    ("Ctrl-D", "exit (on an empty line)"),
    ("Ctrl-O", "the last block in full"),
    ("Tab", "complete a command's name"),
    ("//text", "send a message that starts with /"),
];

/// What the person typed.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    Message(Cow<'a>),
    Command { name: &'a str, args: &'a str },
}

type Cow<'a> = std::borrow::Cow<'a, str>;

pub fn parse(line: &str) -> Parsed<'_> {
    let trimmed = line.trim_start();
    if let Some(rest) = trimmed.strip_prefix("//") {
        return Parsed::Message(Cow::Owned(format!("/{rest}")));
    }
    if trimmed.starts_with('/') {
        let trimmed = trimmed.trim_end();
        let (name, args) = match trimmed.find(char::is_whitespace) {
            Some(i) => (&trimmed[..i], trimmed[i..].trim()),
            None => (trimmed, ""),
        };
        return Parsed::Command { name, args };
    }
    Parsed::Message(Cow::Borrowed(line))
}

pub enum Flow {
    Continue,
    Exit,
}

/// Runs a command (prints what it shows).
pub async fn run(name: &str, args: &str, session: &mut ChatSession, db: &Path) -> Flow {
    match name {
        "/help" | "/?" => help(),
        "/status" => {
            for (key, value) in status::report(session) {
                show(&format!(
                    "{} {}",
                    DIM.paint(&format!("{key:<15}")),
                    escape_controls(&value)
                ));
            }
        }
        "/defs" => defs(session),
        "/jobs" => jobs(session),
        "/sessions" => sessions(session, db),
        "/context" => {
            if session.prefix().is_none() {
                show(
                    "no model request yet: the first message fixes the system prompt and the tool",
                );
            } else {
                let pending = session.pending_catalog_update().await;
                context::print_readable(session, pending);
            }
        }
        "/expand" => expand(session, args),
        "/fold" => fold(session, args),
        "/rewind" => rewind(session, args).await,
        "/diff" => {
            let mut argv = vec!["diff".to_string(), session.id().to_string()];
            argv.extend(args.split_whitespace().map(str::to_string));
            same_as_command(db, &argv).await;
        }
        "/fork" => fork(session, args, db).await,
        "/replay" => {
            let mut argv = vec!["replay".to_string(), session.id().to_string()];
            argv.extend(args.split_whitespace().map(str::to_string));
            show(&DIM.paint(
                "replaying every recorded block in a scratch copy of the workspace (Ctrl-C stops it)…",
            ));
            same_as_command(db, &argv).await;
        }
        "/exit" | "/quit" | "/q" => return Flow::Exit,
        unknown => {
            let near = COMMANDS
                .iter()
                .map(|(n, _, _)| *n)
                .chain(["/quit"])
                .map(|n| (strsim::levenshtein(n, unknown), n))
                .min()
                .filter(|(d, _)| *d <= 2)
                .map(|(_, n)| format!(" (did you mean {n}?)"))
                .unwrap_or_default();
            show(&WARN.paint(&format!(
                    "unknown command {}{near}; /help lists the commands, and // at the start sends the line as a message",
                    escape_controls(unknown)
                )));
        }
    }
    Flow::Continue
}

/// `/fold KEY GIST`: the person folds, with the same rules and receipt as `fold_session`.
fn fold(session: &mut ChatSession, args: &str) {
    let (key, gist) = match args.split_once(char::is_whitespace) {
        Some((k, g)) => (k, g.trim()),
        None => (args, ""),
    };
    if key.is_empty() || gist.is_empty() {
        show(&WARN.paint("usage: /fold KEY GIST, e.g. /fold t2 \"found the bug in total(); fixed\" (keys: t2, t2/i4, t2/i4-i5, -t3, -t3/i9)"));
        return;
    }
    match session.fold(key, gist) {
        Ok(receipt) => {
            show(&ACCENT.paint(&escape_controls(&crate::gateway::receipt_line(&receipt))))
        }
        Err(e) => show(&WARN.paint(&format!("not folded: {}", escape_controls(&e.to_string())))),
    }
}

/// `/rewind tN [--code-only] [--force]`: as `vis rewind` (commands run between turns, so no
/// block is running).
async fn rewind(session: &mut ChatSession, args: &str) {
    let mut key = None;
    let mut options = crate::checkpoints::RewindOptions::default();
    for word in args.split_whitespace() {
        match word {
            "--code-only" => options.code_only = true,
            "--force" => options.force = true,
            other if key.is_none() => key = Some(other),
            _ => key = Some(""),
        }
    }
    let usage = "usage: /rewind tN [--code-only] [--force], e.g. /rewind t3";
    let turn = match key.map(crate::checkpoints::parse_point) {
        Some(Ok(crate::checkpoints::Point::BeforeTurn(turn))) => turn,
        Some(Err(e)) => {
            return show(&WARN.paint(&format!("{}; {usage}", escape_controls(&e.to_string()))))
        }
        _ => return show(&WARN.paint(usage)),
    };
    match session.rewind(turn, options).await {
        Ok(outcome) => {
            for line in crate::cli::rewind::summary(session.id(), &outcome) {
                show(&ACCENT.paint(&escape_controls(&line)));
            }
        }
        Err(e) => {
            for line in e.to_string().lines() {
                show(&WARN.paint(&escape_controls(line)));
            }
        }
    }
}

/// `/fork tN [--workspace DIR]`: as `vis sessions fork ID --at tN`; this chat goes on with its
/// own session.
async fn fork(session: &ChatSession, args: &str, db: &Path) {
    let mut words = args.split_whitespace();
    let Some(at) = words.next().filter(|w| !w.starts_with('-')) else {
        return show(&WARN.paint(
            "usage: /fork tN [--workspace DIR], e.g. /fork t3 (the fork keeps turns 1 to 3)",
        ));
    };
    let mut argv = vec![
        "sessions".to_string(),
        "fork".to_string(),
        session.id().to_string(),
        "--at".to_string(),
        at.to_string(),
    ];
    argv.extend(words.map(str::to_string));
    if same_as_command(db, &argv).await {
        show(&DIM.paint("this chat goes on in its own session"));
    }
}

/// Runs this `vis` with `VIS_DB=DB` and `ARGV…` and shows what it printed: the command the README
/// documents, so `/diff`, `/fork` and `/replay` behave exactly as `vis diff`, `vis sessions
/// fork` and `vis replay` do (commands run between turns: the session is idle). True when it
/// succeeded.
async fn same_as_command(db: &Path, argv: &[String]) -> bool {
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            show(&WARN.paint(&format!("cannot find the vis binary: {e}")));
            return false;
        }
    };
    let out = tokio::process::Command::new(program)
        // Through the environment, not the command line: a PostgreSQL URL may hold a
        // password, and every local user can read a process's arguments.
        .env("VIS_DB", db)
        .args(argv)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            show(&WARN.paint(&format!("cannot run vis {}: {e}", argv[0])));
            return false;
        }
    };
    // What the command printed is untrusted (file contents, block output): escaped.
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        show(&escape_controls(line));
    }
    let style = if out.status.success() { DIM } else { WARN };
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        show(&style.paint(&escape_controls(line)));
    }
    out.status.success()
}

fn help() {
    show(&Style::PLAIN.bold().paint("commands"));
    for (name, args, what) in COMMANDS {
        let head = if args.is_empty() {
            name.to_string()
        } else {
            format!("{name} {args}")
        };
        show(&format!(
            "  {} {what}",
            ACCENT.paint(&format!("{head:<12}"))
        ));
    }
    show(&Style::PLAIN.bold().paint("keys"));
    for (key, what) in KEYS {
        show(&format!("  {} {what}", ACCENT.paint(&format!("{key:<27}"))));
    }
    show(&DIM.paint(
        "A block's output is shown collapsed to its first lines; /expand K shows block K in full.",
    ));
}

fn defs(session: &ChatSession) {
    let defs = match session.store().load_defs(session.id()) {
        Ok(d) => d,
        Err(e) => return show(&WARN.paint(&format!("cannot read the definitions: {e}"))),
    };
    if defs.is_empty() {
        show("no definitions yet: top-level functions and classes a block defines are kept here");
        return;
    }
    show(&format!(
        "{} (restored after restarts):",
        plural(defs.len() as i64, "definition")
    ));
    for d in defs {
        // Signatures read `def f(x)` / `class C`; a bare name gets its kind in front.
        let signature = if d.signature.trim().is_empty() {
            format!("{} {}", d.kind, d.name)
        } else {
            d.signature.trim().to_string()
        };
        let doc = if d.doc.is_empty() {
            String::new()
        } else {
            DIM.paint(&format!("  — {}", escape_controls(&d.doc)))
        };
        show(&format!(
            "  {}{doc}",
            ACCENT.paint(&escape_controls(&signature))
        ));
    }
}

fn sessions(session: &ChatSession, db: &Path) {
    let list = match session.store().list_sessions() {
        Ok(l) => l,
        Err(e) => return show(&WARN.paint(&format!("cannot list the sessions: {e}"))),
    };
    const SHOWN: usize = 15;
    show(&DIM.paint(&format!(
        "  {:<20} {:<21} {:>5} {:>6} {:>5}  workspace",
        "id", "last used", "turns", "iters", "defs"
    )));
    for s in list.iter().take(SHOWN) {
        let mark = if s.id == session.id() { "*" } else { " " };
        show(&format!(
            "{mark} {:<20} {:<21} {:>5} {:>6} {:>5}  {}",
            escape_controls(&s.id),
            format_time(s.updated_at),
            s.turns,
            s.iterations,
            s.defs,
            escape_controls(&s.workspace_roots.join(", "))
        ));
    }
    if list.len() > SHOWN {
        show(&DIM.paint(&format!(
            "  … {} more (vis --db {} sessions list shows all)",
            list.len() - SHOWN,
            crate::store::shown_location(db)
        )));
    }
    show(&DIM.paint("  * this session; vis chat --resume ID continues one"));
}

fn expand(session: &ChatSession, args: &str) {
    let rows = match session.store().iterations(session.id()) {
        Ok(r) => r,
        Err(e) => return show(&WARN.paint(&format!("cannot read the blocks: {e}"))),
    };
    if rows.is_empty() {
        show("no blocks yet in this session");
        return;
    }
    let k = if args.is_empty() {
        rows.len()
    } else {
        match args.trim_start_matches('#').parse::<usize>() {
            Ok(k) if (1..=rows.len()).contains(&k) => k,
            _ => {
                show(&WARN.paint(&format!(
                    "usage: /expand [K] with K from 1 to {} (the block's number in the session)",
                    rows.len()
                )));
                return;
            }
        }
    };
    let _ = print_styled(&full_block(k, &rows[k - 1]));
}

/// `/jobs`: the session's background jobs, newest last.
fn jobs(session: &ChatSession) {
    let jobs = session.supervisor().jobs().list();
    if jobs.is_empty() {
        show("no background jobs in this session (a block starts one with sh.background(cmd))");
        return;
    }
    for job in jobs {
        let state = match job.ending_line() {
            None => "running".to_string(),
            Some(line) => line,
        };
        show(&format!(
            "{} {}",
            DIM.paint(&format!("job {:<4}", job.id)),
            escape_controls(&format!("{}  {}", job.command, state))
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_messages() {
        assert_eq!(
            parse("/expand 3 "),
            Parsed::Command {
                name: "/expand",
                args: "3"
            }
        );
        assert_eq!(
            parse("  /help"),
            Parsed::Command {
                name: "/help",
                args: ""
            }
        );
        assert_eq!(
            parse("//etc is"),
            Parsed::Message(Cow::Owned("/etc is".into()))
        );
        assert_eq!(parse("hi /x"), Parsed::Message(Cow::Borrowed("hi /x")));
    }
}
