//! `vis trust [DIR] [--revoke] [--list]`: let a workspace's own code load and its instructions
//! reach the model; prints what the workspace carries and [`crate::trust::TRUST_ENABLES`].

use std::path::PathBuf;

use clap::Args;

use super::settings::{current_dir, load_config};
use super::term::{out, outln};
use super::CliError;

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The workspace (default: the current directory). Trusting a directory trusts what is
    /// below it.
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Take the trust back.
    #[arg(long, conflicts_with = "list")]
    pub revoke: bool,
    /// List the trusted directories.
    #[arg(long)]
    pub list: bool,
}

pub fn run(args: TrustArgs) -> Result<i32, CliError> {
    let config = load_config()?;
    if args.list {
        let dirs = crate::trust::trusted_dirs(&config);
        if dirs.is_empty() {
            outln!("no trusted workspaces yet (`vis trust DIR` adds one)");
        }
        for d in dirs {
            outln!("{}", d.display());
        }
        return Ok(0);
    }
    let dir = match args.dir {
        Some(d) => d,
        None => current_dir()?,
    };
    if args.revoke {
        let removed = crate::trust::revoke(&config.dir, &dir)
            .map_err(|e| CliError::usage(format!("vis trust: {e}")))?;
        outln!(
            "{}",
            if removed {
                format!("{} is no longer trusted", dir.display())
            } else {
                format!(
                    "{} was not in the trusted list (`vis trust --list`)",
                    dir.display()
                )
            }
        );
        return Ok(0);
    }
    let canonical = crate::trust::trust(&config.dir, &dir)
        .map_err(|e| CliError::usage(format!("vis trust: {e}")))?;
    let items = crate::trust::workspace_items(&canonical);
    let shown = canonical.to_string_lossy();
    outln!("trusted {shown}");
    if !items.is_empty() {
        outln!("It carries: {}", items.join(", "));
    }
    out!("{}", crate::trust::enables_text());
    outln!("(undo with `vis trust --revoke {shown}`)");
    Ok(0)
}
