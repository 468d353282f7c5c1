//! `[sandbox]`: the worker's sandbox as written (see `crate::sandbox`), and the one check
//! that rewrites values: paths are made absolute (`~/` read as the home directory) here, so
//! every later reader sees full paths.

use std::path::{Path, PathBuf};

/// `[sandbox]`: the worker's sandbox (see `sandbox`).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct SandboxConfig {
    pub mode: Option<String>,
    pub network: Option<bool>,
    #[serde(default)]
    pub writable: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    pub require: Option<bool>,
    pub max_file_mb: Option<u64>,
    pub max_processes: Option<u64>,
    pub artifact_quota_mb: Option<u64>,
    /// More paths blocks may not see (empty in their view).
    #[serde(default)]
    pub hide: Vec<String>,
    /// Hidden paths blocks may read after all (never Vis's own directories).
    #[serde(default)]
    pub allow_read: Vec<String>,
    /// Let blocks create Unix sockets (off: a socket file outside the workspace could reach a
    /// program outside the sandbox).
    pub allow_unix_sockets: Option<bool>,
    /// The size cap of each of the worker's own tmpfs (`/tmp`, `/var/tmp`, `/dev/shm`).
    pub tmp_size_mb: Option<u64>,
}

impl SandboxConfig {
    /// The section checked, its paths made absolute; `at(key)` is `line N: ` for
    /// `[sandbox] key`.
    pub(super) fn resolve(mut self, at: impl Fn(&str) -> String) -> Result<Self, String> {
        if let Some(mode) = &self.mode {
            crate::sandbox::Mode::parse(mode)
                .map_err(|e| format!("{}`sandbox.mode`: {e}", at("mode")))?;
        }
        for (key, paths) in [
            ("writable", &mut self.writable),
            ("hide", &mut self.hide),
            ("allow_read", &mut self.allow_read),
        ] {
            for path in paths.iter_mut() {
                match expand_home(path) {
                    Some(absolute) => *path = absolute,
                    None => {
                        return Err(format!(
                            "{}`sandbox.{key}` holds {path:?}, which is not an absolute path (or one starting with ~/); write it in full",
                            at(key)
                        ))
                    }
                }
            }
        }
        if self.tmp_size_mb == Some(0) {
            return Err(format!(
                "{}`sandbox.tmp_size_mb` must be at least 1",
                at("tmp_size_mb")
            ));
        }
        Ok(self)
    }
}

/// `path` made absolute: as it is, or with a leading `~/` read as the home directory. `None`
/// for a relative path (or `~/` without a home).
fn expand_home(path: &str) -> Option<String> {
    if Path::new(path).is_absolute() {
        return Some(path.to_string());
    }
    let rest = path.strip_prefix("~/").or((path == "~").then_some(""))?;
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(
        PathBuf::from(home)
            .join(rest)
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::key_marker as at;
    use super::*;

    #[test]
    fn paths_are_made_absolute_or_refused() {
        let config = SandboxConfig {
            writable: vec!["/srv/out".into()],
            hide: vec!["relative/secrets".into()],
            ..SandboxConfig::default()
        };
        let e = config.resolve(at).unwrap_err();
        assert!(
            e.starts_with(
                "[hide] `sandbox.hide` holds \"relative/secrets\", which is not an absolute path"
            ),
            "{e}"
        );
        let resolved = SandboxConfig {
            writable: vec!["/srv/out".into()],
            ..SandboxConfig::default()
        }
        .resolve(at)
        .unwrap();
        assert_eq!(resolved.writable, ["/srv/out"]);
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            let home = PathBuf::from(home);
            assert_eq!(
                expand_home("~/notes"),
                Some(home.join("notes").to_string_lossy().into_owned())
            );
        }
        assert_eq!(expand_home("notes"), None);
    }

    #[test]
    fn a_bad_mode_and_a_zero_tmp_size_are_refused() {
        let bad_mode = SandboxConfig {
            mode: Some("bogus".into()),
            ..SandboxConfig::default()
        };
        assert!(bad_mode
            .resolve(at)
            .unwrap_err()
            .starts_with("[mode] `sandbox.mode`: "));
        let zero = SandboxConfig {
            tmp_size_mb: Some(0),
            ..SandboxConfig::default()
        };
        assert_eq!(
            zero.resolve(at).unwrap_err(),
            "[tmp_size_mb] `sandbox.tmp_size_mb` must be at least 1"
        );
    }
}
