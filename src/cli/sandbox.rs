//! `vis sandbox status`: which isolation layers are in force on this machine, measured by
//! starting a worker with the configured policy and asking it.

use clap::{Args, Subcommand};

use super::settings::{limits, load_config, worker_options, LimitArgs};
use super::term::outln;
use super::CliError;
use crate::runtime::Runtime;

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
            "not used (running as root keeps root's rights over files)"
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
            (_, crate::sandbox::Mode::FullAccess) => "not used (full-access)".to_string(),
            (_, crate::sandbox::Mode::Off) => "not used (sandbox off)".to_string(),
            (Some(level), crate::sandbox::Mode::ReadOnly) =>
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
            crate::sandbox::Mode::FullAccess => "not used (full-access)".to_string(),
            crate::sandbox::Mode::Off => "not used (sandbox off)".to_string(),
            _ if layers.seccomp => format!(
                "yes ({} system calls refused: {})",
                crate::sandbox::denied_syscalls().len(),
                crate::sandbox::denied_syscalls()
                    .iter()
                    .take(6)
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
                    + ", …"
            ),
            _ => "no".into(),
        }
    );
    outln!("  resource limits   {}", yes(layers.rlimits));
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
