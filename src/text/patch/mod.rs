//! `patch`: apply a batch of address-based edits to one file, all or nothing.
//!
//! Steps, under the directory lock (see [`super::atomic`]):
//! 1. resolve the path as the OS does and confine it ([`super::confine`]), keeping the
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
//!
//! One file per step, so each can be read and tested alone:
//!
//! | file | owns |
//! |---|---|
//! | `options.rs` | what the caller asks for: [`Edit`] and [`PatchOptions`] |
//! | `validate.rs` | step 2: edits → sorted splices, or one report listing every problem |
//! | `apply.rs` | step 3: splices → new bytes (pure, no I/O); [`apply_edits`] for in-memory use |
//! | `file.rs` | steps 1, 4, 5: the file — open, refuse, gate, write; the [`patch`] entry point |
//! | `render.rs` | what a patch returns ([`PatchOutput`]) and every text the model sees |

mod apply;
mod file;
mod options;
mod render;
mod validate;

pub use apply::apply_edits;
pub use file::patch;
pub use options::{Edit, PatchOptions};
pub use render::PatchOutput;
