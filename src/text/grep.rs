//! `grep`: ripgrep's walk and search, with every printed line addressed.
//!
//! The walk is `ignore`'s parallel walker (gitignore, hidden and `.ignore` rules exactly as
//! ripgrep applies them by default; symlinks are not followed), the search is `grep-searcher`
//! with a `grep-regex` matcher, and binary files (a NUL byte) are skipped the way ripgrep skips
//! them. The sink computes each line's address with the shared line model, so an address
//! copied from grep works in patch.
//!
//! Determinism: files finish in whatever order the threads get to them, so results are
//! collected in a map keyed by display path and rendered in sorted order. With a total limit
//! only the first `limit` matches in path order are kept; later files keep just their counts,
//! which bounds memory on huge result sets while still allowing the "N more matches in M
//! files" note.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use grep_matcher::LineTerminator;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{WalkBuilder, WalkState};

use crate::text::address::{Address, LineHash};
use crate::text::confine::{Access, Resolved, Workspace};
use crate::text::lines::{display_text, line_content, push_line_with_sep, DEFAULT_MAX_LINE_CHARS};
use crate::text::{Result, TextError};

/// Search settings; the defaults match `rg -n PATTERN` plus a total limit of 100 matches.
#[derive(Clone, Debug)]
pub struct GrepOptions {
    /// Treat the pattern as literal text, not a regex.
    pub fixed: bool,
    pub ignore_case: bool,
    /// Case-insensitive unless the pattern has an uppercase letter.
    pub smart_case: bool,
    /// Only match whole words.
    pub word: bool,
    /// ripgrep-style globs (`*.py`, `!tests/**`), relative to the first workspace root.
    pub globs: Vec<String>,
    /// ripgrep file type names (`py`, `rust`, `js`, ...).
    pub types: Vec<String>,
    /// Context lines before / after each match.
    pub before: usize,
    pub after: usize,
    /// Stop searching a file after this many matches.
    pub max_count: Option<u64>,
    /// Show at most this many matches in total (the rest are counted).
    pub limit: Option<usize>,
    /// Search hidden files and directories.
    pub hidden: bool,
    /// Don't respect .gitignore/.ignore files.
    pub no_ignore: bool,
    pub max_line_chars: usize,
    /// Walker threads; 0 picks from the number of cores.
    pub threads: usize,
}

impl Default for GrepOptions {
    fn default() -> Self {
        GrepOptions {
            fixed: false,
            ignore_case: false,
            smart_case: false,
            word: false,
            globs: Vec::new(),
            types: Vec::new(),
            before: 0,
            after: 0,
            max_count: None,
            limit: Some(100),
            hidden: false,
            no_ignore: false,
            max_line_chars: DEFAULT_MAX_LINE_CHARS,
            threads: 0,
        }
    }
}

/// One row printed under a file header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrepLine {
    Match {
        address: Address,
        text: String,
    },
    Context {
        address: Address,
        text: String,
    },
    /// A gap between non-adjacent groups of lines (printed `--`).
    Break,
}

/// One matched line, for code that filters results without printing them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepMatch {
    pub path: String,
    pub address: Address,
    pub text: String,
}

/// The matches of one file.
#[derive(Clone, Debug, Default)]
pub struct FileHits {
    pub path: String,
    /// The rows kept for display (within the limit).
    pub lines: Vec<GrepLine>,
    /// Every match in the file (up to `max_count`), shown or not.
    pub matches: u64,
    /// How many of `matches` are in `lines`.
    pub shown: u64,
}

/// Everything a search found.
#[derive(Clone, Debug)]
pub struct GrepOutput {
    pub pattern: String,
    /// The searched paths as given.
    pub paths: Vec<String>,
    /// Files with at least one match, sorted by path.
    pub files: Vec<FileHits>,
    pub total_matches: u64,
    /// Files or directories that could not be read.
    pub errors: Vec<String>,
    /// Explicitly named files skipped because they are binary.
    pub skipped_binary: Vec<String>,
}

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
    if !options.globs.is_empty() {
        let mut overrides = OverrideBuilder::new(&base);
        for glob in &options.globs {
            overrides
                .add(glob)
                .map_err(|e| TextError::InvalidArgument(format!("invalid glob {glob:?}: {e}")))?;
        }
        let overrides = overrides
            .build()
            .map_err(|e| TextError::InvalidArgument(format!("invalid glob: {e}")))?;
        walk.overrides(overrides);
    }
    if !options.types.is_empty() {
        let mut types = TypesBuilder::new();
        types.add_defaults();
        for name in &options.types {
            types.select(name);
        }
        let types = types.build().map_err(|e| {
            TextError::InvalidArgument(format!(
                "{e}; use ripgrep's type names, e.g. py, rust, js, ts, go, c, cpp, java, md, \
                 json, toml, yaml"
            ))
        })?;
        walk.types(types);
    }

    let per_file_cap = match (options.limit, options.max_count) {
        (Some(limit), Some(max)) => (limit as u64).min(max),
        (Some(limit), None) => limit as u64,
        (None, Some(max)) => max,
        (None, None) => u64::MAX,
    };
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
    let collector = Mutex::new(Collector {
        files: BTreeMap::new(),
        stored: 0,
        limit: options.limit,
        errors: Vec::new(),
        binary: Vec::new(),
    });
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

/// Build the matcher; a bad regex becomes an error naming the position.
fn build_matcher(pattern: &str, options: &GrepOptions) -> Result<RegexMatcher> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .fixed_strings(options.fixed)
        .case_insensitive(options.ignore_case)
        .case_smart(options.smart_case)
        .word(options.word)
        // `^`/`$` are line anchors: the searcher runs the regex over many lines at once.
        .multi_line(true)
        .line_terminator(Some(b'\n'))
        // `$` matches before `\r\n` too, consistent with the line model dropping `\r`.
        .crlf(true);
    builder
        .build(pattern)
        .map_err(|err| TextError::Pattern(describe_pattern_error(pattern, &err.to_string())))
}

fn describe_pattern_error(pattern: &str, fallback: &str) -> String {
    let parsed = regex_syntax::ParserBuilder::new().build().parse(pattern);
    let (what, offset) = match &parsed {
        Err(regex_syntax::Error::Parse(e)) => (e.kind().to_string(), e.span().start.offset),
        Err(regex_syntax::Error::Translate(e)) => (e.kind().to_string(), e.span().start.offset),
        _ => {
            return format!(
                "invalid regex {pattern:?}: {fallback}\nhint: pass fixed=True to search for the \
                 text literally"
            )
        }
    };
    let column = pattern[..offset.min(pattern.len())].chars().count();
    format!(
        "invalid regex {pattern:?}: {what} at position {column}\n    {pattern}\n    {}^\nhint: \
         escape special characters or pass fixed=True to search for the text literally",
        " ".repeat(column)
    )
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

impl GrepOutput {
    /// Matched lines within the limit, in output order.
    pub fn matches(&self) -> Vec<GrepMatch> {
        let mut out = Vec::new();
        for hits in &self.files {
            for line in &hits.lines {
                if let GrepLine::Match { address, text } = line {
                    out.push(GrepMatch {
                        path: hits.path.clone(),
                        address: *address,
                        text: text.clone(),
                    });
                }
            }
        }
        out
    }

    /// Files with at least one match.
    pub fn files_matched(&self) -> usize {
        self.files.len()
    }

    /// Matches counted but not shown, and the number of files they are in.
    pub fn omitted(&self) -> (u64, usize) {
        let mut matches = 0;
        let mut files = 0;
        for hits in &self.files {
            if hits.shown < hits.matches {
                matches += hits.matches - hits.shown;
                files += 1;
            }
        }
        (matches, files)
    }

    /// The text the model sees.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if self.files.is_empty() {
            out.push_str(&format!(
                "no matches for {:?} in {}",
                self.pattern,
                self.paths.join(", ")
            ));
            out.push('\n');
        }
        let mut first = true;
        for hits in self.files.iter().filter(|h| !h.lines.is_empty()) {
            if !first {
                out.push('\n');
            }
            first = false;
            out.push_str(&hits.path);
            out.push('\n');
            for line in &hits.lines {
                match line {
                    GrepLine::Match { address, text } => {
                        push_row(&mut out, address, '|', text);
                    }
                    GrepLine::Context { address, text } => {
                        push_row(&mut out, address, '-', text);
                    }
                    GrepLine::Break => out.push_str("--\n"),
                }
            }
        }
        let (more, more_files) = self.omitted();
        if more > 0 {
            let s = if more == 1 { "" } else { "es" };
            let fs = if more_files == 1 { "" } else { "s" };
            out.push_str(&format!(
                "[{more} more match{s} in {more_files} file{fs} not shown; narrow the search or \
                 raise limit=]\n"
            ));
        }
        if !self.skipped_binary.is_empty() {
            out.push_str(&format!(
                "[skipped binary file(s): {}]\n",
                self.skipped_binary.join(", ")
            ));
        }
        if !self.errors.is_empty() {
            out.push_str(&format!(
                "[{} path(s) could not be read, e.g. {}]\n",
                self.errors.len(),
                self.errors[0]
            ));
        }
        while out.ends_with('\n') {
            out.pop();
        }
        out
    }
}

fn push_row(out: &mut String, address: &Address, sep: char, text: &str) {
    // Text is already cut for display; render with an unlimited width.
    push_line_with_sep(
        out,
        address.line,
        address.hash,
        sep,
        text.as_bytes(),
        usize::MAX,
    );
}

impl fmt::Display for GrepOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}
