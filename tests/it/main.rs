//! The integration test binary: one binary, one module per area.

mod support;

mod blocks;
mod catalog;
mod chat;
mod chat_tui;
mod cli;
mod defs;
mod discovery;
mod editing;
mod extensions;
mod faults;
mod folding;
mod frames;
mod gateway;
mod mcp;
mod providers;
mod sandbox;
mod serve;
mod shell;
mod store;
mod supervisor;
mod text;
mod web;
