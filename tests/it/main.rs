//! The integration test binary: one binary, one module per area.

mod support;

mod blocks;
mod catalog;
mod cli;
mod defs;
mod editing;
mod faults;
mod shell;
mod store;
mod text;
