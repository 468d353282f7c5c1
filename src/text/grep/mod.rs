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
//!
//! | file | owns |
//! |---|---|
//! | `options.rs` | [`GrepOptions`] and turning them into a matcher and walk filters; every bad pattern, glob or type name is an error here, before any file is read |
//! | `search.rs` | the search itself: the [`grep`] entry point, the per-file sink, the shared collector and the limit |
//! | `render.rs` | what a search returns ([`GrepOutput`]) and the text the model sees |

mod options;
mod render;
mod search;

pub use options::GrepOptions;
pub use render::{FileHits, GrepLine, GrepMatch, GrepOutput};
pub use search::grep;
