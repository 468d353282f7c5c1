//! The worker's sandbox on Linux, in layers (SPEC §1; the threat model and how it compares
//! with Codex and Claude Code: `docs/security.md`):
//!
//! 1. namespaces (`runtime::launcher`): its own user (unprivileged users), PID, mount and,
//!    when the network is off, network namespace; a fresh `/proc` that shows only the
//!    worker's own processes, so the host (and its keys) cannot even be seen; its own
//!    session, so no terminal;
//! 2. the filesystem view ([`view`] planned by the host, [`mounts`] built in the worker's
//!    mount namespace): a read-only root, the writable roots bound again, `.git` and `.vis`
//!    read-only inside them, secrets and Vis's own directories hidden, a private `/tmp`,
//!    `/var/tmp`, `/dev/shm` and `/dev`, `/run` hidden;
//! 3. Landlock ([`landlock`]): writes only beneath the same writable roots; no abstract Unix
//!    socket or signal outside the sandbox;
//! 4. no capabilities ([`caps`]): every set emptied, root's `execve` rules off;
//! 5. seccomp ([`seccomp`]): no `ptrace`, mounts, new namespaces, kernel modules, keyring,
//!    `io_uring`, terminal injection, device nodes or (by default) Unix sockets;
//! 6. resource limits: address space (the memory cap), file size, process count, no core
//!    dumps; an environment allow-list (`runtime::env`).
//!
//! Modes, in the spirit of Codex: `read-only` (writes only to the session's own directories),
//! `workspace-write` (the default), `full-access` (no view, Landlock or seccomp, network on;
//! the namespaces stay, so nothing outlives the worker, and capabilities are dropped), and
//! `off` (no sandbox at all: for when an outer sandbox such as a container already confines
//! Vis, and to measure what the sandbox costs; the worker is then only a child subreaper).
//! The network is a separate switch, off by default except in `full-access` and `off`.
//!
//! A layer the kernel lacks does not stop the worker: [`Layers`] says what is in force and
//! what is missing (`session["sandbox"]`, `vis sandbox status`), and with
//! `[sandbox] require = true` the worker refuses to start instead.

mod caps;
mod landlock;
mod mounts;
mod seccomp;
mod view;

pub use caps::{drop_all as drop_capabilities, none_held as no_capabilities_held};
pub use landlock::{restrict as restrict_writes, Enforcement};
pub use mounts::{build as build_view, harden_proc, Built as BuiltView};
pub use seccomp::{denied as denied_syscalls, denied_by_argument, install as install_seccomp};
pub use view::{
    plan as plan_view, View, VisPlaces, DEFAULT_TMP_BYTES, HIDDEN_IN_HOME, HIDDEN_SYSTEM,
    PROTECTED_IN_WORKSPACE,
};

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
    #[error("capabilities: {0}")]
    Capabilities(String),
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
    /// Directories (and files) writable beyond the workspace in workspace-write
    /// (`[sandbox] writable`). When the host starts a worker it replaces this with everything
    /// Landlock alone lets the worker write where the kernel gives it no filesystem view.
    pub writable: Vec<PathBuf>,
    /// The session's own directories (its artifacts): writable in every mode.
    #[serde(default)]
    pub session_dirs: Vec<PathBuf>,
    /// Workspace roots beyond the first (the first is the worker's `--workspace`).
    #[serde(default)]
    pub extra_roots: Vec<PathBuf>,
    /// Vis's own files outside its directories, hidden from blocks: a `--db` elsewhere and
    /// what lives beside it (its log, the serve token, other sessions' artifacts).
    #[serde(default)]
    pub private: Vec<PathBuf>,
    /// More paths to hide (`[sandbox] hide`).
    #[serde(default)]
    pub hide: Vec<PathBuf>,
    /// Hidden paths to show again, read-only (`[sandbox] allow_read`; never Vis's own).
    #[serde(default)]
    pub allow_read: Vec<PathBuf>,
    /// Blocks may create Unix sockets (`[sandbox] allow_unix_sockets`).
    #[serde(default)]
    pub unix_sockets: bool,
    /// The size cap of each private tmpfs, in bytes (`[sandbox] tmp_size_mb`).
    #[serde(default = "default_tmp_bytes")]
    pub tmp_bytes: u64,
    /// The filesystem view, planned by the host when it starts the worker.
    #[serde(default)]
    pub view: Option<View>,
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

fn default_tmp_bytes() -> u64 {
    DEFAULT_TMP_BYTES
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            mode: Mode::WorkspaceWrite,
            network: false,
            writable: Vec::new(),
            session_dirs: Vec::new(),
            extra_roots: Vec::new(),
            private: Vec::new(),
            hide: Vec::new(),
            allow_read: Vec::new(),
            unix_sockets: false,
            tmp_bytes: DEFAULT_TMP_BYTES,
            view: None,
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
    /// The filesystem view: a read-only root with the writable roots bound again.
    #[serde(default)]
    pub read_only_root: bool,
    /// `/tmp`, `/var/tmp`, `/dev/shm` and `/dev` are the worker's own.
    #[serde(default)]
    pub private_tmp: bool,
    /// What is empty in the worker's view.
    #[serde(default)]
    pub hidden: Vec<String>,
    /// What is read-only inside the writable roots.
    #[serde(default)]
    pub protected: Vec<String>,
    /// The worker has its own session: no controlling terminal.
    #[serde(default)]
    pub no_terminal: bool,
    /// No capability in any set.
    #[serde(default)]
    pub no_capabilities: bool,
    /// Unix sockets cannot be created (seccomp).
    #[serde(default)]
    pub unix_sockets_off: bool,
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

    /// `session["sandbox"]`: the layers, whether the network is on, and whether the user
    /// trusts the workspace.
    pub fn session_json(&self, network: bool, trusted: bool) -> serde_json::Value {
        let mut value = self.to_json();
        if let serde_json::Value::Object(fields) = &mut value {
            fields.insert("network".into(), serde_json::Value::Bool(network));
            fields.insert("trusted".into(), serde_json::Value::Bool(trusted));
        }
        value
    }
}
