//! MCP tools as Python functions: what the host tells the worker about each server's tools
//! (the host reads the servers' `tools/list`; the worker builds namespaces from this). They
//! cross into Python as dicts with the same keys (`vis._mcp.install`).

use pyo3::IntoPyObjectRef;
use serde::{Deserialize, Serialize};

/// An MCP server's namespace (`github`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, IntoPyObjectRef)]
pub struct McpNamespace {
    /// The server's name, which is the namespace.
    pub name: String,
    /// One line for `apropos` and the catalog.
    pub summary: String,
    /// Longer text for `doc(name)` (the server's instructions, if it sent any).
    #[serde(default)]
    pub doc: String,
}

/// One MCP tool as a function (`github.search_issues`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, IntoPyObjectRef)]
pub struct McpFunction {
    /// The dotted name the model calls: `<server>.<python name of the tool>`.
    pub name: String,
    pub server: String,
    /// The tool's name on the server (what `tools/call` sends).
    pub tool: String,
    /// Python signature text from the input schema, e.g.
    /// `(query: str, *, limit: int = 10, labels: list[str] | None = None)`.
    pub signature: String,
    /// The docstring: the tool's description and its arguments.
    pub doc: String,
    /// Parameters in signature order: required ones first (positional or keyword), then
    /// optional ones (keyword only).
    pub params: Vec<McpParam>,
}

/// One parameter of an MCP function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, IntoPyObjectRef)]
pub struct McpParam {
    /// The Python name (an identifier).
    pub name: String,
    /// The property name in the tool's input schema (what is sent).
    pub key: String,
    pub required: bool,
    /// The schema's default as a Python literal, for the signature only: an optional argument
    /// that is left out (or passed as `None`) is not sent, so the server applies its default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}
