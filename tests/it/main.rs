//! The integration test binary: one binary, one module per area.

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod support;

mod blocks;
mod catalog;
mod chat;
mod chat_transcript;
mod chat_tui;
mod chat_work;
mod checkpoints;
mod checkpoints_feed;
mod cli;
mod cost;
mod defs;
mod defs_attacks;
mod defs_parse;
mod discovery;
mod editing;
mod extensions;
mod faults;
mod fold_price;
mod folding;
mod fork;
mod frames;
mod gateway;
mod hostile_git;
mod images;
mod jail;
mod jobs;
mod jobs_tmux;
mod live_output;
mod mcp;
mod outside;
mod providers;
mod python_home;
mod replay;
mod rewind_beneath;
mod sandbox;
mod serve;
mod servers;
mod servers_chat;
mod servers_views;
mod shell;
mod spawn;
mod startup;
mod store;
mod store_cli;
mod store_fence;
mod store_postgres;
mod structure;
mod supervisor;
mod terminal;
mod text;
mod untrusted_workspace;
mod web;
mod web_work;
