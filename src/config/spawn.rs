//! `[spawn]`: sub-sessions a block starts with `spawn()` (issue 27 §3; `docs/spawn.md`).

/// The deepest nesting `max_depth` may ask for.
pub const MAX_SPAWN_DEPTH: u32 = 8;
/// The most children one session may run at once.
pub const MAX_SPAWN_PARALLEL: u32 = 64;

/// `[spawn]` as written; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct SpawnConfig {
    /// How deep sub-sessions nest: 1 lets a session spawn children that cannot spawn; 0 turns
    /// `spawn()` off (default 2).
    pub max_depth: Option<u32>,
    /// Children of one session running at once; more wait their turn (default 4).
    pub max_parallel: Option<u32>,
    /// Models a child may name with `model=` besides the session's own (served by the
    /// session's provider).
    pub models: Option<Vec<String>>,
    /// The model a child runs with when `spawn()` names none (default: the session's own);
    /// it also gives `vis mcp`, which has no model of its own, one for its sub-sessions.
    pub model: Option<String>,
}

impl SpawnConfig {
    /// The checks serde cannot make; `at(key)` is `line N: ` for `[spawn] key`.
    pub(super) fn check(&self, at: impl Fn(&str) -> String) -> Result<(), String> {
        if let Some(depth) = self.max_depth.filter(|d| *d > MAX_SPAWN_DEPTH) {
            return Err(format!(
                "{}`spawn.max_depth` must be between 0 (no sub-sessions) and {MAX_SPAWN_DEPTH}, got {depth}; e.g. max_depth = 2",
                at("max_depth")
            ));
        }
        if let Some(n) = self
            .max_parallel
            .filter(|n| *n == 0 || *n > MAX_SPAWN_PARALLEL)
        {
            return Err(format!(
                "{}`spawn.max_parallel` must be between 1 and {MAX_SPAWN_PARALLEL}, got {n}; e.g. max_parallel = 4",
                at("max_parallel")
            ));
        }
        for model in self.models.iter().flatten().chain(self.model.iter()) {
            if model.trim().is_empty() || model.chars().any(|c| c.is_control() || c == ' ') {
                let key = if self.model.as_ref() == Some(model) {
                    "model"
                } else {
                    "models"
                };
                return Err(format!(
                    "{}`spawn.{key}` holds {:?}, which is not a model name; name models such as \"gpt-4.1-mini\"",
                    at(key),
                    crate::protocol::clip(model, 60)
                ));
            }
        }
        Ok(())
    }
}
