//! The search itself: confine the paths, walk them in parallel, search each file with a sink
//! that addresses every row, and gather the results deterministically.
//!
//! Each file gets its own [`FileSink`], which counts every match but keeps rows only for the
//! first `per_file_cap` of them. Finished files go to one [`Collector`] keyed by display path
//! (so output is sorted whatever order the threads finish in); with a total limit it drops the
//! rows of files past the first `limit` matches as it goes, so memory stays bounded on huge
//! result sets. [`apply_limit`] then cuts the sorted result to exactly `limit` matches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use grep_matcher::LineTerminator;
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::{WalkBuilder, WalkState};

use crate::text::address::{Address, LineHash};
use crate::text::confine::{Access, Resolved, Workspace};
use crate::text::lines::{display_text, line_content};
use crate::text::Result;

use super::options::{build_matcher, build_overrides, build_types, GrepOptions};
use super::render::{FileHits, GrepLine, GrepOutput};

/// Search `paths` (resolved inside `workspace`) for `pattern`.
pub fn grep(
    workspace: &Workspace,
    pattern: &str,
    paths: &[PathBuf],
    options: &GrepOptions,
) -> Result<GrepOutput> {
    let matcher = build_matcher(pattern, options)?;
    // Walks start at real paths (resolved as the OS does), so globs match against the real base.
    let base = workspace.real_base()?;
    let default_paths = [PathBuf::from(".")];
    let paths = if paths.is_empty() {
        &default_paths[..]
    } else {
        paths
    };
    let resolved: Vec<Resolved> = paths
        .iter()
        .map(|p| workspace.resolve(p, Access::Read))
        .collect::<Result<_>>()?;

    // Start at the real paths: what was confined is what gets walked, even if a symlink on
    // the way is swapped afterwards.
    let mut walk = WalkBuilder::new(&resolved[0].real);
    for r in &resolved[1..] {
        walk.add(&r.real);
    }
    let respect_ignores = !options.no_ignore;
    walk.hidden(!options.hidden)
        .ignore(respect_ignores)
        .git_ignore(respect_ignores)
        .git_global(respect_ignores)
        .git_exclude(respect_ignores)
        .parents(respect_ignores)
        .follow_links(false)
        .threads(options.threads);
    if respect_ignores {
        walk.add_custom_ignore_filename(".rgignore");
    }
    if let Some(overrides) = build_overrides(&base, &options.globs)? {
        walk.overrides(overrides);
    }
    if let Some(types) = build_types(&options.types)? {
        walk.types(types);
    }

    let per_file_cap = options.per_file_cap();
    let mut searcher_builder = SearcherBuilder::new();
    searcher_builder
        .line_number(true)
        .before_context(options.before)
        .after_context(options.after)
        .binary_detection(BinaryDetection::quit(0))
        .bom_sniffing(false)
        // Must agree with the matcher's CRLF mode; lines are still split at `\n`.
        .line_terminator(LineTerminator::crlf())
        .max_matches(options.max_count);
    let collector = Mutex::new(Collector::new(options.limit));
    let roots: Vec<(PathBuf, String)> = resolved
        .iter()
        .map(|r| (r.real.clone(), r.display.clone()))
        .collect();

    walk.build_parallel().run(|| {
        let mut searcher = searcher_builder.build();
        let matcher = matcher.clone();
        let collector = &collector;
        let roots = &roots;
        Box::new(move |entry| {
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) => {
                    collector
                        .lock()
                        .map(|mut c| c.errors.push(err.to_string()))
                        .ok();
                    return WalkState::Continue;
                }
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let path = entry.path();
            let mut sink = FileSink::new(per_file_cap, options.after, options.max_line_chars);
            if let Err(err) = searcher.search_path(&matcher, path, &mut sink) {
                let shown = display_path(path, roots);
                collector
                    .lock()
                    .map(|mut c| c.errors.push(format!("{shown}: {err}")))
                    .ok();
                return WalkState::Continue;
            }
            if sink.binary && entry.depth() == 0 {
                // Named explicitly: say why it shows nothing (walked binaries are skipped
                // silently, as ripgrep does).
                let shown = display_path(path, roots);
                collector.lock().map(|mut c| c.binary.push(shown)).ok();
            }
            if sink.binary || sink.matches == 0 {
                return WalkState::Continue;
            }
            let hits = FileHits {
                path: display_path(path, roots),
                lines: sink.lines,
                matches: sink.matches,
                shown: sink.stored_matches,
            };
            if let Ok(mut c) = collector.lock() {
                c.add(hits);
            }
            WalkState::Continue
        })
    });

    let collector = collector.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut files: Vec<FileHits> = collector.files.into_values().collect();
    let total_matches = files.iter().map(|f| f.matches).sum();
    if let Some(limit) = options.limit {
        apply_limit(&mut files, limit as u64, options.after);
    }
    let mut errors = collector.errors;
    errors.sort();
    let mut skipped_binary = collector.binary;
    skipped_binary.sort();
    Ok(GrepOutput {
        pattern: pattern.to_string(),
        paths: resolved.into_iter().map(|r| r.display).collect(),
        files,
        total_matches,
        errors,
        skipped_binary,
    })
}

/// Display path of a walked file: the root as the model gave it, plus the rest of the path.
fn display_path(path: &Path, roots: &[(PathBuf, String)]) -> String {
    for (absolute, display) in roots {
        if let Ok(rest) = path.strip_prefix(absolute) {
            if rest.as_os_str().is_empty() {
                return display.clone();
            }
            if display == "." {
                return rest.to_string_lossy().into_owned();
            }
            return Path::new(display).join(rest).to_string_lossy().into_owned();
        }
    }
    path.to_string_lossy().into_owned()
}

/// Results shared by the walker threads.
struct Collector {
    files: BTreeMap<String, FileHits>,
    /// Matches currently kept with their lines.
    stored: u64,
    limit: Option<usize>,
    errors: Vec<String>,
    binary: Vec<String>,
}

impl Collector {
    fn new(limit: Option<usize>) -> Collector {
        Collector {
            files: BTreeMap::new(),
            stored: 0,
            limit,
            errors: Vec::new(),
            binary: Vec::new(),
        }
    }

    fn add(&mut self, hits: FileHits) {
        self.stored += hits.shown;
        if let Some(old) = self.files.insert(hits.path.clone(), hits) {
            // The same file reached through two search paths: keep one copy.
            self.stored -= old.shown;
        }
        if let Some(limit) = self.limit {
            // Prune only when well over the limit, so the cost stays amortized.
            if self.stored > 2 * limit as u64 + 64 {
                self.prune(limit as u64);
            }
        }
    }

    /// Drop the lines (not the counts) of files past the first `limit` matches in path order;
    /// later additions can only push that boundary earlier, so nothing dropped is needed again.
    fn prune(&mut self, limit: u64) {
        let mut kept = 0u64;
        for hits in self.files.values_mut() {
            if kept >= limit {
                hits.lines = Vec::new();
                hits.shown = 0;
            } else {
                kept += hits.shown;
            }
        }
        self.stored = kept;
    }
}

/// Keep only the first `limit` matches (in path order) and their after-context.
fn apply_limit(files: &mut [FileHits], limit: u64, after: usize) {
    let mut budget = limit;
    for hits in files.iter_mut() {
        if budget == 0 {
            hits.lines.clear();
            hits.shown = 0;
            continue;
        }
        let mut shown = 0u64;
        let mut last_match = 0usize;
        let mut cut = hits.lines.len();
        for (i, line) in hits.lines.iter().enumerate() {
            match line {
                GrepLine::Match { .. } | GrepLine::Break if shown == budget => {
                    cut = i;
                    break;
                }
                GrepLine::Match { address, .. } => {
                    shown += 1;
                    last_match = address.line;
                }
                _ => {}
            }
        }
        hits.lines.truncate(cut);
        // Rows past the last shown match's after-window were before-context of a cut match.
        while matches!(hits.lines.last(),
            Some(GrepLine::Context { address, .. }) if address.line > last_match + after)
        {
            hits.lines.pop();
        }
        hits.shown = shown;
        budget -= shown;
    }
}

/// Per-file sink: counts every match, keeps rows for the first `cap` matches.
struct FileSink {
    cap: u64,
    after: usize,
    max_line_chars: usize,
    matches: u64,
    stored_matches: u64,
    after_pending: usize,
    lines: Vec<GrepLine>,
    binary: bool,
}

impl FileSink {
    fn new(cap: u64, after: usize, max_line_chars: usize) -> FileSink {
        FileSink {
            cap,
            after,
            max_line_chars,
            matches: 0,
            stored_matches: 0,
            after_pending: 0,
            lines: Vec::new(),
            binary: false,
        }
    }

    fn row(&self, raw: &[u8], line_number: Option<u64>) -> (Address, String) {
        let number = line_number.unwrap_or(0);
        let (content, _) = line_content(raw, number);
        let address = Address::new(number as usize, LineHash::of(content));
        (
            address,
            display_text(content, self.max_line_chars).into_owned(),
        )
    }
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.matches += 1;
        if self.stored_matches < self.cap {
            let (address, text) = self.row(mat.bytes(), mat.line_number());
            self.lines.push(GrepLine::Match { address, text });
            self.stored_matches += 1;
            self.after_pending = self.after;
        } else {
            self.after_pending = 0;
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        let keep = match ctx.kind() {
            SinkContextKind::After => {
                let keep = self.after_pending > 0;
                self.after_pending = self.after_pending.saturating_sub(1);
                keep
            }
            _ => self.stored_matches < self.cap,
        };
        if keep {
            let (address, text) = self.row(ctx.bytes(), ctx.line_number());
            self.lines.push(GrepLine::Context { address, text });
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        if self.stored_matches < self.cap && !self.lines.is_empty() {
            self.lines.push(GrepLine::Break);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, std::io::Error> {
        // Same rule as cat: a file with a NUL byte is not text; drop what was found in it.
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::TextError;

    fn row(line: usize, text: &str) -> Address {
        Address::new(line, LineHash::of(text.as_bytes()))
    }

    fn matched(line: usize) -> GrepLine {
        GrepLine::Match {
            address: row(line, "m"),
            text: "m".into(),
        }
    }

    fn context(line: usize) -> GrepLine {
        GrepLine::Context {
            address: row(line, "c"),
            text: "c".into(),
        }
    }

    fn hits(path: &str, lines: Vec<GrepLine>) -> FileHits {
        let matches = lines
            .iter()
            .filter(|l| matches!(l, GrepLine::Match { .. }))
            .count() as u64;
        FileHits {
            path: path.into(),
            lines,
            matches,
            shown: matches,
        }
    }

    /// Search `text` as one file with the sink, as the walker would.
    fn sink_of(pattern: &str, text: &str, cap: u64, before: usize, after: usize) -> FileSink {
        let matcher = build_matcher(pattern, &GrepOptions::default()).expect("pattern");
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(before)
            .after_context(after)
            .binary_detection(BinaryDetection::quit(0))
            .bom_sniffing(false)
            .line_terminator(LineTerminator::crlf())
            .build();
        let mut sink = FileSink::new(cap, after, 1000);
        searcher
            .search_slice(&matcher, text.as_bytes(), &mut sink)
            .expect("search");
        sink
    }

    #[test]
    fn the_sink_addresses_rows_like_the_line_model() {
        let text = "\u{feff}alpha\r\nbeta  \nalpha\n";
        let sink = sink_of("alpha", text, 10, 0, 0);
        assert_eq!(sink.matches, 2);
        assert_eq!(
            sink.lines,
            vec![
                GrepLine::Match {
                    address: row(1, "alpha"),
                    text: "alpha".into()
                },
                GrepLine::Match {
                    address: row(3, "alpha"),
                    text: "alpha".into()
                },
            ]
        );
    }

    #[test]
    fn the_sink_counts_past_its_cap_but_keeps_no_rows() {
        let text = "x1\nx2\nx3\nx4\n";
        let sink = sink_of("x", text, 2, 0, 1);
        assert_eq!(sink.matches, 4);
        assert_eq!(sink.stored_matches, 2);
        assert_eq!(sink.lines.len(), 2);
    }

    #[test]
    fn the_sink_keeps_context_and_breaks_between_groups() {
        let text = "a\nhit\nb\nc\nd\nhit\ne\n";
        let sink = sink_of("hit", text, 10, 1, 1);
        let kinds: Vec<(char, usize)> = sink
            .lines
            .iter()
            .map(|l| match l {
                GrepLine::Match { address, .. } => ('m', address.line),
                GrepLine::Context { address, .. } => ('c', address.line),
                GrepLine::Break => ('-', 0),
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                ('c', 1),
                ('m', 2),
                ('c', 3),
                ('-', 0),
                ('c', 5),
                ('m', 6),
                ('c', 7)
            ]
        );
    }

    #[test]
    fn a_nul_byte_marks_the_file_binary() {
        let sink = sink_of("x", "x\n\0x\n", 10, 0, 0);
        assert!(sink.binary);
    }

    #[test]
    fn the_limit_keeps_the_first_matches_in_path_order_and_their_after_context() {
        let mut files = vec![
            hits("a", vec![matched(1), context(2), matched(5), context(6)]),
            hits("b", vec![context(1), matched(2)]),
        ];
        apply_limit(&mut files, 1, 1);
        assert_eq!(files[0].lines, vec![matched(1), context(2)]);
        assert_eq!(files[0].shown, 1);
        assert_eq!(files[0].matches, 2);
        assert!(files[1].lines.is_empty());
        assert_eq!(files[1].shown, 0);
    }

    #[test]
    fn the_limit_drops_before_context_of_a_cut_match() {
        let mut files = vec![hits(
            "a",
            vec![matched(1), context(2), context(9), matched(10)],
        )];
        apply_limit(&mut files, 1, 1);
        assert_eq!(files[0].lines, vec![matched(1), context(2)]);
    }

    #[test]
    fn the_collector_prunes_files_past_the_limit_and_keeps_counts() {
        let mut collector = Collector::new(Some(1));
        for name in ["c", "b", "a"] {
            let many: Vec<GrepLine> = (1..=40).map(matched).collect();
            collector.add(hits(name, many));
        }
        // 120 rows is over 2 * 1 + 64, so the rows of files after the first are dropped.
        assert_eq!(collector.stored, 40);
        let files: Vec<(&str, u64, usize)> = collector
            .files
            .values()
            .map(|h| (h.path.as_str(), h.matches, h.lines.len()))
            .collect();
        assert_eq!(files, vec![("a", 40, 40), ("b", 40, 0), ("c", 40, 0)]);
    }

    #[test]
    fn a_file_reached_twice_is_kept_once() {
        let mut collector = Collector::new(None);
        collector.add(hits("a", vec![matched(1)]));
        collector.add(hits("a", vec![matched(1)]));
        assert_eq!(collector.files.len(), 1);
        assert_eq!(collector.stored, 1);
    }

    #[test]
    fn display_paths_keep_the_root_as_given() {
        let roots = vec![
            (PathBuf::from("/w"), ".".to_string()),
            (PathBuf::from("/x/src"), "lib/src".to_string()),
        ];
        assert_eq!(display_path(Path::new("/w/a/b.py"), &roots), "a/b.py");
        assert_eq!(
            display_path(Path::new("/x/src/m.rs"), &roots),
            "lib/src/m.rs"
        );
        assert_eq!(display_path(Path::new("/x/src"), &roots), "lib/src");
        assert_eq!(
            display_path(Path::new("/elsewhere/f"), &roots),
            "/elsewhere/f"
        );
    }

    #[test]
    fn bad_input_fails_before_any_file_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new([dir.path()]);
        let err = grep(&ws, "(", &[], &GrepOptions::default()).expect_err("bad regex");
        assert!(matches!(err, TextError::Pattern(_)), "{err}");
        let err = grep(
            &ws,
            "x",
            &[PathBuf::from("missing")],
            &GrepOptions::default(),
        )
        .expect_err("missing path");
        assert!(matches!(err, TextError::NotFound { .. }), "{err}");
        let err = grep(&Workspace::default(), "x", &[], &GrepOptions::default())
            .expect_err("no workspace");
        assert!(matches!(err, TextError::NoWorkspace), "{err}");
    }
}
