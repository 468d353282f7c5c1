//! `impl ChatSession`: opening a session, its worker and MCP servers, the request prefix and
//! the updates appended after it, inspecting the conversation, folding for the person, and the
//! entry points of a turn (`turn`) and of a block run without the model.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::fold::{limits_for, Limits};
use crate::catalog::render_catalog;
use crate::protocol::{Event, FoldReceipt, HistoryItem, TurnKind, TurnStatus, Utilization};
use crate::providers::{Provider, ProviderError};
use crate::runtime::{BlockLimits, BlockRunner, BlockSpec, Supervisor};
use crate::store::{ChatPrefix, Store};

use super::calls::ConversationCalls;
use super::conversation::shown_snapshot;
use super::history::{Entry, NoticeMeta};
use super::turn::{EventSink, ExecEnd, TurnEnd};
use super::{fold, prompt, ChatSession, ChatSettings, Conversation, FoldError, GatewayError};

impl ChatSession {
    /// A new chat session for `roots` (its worker starts with the first request).
    pub fn create(
        store: Box<Store>,
        db: &Path,
        id: &str,
        roots: Vec<String>,
        settings: ChatSettings,
    ) -> Result<ChatSession, GatewayError> {
        store.ensure_session(id, &roots)?;
        Self::open(store, db, id, settings).map(|(s, _)| s)
    }

    /// Opens a stored session, repairing a turn a stopped gateway left running. Returns the
    /// session and what the person should be told (one line each).
    pub fn open(
        mut store: Box<Store>,
        db: &Path,
        id: &str,
        mut settings: ChatSettings,
    ) -> Result<(ChatSession, Vec<String>), GatewayError> {
        // As given, for the children (the worker options below get this session's paths).
        let given = settings.clone();
        let row = store.require_session(id)?;
        if let Some(missing) = row.workspace_roots.iter().find(|r| !Path::new(r).is_dir()) {
            return Err(GatewayError::WorkspaceGone(missing.clone()));
        }
        let mut notes = Vec::new();
        let (kind, model) = (
            settings.provider.kind.as_str(),
            settings.provider.model.clone(),
        );
        match store.session_model(id)? {
            Some(m) if m.provider != kind || m.model != model => notes.push(format!(
                "[vis] this session used {}/{}; it continues with {kind}/{model}",
                m.provider, m.model
            )),
            _ => {}
        }
        store.set_session_model(id, kind, &model, &settings.provider.base_url)?;
        let (conversation, repaired) = Conversation::load(&mut *store, id, settings.cache_prices)?;
        notes.extend(repaired);
        notes.extend(super::children::repair_children(&*store, id)?);
        let depth = super::children::depth_of(&*store, id)?;
        let defs = store.load_defs(id)?;
        let cache_key = store.prompt_cache_key(id)?;
        settings.worker.workspace = row.workspace_roots.first().map(PathBuf::from);
        // Blocks write their full outputs there, also under the sandbox.
        let artifact_dir = crate::config::artifact_dir(db, id);
        settings.worker.add_session(
            crate::config::store_files(db),
            &artifact_dir,
            &row.workspace_roots,
        );
        let supervisor = Supervisor::new(settings.worker.clone(), defs);
        let limits = BlockLimits {
            output_limit: settings.output_limit,
            timeout: settings.block_timeout,
            artifact_quota: settings.worker.sandbox.artifact_quota,
            images: settings.images,
        };
        let mut runner = BlockRunner::new(
            id,
            store,
            supervisor,
            artifact_dir,
            row.workspace_roots,
            limits,
        );
        runner.set_checkpoint_settings(settings.checkpoints.clone());
        let children = Arc::new(super::children::Children::new(
            id,
            depth,
            db.to_path_buf(),
            given,
            super::SpawnSettings::default(),
        ));
        runner.set_subs(children.clone());
        let session = ChatSession {
            id: id.to_string(),
            cache_key,
            runner,
            conversation,
            provider: None,
            settings,
            drain: CancellationToken::new(),
            mcp_listed: false,
            server_window: None,
            limits_settled: false,
            cache: Default::default(),
            children,
            depth,
        };
        Ok((session, notes))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// `[spawn]` for the sub-sessions this session's blocks start (the default until called;
    /// call before the first turn: children already running keep the settings they have).
    pub fn set_spawn(&mut self, spawn: super::SpawnSettings) {
        let children = Arc::new(super::children::Children::new(
            &self.id,
            self.depth,
            self.runner.store().location().to_path_buf(),
            self.children.given_settings(),
            spawn,
        ));
        self.runner.set_subs(children.clone());
        self.children = children;
    }

    /// How deep the session is among sub-sessions (0: no block spawned it).
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Starts a sub-session's conversation from its parent's prompt prefix, so its first
    /// request does not wait for its worker.
    pub(super) fn adopt_prefix(&mut self, prefix: ChatPrefix) -> Result<(), GatewayError> {
        if self.conversation.prefix().is_some() {
            return Ok(());
        }
        self.runner.store().save_chat_prefix(&self.id, &prefix)?;
        self.conversation.set_prefix(prefix, 0);
        Ok(())
    }

    /// Tells the children what they start from: the prompt prefix and the server's window.
    pub(super) fn brief_children(&self) {
        self.children
            .set_parent_prefix(self.conversation.prefix().cloned(), self.server_window);
    }

    pub fn store(&self) -> &Store {
        self.runner.store()
    }

    pub fn supervisor(&self) -> &Supervisor {
        self.runner.supervisor()
    }

    pub fn settings(&self) -> &ChatSettings {
        &self.settings
    }

    pub fn roots(&self) -> &[String] {
        self.runner.roots()
    }

    /// The conversation as it stands.
    pub fn entries(&self) -> &[Entry] {
        self.conversation.entries()
    }

    pub fn prefix(&self) -> Option<&ChatPrefix> {
        self.conversation.prefix()
    }

    /// o200k estimate of the next request (prefix + conversation).
    pub fn estimate_tokens(&self) -> u64 {
        self.conversation.estimate()
    }

    /// The model's limits and where they come from: the config's overrides, else the
    /// server's own window (asked at the session's first turn), else the model table, else
    /// the guess for an unknown model.
    pub fn limits(&self) -> Limits {
        limits_for(
            &self.settings.provider.model,
            self.settings.folding.input_limit,
            self.settings.folding.auto_compress_above,
            self.server_window,
        )
    }

    /// The settings to ask the server's context window with, once per session start, when
    /// nothing overrides the answer (`[folding] input_limit`).
    pub(super) fn window_question(&self) -> Option<crate::providers::ProviderSettings> {
        (!self.limits_settled && self.settings.folding.input_limit.is_none())
            .then(|| self.settings.provider.clone())
    }

    /// Takes the server's answer (`None`: it told nothing) and records the limits the session
    /// runs with and where they came from; only the first call of a session start counts.
    pub(super) fn settle_limits(
        &mut self,
        window: Option<crate::providers::ServerWindow>,
    ) -> Result<(), GatewayError> {
        if self.limits_settled {
            return Ok(());
        }
        self.limits_settled = true;
        self.server_window = window;
        let limits = self.limits();
        let record = crate::store::InputLimit {
            tokens: limits.input_limit as i64,
            source: limits.source.describe(),
        };
        self.runner.store().set_input_limit(&self.id, &record)?;
        Ok(())
    }

    /// `session["utilization"]` as it stands.
    pub fn utilization(&self) -> Utilization {
        fold::utilization(&self.conversation, self.limits())
    }

    /// Moves the clock the prompt cache's lifetime runs on forward by `secs`, as if the
    /// session had been idle that long (replays and tests simulate an idle gap with it; a
    /// running session never calls it).
    pub fn advance_clock(&mut self, secs: u64) {
        self.conversation.advance_clock(secs);
    }

    /// The folds of the session (absorbed ones included).
    pub fn folds(&self) -> &[fold::Fold] {
        self.conversation.folds()
    }

    /// Folds `key` with `gist` for the person (`/fold`), between turns.
    pub fn fold(&mut self, key: &str, gist: &str) -> Result<FoldReceipt, FoldError> {
        fold::fold(
            &mut self.conversation,
            self.runner.store_mut(),
            &self.id,
            key,
            gist,
            false,
            &self.settings.folding,
        )
    }

    /// The provider client, made on first use.
    pub(super) fn provider(&mut self) -> Result<&Provider, ProviderError> {
        if self.provider.is_none() {
            self.provider = Some(Provider::new(self.settings.provider.clone())?);
        }
        match &self.provider {
            Some(p) => Ok(p),
            None => Err(ProviderError::Config("no provider".into())),
        }
    }

    /// Gives the session MCP servers as namespaces (call before the first turn). The servers
    /// start with the worker; their calls are answered while blocks run.
    pub fn set_mcp(&mut self, hub: crate::mcp::McpHub) {
        self.runner.set_tools(Arc::new(hub));
        self.mcp_listed = false;
    }

    /// Starts the worker and, the first time, the MCP servers (together), and gives the
    /// worker the servers' tools.
    pub(super) async fn start_worker(&mut self) -> Result<(), GatewayError> {
        if self.runner.tools().is_some() && !self.mcp_listed {
            self.runner.start(true).await?;
            self.mcp_listed = true;
            Ok(())
        } else {
            Ok(self.runner.supervisor_mut().start().await?)
        }
    }

    /// Picks up MCP tool-list changes (`notifications/tools/list_changed`, restarts) before a
    /// request is assembled, so the next request carries the catalog update.
    pub(super) async fn sync_mcp(&mut self) -> Result<(), GatewayError> {
        if self.runner.tools().is_none() {
            return Ok(());
        }
        if !self.mcp_listed {
            return self.start_worker().await;
        }
        Ok(self.runner.sync_tools().await?)
    }

    /// Stops the sub-sessions, the worker and the MCP servers.
    pub async fn shutdown(&mut self) {
        self.runner.shutdown().await;
    }

    /// Stops an idle worker to free its memory; the next block starts a new one, restores
    /// the definitions and says why.
    pub async fn park(&mut self) {
        self.runner
            .supervisor_mut()
            .kill_worker("after the session was parked while idle")
            .await;
    }

    /// Turns of this session stop before their next model request once `drain` is
    /// cancelled (a gateway shutting down lets running blocks finish).
    pub fn set_drain(&mut self, drain: CancellationToken) {
        self.drain = drain;
    }

    /// Makes sure the session has its prefix: a new session's first request fixes it from the
    /// worker's catalog and the workspace's `AGENTS.md`.
    pub(super) async fn ensure_prefix(&mut self) -> Result<(), GatewayError> {
        if self.conversation.prefix().is_some() {
            return Ok(());
        }
        self.start_worker().await?;
        let supervisor = self.runner.supervisor();
        let snapshot = render_catalog(&supervisor.manifest()?, self.settings.catalog_budget)?;
        let manifest_version = supervisor.manifest_version();
        self.runner.store().save_catalog_snapshot(&snapshot)?;
        let trusted = self.runner.supervisor().options().trusted;
        let prefix = prompt::chat_prefix(&snapshot, self.workspace().as_deref(), trusted)?;
        self.runner.store().save_chat_prefix(&self.id, &prefix)?;
        self.conversation.set_prefix(prefix, manifest_version);
        Ok(())
    }

    fn workspace(&self) -> Option<PathBuf> {
        self.runner.roots().first().map(PathBuf::from)
    }

    /// Appends what changed since the conversation last showed them: the catalog (only when
    /// the worker's manifest changed), `AGENTS.md`, and background jobs that ended.
    pub(super) fn append_updates(&mut self, turn: i64) -> Result<Vec<String>, GatewayError> {
        let mut notices = Vec::new();
        let supervisor = self.runner.supervisor();
        if supervisor.is_running()
            && self
                .conversation
                .manifest_unseen(supervisor.manifest_version())
        {
            let current = render_catalog(&supervisor.manifest()?, self.settings.catalog_budget)?;
            let shown = self.conversation.shown().0.map(str::to_string);
            if shown.as_deref() != Some(current.hash.as_str()) {
                let old = shown_snapshot(self.runner.store(), shown.as_deref())?;
                self.runner.store().save_catalog_snapshot(&current)?;
                let update = crate::catalog::catalog_update(&old, &current)?;
                let text = update.text().trim_end().to_string();
                if !text.is_empty() {
                    self.append_notice(turn, &text, NoticeMeta::CatalogHash(current.hash.clone()))?;
                    notices.push(text);
                }
                self.conversation.show_catalog(current.hash);
            }
        }
        if let Some(shown) = self.conversation.shown().1.cloned() {
            let trusted = self.runner.supervisor().options().trusted;
            let now = self
                .workspace()
                .and_then(|w| prompt::shown_agents_md(&w, trusted));
            if now != shown {
                let text = prompt::agents_md_notice(now.as_deref(), trusted);
                self.append_notice(turn, &text, NoticeMeta::AgentsMd(now.clone()))?;
                self.conversation.show_agents(now);
                notices.push(text);
            }
        }
        // Background jobs that ended since the model last heard (each said once; stored as
        // history, so a resumed session sends the same bytes).
        for line in self.runner.supervisor().jobs().take_announcements() {
            self.conversation.append(
                self.runner.store_mut(),
                &self.id,
                turn,
                HistoryItem::Notice { text: line.clone() },
                None,
            )?;
            notices.push(line);
        }
        Ok(notices)
    }

    fn append_notice(
        &mut self,
        turn: i64,
        text: &str,
        meta: NoticeMeta,
    ) -> Result<(), GatewayError> {
        self.conversation.append(
            self.runner.store_mut(),
            &self.id,
            turn,
            HistoryItem::Notice {
                text: text.to_string(),
            },
            Some(meta),
        )
    }

    /// Rewinds the workspace files to before `turn` and, unless `code_only`, the conversation
    /// too (reloaded from the store, so the next request is the one sent before that turn).
    pub async fn rewind(
        &mut self,
        turn: i64,
        options: crate::checkpoints::RewindOptions,
    ) -> Result<crate::checkpoints::RewindOutcome, GatewayError> {
        let outcome = self.runner.rewind(turn, options).await?;
        let prices = self.settings.cache_prices;
        let (conversation, _) = Conversation::load(self.runner.store_mut(), &self.id, prices)?;
        self.conversation = conversation;
        Ok(outcome)
    }

    /// The body of the next request, as it would be sent now.
    pub fn next_request_body(&mut self) -> Result<Vec<u8>, GatewayError> {
        Ok(self.conversation.body(&self.settings, &self.cache_key))
    }

    /// What `vis context` shows: system text and the conversation's items.
    pub fn context_parts(&self) -> (Option<&ChatPrefix>, &[Entry]) {
        (self.conversation.prefix(), self.conversation.entries())
    }

    /// The catalog update the next request would carry if it were made now (starts the
    /// worker to know the current catalog); nothing is recorded.
    pub async fn pending_catalog_update(&mut self) -> Result<Option<String>, GatewayError> {
        let Some(shown) = self.conversation.shown().0.map(str::to_string) else {
            return Ok(None);
        };
        self.start_worker().await?;
        let current = render_catalog(
            &self.runner.supervisor().manifest()?,
            self.settings.catalog_budget,
        )?;
        if current.hash == shown {
            return Ok(None);
        }
        let old = shown_snapshot(self.runner.store(), Some(&shown))?;
        let update = crate::catalog::catalog_update(&old, &current)?;
        let text = update.text().trim_end().to_string();
        Ok((!text.is_empty()).then_some(text))
    }

    /// Runs one turn for the person's message `text` (see `turn`). Cancelling `stop`
    /// interrupts the running block or request and ends the turn. Provider errors end the
    /// turn (`Failed`, with the error) without losing anything; `Err` is kept for failures of
    /// the store or the session itself.
    pub async fn run_turn(
        &mut self,
        text: &str,
        events: &EventSink,
        stop: &CancellationToken,
    ) -> Result<TurnEnd, GatewayError> {
        super::turn::run(self, text, events, stop).await
    }

    /// Runs one block without the model, as `vis exec` does: a new turn of kind `exec` with
    /// one iteration, recorded but not part of the conversation the model sees.
    pub async fn run_exec(
        &mut self,
        code: &str,
        events: &EventSink,
        stop: &CancellationToken,
    ) -> Result<ExecEnd, GatewayError> {
        crate::runtime::validate_code(code)?;
        let turn = self
            .runner
            .store_mut()
            .begin_turn(&self.id, TurnKind::Exec, None)?;
        let _ = events.send(Event::TurnStarted { turn });
        let _ = events.send(Event::BlockStarted {
            turn,
            iteration: 1,
            code: code.to_string(),
        });
        let limits = self.limits();
        let spec = BlockSpec {
            turn,
            iteration: 1,
            code: code.to_string(),
            utilization: fold::utilization(&self.conversation, limits),
            live: Some(events.clone()),
        };
        self.conversation.set_running(Some((turn, 1)));
        let mut calls = ConversationCalls::new(
            &mut self.conversation,
            &self.id,
            &self.settings.folding,
            limits,
            None,
        );
        let ran = self
            .runner
            .run_block(spec, &mut calls, stop.child_token())
            .await;
        self.conversation.set_running(None);
        let ran = ran?;
        if let Some(e) = ran.unrecorded {
            return Err(e.into());
        }
        let _ = events.send(Event::BlockFinished {
            turn,
            iteration: 1,
            status: ran.status,
            output: ran.output.clone(),
            wall_ms: ran.wall.as_millis() as u64,
            code: None,
            images: ran.images.iter().map(|i| i.meta.clone()).collect(),
        });
        self.runner.end_turn(turn, TurnStatus::Done)?;
        let _ = events.send(Event::TurnFinished {
            turn,
            status: TurnStatus::Done,
            text: String::new(),
        });
        Ok(ExecEnd {
            turn,
            status: ran.status,
            output: ran.output,
        })
    }
}
