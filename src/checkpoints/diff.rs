//! `vis diff`: what a session, a turn or an iteration changed, as a unified diff. Binary
//! files (a NUL byte, or not UTF-8) are named with their sizes, never dumped; content that
//! was not kept is named with the reason. The text is the files' own: the caller escapes it
//! before it reaches a terminal.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::blobs::Blobs;
use super::log::{Checkpoint, FileState, Log, Origin};
use super::{CheckpointError, Span};

/// How [`render_diff`] shows paths.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiffOptions {
    /// Lines of context around each change.
    pub context: usize,
}

/// The diff of `span` of session `session_id` (empty when nothing changed).
pub fn render_diff(
    db: &Path,
    session_id: &str,
    span: Span,
    options: DiffOptions,
) -> Result<String, CheckpointError> {
    let dir = super::session_dir(db, session_id);
    let log = Log::load(&dir)?.ok_or_else(|| CheckpointError::NoCheckpoints(session_id.into()))?;
    let blobs = Blobs::new(&dir);
    let roots = log.roots().to_vec();
    let chosen: Vec<&Checkpoint> = log
        .since(super::Point::Start)
        .into_iter()
        .filter(|c| in_span(c, span))
        .collect();
    // Per path: the state before its first change in the span, and after its last.
    let mut paths: BTreeMap<&str, Composed<'_>> = BTreeMap::new();
    for checkpoint in &chosen {
        for change in &checkpoint.changes {
            let slot =
                paths
                    .entry(change.path.as_str())
                    .or_insert((change.before.as_ref(), None, None));
            slot.1 = change.after.as_ref();
            if change.note.is_some() {
                slot.2 = change.note.as_deref();
            }
        }
    }
    let mut out = String::new();
    for (path, (before, after, note)) in paths {
        if before == after {
            continue;
        }
        let shown = display_path(path, &roots);
        file_diff(&mut out, &blobs, &shown, before, after, note, options);
    }
    Ok(out)
}

/// A path's state before its first change in the span, after its last, and a note.
type Composed<'a> = (
    Option<&'a FileState>,
    Option<&'a FileState>,
    Option<&'a str>,
);

fn in_span(checkpoint: &Checkpoint, span: Span) -> bool {
    let made_by_blocks = matches!(checkpoint.origin, Origin::Block | Origin::Interrupted);
    match span {
        Span::Session => checkpoint.origin != Origin::Outside,
        Span::Turn(t) => made_by_blocks && checkpoint.turn == t,
        Span::Iteration(t, i) => {
            made_by_blocks && checkpoint.turn == t && checkpoint.iteration == i
        }
    }
}

/// The path relative to its root when there is one root, else as it is.
pub(super) fn display_path(path: &str, roots: &[String]) -> String {
    if roots.len() == 1 {
        if let Ok(rel) = Path::new(path).strip_prefix(&roots[0]) {
            return rel.to_string_lossy().into_owned();
        }
    }
    path.to_string()
}

enum Body {
    Absent,
    Text(String),
    Binary(u64),
    Link(String),
    NotKept(u64),
}

fn body_of(blobs: &Blobs, state: Option<&FileState>) -> Body {
    match state {
        None => Body::Absent,
        Some(FileState::Symlink { target }) => Body::Link(target.clone()),
        Some(FileState::File {
            hash: Some(hash),
            size,
            ..
        }) => match blobs.read(hash) {
            Ok(bytes) if !bytes.contains(&0) => match String::from_utf8(bytes) {
                Ok(text) => Body::Text(text),
                Err(_) => Body::Binary(*size),
            },
            Ok(_) => Body::Binary(*size),
            Err(_) => Body::NotKept(*size),
        },
        Some(FileState::File { size, .. }) => Body::NotKept(*size),
    }
}

fn mode_of(state: Option<&FileState>) -> Option<u32> {
    match state {
        Some(FileState::File { mode, .. }) => Some(*mode),
        _ => None,
    }
}

fn file_diff(
    out: &mut String,
    blobs: &Blobs,
    path: &str,
    before: Option<&FileState>,
    after: Option<&FileState>,
    note: Option<&str>,
    options: DiffOptions,
) {
    let _ = writeln!(out, "diff --vis a/{path} b/{path}");
    match (before, after) {
        (None, Some(FileState::File { mode, .. })) => {
            let _ = writeln!(out, "new file mode {:o}", 0o100000 | mode);
        }
        (Some(FileState::File { mode, .. }), None) => {
            let _ = writeln!(out, "deleted file mode {:o}", 0o100000 | mode);
        }
        _ => {
            if let (Some(old), Some(new)) = (mode_of(before), mode_of(after)) {
                if old != new {
                    let _ = writeln!(out, "old mode {:o}", 0o100000 | old);
                    let _ = writeln!(out, "new mode {:o}", 0o100000 | new);
                }
            }
        }
    }
    let (old, new) = (body_of(blobs, before), body_of(blobs, after));
    let old_name = if before.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".into()
    };
    let new_name = if after.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".into()
    };
    match (&old, &new) {
        (Body::Text(_) | Body::Absent, Body::Text(_) | Body::Absent) => {
            let text = |b: &Body| match b {
                Body::Text(t) => t.clone(),
                _ => String::new(),
            };
            let (a, b) = (text(&old), text(&new));
            if a != b {
                let diff = similar::TextDiff::from_lines(&a, &b);
                let rendered = diff
                    .unified_diff()
                    .context_radius(options.context)
                    .header(&old_name, &new_name)
                    .to_string();
                out.push_str(&rendered);
                if !rendered.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
        _ => {
            let _ = writeln!(out, "{}", describe_change(path, &old, &new, note));
        }
    }
}

fn describe(body: &Body) -> String {
    match body {
        Body::Absent => "absent".into(),
        Body::Text(t) => format!("text, {} bytes", t.len()),
        Body::Binary(n) => format!("binary, {n} bytes"),
        Body::Link(target) => format!("symlink to {target}"),
        Body::NotKept(n) => format!("{n} bytes, content not kept"),
    }
}

fn describe_change(path: &str, old: &Body, new: &Body, note: Option<&str>) -> String {
    let kind = if matches!(old, Body::Binary(_)) || matches!(new, Body::Binary(_)) {
        "Binary file"
    } else {
        "File"
    };
    let mut line = format!(
        "{kind} {path} changed ({} → {})",
        describe(old),
        describe(new)
    );
    if let Some(note) = note {
        line.push_str(&format!("; {note}"));
    }
    line
}
