//! `vis sandbox status`: which isolation layers are in force on this machine, measured by
//! starting a worker with the configured policy and asking it.

use clap::{Args, Subcommand};

use super::settings::{limits, load_config, worker_options, LimitArgs};
use super::term::outln;
use super::CliError;
use crate::runtime::Runtime;
use crate::sandbox::Mode;

#[derive(Debug, Args)]
pub struct SandboxArgs {
    #[command(subcommand)]
    pub action: SandboxAction,
}

#[derive(Debug, Subcommand)]
pub enum SandboxAction {
    /// Start a worker with the configured sandbox and show what is in force and what is
    /// missing.
    Status {
        #[command(flatten)]
        limits: LimitArgs,
    },
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

pub fn run(args: SandboxArgs) -> Result<i32, CliError> {
    let SandboxAction::Status { limits: flags } = args.action;
    let config = load_config()?;
    let limits = limits(&flags, &config)?;
    let scratch = tempfile::tempdir().map_err(|e| {
        CliError::usage(format!("vis sandbox: cannot make a scratch workspace: {e}"))
    })?;
    let mut opts = worker_options(&config, Some(scratch.path()))?;
    opts.sandbox = limits.sandbox.clone();
    let mut runtime = Runtime::new(opts, Vec::new());
    runtime.start().map_err(|e| CliError {
        code: 1,
        message: format!("vis sandbox: the worker did not start: {e}"),
    })?;
    let layers = runtime.supervisor().isolation().clone();
    runtime.shutdown();
    let policy = &limits.sandbox;
    outln!(
        "mode {}, network {}",
        policy.mode.as_str(),
        if policy.network { "on" } else { "off" }
    );
    let root = rustix::process::getuid().is_root();
    outln!(
        "  user namespace    {}",
        if layers.user_namespace {
            "yes (only your uid and gid are mapped)"
        } else if root {
            "not used (root: files keep their owner; every capability is dropped instead)"
        } else {
            "no"
        }
    );
    outln!(
        "  PID namespace     {} (nothing a block starts outlives the worker)",
        yes(layers.pid_namespace)
    );
    outln!("  mount namespace   {}", yes(layers.mount_namespace));
    outln!(
        "  private /proc     {} (the host's processes are not visible)",
        yes(layers.private_proc)
    );
    let view = matches!(policy.mode, Mode::ReadOnly | Mode::WorkspaceWrite);
    outln!(
        "  read-only root    {}",
        match (view, layers.read_only_root) {
            (false, _) => format!("not used ({})", policy.mode.as_str()),
            (true, true) if policy.mode == Mode::ReadOnly =>
                "yes (only the session's own directories are writable)".to_string(),
            (true, true) =>
                "yes (only the workspace and the session's own directories are writable)"
                    .to_string(),
            (true, false) => "no".to_string(),
        }
    );
    outln!(
        "  private /tmp      {}",
        match (view, layers.private_tmp) {
            (false, _) => format!("not used ({})", policy.mode.as_str()),
            (true, true) => format!(
                "yes (/tmp, /var/tmp, /dev/shm and /dev are the worker's own; {} MiB each)",
                policy.tmp_bytes / (1024 * 1024)
            ),
            (true, false) => "no".to_string(),
        }
    );
    outln!(
        "  no terminal       {}",
        if layers.no_terminal {
            "yes (a session of its own: /dev/tty cannot be opened)"
        } else {
            "no"
        }
    );
    outln!(
        "  capabilities      {}",
        match (policy.mode, layers.no_capabilities) {
            (Mode::Off, _) => "kept (sandbox off)",
            (_, true) => "none (every set empty, root's execve rules off)",
            (_, false) => "some kept",
        }
    );
    outln!(
        "  network off       {}",
        if policy.network {
            "no (the network is on by policy)".to_string()
        } else {
            format!("{} (only loopback)", yes(layers.network_off))
        }
    );
    outln!(
        "  landlock          {}",
        match (&layers.landlock, policy.mode) {
            (_, Mode::FullAccess) => "not used (full-access)".to_string(),
            (_, Mode::Off) => "not used (sandbox off)".to_string(),
            (Some(level), Mode::ReadOnly) =>
                format!("{level} (writes only to the session's own directories)"),
            (Some(level), _) => format!(
                "{level} (writes only beneath the workspace and the session's own directories)"
            ),
            (None, _) => "no".into(),
        }
    );
    outln!(
        "  seccomp           {}",
        match policy.mode {
            Mode::FullAccess => "not used (full-access)".to_string(),
            Mode::Off => "not used (sandbox off)".to_string(),
            _ if layers.seccomp => format!(
                "yes ({} system calls refused: {}; by argument: {})",
                crate::sandbox::denied_syscalls().len(),
                crate::sandbox::denied_syscalls()
                    .iter()
                    .take(6)
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
                    + ", …",
                crate::sandbox::denied_by_argument(policy.unix_sockets).join(", ")
            ),
            _ => "no".into(),
        }
    );
    outln!(
        "  unix sockets      {}",
        if layers.unix_sockets_off {
            "off (blocks cannot create them; [sandbox] allow_unix_sockets)"
        } else if policy.unix_sockets && view {
            "allowed ([sandbox] allow_unix_sockets): only sockets in the view can be reached"
        } else {
            "allowed"
        }
    );
    outln!("  resource limits   {}", yes(layers.rlimits));
    if !layers.hidden.is_empty() {
        outln!("hidden (empty in the worker's view; [sandbox] hide, allow_read):");
        for path in &layers.hidden {
            outln!("  {}", path);
        }
    }
    if view {
        outln!(
            "protected (read-only inside every workspace root): {}, and the git directory a `gitdir:` file names",
            crate::sandbox::PROTECTED_IN_WORKSPACE.join(", ")
        );
    }
    if layers.missing.is_empty() {
        outln!("missing: nothing");
    } else {
        outln!("missing:");
        for m in &layers.missing {
            outln!("  {m}");
        }
        if policy.require {
            outln!("[sandbox] require = true: workers refuse to start on this machine");
            return Ok(1);
        }
    }
    Ok(0)
}
