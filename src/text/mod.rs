//! Text tools: reading and editing files by line address.
//!
//! The model never repeats old text to change it. `cat` and `grep` print every line as
//! `LINE:HASH|content`; `patch` takes those addresses back, checks each hash against the file
//! as it is now, and rejects the whole batch if anything is stale. Design notes:
//!
//! - **One line model** (`lines.rs`): BOM, CRLF/LF/mixed endings, a missing final newline and
//!   long lines are handled in one place, so the same line always gets the same address.
//! - **Addresses** (`address.rs`): a four-letter pronounceable hash, chosen because it is the
//!   cheapest in o200k tokens among hashes with at most 1/4096 collision rate.
//! - **cat** (`cat.rs`) reads a file or a range of it; a range given by address is checked
//!   like patch checks its edits.
//! - **grep** (`grep/`) is ripgrep's own crates (`ignore`, `grep-searcher`, `grep-regex`) with a
//!   sink that addresses each line; results are sorted by path so output is deterministic.
//!   Options and their validation, the search, and the rendering are one file each.
//! - **patch** (`patch/`) validates all edits against the pre-batch file, applies them in one
//!   pass, runs a syntax gate (`syntax.rs`) that only rejects new errors where the batch
//!   edited, and writes atomically under a directory lock (`atomic/`), refusing read-only
//!   files and files that changed since they were read. Options, validation, applying, the
//!   file work and rendering are one file each.
//! - **Confinement** (`confine.rs`): every path is resolved as the OS resolves it, from `/`,
//!   through directory descriptors, and must lie under a workspace root; reads and writes then
//!   go through the descriptor of the file's directory, so a symlink swapped in later cannot
//!   redirect them.
//! - **Python** (`python.rs`): the native side of `vis.text`; the model-facing wrappers and
//!   their docstrings live in `python/vis/text.py`.
//!
//! The submodules are private: everything other code may use is re-exported below, so the
//! list of `pub use` lines is the whole API of the text tools.
//!
//! Everything is usable from Rust without Python except the Python syntax check, which uses
//! CPython's compiler through pyo3 (the interpreter is initialized on demand).

mod address;
mod atomic;
mod binary;
mod cat;
mod confine;
mod grep;
mod lines;
mod patch;
mod python;
mod syntax;

use std::path::PathBuf;

pub use address::{Address, AddressParseError, LineHash, HASH_SPACE};
pub use atomic::{is_temp_name, Hook};
pub use binary::read_bytes;
pub use cat::{cat, CatLine, CatOptions, CatOutput, LineRef};
pub use confine::{Access, Kind, Resolved, Workspace};
pub use grep::{grep, FileHits, GrepLine, GrepMatch, GrepOptions, GrepOutput};
pub use lines::{Document, Ending, LineSpan, DEFAULT_MAX_LINE_CHARS};
pub use patch::{apply_edits, patch, Edit, PatchOptions, PatchOutput};
pub use python::{register as register_native, set_workspace};
pub use syntax::{check as check_syntax, Language, Problems, SyntaxError, Verdict};

/// Everything that can go wrong in the text tools. Messages name the cause and what to do,
/// because they are shown to the model as they are.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    #[error("no workspace root is set, so no path can be resolved")]
    NoWorkspace,

    #[error("no such file or directory: {path} (relative paths resolve against {})", base.display())]
    NotFound { path: String, base: PathBuf },

    #[error(
        "{path} is outside the workspace (it resolves to {}); only files under {} can be used",
        real.display(),
        roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    OutsideWorkspace {
        path: String,
        real: PathBuf,
        roots: Vec<PathBuf>,
    },

    #[error("{path} is under a read-only root: it can be read with cat or grep but not patched")]
    ReadOnly { path: String },

    #[error("{path} is a directory; {hint}")]
    IsDirectory { path: String, hint: &'static str },

    #[error("{path} is not a regular file")]
    NotAFile { path: String },

    #[error(
        "{path} is a binary file (NUL byte at offset {offset}); the text tools only handle text \
         — use Path({path:?}).read_bytes() for raw data"
    )]
    Binary { path: String, offset: usize },

    /// Refused by the file's mode bits (for root too); `force` overrides.
    #[error(
        "{path} is {reason}; nothing was changed. If it really should be edited, pass \
         force=True: patch(path, edits, force=True) (the file keeps its mode)"
    )]
    NotWritable { path: String, reason: String },

    /// The file changed between being read and being replaced; nothing was written.
    #[error(
        "{path} changed while patch was working on it ({reason}); nothing was written. Re-read \
         it with cat({path:?}) and send the batch again with the fresh addresses"
    )]
    Changed { path: String, reason: &'static str },

    /// Another process kept the file open for writing; nothing was written.
    #[error(
        "{path} is open for writing in another process (or in this one: a file object not yet \
         closed), which would go on writing into the old version once patch replaced it, and \
         those writes would be lost; nothing was changed. Close it or wait for that writer to \
         finish, then patch again"
    )]
    OpenForWriting { path: String },

    /// A setuid/setgid file whose owner could not be kept.
    #[error(
        "{path} has mode {mode:04o} and is owned by uid {uid}, gid {gid}; patch runs as uid \
         {euid} and cannot give the new version that owner and mode, so the setuid/setgid bit \
         would be lost; nothing was changed. Edit it as its owner (or as root)"
    )]
    ModeNotKept {
        path: String,
        mode: u32,
        uid: u32,
        gid: u32,
        euid: u32,
    },

    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    #[error("{0}")]
    InvalidArgument(String),

    #[error("{0}")]
    Pattern(String),

    /// Malformed, out-of-range, stale or conflicting addresses (patch edits or cat's
    /// start/end); the report lists every one.
    #[error("{report}")]
    Address { path: String, report: String },

    /// The edit would introduce a syntax error.
    #[error("{report}")]
    Syntax { path: String, report: String },

    /// Only produced by `PatchOptions::fail_before_rename`, for fault-injection tests.
    #[error("injected failure before rename; {path} was left unchanged")]
    Injected { path: String },
}

pub type Result<T, E = TextError> = std::result::Result<T, E>;
