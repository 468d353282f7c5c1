//! `vis sessions list | show ID | export ID | fork ID --at KEY [--workspace DIR]`.

use crate::protocol::Measurement;
use std::path::Path;

use super::term::{escape_controls, escape_json, out, outln};
use super::{format_time, CliError, SessionsAction};
use crate::protocol::TurnStatus;
use crate::store::{CostTotals, Store};

pub fn run(action: SessionsAction, db: &Path) -> Result<i32, CliError> {
    if !crate::store::location_exists(db) {
        return match action {
            SessionsAction::List => {
                outln!(
                    "no sessions yet ({} does not exist)",
                    crate::store::shown_location(db)
                );
                Ok(0)
            }
            SessionsAction::Show { id }
            | SessionsAction::Export { id }
            | SessionsAction::Fork { id, .. } => Err(CliError::usage(format!(
                "no session '{id}': the database {} does not exist yet",
                crate::store::shown_location(db)
            ))),
        };
    }
    let mut store = Store::open(db)?;
    match action {
        SessionsAction::List => list(&*store),
        SessionsAction::Show { id } => show(&*store, &id),
        SessionsAction::Export { id } => export(&*store, &id),
        SessionsAction::Fork { id, at, workspace } => {
            fork(db, &mut *store, &id, &at, workspace.as_deref())
        }
    }
}

fn list(store: &Store) -> Result<i32, CliError> {
    let sessions = store.list_sessions()?;
    if sessions.is_empty() {
        outln!("no sessions yet");
        return Ok(0);
    }
    outln!(
        "{:<20} {:<21} {:>5} {:>6} {:>5}  workspace",
        "id",
        "last used",
        "turns",
        "iters",
        "defs"
    );
    for s in sessions {
        // A sub-session names its parent (issue 27 §3).
        let parent = s
            .parent_session
            .as_deref()
            .map(|p| format!("  ↳ {p}"))
            .unwrap_or_default();
        outln!(
            "{:<20} {:<21} {:>5} {:>6} {:>5}  {}{parent}",
            s.id,
            format_time(s.updated_at),
            s.turns,
            s.iterations,
            s.defs,
            s.workspace_roots.join(", ")
        );
    }
    Ok(0)
}

/// `text` with `prefix` before each line (escaped first, so a `\r` shows as `\x0d`).
fn indent(text: &str, prefix: &str) -> String {
    escape_controls(text)
        .lines()
        .map(|l| format!("{prefix}{l}\n"))
        .collect()
}

/// The sub-sessions of `id`: one line each (id, where it was spawned, status, tokens, the
/// answer's first line), then their totals, apart from the session's own.
fn show_children(store: &Store, id: &str) -> Result<(), CliError> {
    let children = store.children_of(id)?;
    if children.is_empty() {
        return Ok(());
    }
    outln!("\nsub-sessions:");
    let (mut input, mut output, mut requests) = (0, 0, 0);
    for c in &children {
        input += c.input_tokens;
        output += c.output_tokens;
        requests += c.requests;
        let answer = c
            .answer
            .as_deref()
            .and_then(|a| a.lines().find(|l| !l.trim().is_empty()))
            .map(|l| {
                format!(
                    "  {}",
                    escape_controls(&crate::protocol::clip(l.trim(), 100))
                )
            })
            .unwrap_or_default();
        outln!(
            "  {:<12} t{}/i{}  {}  {} in / {} out tokens{answer}",
            c.link.child,
            c.link.turn,
            c.link.iteration,
            escape_controls(&c.status),
            crate::protocol::group_thousands(c.input_tokens.max(0) as usize),
            crate::protocol::group_thousands(c.output_tokens.max(0) as usize),
        );
    }
    outln!(
        "  children: {} sub-session{}, {} requests, {} input / {} output tokens (not in this session's context)",
        children.len(),
        if children.len() == 1 { "" } else { "s" },
        requests,
        crate::protocol::group_thousands(input.max(0) as usize),
        crate::protocol::group_thousands(output.max(0) as usize),
    );
    Ok(())
}

fn show(store: &Store, id: &str) -> Result<i32, CliError> {
    let session = store.require_session(id)?;
    let counts = store.counts(id)?;
    let defs = store.load_defs(id)?;
    outln!("session {}", session.id);
    outln!("  created   {}", format_time(session.created_at));
    outln!("  last used {}", format_time(session.updated_at));
    outln!("  workspace {}", session.workspace_roots.join(", "));
    if let Some(origin) = store.forked_from(id)? {
        outln!("  forked from {origin}");
    }
    if let Some(me) = store.child(id)? {
        outln!(
            "  sub-session of {} (t{}/i{}), {}",
            me.link.parent,
            me.link.turn,
            me.link.iteration,
            escape_controls(&me.status)
        );
        out!("{}", indent(&me.link.task, "  task: "));
    }
    outln!(
        "  {} turns, {} iterations, {} definitions",
        counts.turns,
        counts.iterations,
        defs.len()
    );
    if let Some(limit) = store.input_limit(id)? {
        outln!(
            "  context   input limit {} tokens ({})",
            crate::protocol::group_thousands(limit.tokens.max(0) as usize),
            limit.source
        );
    }
    let iterations = store.iterations(id)?;
    for turn in store.turns(id)? {
        let state = if turn.status == TurnStatus::Done {
            String::new()
        } else {
            format!(" [{}]", turn.status)
        };
        outln!("\nturn {} ({}){state}", turn.turn, turn.kind);
        if let Some(text) = &turn.user_text {
            out!("{}", indent(text, "  user: "));
        }
        for it in iterations.iter().filter(|i| i.turn == turn.turn) {
            let exec_ms = it.exec_us as f64 / 1000.0;
            outln!(
                "  t{}/i{}  {}  {} ms wall, {exec_ms:.1} ms in the worker",
                it.turn,
                it.iteration,
                it.status,
                it.duration_ms
            );
            out!("{}", indent(&it.code, "    > "));
            out!("{}", indent(&it.output, "    | "));
            if let Some(a) = &it.artifact {
                outln!("    full output: {a}");
            }
            if let Some(exit) = &it.worker_exit {
                outln!("    worker {exit}");
            }
        }
    }
    show_children(store, id)?;
    let requests = store.requests(id)?;
    if !requests.is_empty() {
        outln!("\nmodel requests:");
        outln!(
            "  {:>4} {:>4}  {:<28} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>8} {:>8}  {:<10} status",
            "#",
            "turn",
            "provider/model",
            "input",
            "cached",
            "c.write",
            "weighted",
            "expected",
            "output",
            "retries",
            "estimate",
            "latency",
            "ttft",
            "finish"
        );
        for r in &requests {
            let n = |v: Option<i64>| v.map_or_else(|| "n/a".to_string(), |v| v.to_string());
            let status = match (&r.error_kind, &r.error) {
                (Some(kind), Some(e)) => format!("{kind}: {e}"),
                _ => "ok".into(),
            };
            outln!(
                "  {:>4} {:>4}  {:<28} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>9} {:>6}ms {:>8}  {:<10} {status}",
                r.seq,
                r.turn,
                crate::protocol::clip(&format!("{}/{}", r.provider, r.model), 28),
                n(r.input_tokens),
                n(r.cached_tokens),
                n(r.cache_write_tokens),
                r.weighted_tokens
                    .map_or_else(|| "n/a".to_string(), |w| format!("{w:.0}")),
                n(r.expected_cached_tokens),
                n(r.output_tokens),
                r.retries,
                r.estimate_tokens,
                r.latency_ms,
                r.ttft_ms.map_or_else(|| "n/a".into(), |t| format!("{t}ms")),
                crate::protocol::clip(r.finish_reason.as_deref().unwrap_or("-"), 10),
            );
            if r.cache_miss == Some(true) {
                outln!(
                    "        CACHE MISS: {} cached of ~{} expected (the prefix changed where it should not have)",
                    n(r.cached_tokens),
                    n(r.expected_cached_tokens)
                );
            }
            if let Some(m) = &r.fold_measurement {
                outln!("        fold measurement: {m}");
            }
        }
        outln!("  (n/a: the provider did not report it, or an answer that came whole has no time to first token; c.write: tokens written to the cache; weighted: the input in uncached-token units at the cache prices; expected: cached tokens expected from the prefix shared with the previous request; finish: why the answer ended, - for none)");
        outln!("  cost: {}", CostTotals::of(&requests).describe());
    }
    let folds = store.folds(id)?;
    if !folds.is_empty() {
        outln!("\nfolds:");
        for f in &folds {
            let labels: Vec<&str> = f.spans.iter().map(|s| s.label.as_str()).collect();
            let state = match &f.measurement {
                Measurement::Measured {
                    before_input_tokens,
                    after_input_tokens,
                    net_reduction_tokens,
                    ..
                } => format!(
                    "measured: {before_input_tokens} → {after_input_tokens} input tokens (net {net_reduction_tokens})"
                ),
                Measurement::Unavailable { reason, .. } => format!("unavailable: {reason}"),
                Measurement::Pending { .. } => "pending".into(),
            };
            outln!(
                "  fold {} (t{}{}) {}{}{}  — {state}",
                f.id,
                f.turn,
                f.iteration.map(|i| format!("/i{i}")).unwrap_or_default(),
                labels.join(", "),
                if f.automatic { " [automatic]" } else { "" },
                f.absorbed_by
                    .map(|a| format!(" [absorbed by fold {a}]"))
                    .unwrap_or_default(),
            );
            out!("{}", indent(&f.gist, "      gist: "));
        }
    }
    if !defs.is_empty() {
        outln!("\ndefinitions:");
        for d in defs {
            let doc = if d.doc.is_empty() {
                String::new()
            } else {
                format!("  — {}", d.doc)
            };
            outln!("  {}{doc}", d.signature.trim());
        }
    }
    Ok(0)
}

fn export(store: &Store, id: &str) -> Result<i32, CliError> {
    let session = store.require_session(id)?;
    let value = serde_json::json!({
        "session": session,
        "turns": store.turns(id)?,
        "iterations": store.iterations(id)?,
        "defs": store.load_defs(id)?,
        "history": store.history(id)?,
        "requests": store.requests(id)?,
        "folds": store.folds(id)?,
    });
    let text = serde_json::to_string_pretty(&value).map_err(|e| CliError::usage(e.to_string()))?;
    // Valid JSON with the same value, and safe on a terminal.
    outln!("{}", escape_json(&text));
    Ok(0)
}

/// `vis sessions fork ID --at tN [--workspace DIR]`: everything is checked before anything is
/// made; the records are copied in one transaction, and a workspace copy made for a fork that
/// then fails is removed.
fn fork(
    db: &Path,
    store: &mut Store,
    id: &str,
    at: &str,
    workspace: Option<&Path>,
) -> Result<i32, CliError> {
    use crate::checkpoints::Point;
    let session = store.require_session(id)?;
    let through = match crate::checkpoints::parse_point(at) {
        Ok(Point::BeforeTurn(turn)) => turn,
        Ok(Point::Start) => {
            return Err(CliError::usage(format!(
                "--at {at}: a fork keeps at least one turn; give one such as t1"
            )))
        }
        Err(e) => return Err(CliError::usage(format!("--at: {e}"))),
    };
    let turns = store.turns(id)?;
    let Some(turn) = turns.iter().find(|t| t.turn == through) else {
        let last = turns.last().map_or(0, |t| t.turn);
        return Err(CliError::usage(if last == 0 {
            format!("session {id} has no turns yet: there is nothing to fork")
        } else {
            format!("session {id} has no turn {through} (its turns are t1 to t{last}); fork at one of those")
        }));
    };
    if turn.status == TurnStatus::Running {
        return Err(CliError::usage(format!(
            "turn {through} of session {id} is still running (or its process stopped and the session was not opened since); fork when it has ended, or at an earlier turn"
        )));
    }
    let new_id = crate::session::new_session_id();
    let (roots, made) = match workspace {
        Some(dir) => {
            let original = session
                .workspace_roots
                .first()
                .map(Path::new)
                .ok_or_else(|| {
                    CliError::usage(format!("session {id} has no workspace recorded to copy"))
                })?;
            let scratch = super::replay::ScratchDir::chosen(dir, original)?;
            let dest = scratch.path();
            let notes = super::replay::workspace_at(
                db,
                id,
                original,
                Point::BeforeTurn(through + 1),
                &dest,
            )?;
            for note in notes {
                super::term::errln!("vis sessions fork: {note}");
            }
            (vec![dest.to_string_lossy().into_owned()], Some(dest))
        }
        None => (session.workspace_roots.clone(), None),
    };
    // The checkpoints through turn N come along, so diff and rewind on the fork reach back
    // before the fork point.
    let undo = |made: Option<std::path::PathBuf>| {
        let _ = std::fs::remove_dir_all(crate::checkpoints::session_dir(db, &new_id));
        if let Some(dest) = made {
            let _ = std::fs::remove_dir_all(dest);
        }
    };
    let history = crate::checkpoints::fork_history(db, id, &new_id, through, &roots);
    let history = match history {
        Ok(history) => history,
        Err(e) => {
            undo(made);
            return Err(CliError {
                code: 1,
                message: format!("vis sessions fork: cannot copy the checkpoints of {id}: {e}; nothing was created"),
            });
        }
    };
    let copied = store.fork_session(&crate::store::ForkRequest {
        source: id,
        through,
        new_id: &new_id,
        roots: &roots,
    });
    let copied = match copied {
        Ok(copied) => copied,
        Err(e) => {
            undo(made);
            return Err(e.into());
        }
    };
    outln!(
        "forked session {id} at t{through} into {new_id}: {} turns, {} iterations, {} folds, {} definitions",
        copied.turns,
        copied.iterations,
        copied.folds,
        copied.defs
    );
    outln!("  workspace {}", roots.join(", "));
    if let Some(history) = history {
        outln!(
            "  checkpoints through t{through}: {} (diff and rewind on the fork reach back to the start)",
            history.checkpoints
        );
    }
    outln!("  continue it with: vis chat --resume {new_id}  (or vis exec --session {new_id} CODE)");
    Ok(0)
}
