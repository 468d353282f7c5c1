//! The host-call side of sub-sessions: what a block's `spawn()`, `Sub.status`, `Sub.wait()`,
//! `Sub.cancel()` and `subs()` ask of the session's [`Children`], each checked first (an
//! empty task, a model or tool name not allowed, a depth past the cap are refused with the
//! cause and the fix, and nothing is started or stored).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::plan::ChildPlan;
use super::run::run_child;
use super::{first_line, lock, ChildState, Children, Running, SpawnSettings, MAX_CHILD_ITERATIONS};
use crate::catalog::ManifestEntry;
use crate::protocol::{clip, CallAnswer, CallError, Event, HostReply, HostRequest, SpawnParams};
use crate::runtime::{CallOrigin, SubSessions, ToolFuture};
use crate::store::ChildLink;

impl Children {
    /// Checks `params` and starts the child; the reply is its first state.
    fn spawn(&self, origin: &CallOrigin, params: SpawnParams) -> CallAnswer {
        let called = crate::trace::now();
        let blueprint = lock(&self.blueprint).clone();
        let task = params.task.trim();
        if task.is_empty() {
            return Err(CallError(
                "spawn: the task is empty; say what the sub-session should do, e.g. spawn(\"review src/app.py for bugs and answer with a list\")".into(),
            ));
        }
        if !(1..=MAX_CHILD_ITERATIONS).contains(&params.max_iterations) {
            return Err(CallError(format!(
                "spawn: max_iterations must be between 1 and {MAX_CHILD_ITERATIONS}, got {}; it bounds the child's tool calls (default 50)",
                params.max_iterations
            )));
        }
        let model = accepted_model(
            blueprint.settings.provider.kind.as_str(),
            &blueprint.settings.provider.model,
            &blueprint.spawn,
            params.model,
        )?;
        if let Some(tools) = &params.tools {
            for name in tools {
                crate::catalog::validate_name(name, crate::catalog::NameRule::Slug).map_err(
                    |e| CallError(format!("spawn: tools holds {:?}: {e}", clip(name, 60))),
                )?;
            }
        }
        let mut deny = blueprint.settings.worker.deny.clone();
        deny.extend(params.deny.iter().cloned());
        crate::catalog::DenyList::new(deny.iter().cloned())
            .map_err(|e| CallError(format!("spawn: the names to leave out: {e}")))?;
        if self.depth + 1 > blueprint.spawn.max_depth {
            return Err(CallError(if blueprint.spawn.max_depth == 0 {
                "spawn: sub-sessions are turned off ([spawn] max_depth = 0 in config.toml); do the work in this block".to_string()
            } else {
                format!(
                    "spawn: this session is at depth {} and [spawn] max_depth = {} allows no deeper sub-sessions; do the work in this session, or raise max_depth in config.toml",
                    self.depth, blueprint.spawn.max_depth
                )
            }));
        }
        let child = crate::session::new_session_id();
        crate::trace::mark_at(&child, "host: spawn call", called);
        let link = ChildLink {
            child: child.clone(),
            parent: self.parent.clone(),
            turn: origin.turn,
            iteration: origin.iteration,
            task: task.to_string(),
        };
        // Under the parent's lease: a node that lost it starts no child, and every write of
        // the child (its records, turns, end state) carries the same fence.
        let fence = origin.fence.as_ref().map(|f| f.for_sub_session(&child));
        self.with_store(|store| {
            store.set_lease_fence(fence.clone());
            let roots = store.require_session(&self.parent)?.workspace_roots;
            store.ensure_session(&child, &roots)?;
            store.link_child(&link)
        })?;
        crate::trace::mark(&child, "host: child stored");
        let (state_tx, state_rx) = watch::channel(ChildState {
            status: "queued".into(),
            answer: None,
        });
        let cancel = CancellationToken::new();
        let mut settings = blueprint.settings.clone();
        settings.provider.model = model.clone();
        settings.max_iterations = params.max_iterations as u32;
        settings.worker.deny = deny;
        let plan = ChildPlan {
            id: child.clone(),
            task: task.to_string(),
            db: blueprint.db.clone(),
            settings,
            spawn: blueprint.spawn.clone(),
            // A child with fewer tools (or of a parent without a conversation) renders its
            // own catalog, from the parent's manifest when there is one.
            prefix: blueprint.prefix.filter(|_| params.deny.is_empty()),
            manifest: blueprint.manifest,
            rendered: self.rendered.clone(),
            window: blueprint.window,
            live: origin.live.clone(),
            fence,
        };
        // Said before the child's task exists: a child that ends at once must not report its
        // end ahead of its start.
        if let Some(live) = &origin.live {
            let _ = live.send(Event::ChildStarted {
                turn: origin.turn,
                iteration: origin.iteration,
                child: child.clone(),
                task: first_line(task),
            });
        }
        let task_handle = tokio::spawn(run_child(
            plan,
            self.slots.clone(),
            cancel.clone(),
            state_tx,
        ));
        lock(&self.running).insert(
            child.clone(),
            Running {
                turn: origin.turn,
                iteration: origin.iteration,
                cancel,
                state: state_rx,
                task: Some(task_handle),
            },
        );
        crate::trace::mark(&child, "host: task started");
        Ok(HostReply::Sub(json!({
            "id": child,
            "task": task,
            "model": model,
            "status": "queued",
            "answer": Value::Null,
        })))
    }

    fn reply(id: &str, state: &ChildState) -> CallAnswer {
        Ok(HostReply::Sub(json!({
            "id": id,
            "status": state.status,
            "answer": state.answer,
        })))
    }

    fn list(&self) -> CallAnswer {
        let rows = self.with_store(|store| store.children_of(&self.parent))?;
        let running = lock(&self.running);
        let items: Vec<Value> = rows
            .into_iter()
            .map(|row| {
                let (status, answer) = match running.get(&row.link.child) {
                    Some(r) => {
                        let state = r.state.borrow();
                        (state.status.clone(), state.answer.clone())
                    }
                    None => (row.status, row.answer),
                };
                json!({
                    "id": row.link.child,
                    "task": row.link.task,
                    "turn": row.link.turn,
                    "iteration": row.link.iteration,
                    "status": status,
                    "answer": answer,
                    "input_tokens": row.input_tokens,
                    "output_tokens": row.output_tokens,
                })
            })
            .collect();
        Ok(HostReply::Sub(Value::Array(items)))
    }
}

impl SubSessions for Children {
    fn answer(&self, origin: CallOrigin, request: HostRequest) -> ToolFuture<'static, CallAnswer> {
        let ready = |answer: CallAnswer| -> ToolFuture<'static, CallAnswer> {
            Box::pin(async move { answer })
        };
        match request {
            HostRequest::Spawn(params) => ready(self.spawn(&origin, params)),
            HostRequest::SubStatus { id } => {
                ready(self.state(&id).and_then(|(s, _)| Self::reply(&id, &s)))
            }
            HostRequest::SubCancel { id } => {
                // One not running here ended (or ran in a process that stopped); `state`
                // answers for it, or says it is not this session's child.
                if let Some(r) = lock(&self.running).get(&id) {
                    r.cancel.cancel();
                }
                ready(self.state(&id).and_then(|(s, _)| Self::reply(&id, &s)))
            }
            HostRequest::SubList {} => ready(self.list()),
            HostRequest::SubWait { id, timeout } => {
                if let Some(t) = timeout.filter(|t| !(t.is_finite() && *t >= 0.0)) {
                    return ready(Err(CallError(format!(
                        "Sub.wait: timeout must be a number of seconds of at least 0, or None to wait until the sub-session ends; got {t}"
                    ))));
                }
                let (state, receiver) = match self.state(&id) {
                    Ok(found) => found,
                    Err(e) => return ready(Err(e)),
                };
                let Some(mut receiver) = receiver.filter(|_| !state.finished()) else {
                    return ready(Self::reply(&id, &state));
                };
                // A timeout too long for a `Duration` (1e20 s) is no limit at all.
                let timeout = timeout.and_then(|t| Duration::try_from_secs_f64(t).ok());
                Box::pin(async move {
                    let state = match timeout {
                        None => receiver
                            .wait_for(ChildState::finished)
                            .await
                            .map(|s| s.clone())
                            .ok(),
                        Some(t) => {
                            let ended =
                                tokio::time::timeout(t, receiver.wait_for(ChildState::finished))
                                    .await
                                    .map(|s| s.map(|s| s.clone()).ok());
                            match ended {
                                Ok(state) => state,
                                Err(_) => Some(receiver.borrow().clone()),
                            }
                        }
                    };
                    let state = state.unwrap_or_else(|| ChildState {
                        status: "failed: the sub-session's task ended without a status".into(),
                        answer: None,
                    });
                    Self::reply(&id, &state)
                })
            }
            other => ready(Err(CallError(format!(
                "the sub-sessions answer no '{}' call",
                other.method()
            )))),
        }
    }

    fn block_interrupted(&self, turn: i64, iteration: i64) {
        for r in lock(&self.running).values() {
            if r.turn == turn && r.iteration == iteration && !r.state.borrow().finished() {
                r.cancel.cancel();
            }
        }
    }

    fn parent_manifest(&self, version: u64, entries: &[ManifestEntry]) {
        let mut blueprint = lock(&self.blueprint);
        // Copied once per change of the manifest (0: no worker has reported one yet).
        let known = blueprint.manifest.as_ref().map(|(v, _)| *v);
        if version != 0 && known != Some(version) {
            blueprint.manifest = Some((version, Arc::new(entries.to_vec())));
        }
    }

    fn shutdown(&self) -> crate::runtime::ShutdownFuture<'_> {
        Box::pin(self.stop_all())
    }
}

/// The model a child runs with: the session's own, or one `[spawn] models` lists, either
/// alone or as `PROVIDER/MODEL` with the session's provider.
fn accepted_model(
    kind: &str,
    own: &str,
    spawn: &SpawnSettings,
    asked: Option<String>,
) -> Result<String, CallError> {
    let Some(asked) = asked else {
        return Ok(spawn.model.clone().unwrap_or_else(|| own.to_string()));
    };
    let name = asked
        .strip_prefix(kind)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(&asked)
        .trim();
    if name == own || spawn.models.iter().any(|m| m == name) || spawn.model.as_deref() == Some(name)
    {
        return Ok(name.to_string());
    }
    let listed = if spawn.models.is_empty() {
        "none is listed".to_string()
    } else {
        format!("listed: {}", spawn.models.join(", "))
    };
    Err(CallError(format!(
        "spawn: model {:?} is not configured for sub-sessions; use the session's model ({kind}/{own}) with model=None, or list the model in [spawn] models in config.toml ({listed})",
        clip(&asked, 80)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(models: &[&str], model: Option<&str>) -> SpawnSettings {
        SpawnSettings {
            models: models.iter().map(|m| m.to_string()).collect(),
            model: model.map(str::to_string),
            ..SpawnSettings::default()
        }
    }

    #[test]
    fn a_child_without_a_model_runs_with_the_spawn_model_else_the_sessions() {
        let none = listing(&[], None);
        assert_eq!(
            accepted_model("openai", "gpt-4.1", &none, None).unwrap(),
            "gpt-4.1"
        );
        let set = listing(&[], Some("gpt-4.1-mini"));
        assert_eq!(
            accepted_model("openai", "gpt-4.1", &set, None).unwrap(),
            "gpt-4.1-mini"
        );
    }

    #[test]
    fn a_listed_model_is_accepted_alone_or_with_the_sessions_provider() {
        let spawn = listing(&["gpt-4.1-mini"], None);
        for asked in [
            "gpt-4.1-mini",
            "openai/gpt-4.1-mini",
            "openai/gpt-4.1",
            "gpt-4.1",
        ] {
            let got = accepted_model("openai", "gpt-4.1", &spawn, Some(asked.into())).unwrap();
            assert_eq!(Some(got.as_str()), asked.rsplit('/').next(), "{asked}");
        }
    }

    #[test]
    fn an_unlisted_model_or_another_provider_is_refused_with_the_fix() {
        let spawn = listing(&["gpt-4.1-mini"], None);
        for asked in ["o3", "anthropic/gpt-4.1-mini"] {
            let CallError(message) =
                accepted_model("openai", "gpt-4.1", &spawn, Some(asked.into())).unwrap_err();
            assert!(message.contains(&format!("{asked:?}")), "{message}");
            assert!(
                message.contains("(openai/gpt-4.1) with model=None"),
                "{message}"
            );
            assert!(message.contains("listed: gpt-4.1-mini"), "{message}");
        }
        let CallError(message) =
            accepted_model("openai", "gpt-4.1", &listing(&[], None), Some("o3".into()))
                .unwrap_err();
        assert!(message.contains("none is listed"), "{message}");
    }
}
