//! The runtime as the worker sees it: everything that runs in `vis worker`.
//!
//! - `launcher`: the namespaces, the filesystem view, init and the worker process (it runs
//!   first, while the process has one thread);
//! - `worker`: the channel's reader thread and the interpreter thread;
//! - `python`: `vis._native`, the Rust functions the prelude calls (pyo3);
//! - `frames`: blocking reads and writes of the host's frames.

pub mod frames;
mod launcher;
mod python;
mod worker;

pub use worker::{run_worker, WorkerArgs};
