//! `[provider]`: which model to talk to and how. Flags and environment variables are layered
//! over it in `cli::settings`; values are checked here, so a bad one is reported with its
//! line before anything runs.

use serde::{de::Error as _, Deserialize, Deserializer};

use crate::providers::ToolChoice;

/// `[provider]` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ProviderConfig {
    pub name: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub thinking_budget: Option<u32>,
    pub request_timeout: Option<f64>,
    pub idle_timeout: Option<f64>,
    pub max_retries: Option<u32>,
    /// `"auto"`, `"required"`, `"none"` or the tool's name (`python_execution`); sent as
    /// `tool_choice` with every request. Not sent when absent.
    #[serde(default, deserialize_with = "tool_choice")]
    pub tool_choice: Option<ToolChoice>,
    /// `false`: ask for whole answers instead of streams (for servers that cannot stream
    /// what is asked, e.g. llama-cpp-python with `tool_choice`).
    pub stream: Option<bool>,
    /// Whether the model takes images (`show()`); unset: decided by the model's family.
    pub images: Option<bool>,
}

/// `tool_choice` checked while it is read, so the error carries the line.
pub(super) fn tool_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ToolChoice>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    text.map(|t| {
        ToolChoice::parse(&t).map_err(|why| D::Error::custom(format!("`tool_choice` {why}")))
    })
    .transpose()
}

impl ProviderConfig {
    /// The checks serde cannot make; `at(key)` is `line N: ` for `[provider] key`.
    pub(super) fn check(&self, at: impl Fn(&str) -> String) -> Result<(), String> {
        for (key, value) in [
            ("request_timeout", self.request_timeout),
            ("idle_timeout", self.idle_timeout),
        ] {
            if let Some(v) = value.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(format!(
                    "{}`provider.{key}` must be a positive number of seconds, got {v}",
                    at(key)
                ));
            }
        }
        Ok(())
    }
}
