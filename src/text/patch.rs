//! `patch`: apply a batch of address-based edits to one file, all or nothing.
//!
//! Steps, under the directory lock (see [`crate::text::atomic`]):
//! 1. resolve the path as the OS does and confine it ([`crate::text::confine`]), keeping the
//!    directory's descriptor; open the file through it without following symlinks; refuse
//!    directories, binary files and read-only files (mode bits, whoever runs it — root too)
//!    unless `force`;
//! 2. validate every edit against that pre-batch text: addresses well-formed, in range, hashes
//!    current, ranges ordered, no two edits touching the same lines or the same insertion
//!    point, no bare `\r` in new text. Every problem is collected so the model can fix them
//!    all in one retry;
//! 3. apply all edits in one pass over the original lines (untouched lines are copied
//!    byte-for-byte, new lines get the file's dominant ending, BOM and final-newline state are
//!    kept);
//! 4. run the syntax gate, which rejects only new errors in or next to the edited lines;
//! 5. write atomically — unless the file changed since it was read, which rejects the batch —
//!    and show the changed region with fresh addresses.
//!
//! An edit is never moved to where its hash appears now: a stale address is an error, because
//! silently relocating an edit is how automated edits corrupt files.

use std::fmt::{self, Write as _};
use std::path::Path;

use crate::text::address::{Address, LineHash};
use crate::text::atomic::{Faults, Hook, Identity, LockedFile, OpenError, WriteError};
use crate::text::confine::{Access, Kind, Workspace};
use crate::text::lines::{display_text, find_nul, Document, Ending, BOM, DEFAULT_MAX_LINE_CHARS};
use crate::text::syntax::{gate_changes, Change, Verdict};
use crate::text::{Result, TextError};

/// One edit. Addresses are kept as the strings the caller gave so that malformed ones can be
/// reported together with every other problem in the batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Replace the inclusive range `first..=last` with `text` (empty text deletes).
    Replace {
        first: String,
        last: String,
        text: String,
    },
    InsertBefore {
        at: String,
        text: String,
    },
    InsertAfter {
        at: String,
        text: String,
    },
    InsertAtStart {
        text: String,
    },
    InsertAtEnd {
        text: String,
    },
}

impl Edit {
    /// Replace one line.
    pub fn replace(at: impl Into<String>, text: impl Into<String>) -> Edit {
        let at = at.into();
        Edit::Replace {
            first: at.clone(),
            last: at,
            text: text.into(),
        }
    }

    /// Replace an inclusive range of lines.
    pub fn replace_range(
        first: impl Into<String>,
        last: impl Into<String>,
        text: impl Into<String>,
    ) -> Edit {
        Edit::Replace {
            first: first.into(),
            last: last.into(),
            text: text.into(),
        }
    }

    /// Delete an inclusive range of lines.
    pub fn delete(first: impl Into<String>, last: impl Into<String>) -> Edit {
        Edit::replace_range(first, last, "")
    }

    pub fn insert_before(at: impl Into<String>, text: impl Into<String>) -> Edit {
        Edit::InsertBefore {
            at: at.into(),
            text: text.into(),
        }
    }

    pub fn insert_after(at: impl Into<String>, text: impl Into<String>) -> Edit {
        Edit::InsertAfter {
            at: at.into(),
            text: text.into(),
        }
    }

    pub fn insert_at_start(text: impl Into<String>) -> Edit {
        Edit::InsertAtStart { text: text.into() }
    }

    pub fn insert_at_end(text: impl Into<String>) -> Edit {
        Edit::InsertAtEnd { text: text.into() }
    }

    fn text(&self) -> &str {
        match self {
            Edit::Replace { text, .. }
            | Edit::InsertBefore { text, .. }
            | Edit::InsertAfter { text, .. }
            | Edit::InsertAtStart { text }
            | Edit::InsertAtEnd { text } => text,
        }
    }

    /// How the edit reads in messages.
    fn describe(&self) -> String {
        match self {
            Edit::Replace { first, last, .. } if first == last => format!("replace {first}"),
            Edit::Replace { first, last, .. } => format!("replace {first}..{last}"),
            Edit::InsertBefore { at, .. } => format!("insert before {at}"),
            Edit::InsertAfter { at, .. } => format!("insert after {at}"),
            Edit::InsertAtStart { .. } => "insert at start".to_string(),
            Edit::InsertAtEnd { .. } => "insert at end".to_string(),
        }
    }
}

/// Knobs for `patch`; the defaults are what the model gets.
#[derive(Clone, Debug)]
pub struct PatchOptions {
    /// Run the syntax gate (default true).
    pub check_syntax: bool,
    /// Edit a read-only file (no write bit for the caller) anyway; its mode is kept.
    pub force: bool,
    /// Fault injection: fail after the temp file is written, before the rename.
    pub fail_before_rename: bool,
    /// Testing hook: runs after the new version is written to the temp file, just before the
    /// checks that precede the commit — where a concurrent writer or a symlink swap would
    /// strike.
    pub before_commit: Option<Hook>,
    pub max_line_chars: usize,
}

impl Default for PatchOptions {
    fn default() -> Self {
        PatchOptions {
            check_syntax: true,
            force: false,
            fail_before_rename: false,
            before_commit: None,
            max_line_chars: DEFAULT_MAX_LINE_CHARS,
        }
    }
}

/// What a successful patch did.
#[derive(Clone, Debug)]
pub struct PatchOutput {
    pub path: String,
    pub lines_removed: usize,
    pub lines_added: usize,
    pub lines_before: usize,
    pub lines_after: usize,
    /// False when the edits produced the bytes already on disk (nothing was written).
    pub changed: bool,
    /// The syntax gate's verdict on the new text.
    pub syntax: Verdict,
    /// The edited regions in the new file, each as 1-based inclusive line ranges, merged.
    pub regions: Vec<(usize, usize)>,
    rendered_region: String,
}

/// An edit turned into a splice of the original lines: remove `[from, to)` (0-based) and put
/// `lines` there.
struct Splice<'a> {
    from: usize,
    to: usize,
    lines: Vec<&'a str>,
    edit_index: usize,
}

/// Apply `edits` to the file at `path`, all or nothing.
pub fn patch(
    workspace: &Workspace,
    path: &Path,
    edits: &[Edit],
    options: &PatchOptions,
) -> Result<PatchOutput> {
    let located = workspace.locate(path, Access::Write)?;
    let display = located.resolved.display.clone();
    let real = located.resolved.real.clone();
    if edits.is_empty() {
        return Err(TextError::InvalidArgument(
            "patch got no edits; pass a list like [(\"12:kodu\", \"new text\")]".into(),
        ));
    }
    match located.resolved.kind {
        Kind::Directory => return Err(is_directory(&display)),
        Kind::Other => return Err(TextError::NotAFile { path: display }),
        Kind::File => {}
    }
    let mut file = LockedFile::open(&located).map_err(|err| match err {
        OpenError::Io(source) => TextError::Io {
            path: display.clone(),
            source,
        },
        OpenError::NotAFile(Kind::Directory) => is_directory(&display),
        OpenError::NotAFile(_) => TextError::NotAFile {
            path: display.clone(),
        },
        OpenError::Swapped => TextError::Changed {
            path: display.clone(),
            reason: "a symlink replaced it after its path was checked",
        },
    })?;
    if !options.force {
        if let Some(reason) = write_refusal(&file.identity()) {
            return Err(TextError::NotWritable {
                path: display,
                reason,
            });
        }
    }
    let original = file.read_all().map_err(|source| TextError::Io {
        path: display.clone(),
        source,
    })?;
    if let Some(offset) = find_nul(&original) {
        return Err(TextError::Binary {
            path: display,
            offset,
        });
    }
    let document = Document::parse(original);

    let splices = validate(&document, edits, &display, options.max_line_chars)?;
    let (new_bytes, new_ranges) = apply(&document, &splices);

    let syntax = if options.check_syntax {
        let changes: Vec<Change> = splices
            .iter()
            .zip(&new_ranges)
            .map(|(splice, &new)| Change {
                old: (splice.from, splice.to),
                new,
            })
            .collect();
        gate_changes(&real, document.bytes(), &new_bytes, &changes)
    } else {
        Verdict::Unchecked
    };
    if let Verdict::Worse { .. } = &syntax {
        return Err(TextError::Syntax {
            path: display.clone(),
            report: syntax_report(
                &display,
                &syntax,
                &new_bytes,
                &new_ranges,
                options.max_line_chars,
            ),
        });
    }

    let changed = new_bytes != document.bytes();
    if changed {
        let faults = Faults {
            fail_before_rename: options.fail_before_rename,
            before_commit: options.before_commit.clone(),
        };
        file.replace(document.bytes(), &new_bytes, &faults)
            .map_err(|err| write_error(err, &display))?;
    }
    drop(file);

    let lines_removed = splices.iter().map(|s| s.to - s.from).sum();
    let lines_added = splices.iter().map(|s| s.lines.len()).sum();
    let lines_before = document.len();
    let new_document = Document::parse(new_bytes);
    let regions = merge_regions(&new_ranges, new_document.len());
    let rendered_region = render_regions(&new_document, &regions, options.max_line_chars);
    Ok(PatchOutput {
        path: display,
        lines_removed,
        lines_added,
        lines_before,
        lines_after: new_document.len(),
        changed,
        syntax,
        regions,
        rendered_region,
    })
}

/// Validate and apply `edits` to `original` in memory, without touching any file or running
/// the syntax gate: the same checks and the same bytes `patch` would write. `display` names
/// the file in error reports.
pub fn apply_edits(original: &[u8], edits: &[Edit], display: &str) -> Result<Vec<u8>> {
    if edits.is_empty() {
        return Err(TextError::InvalidArgument(
            "patch got no edits; pass a list like [(\"12:kodu\", \"new text\")]".into(),
        ));
    }
    let document = Document::parse(original.to_vec());
    let splices = validate(&document, edits, display, DEFAULT_MAX_LINE_CHARS)?;
    Ok(apply(&document, &splices).0)
}

fn is_directory(display: &str) -> TextError {
    TextError::IsDirectory {
        path: display.to_string(),
        hint: "patch edits one file — give the path of a file",
    }
}

fn write_error(err: WriteError, display: &str) -> TextError {
    let path = display.to_string();
    match err {
        WriteError::Injected => TextError::Injected { path },
        WriteError::Io(source) => TextError::Io { path, source },
        WriteError::Changed(reason) => TextError::Changed { path, reason },
        WriteError::Escaped => TextError::Changed {
            path,
            reason: "its directory was moved out of the workspace",
        },
        WriteError::ModeNotKept { mode, uid, gid } => TextError::ModeNotKept {
            path,
            mode: mode & 0o7777,
            uid,
            gid,
            euid: rustix::process::geteuid().as_raw(),
        },
    }
}

/// Why the caller may not write a file with this mode, judged by the mode bits alone so the
/// answer is the same for root: no write bit at all means read-only; otherwise the bit of the
/// caller's class (owner, group, other) decides, except for root, who may write any file that
/// has a write bit.
fn write_refusal(identity: &Identity) -> Option<String> {
    let mode = identity.mode & 0o7777;
    if mode & 0o222 == 0 {
        return Some(format!(
            "read-only (mode {mode:04o}: nobody has write permission)"
        ));
    }
    let euid = rustix::process::geteuid().as_raw();
    if euid == 0 {
        return None;
    }
    let in_group = rustix::process::getegid().as_raw() == identity.gid
        || rustix::process::getgroups()
            .map(|groups| groups.iter().any(|g| g.as_raw() == identity.gid))
            .unwrap_or(false);
    let (bit, class) = if euid == identity.uid {
        (0o200, "its owner")
    } else if in_group {
        (0o020, "its group")
    } else {
        (0o002, "others")
    };
    (mode & bit == 0).then(|| {
        format!(
            "not writable by you (mode {mode:04o}, owner uid {}, gid {}: no write permission for \
             {class}, and you are uid {euid})",
            identity.uid, identity.gid
        )
    })
}

/// Where `text` has a carriage return that does not end a line (`\r` not followed by `\n`):
/// the 1-based line of the text it is on.
fn bare_cr(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let at = memchr::memchr_iter(b'\r', bytes).find(|&i| bytes.get(i + 1) != Some(&b'\n'))?;
    Some(memchr::memchr_iter(b'\n', &bytes[..at]).count() + 1)
}

/// Split replacement text into lines: `""` is no lines, one trailing `\n` is optional, and a
/// `\r` before `\n` is dropped (the file's own ending is used).
fn split_text(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// A problem with one edit, with the current lines around it when that helps.
struct Problem {
    message: String,
    show: Option<(usize, usize)>,
}

/// Check every edit against `document`; on success, the splices sorted by position.
fn validate<'a>(
    document: &Document,
    edits: &'a [Edit],
    display: &str,
    max_chars: usize,
) -> Result<Vec<Splice<'a>>> {
    let total = document.len();
    let mut problems: Vec<Problem> = Vec::new();
    let mut splices: Vec<Splice<'a>> = Vec::new();

    // Parse and check one address; records a problem and returns None if it is bad.
    let check =
        |index: usize, spec: &str, problems: &mut Vec<Problem>| -> Option<Address> {
            let address = match spec.parse::<Address>() {
                Ok(address) => address,
                Err(err) => {
                    problems.push(Problem {
                        message: format!("edits[{index}]: {err}"),
                        show: None,
                    });
                    return None;
                }
            };
            if address.line > total {
                let lines = if total == 1 { "line" } else { "lines" };
                problems.push(Problem {
                    message: format!(
                    "edits[{index}]: {address} is past the end: {display} has {total} {lines}{}",
                    if total > 0 { "; its last lines are" } else { "" }
                ),
                    show: (total > 0).then(|| (total.saturating_sub(3), total)),
                });
                return None;
            }
            let current = document.hash(address.line - 1);
            if current != address.hash {
                problems.push(Problem {
                    message: format!(
                        "edits[{index}]: {address} is stale: line {} is now {}:{current}; current \
                     lines there",
                        address.line, address.line
                    ),
                    show: Some((
                        address.line.saturating_sub(3),
                        (address.line + 2).min(total),
                    )),
                });
                return None;
            }
            Some(address)
        };

    for (index, edit) in edits.iter().enumerate() {
        if let Some(line) = bare_cr(edit.text()) {
            // Written as is it would be a line break to some tools and not to others (and
            // the line model keeps it inside the line), so it is refused, not guessed at.
            problems.push(Problem {
                message: format!(
                    "edits[{index}]: the new text has a bare carriage return (\\r not followed \
                     by \\n) on its line {line}; patch gives new lines the file's own ending, so \
                     remove the \\r (separate lines with \\n only)"
                ),
                show: None,
            });
        }
        let lines = split_text(edit.text());
        if let Some(prefix) = lines.iter().find_map(|l| address_prefix(l)) {
            problems.push(Problem {
                message: format!(
                    "edits[{index}]: the new text starts a line with an address ({prefix:?}); \
                     pass only the content, without LINE:HASH|"
                ),
                show: None,
            });
        }
        let splice = |from, to, lines| Splice {
            from,
            to,
            lines,
            edit_index: index,
        };
        match edit {
            Edit::Replace { first, last, .. } => {
                let a = check(index, first, &mut problems);
                let b = if last == first {
                    a
                } else {
                    check(index, last, &mut problems)
                };
                if let (Some(a), Some(b)) = (a, b) {
                    if a.line > b.line {
                        problems.push(Problem {
                            message: format!(
                                "edits[{index}]: reversed range {a}..{b}: the first address must \
                                 not come after the last"
                            ),
                            show: None,
                        });
                    } else {
                        splices.push(splice(a.line - 1, b.line, lines));
                    }
                }
            }
            Edit::InsertBefore { at, .. } => {
                if let Some(a) = check(index, at, &mut problems) {
                    splices.push(splice(a.line - 1, a.line - 1, lines));
                }
            }
            Edit::InsertAfter { at, .. } => {
                if let Some(a) = check(index, at, &mut problems) {
                    splices.push(splice(a.line, a.line, lines));
                }
            }
            Edit::InsertAtStart { .. } => splices.push(splice(0, 0, lines)),
            Edit::InsertAtEnd { .. } => splices.push(splice(total, total, lines)),
        }
    }

    // Conflicts are only meaningful between edits whose addresses are all valid.
    splices.sort_by_key(|s| (s.from, s.to, s.edit_index));
    for pair in splices.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let overlap = a.to > b.from;
        let same_point = a.from == a.to && b.from == b.to && a.from == b.from;
        if overlap || same_point {
            let what = if same_point {
                "insert at the same place; combine their text into one insert"
            } else {
                "overlap; every line may be touched by one edit only — merge them into one edit"
            };
            problems.push(Problem {
                message: format!(
                    "edits[{}] ({}) and edits[{}] ({}) {what}",
                    a.edit_index,
                    edits[a.edit_index].describe(),
                    b.edit_index,
                    edits[b.edit_index].describe(),
                ),
                show: None,
            });
        }
    }

    if problems.is_empty() {
        return Ok(splices);
    }
    let mut report = format!(
        "patch rejected, nothing changed in {display}: {} problem{}\n",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in &problems {
        report.push_str("- ");
        report.push_str(&problem.message);
        if let Some((from, to)) = problem.show {
            report.push_str(":\n");
            document.render_range(from, to, max_chars, &mut report);
        } else {
            report.push('\n');
        }
    }
    report.push_str("All addresses refer to the file before the batch; fix the listed edits and send the whole batch again.");
    Err(TextError::Address {
        path: display.to_string(),
        report,
    })
}

/// `"12:kodu|x"` → `Some("12:kodu|")`: a line that begins with an address as printed by cat.
fn address_prefix(line: &str) -> Option<&str> {
    let bar = line.find('|')?;
    let (addr, _) = line.split_at(bar);
    let (number, hash) = addr.split_once(':')?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    LineHash::parse(hash)?;
    Some(&line[..=bar])
}

/// Build the new file. Returns the bytes and, per splice, the 0-based range of its new lines.
fn apply<'a>(document: &'a Document, splices: &'a [Splice<'a>]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let dominant = document.dominant_ending();
    let added: usize = splices
        .iter()
        .flat_map(|s| s.lines.iter())
        .map(|l| l.len() + 2)
        .sum();
    let mut rows: Vec<(&'a [u8], Ending)> = Vec::with_capacity(document.len() + splices.len());
    let mut new_ranges = Vec::with_capacity(splices.len());
    let mut cursor = 0;
    let push_original = |rows: &mut Vec<(&'a [u8], Ending)>, from: usize, to: usize| {
        for index in from..to {
            rows.push((document.content(index), document.ending(index)));
        }
    };
    for splice in splices {
        push_original(&mut rows, cursor, splice.from);
        let start = rows.len();
        for line in &splice.lines {
            rows.push((line.as_bytes(), dominant));
        }
        new_ranges.push((start, rows.len()));
        cursor = splice.to;
    }
    push_original(&mut rows, cursor, document.len());

    // Only the last line may lack an ending, and it does exactly when it did before.
    let last = rows.len().saturating_sub(1);
    let final_newline = document.final_newline();
    let mut out = Vec::with_capacity(document.bytes().len() + added + BOM.len());
    if document.has_bom() {
        out.extend_from_slice(BOM);
    }
    for (i, (content, ending)) in rows.iter().enumerate() {
        out.extend_from_slice(content);
        let ending = match (i == last, final_newline) {
            (true, false) => Ending::None,
            (_, _) if *ending == Ending::None => dominant,
            _ => *ending,
        };
        out.extend_from_slice(ending.as_bytes());
    }
    (out, new_ranges)
}

/// Windows of one line of context around each changed range, merged, as 1-based inclusive
/// ranges in the new file.
fn merge_regions(new_ranges: &[(usize, usize)], total: usize) -> Vec<(usize, usize)> {
    let mut regions: Vec<(usize, usize)> = Vec::new();
    for &(from, to) in new_ranges {
        let lo = from.saturating_sub(1);
        let hi = (to + 1).min(total);
        if lo >= hi {
            continue;
        }
        match regions.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => regions.push((lo, hi)),
        }
    }
    regions.into_iter().map(|(lo, hi)| (lo + 1, hi)).collect()
}

/// Long regions show their head and tail only; the model can cat the middle.
const REGION_HEAD: usize = 12;
const REGION_TAIL: usize = 8;

fn render_regions(document: &Document, regions: &[(usize, usize)], max_chars: usize) -> String {
    let mut out = String::new();
    for (i, &(first, last)) in regions.iter().enumerate() {
        if i > 0 {
            out.push_str("--\n");
        }
        let (from, to) = (first - 1, last);
        if to - from > REGION_HEAD + REGION_TAIL + 1 {
            document.render_range(from, from + REGION_HEAD, max_chars, &mut out);
            let hidden = to - from - REGION_HEAD - REGION_TAIL;
            let _ = writeln!(
                out,
                "[… {hidden} more lines; cat(path, {}, {}) shows them]",
                from + REGION_HEAD + 1,
                to - REGION_TAIL
            );
            document.render_range(to - REGION_TAIL, to, max_chars, &mut out);
        } else {
            document.render_range(from, to, max_chars, &mut out);
        }
    }
    out
}

/// The message for an edit that breaks the syntax: the error and the would-be lines.
fn syntax_report(
    display: &str,
    verdict: &Verdict,
    new_bytes: &[u8],
    new_ranges: &[(usize, usize)],
    max_chars: usize,
) -> String {
    let Verdict::Worse {
        language,
        before,
        after,
        error,
    } = verdict
    else {
        return format!("patch rejected, nothing changed in {display}: syntax check failed");
    };
    let mut report = format!(
        "patch rejected, nothing changed in {display}: the edit introduces a {} syntax error",
        language.name()
    );
    if *before > 0 {
        let _ = write!(
            report,
            " in or next to the edited lines (the file had {before} error(s) before, {} after; \
             errors elsewhere are not held against the edit)",
            after.count
        );
    } else if after.count > 1 {
        let _ = write!(
            report,
            " ({} error(s) after the edit, none before)",
            after.count
        );
    }
    report.push('\n');
    let error_line = error.rows.map(|(row, _)| row + 1);
    report.push_str(&error.message);
    report.push('\n');
    let new_document = Document::parse(new_bytes.to_vec());
    let total = new_document.len();
    let (from, to) = match error_line {
        Some(line) if line >= 1 => (line.saturating_sub(3), (line + 2).min(total)),
        _ => new_ranges
            .first()
            .map(|&(a, b)| (a.saturating_sub(1), (b + 1).min(total)))
            .unwrap_or((0, total.min(5))),
    };
    if from < to {
        let _ = writeln!(report, "would-be lines {}-{} (not written):", from + 1, to);
        for index in from..to {
            let marker = if Some(index + 1) == error_line {
                ">"
            } else {
                " "
            };
            let _ = writeln!(
                report,
                "{marker}{}|{}",
                index + 1,
                display_text(new_document.content(index), max_chars)
            );
        }
    }
    report.push_str(
        "Fix the new text and send the whole batch again; the old addresses are still valid.",
    );
    report
}

impl PatchOutput {
    /// One-line summary of the syntax verdict.
    fn syntax_note(&self) -> String {
        match &self.syntax {
            Verdict::Clean(language) => format!("{} syntax ok", language.name()),
            Verdict::NoWorse {
                language,
                before,
                after,
            } => {
                let first = after
                    .first
                    .as_ref()
                    .map(|(_, m)| format!(", first: {m}"))
                    .unwrap_or_default();
                if after.count <= *before {
                    format!(
                        "{} syntax: still {} error(s) as before{first}",
                        language.name(),
                        after.count
                    )
                } else {
                    format!(
                        "{} syntax: {} error(s) (before: {before}), none new in or next to the \
                         edited lines{first}",
                        language.name(),
                        after.count
                    )
                }
            }
            Verdict::Worse { .. } => "syntax worse (not written)".into(),
            Verdict::Unchecked => {
                let ext = Path::new(&self.path)
                    .extension()
                    .map(|e| format!(".{} files", e.to_string_lossy()))
                    .unwrap_or_else(|| "this file type".into());
                format!("syntax not checked (no checker for {ext})")
            }
        }
    }

    /// The text the model sees.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{}: -{} +{} lines, {} → {} lines; {}",
            self.path,
            self.lines_removed,
            self.lines_added,
            self.lines_before,
            self.lines_after,
            self.syntax_note()
        );
        if !self.changed {
            out.push_str("; the result equals the file, nothing written");
        }
        out.push('\n');
        out.push_str(&self.rendered_region);
        while out.ends_with('\n') {
            out.pop();
        }
        out
    }
}

impl fmt::Display for PatchOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}
