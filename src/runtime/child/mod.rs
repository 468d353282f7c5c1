//! The runtime as the worker sees it: everything that runs in `vis worker`.
//!
//! - `launcher`: the namespaces, the filesystem view, init and the worker process (it runs
//!   first, while the process has one thread);
//! - `worker`: the process's start (limits, descriptors) and the interpreter thread's loop;
//! - `channel`: the channel to the host (its reader thread, host calls, interrupts);
//! - `interpreter`: the interpreter's start, with the standard library of the loaded libpython;
//! - `prelude`: the embedded prelude and its start in the interpreter;
//! - `python`: `vis._native`, the Rust functions the prelude calls (pyo3);
//! - `settings`: what the worker tells the prelude (`vis._state.Settings`);
//! - `frames`: blocking reads and writes of the host's frames.
//!
//! The files depend on each other one way only: `worker` on `launcher`, `channel`, `interpreter`,
//! `prelude` and `settings`; `prelude` on `python` and `settings`; `python` on `channel`; `channel` on
//! `frames`. Nothing depends back.

mod channel;
pub mod frames;
mod interpreter;
mod launcher;
mod prelude;
mod python;
mod settings;
mod worker;

pub use worker::run_worker;
