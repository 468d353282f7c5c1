//! MCP both ways, against real clients and servers (the official Python SDK): `vis mcp` as a
//! server (`server`), MCP servers as namespaces (`namespaces`), and tool-list changes
//! reaching the model's catalog (`catalog`).

mod approval;
mod catalog;
mod hostile;
mod leftover;
mod lifetime;
mod namespaces;
mod protocol;
mod server;
mod spawn;
mod work;
