//! The stable prefix of every request: the system prompt, the tool, the catalog and the
//! workspace's `AGENTS.md`.
//!
//! A session's prefix is built once, at its first request, and stored (`store::ChatPrefix`);
//! every later request, also after a restart or an upgrade of vis, sends those same bytes.
//! Changes to the catalog or to `AGENTS.md` later in the session are appended to the
//! conversation as notices, never written into the prefix.

use std::path::Path;

use serde_json::json;

use crate::catalog::Snapshot;
use crate::protocol::ToolSpec;

/// The system prompt (documented in `docs/gateway.md`): every token of it is paid in every
/// request, so it stays short.
pub const SYSTEM_PROMPT: &str = include_str!("system_prompt.md");

/// The tool's name.
pub const TOOL_NAME: &str = "python_execution";

/// `AGENTS.md` beyond this many bytes is cut (with a note), so one file cannot crowd out the
/// conversation.
pub const AGENTS_MD_LIMIT: usize = 32 * 1024;

/// The one tool, exactly as every request describes it.
pub fn tool_spec() -> ToolSpec {
    ToolSpec {
        name: TOOL_NAME.into(),
        description: "Run a Python block in this session's persistent interpreter and get back what it printed (stdout and stderr, capped) and the value of a final expression. The prelude (cat, grep, patch, sh, defs, apropos, doc, Path) is imported; apropos and doc find everything else.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source to run."}},
            "required": ["code"],
            "additionalProperties": false,
        }),
    }
}

/// The system text: prompt, catalog and the project's instructions.
pub fn system_text(catalog: &Snapshot, agents_md: Option<&str>) -> String {
    let mut text = String::from(SYSTEM_PROMPT.trim_end());
    let catalog = catalog.text();
    if !catalog.trim().is_empty() {
        text.push_str("\n\n");
        text.push_str(catalog.trim_end());
    }
    if let Some(agents) = agents_md.filter(|a| !a.trim().is_empty()) {
        text.push_str("\n\n");
        text.push_str(&agents_section(agents));
    }
    text.push('\n');
    text
}

fn agents_section(agents: &str) -> String {
    format!(
        "Project instructions (AGENTS.md in the workspace):\n{}",
        agents.trim_end()
    )
}

/// The workspace's `AGENTS.md`, cut to [`AGENTS_MD_LIMIT`]; `None` when there is none.
pub fn read_agents_md(workspace: &Path) -> Option<String> {
    let raw = std::fs::read(workspace.join("AGENTS.md")).ok()?;
    let mut text = String::from_utf8_lossy(&raw).into_owned();
    if text.len() > AGENTS_MD_LIMIT {
        let mut cut = AGENTS_MD_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(
            "\n[vis] AGENTS.md was cut here: it is longer than 32 KiB; cat() it for the rest.\n",
        );
    }
    Some(text)
}

/// The notice that brings the conversation up to date with a changed `AGENTS.md`.
pub fn agents_md_notice(agents: Option<&str>) -> String {
    match agents.filter(|a| !a.trim().is_empty()) {
        Some(a) => format!(
            "[vis] AGENTS.md changed; these instructions replace the earlier ones.\n{}",
            agents_section(a)
        ),
        None => "[vis] AGENTS.md was removed; disregard its earlier instructions.".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_is_short_and_names_the_tool_surface() {
        let tokens = crate::catalog::count_tokens(SYSTEM_PROMPT).unwrap();
        eprintln!("system prompt: {tokens} o200k tokens");
        assert!(tokens < 450, "{tokens} tokens");
        for name in [
            "cat(", "grep(", "patch(", "sh(", "apropos(", "doc(", "defs()",
        ] {
            assert!(SYSTEM_PROMPT.contains(name), "{name}");
        }
        let text = system_text(&Snapshot::empty(), Some("Use tabs."));
        assert!(text.ends_with("Project instructions (AGENTS.md in the workspace):\nUse tabs.\n"));
    }
}
