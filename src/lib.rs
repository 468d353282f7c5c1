//! Vis: a coding gateway whose model has one tool, `python_execution`.
//!
//! - `protocol`: the types every layer shares (blocks, definitions, the conversation);
//! - `providers`: streaming clients for OpenAI-compatible and Anthropic models, with retries;
//! - `catalog`: the manifest, `apropos`/`doc`, and the token-budgeted catalog;
//! - `runtime`: the embedded CPython worker and the host API that supervises it;
//! - `store`: the SQLite session store;
//! - `session`: the per-block `session` dict and session ids;
//! - `config`: where data lives;
//! - `text`: line addresses, `cat`, `grep` and the atomic batch `patch`;
//! - `mcp`: `vis mcp` (Vis as an MCP server) and MCP servers as Python namespaces;
//! - `cli`: the `vis` command line;
//! - `trace`: step marks a benchmark turns on (where a sub-session's start goes).

pub mod catalog;
pub mod checkpoints;
pub mod cli;
pub mod config;
pub mod gateway;
pub mod images;
pub mod mcp;
pub mod protocol;
pub mod providers;
pub mod release;
pub mod runtime;
pub mod sandbox;
pub mod serve;
pub mod session;
pub mod store;
pub mod text;
pub mod trace;
pub mod trust;
