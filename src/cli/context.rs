//! `vis context ID [--json]`: the exact next model request of a session.

use std::path::Path;

use clap::Args;

use super::settings::{
    chat_settings, limits, load_config, provider_settings, LimitArgs, ProviderArgs,
};
use super::term::{escape_json, out, outln};
use super::CliError;
use crate::gateway::ChatSession;
use crate::protocol::{ContentBlock, HistoryItem};
use crate::session::validate_session_id;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The session.
    pub id: String,
    /// Print the provider's request body (JSON) instead of the readable form.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

pub fn run(args: ContextArgs, db: &Path) -> Result<i32, CliError> {
    validate_session_id(&args.id)?;
    super::diff::require_database(db, &args.id)?;
    let config = load_config()?;
    let store = Store::open(db)?;
    let row = store.require_session(&args.id)?;
    let stored = store.session_model(&args.id)?;
    let provider = provider_settings(&args.provider, &config, stored.as_ref())?;
    let limits = limits(&LimitArgs::from_env()?, &config)?;
    let root = row.workspace_roots.first().map(std::path::PathBuf::from);
    let settings = chat_settings(provider, &config, limits, root.as_deref())?;
    // The current catalog includes the MCP servers' tools (their servers start to tell).
    let hub = match &root {
        Some(ws) => {
            let hub = crate::mcp::hub_for(
                &config,
                ws,
                crate::config::artifact_dir(db, &args.id),
                &*store,
            )?;
            (!hub.is_empty()).then_some(hub)
        }
        None => None,
    };
    let events = super::event_loop("vis context")?;
    events.block_on(async move {
        let (mut session, _) = ChatSession::open(store, db, &args.id, settings)
            .map_err(|e| CliError::gateway("vis context", e))?;
        if let Some(hub) = hub {
            session.set_mcp(hub);
        }
        if session.prefix().is_none() {
            session.shutdown().await;
            return Err(CliError::usage(format!(
                "session '{}' has no model requests yet (it was only used by `vis exec`); `vis chat --resume {}` starts its conversation",
                args.id, args.id
            )));
        }
        let body = session
            .next_request_body()
            .map_err(|e| CliError::gateway("vis context", e))?;
        if args.json {
            // The exact body, with the characters a terminal must not get as JSON escapes
            // (the same JSON value).
            outln!("{}", escape_json(&String::from_utf8_lossy(&body)));
            session.shutdown().await;
            return Ok(0);
        }
        let pending = session.pending_catalog_update().await;
        session.shutdown().await;
        print_readable(&session, pending);
        Ok(0)
    })
}

pub(super) fn print_readable(
    session: &ChatSession,
    pending: Result<Option<String>, crate::gateway::GatewayError>,
) {
    let (prefix, entries) = session.context_parts();
    let settings = &session.settings().provider;
    outln!(
        "session {} · next request to {}/{} · about {} tokens (o200k)",
        session.id(),
        settings.kind,
        settings.model,
        session.estimate_tokens()
    );
    if let Some(prefix) = prefix {
        outln!("\n== system ({} tokens with the tool) ==", prefix.tokens);
        out!("{}", prefix.system);
        outln!("\n== tool ==\n{}", prefix.tool);
    }
    outln!("\n== messages ({}) ==", entries.len());
    for entry in entries {
        let place = match entry.iteration {
            Some(i) => format!("t{}/i{i}", entry.turn),
            None => format!("t{}", entry.turn),
        };
        match &entry.item {
            HistoryItem::User { text } => outln!("[user {place}]\n{text}"),
            HistoryItem::Notice { text } => outln!("[notice {place}]\n{text}"),
            HistoryItem::ToolResult {
                output, is_error, ..
            } => outln!(
                "[tool result {place}{}]\n{}",
                if *is_error { ", error" } else { "" },
                output.trim_end()
            ),
            HistoryItem::Assistant(message) => {
                outln!("[assistant {place}]");
                for block in &message.blocks {
                    match block {
                        ContentBlock::Text { text } => outln!("{text}"),
                        ContentBlock::ToolCall(call) => {
                            let code = crate::protocol::code_of(call)
                                .unwrap_or_else(|_| call.arguments.clone());
                            outln!("<{} call {}>\n{}", call.name, call.id, code.trim_end());
                        }
                        ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {
                            outln!("<thinking, kept with its signature>")
                        }
                    }
                }
            }
        }
    }
    outln!("\n== pending catalog update ==");
    match pending {
        Ok(None) => outln!("(none)"),
        Ok(Some(text)) => outln!("{text}"),
        Err(e) => outln!("(unknown: {e})"),
    }
}
