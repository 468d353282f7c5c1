//! Which workspaces the user trusts with their own code and instructions.
//!
//! A cloned repository can carry code that would run as soon as a worker starts in it
//! (`.vis/extensions/*.py`, commands in `.vis/mcp.toml`, a workspace `.venv`'s `.pth` files and
//! Python) and text that would reach the model as instructions (`AGENTS.md`, skills). None of it
//! is used until the user trusts the workspace once, like Codex and Claude Code ask:
//! `vis trust [DIR]`, the prompt of `vis chat`, or `[trust] workspaces` in `config.toml`.
//! [`TRUST_ENABLES`] is the one list of what trusting changes; every place that asks or tells
//! the user shows it. Trusting a directory trusts everything below it. The list `vis trust`
//! keeps is `trusted.toml` in the config directory.

use std::path::{Path, PathBuf};

use crate::config::Config;

/// The file `vis trust` writes, in the config directory.
pub const TRUST_FILE: &str = "trusted.toml";

/// What trusting a workspace lets its own files do, as the user reads it (`vis trust`, the
/// question of `vis chat`). Each item is also what an untrusted workspace does not get.
pub const TRUST_ENABLES: &[&str] = &[
    "its extensions (.vis/extensions) load into every session's worker",
    "its MCP servers (.vis/mcp.toml) start: the commands written there run",
    "its .venv's .pth files run when a worker starts",
    "tests.run() runs pytest with its .venv's Python (untrusted: Vis's own Python)",
    "its AGENTS.md and skills (.vis/skills) reach the model as instructions (untrusted: only their names)",
    "git.* reads its repository's whole .git/config (untrusted: only what reading the repository needs; no setting can make git.* run a program either way)",
];

/// [`TRUST_ENABLES`] as an indented list under a heading, one item a line.
pub fn enables_text() -> String {
    let mut text = String::from("Trusting a workspace lets:\n");
    for item in TRUST_ENABLES {
        text.push_str("  - ");
        text.push_str(item);
        text.push('\n');
    }
    text
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{path} is not an existing directory; pass the workspace to trust")]
    NotADirectory { path: PathBuf },
    #[error("cannot read {path}: {detail}; fix or remove it")]
    Read { path: PathBuf, detail: String },
    #[error("cannot write {path}: {source}; check the config directory's permissions")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct TrustFile {
    #[serde(default)]
    workspaces: Vec<String>,
}

fn read_file(config_dir: &Path) -> Result<TrustFile, TrustError> {
    let path = config_dir.join(TRUST_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => toml::from_str(&text).map_err(|e| TrustError::Read {
            path,
            detail: e.message().to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustFile::default()),
        Err(e) => Err(TrustError::Read {
            path,
            detail: e.to_string(),
        }),
    }
}

/// Every trusted directory: `vis trust`'s list and the config's `[trust] workspaces`.
pub fn trusted_dirs(config: &Config) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = read_file(&config.dir)
        .map(|f| f.workspaces)
        .unwrap_or_default()
        .into_iter()
        .chain(config.trusted_workspaces.iter().cloned())
        .map(PathBuf::from)
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// True when `workspace` (or a directory above it) is trusted.
pub fn is_trusted(config: &Config, workspace: &Path) -> bool {
    let Ok(ws) = workspace.canonicalize() else {
        return false;
    };
    trusted_dirs(config)
        .iter()
        .any(|t| t.canonicalize().map(|t| ws.starts_with(t)).unwrap_or(false))
}

/// Adds `dir` to `vis trust`'s list; returns its canonical path.
pub fn trust(config_dir: &Path, dir: &Path) -> Result<PathBuf, TrustError> {
    let canonical = dir
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| TrustError::NotADirectory {
            path: dir.to_path_buf(),
        })?;
    let mut file = read_file(config_dir)?;
    let text = canonical.to_string_lossy().into_owned();
    if !file.workspaces.contains(&text) {
        file.workspaces.push(text);
        file.workspaces.sort();
        write_file(config_dir, &file)?;
    }
    Ok(canonical)
}

/// Removes `dir` from `vis trust`'s list; returns whether it was there.
pub fn revoke(config_dir: &Path, dir: &Path) -> Result<bool, TrustError> {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut file = read_file(config_dir)?;
    let before = file.workspaces.len();
    let text = canonical.to_string_lossy();
    file.workspaces.retain(|w| w.as_str() != text);
    let removed = file.workspaces.len() != before;
    if removed {
        write_file(config_dir, &file)?;
    }
    Ok(removed)
}

fn write_file(config_dir: &Path, file: &TrustFile) -> Result<(), TrustError> {
    let path = config_dir.join(TRUST_FILE);
    let write = |source| TrustError::Write {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(config_dir).map_err(write)?;
    let text = format!(
        "# Workspaces whose own code may run in Vis (`vis trust`).\n{}",
        toml::to_string(file).unwrap_or_default()
    );
    // Written beside and renamed, so a reader never sees half a list.
    let temp = path.with_extension("toml.new");
    std::fs::write(&temp, text).map_err(write)?;
    std::fs::rename(&temp, &path).map_err(write)
}

/// What a workspace carries that is used only once it is trusted: its code and its
/// instructions (see [`TRUST_ENABLES`]).
pub fn workspace_items(workspace: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let ext = workspace.join(".vis/extensions");
    if let Ok(entries) = std::fs::read_dir(&ext) {
        let names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with(['.', '_']) && (n.ends_with(".py") || !n.contains('.')))
            .collect();
        if !names.is_empty() {
            out.push(format!(".vis/extensions ({})", names.join(", ")));
        }
    }
    if workspace.join(".vis/mcp.toml").is_file() {
        out.push(".vis/mcp.toml (MCP server commands)".into());
    }
    let lib = workspace.join(".venv/lib");
    if let Ok(versions) = std::fs::read_dir(&lib) {
        for v in versions.flatten() {
            let sp = v.path().join("site-packages");
            let pth = std::fs::read_dir(&sp)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.file_name().to_string_lossy().ends_with(".pth"))
                        .count()
                })
                .unwrap_or(0);
            if pth > 0 {
                out.push(format!(".venv .pth files ({pth})"));
            }
        }
    }
    if workspace.join(".venv/bin/python").exists() {
        out.push(".venv Python (tests.run)".into());
    }
    if workspace.join("AGENTS.md").is_file() {
        out.push("AGENTS.md".into());
    }
    let skills = std::fs::read_dir(workspace.join(".vis/skills"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("SKILL.md").is_file())
                .count()
        })
        .unwrap_or(0);
    if skills > 0 {
        out.push(format!(".vis/skills ({skills})"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusting_a_directory_trusts_what_is_below_it() {
        let dir = tempfile::tempdir().unwrap();
        let config_dir = dir.path().join("config");
        let ws = dir.path().join("code/project");
        std::fs::create_dir_all(&ws).unwrap();
        let config = Config {
            dir: config_dir.clone(),
            ..Config::default()
        };
        assert!(!is_trusted(&config, &ws));
        trust(&config_dir, &dir.path().join("code")).unwrap();
        assert!(is_trusted(&config, &ws));
        assert!(!is_trusted(&config, dir.path()));
        assert!(revoke(&config_dir, &dir.path().join("code")).unwrap());
        assert!(!is_trusted(&config, &ws));
        let e = trust(&config_dir, &dir.path().join("nope")).unwrap_err();
        assert!(e.to_string().contains("not an existing directory"), "{e}");
    }

    #[test]
    fn a_workspace_lists_its_code_and_instructions() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        assert!(workspace_items(ws).is_empty());
        std::fs::write(ws.join("AGENTS.md"), "x").unwrap();
        std::fs::create_dir_all(ws.join(".vis/skills/a")).unwrap();
        std::fs::write(ws.join(".vis/skills/a/SKILL.md"), "x").unwrap();
        std::fs::create_dir_all(ws.join(".vis/skills/not-a-skill")).unwrap();
        std::fs::create_dir_all(ws.join(".vis/extensions")).unwrap();
        std::fs::write(ws.join(".vis/extensions/tool.py"), "x").unwrap();
        assert_eq!(
            workspace_items(ws),
            [".vis/extensions (tool.py)", "AGENTS.md", ".vis/skills (1)"]
        );
        let text = enables_text();
        assert_eq!(text.lines().count(), TRUST_ENABLES.len() + 1);
        assert!(text.contains("  - its AGENTS.md and skills"), "{text}");
    }
}
