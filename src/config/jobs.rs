//! `[jobs]`: background jobs (`sh.background`, see `runtime::host::jobs`).

/// `[jobs]` as written (numbers as TOML integers); `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct JobsConfig {
    /// Jobs running at once per session (default 8, at most [`MAX_JOBS_LIMIT`]).
    pub max: Option<i64>,
    /// What one job's artifact file keeps, MiB (default 64); the rest is counted, not kept.
    pub output_mb: Option<i64>,
}

/// The largest `[jobs] max` accepted.
pub const MAX_JOBS_LIMIT: i64 = 256;

impl JobsConfig {
    /// Checks the values; the error names the key (`at` gives its line) and what to write.
    pub fn check(&self, at: impl Fn(&str) -> String) -> Result<(), String> {
        if let Some(max) = self.max.filter(|m| !(1..=MAX_JOBS_LIMIT).contains(m)) {
            return Err(format!(
                "{}`jobs.max` must be a whole number from 1 to {MAX_JOBS_LIMIT}, got {max}; e.g. max = 8",
                at("max")
            ));
        }
        if let Some(mb) = self.output_mb.filter(|m| !(1..=1024 * 1024).contains(m)) {
            return Err(format!(
                "{}`jobs.output_mb` must be a whole number of MiB from 1 to 1048576, got {mb}; e.g. output_mb = 64",
                at("output_mb")
            ));
        }
        Ok(())
    }
}
