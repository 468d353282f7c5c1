//! The worker's sandbox on Linux, in layers (SPEC §1):
//!
//! 1. namespaces (`runtime::launcher`): its own user (unprivileged users), PID, mount and,
//!    when the network is off, network namespace; a fresh `/proc` that shows only the
//!    worker's own processes, so the host (and its keys) cannot even be seen;
//! 2. Landlock ([`landlock`]): writes only beneath the workspace roots, the session's own
//!    directories (artifacts, temp) and configured extra paths; reads everywhere (or as
//!    configured);
//! 3. seccomp ([`seccomp`]): no `ptrace`, `process_vm_readv`/`writev`, `mount`, `bpf`, kernel
//!    keyring, `perf_event_open`, new namespaces or kernel modules;
//! 4. resource limits: address space (the memory cap), file size, process count, no core
//!    dumps; an environment allow-list (`runtime::env`).
//!
//! Modes, in the spirit of Codex: `read-only` (writes only to the session's own directories),
//! `workspace-write` (the default), `full-access` (no Landlock, no seccomp, network on; the
//! namespaces stay, so nothing outlives the worker), and `off` (no sandbox at all: for when an
//! outer sandbox such as a container already confines Vis, and to measure what the sandbox
//! costs; the worker is then only a child subreaper). The network is a separate switch, off by
//! default except in `full-access` and `off`.
//!
//! A layer the kernel lacks does not stop the worker: [`Layers`] says what is in force and
//! what is missing (`session["sandbox"]`, `vis sandbox status`), and with
//! `[sandbox] require = true` the worker refuses to start instead.

mod landlock;
mod seccomp;

pub use landlock::{restrict as restrict_writes, Enforcement};
pub use seccomp::{denied as denied_syscalls, install as install_seccomp};

/// Why a sandbox layer could not be put in place, or a mode name was not understood.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("unknown sandbox mode '{0}'; use read-only, workspace-write, full-access or off")]
    UnknownMode(String),
    /// Landlock refused a step (`what`: the ruleset, or the path whose rule failed).
    #[error("{what}: {detail}")]
    Landlock { what: String, detail: String },
    #[error("the kernel does not enforce Landlock")]
    LandlockNotEnforced,
    #[error("no seccomp filter for this architecture")]
    UnsupportedArch,
    #[error("seccomp: {0}")]
    Seccomp(String),
    #[error("no_new_privs: {0}")]
    NoNewPrivs(std::io::Error),
}

/// The most bytes a session's artifacts (full outputs) may take unless configured.
pub const DEFAULT_ARTIFACT_QUOTA: u64 = 1024 * 1024 * 1024;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How much a block may change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    ReadOnly,
    #[default]
    WorkspaceWrite,
    FullAccess,
    /// No namespaces, Landlock or seccomp (resource limits and the env allow-list stay).
    Off,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
            Mode::Off => "off",
        }
    }

    pub fn parse(s: &str) -> Result<Mode, SandboxError> {
        match s.trim() {
            "read-only" => Ok(Mode::ReadOnly),
            "workspace-write" => Ok(Mode::WorkspaceWrite),
            "full-access" => Ok(Mode::FullAccess),
            "off" => Ok(Mode::Off),
            other => Err(SandboxError::UnknownMode(crate::protocol::clip(other, 40))),
        }
    }
}

/// What the worker may do, as the host decides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub mode: Mode,
    /// Network access (off by default except in `full-access`).
    pub network: bool,
    /// Directories (and files) writable beyond the defaults.
    pub writable: Vec<PathBuf>,
    /// Refuse to start when a layer is missing.
    pub require: bool,
    /// Largest file a block may write, in bytes (RLIMIT_FSIZE; 0 = no limit).
    pub max_file_bytes: u64,
    /// Processes the user may have (RLIMIT_NPROC; it counts all of the user's processes, so
    /// the default is generous; 0 = no limit).
    pub max_processes: u64,
    /// The most bytes a session's artifacts (full outputs) may take.
    #[serde(default = "default_quota")]
    pub artifact_quota: u64,
}

fn default_quota() -> u64 {
    DEFAULT_ARTIFACT_QUOTA
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            mode: Mode::WorkspaceWrite,
            network: false,
            writable: Vec::new(),
            require: false,
            max_file_bytes: 8 * 1024 * 1024 * 1024,
            max_processes: 4096,
            artifact_quota: default_quota(),
        }
    }
}

impl Policy {
    /// `mode` with its default network switch (on only in `full-access` and `off`).
    pub fn for_mode(mode: Mode) -> Policy {
        Policy {
            mode,
            network: matches!(mode, Mode::FullAccess | Mode::Off),
            ..Policy::default()
        }
    }
}

/// Which layers are in force in a worker (reported by the worker itself).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    pub mode: Option<Mode>,
    pub user_namespace: bool,
    pub pid_namespace: bool,
    pub mount_namespace: bool,
    /// `/proc` shows only the worker's own processes.
    pub private_proc: bool,
    /// A network namespace with only loopback (the network is off).
    pub network_off: bool,
    /// `full`, `partial` (an older kernel enforces a subset), or absent.
    pub landlock: Option<String>,
    pub seccomp: bool,
    pub rlimits: bool,
    /// One line per layer that is missing, with the reason.
    pub missing: Vec<String>,
}

impl Layers {
    pub fn note(&mut self, layer: &str, why: impl std::fmt::Display) {
        self.missing.push(format!("{layer}: {why}"));
    }

    /// The summary shown in `session["sandbox"]` and `vis sandbox status`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// A temporary directory of the worker's own (`TMPDIR`), writable in every mode.
pub fn private_tmp() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix("vis-tmp-").tempdir()
}
