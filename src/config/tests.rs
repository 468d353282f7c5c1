//! Unit tests of `config.toml` parsing.

use super::*;

pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(Path::new("/c"), Path::new("/c/config.toml"), text)
}

/// A section check's `at` for unit tests: `[key] ` instead of a line, so a message shows
/// which key it was given.
pub(super) fn key_marker(key: &str) -> String {
    format!("[{key}] ")
}

#[test]
fn reads_deny_and_budget() {
    let c = parse("[permissions]\ndeny = [\"git.blame\", \"tests\"]\n[catalog]\nbudget = 900\n[other]\nx = 1\n").unwrap();
    assert_eq!(c.deny, vec!["git.blame", "tests"]);
    assert_eq!(c.catalog_budget, Some(900));
    assert_eq!(parse("").unwrap().deny, Vec::<String>::new());
}

#[test]
fn reads_runtime_settings_and_rejects_bad_ones() {
    let c = parse("[runtime]\ntimeout = 1.5\nmemory_limit_mb = 512\noutput_limit = 300\n").unwrap();
    assert_eq!(
        (c.timeout, c.memory_limit_mb, c.output_limit),
        (Some(1.5), Some(512), Some(300))
    );
    let e = parse("[runtime]\n\ntimeout = -1\n")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "invalid config file /c/config.toml: line 3: `runtime.timeout` must be a number of at least 0.001, got -1; e.g. timeout = 300");
    let e = parse("[runtime]\noutput_limit = \"big\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2 (`output_limit = \"big\"`)") && e.contains("expected a number"),
        "{e}"
    );
}

#[test]
fn reads_provider_and_gateway_tables() {
    let c = parse("[provider]\nname = \"anthropic\"\nmodel = \"m\"\nmax_retries = 2\n[gateway]\nmax_iterations = 7\n").unwrap();
    assert_eq!(c.provider.name.as_deref(), Some("anthropic"));
    assert_eq!(c.provider.max_retries, Some(2));
    assert_eq!(c.gateway.max_iterations, Some(7));
    let e = parse("[provider]\n\nmax_retries = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 3") && e.contains("max_retries"), "{e}");
    let e = parse("[gateway]\nmax_iterations = 0\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least 1"), "{e}");
    let e = parse("[provider]\nidle_timeout = -3\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("positive number of seconds"), "{e}");
}

#[test]
fn tool_choice_and_stream_are_read_and_checked() {
    use crate::providers::ToolChoice;
    let c = parse("[provider]\ntool_choice = \"auto\"\nstream = false\n").unwrap();
    assert_eq!(c.provider.tool_choice, Some(ToolChoice::Auto));
    assert_eq!(c.provider.stream, Some(false));
    for (text, choice) in [
        ("required", ToolChoice::Required),
        ("none", ToolChoice::Off),
        (
            "python_execution",
            ToolChoice::Function("python_execution".into()),
        ),
    ] {
        let c = parse(&format!("[provider]\ntool_choice = \"{text}\"\n")).unwrap();
        assert_eq!(c.provider.tool_choice, Some(choice));
    }
    let c = parse("").unwrap();
    assert_eq!((c.provider.tool_choice, c.provider.stream), (None, None));
    let e = parse("[provider]\nmodel = \"m\"\ntool_choice = \"grep\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 3")
            && e.contains("`tool_choice` must be \"auto\", \"required\", \"none\" or the tool's name \"python_execution\", got \"grep\""),
        "{e}"
    );
    let e = parse("[provider]\nstream = 0\n").unwrap_err().to_string();
    assert!(
        e.contains("line 2") && e.contains("expected true or false"),
        "{e}"
    );
    let c = parse(
        "[serve.providers.local]\nprovider = \"openai\"\ntool_choice = \"auto\"\nstream = false\n",
    )
    .unwrap();
    let local = &c.serve.providers["local"];
    assert_eq!(
        (&local.tool_choice, local.stream),
        (&Some(ToolChoice::Auto), Some(false))
    );
}

#[test]
fn a_bad_value_is_placed_in_its_own_table() {
    // `mode` appears first under [serve] (where it is unknown and ignored); the error is
    // about the one under [sandbox].
    let e = parse("[serve]\nmode = 1\n\n[sandbox]\nmode = \"bogus\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 5: `sandbox.mode`"), "{e}");
    let e = parse("[provider]\ntimeout = 1\n[runtime]\nx = 1\ntimeout = -2\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 5: `runtime.timeout`"), "{e}");
    let e = parse("[folding]\n[folding.x]\ninput_limit = 5\n[folding.y]\n")
        .map(|c| c.folding.input_limit);
    assert!(matches!(e, Ok(None)), "{e:?}");
    assert_eq!(line_of_key("a = 1\n[b]\nc = 2\n", &["b", "c"]), "line 3: ");
    assert_eq!(line_of_key("a = 1\n[b]\nc = 2\n", &["b", "d"]), "line 2: ");
    assert_eq!(line_of_key("[b\n", &["b"]), "");
}

#[test]
fn the_serve_token_lives_beside_the_database() {
    assert_eq!(
        serve_token_path(Path::new("/data/vis/vis.db")),
        Path::new("/data/vis/serve-token")
    );
    assert_eq!(
        serve_token_path(Path::new("vis.db")),
        Path::new("./serve-token")
    );
}

#[test]
fn errors_name_file_line_and_fix() {
    let e = parse("[permissions]\ndeny = [\"git.2fa\"]\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/c/config.toml") && e.contains("line 2") && e.contains("`2fa`"),
        "{e}"
    );
    let e = parse("[catalog]\nbudget = 0\n").unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("positive"), "{e}");
    let e = parse("[catalog\n").unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("TOML"), "{e}");
    let e = parse("[permissions]\ndeny = \"tests\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2") && e.contains("expected a list"), "{e}");
}

#[test]
fn pricing_overrides_the_builtin_table_by_provider_and_model_pattern() {
    use crate::providers::{CachePrices, ProviderKind};
    let c = parse(
        "[pricing]\ncache_lifetime = 3600\ncache_write = 2\n[pricing.models.\"gpt-5*\"]\ncache_read = 0.2\n[pricing.models.\"gpt-5-mini\"]\ncache_read = 0.05\n[pricing.models.\"*/gpt-4o*\"]\ncache_read = 0.3\n",
    )
    .unwrap();
    let p = c
        .pricing
        .prices(ProviderKind::Anthropic, "claude-sonnet-4-5");
    assert_eq!(
        (p.cache_read, p.cache_write, p.lifetime_secs),
        (0.1, 2.0, 3600)
    );
    let p = c.pricing.prices(ProviderKind::OpenAi, "GPT-5");
    assert_eq!((p.cache_read, p.cache_write), (0.2, 2.0));
    // The longest matching pattern wins.
    assert_eq!(
        c.pricing
            .prices(ProviderKind::OpenAi, "gpt-5-mini")
            .cache_read,
        0.05
    );
    assert_eq!(
        c.pricing
            .prices(ProviderKind::OpenAi, "openai/gpt-4o-mini")
            .cache_read,
        0.3
    );
    assert_eq!(
        c.pricing.prices(ProviderKind::OpenAi, "gpt-4o").cache_read,
        0.5
    );
    // No [pricing]: the built-in table.
    assert_eq!(
        parse("")
            .unwrap()
            .pricing
            .prices(ProviderKind::OpenAi, "gpt-4.1"),
        CachePrices::builtin(ProviderKind::OpenAi, "gpt-4.1")
    );
}

#[test]
fn model_patterns_match_whole_names_with_stars() {
    for (pattern, name, hit) in [
        ("gpt-5*", "gpt-5-mini", true),
        ("gpt-5*", "xgpt-5", false),
        ("gpt-5", "gpt-5-mini", false),
        ("GPT-5", "gpt-5", true),
        ("claude-*-4-5", "claude-sonnet-4-5", true),
        ("claude-*-4-5", "claude-sonnet-4-5-x", false),
        ("*mini*", "o4-mini-high", true),
        ("a*a", "a", false),
    ] {
        assert_eq!(matches_pattern(pattern, name), hit, "{pattern} {name}");
    }
}

#[test]
fn bad_pricing_values_are_refused_with_their_line() {
    for (text, expected) in [
        (
            "[pricing]\n\ncache_read = 1.5\n",
            "line 3: `pricing.cache_read` must be a price between 0 and 1",
        ),
        (
            "[pricing]\ncache_write = 0.5\n",
            "line 2: `pricing.cache_write` must be a price between 1 and 10",
        ),
        (
            "[pricing]\ncache_lifetime = 0\n",
            "line 2: `pricing.cache_lifetime` must be between 1 and 86400 seconds, got 0",
        ),
        (
            "[pricing.models.\"gpt-5*\"]\ncache_read = 0.1\n[pricing.models.\"o3\"]\n\ncache_read = -0.1\n",
            "line 5: `pricing.models.\"o3\".cache_read` must be a price between 0 and 1",
        ),
        (
            "[pricing.models.\"*\"]\ncache_read = 0.1\n",
            "line 1: `pricing.models.\"*\"`: the pattern names no model",
        ),
        (
            "[pricing.models.\"o3\"]\ncache_reads = 0.1\n",
            "line 1: `pricing.models.\"o3\"` sets none of cache_read, cache_write and cache_lifetime",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(expected), "{text}\n{e}");
    }
    let e = parse("[pricing]\ncache_read = \"cheap\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2 (`cache_read = \"cheap\"`)") && e.contains("expected a number"),
        "{e}"
    );
}

#[test]
fn reads_jobs_and_rejects_bad_values_with_the_fix() {
    let c = parse("[jobs]\nmax = 3\noutput_mb = 10\n").unwrap();
    assert_eq!((c.jobs.max, c.jobs.output_mb), (Some(3), Some(10)));
    assert_eq!(parse("").unwrap().jobs, JobsConfig::default());
    let e = parse("[jobs]\n\nmax = 0\n").unwrap_err().to_string();
    assert_eq!(e, "invalid config file /c/config.toml: line 3: `jobs.max` must be a whole number from 1 to 256, got 0; e.g. max = 8");
    let e = parse("[jobs]\noutput_mb = -5\n").unwrap_err().to_string();
    assert!(
        e.contains("`jobs.output_mb` must be a whole number of MiB"),
        "{e}"
    );
    let e = parse("[jobs]\nmax = \"many\"\n").unwrap_err().to_string();
    assert!(e.contains("line 2 (`max = \"many\"`)"), "{e}");
}
