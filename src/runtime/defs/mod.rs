//! Persisted definitions on the host's side: what a block may add to them and how large they
//! may grow.
//!
//! A worker that has run a block is controlled by whoever wrote the block, so what it reports
//! is a claim, and persisted code runs again in every new worker of the session. The host
//! therefore never takes code from the worker: it reads the block's own source as the
//! worker's Python reads it ([`tokens`]: newlines, indentation, continuations; [`strings`]:
//! strings and f-strings), cuts out its top-level statements ([`statements`]) and keeps, of what the
//! worker reported, only definitions that are one of those statements, stored as the host's
//! cut ([`keep_reported`]). An import is stored as the one-name statement the host builds
//! (`import os`, never the worker's text); a constant only with a literal value or a call on
//! a kept import. The worker's report is metadata: which statements defined something, and
//! a function's signature and first doc line.
//!
//! Limits: one definition's source at most [`MAX_DEFINITION_BYTES`], a session's at most
//! [`MAX_SESSION_DEFINITION_BYTES`] in all. A block that defines something larger still runs;
//! the definition is not kept and the block's output says why (the worker says it when it
//! records the definition, the host when it refuses one the worker reported). A session
//! stored before the limits existed is restored up to them (see `runtime::restore`).
//!
//! A second check runs in the worker at restore time (`vis._runner`): Python's own parser
//! must read each stored source as exactly one statement of its kind binding its name.

mod keep;
mod statements;
mod strings;
mod tokens;

pub use keep::{keep_reported, over_session_limit, too_big, Kept};
pub use statements::{top_level_statements, ImportedName, Statement, StatementKind, ValueShape};
pub use tokens::{normalize_newlines, tokenize, Dialect, SourceError};

/// The largest source one persisted definition may have, in bytes.
pub const MAX_DEFINITION_BYTES: usize = 64 * 1024;
/// The most source a session's persisted definitions may have in all, in bytes.
pub const MAX_SESSION_DEFINITION_BYTES: usize = 512 * 1024;
/// The longest constant kept, in characters (larger data belongs in a file).
pub const MAX_CONSTANT_CHARS: usize = 2000;
/// A function's signature and doc line are metadata the worker reports; kept this long.
pub const MAX_SIGNATURE_CHARS: usize = 300;
pub const MAX_DOC_CHARS: usize = 200;
