//! `vis catalog [--budget N] [--workspace DIR]`: the prompt catalog a session of that
//! workspace would get, with its hash; the snapshot is stored in the database.

use std::path::{Path, PathBuf};

use clap::Args;

use super::settings::{load_config, worker_options, workspace_or_current};
use super::term::{errln, out};
use super::CliError;
use crate::catalog::{render_catalog, DEFAULT_BUDGET_TOKENS};
use crate::runtime::Supervisor;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct CatalogArgs {
    /// Token budget (o200k) for the catalog (default: `[catalog] budget` in config.toml, else
    /// 2000).
    #[arg(long, value_name = "TOKENS", value_parser = parse_budget)]
    pub budget: Option<usize>,
    /// Workspace whose extensions and skills are loaded (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

fn parse_budget(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("the budget must be at least 1 token (the default is 2000)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "'{text}' is not a whole number of tokens; e.g. --budget 2000"
        )),
    }
}

pub fn run(args: CatalogArgs, db: &Path) -> Result<i32, CliError> {
    let config = load_config()?;
    let workspace = workspace_or_current(args.workspace.as_deref())?;
    let budget = args
        .budget
        .or(config.catalog_budget)
        .unwrap_or(DEFAULT_BUDGET_TOKENS);
    let store = Store::open(db)?;
    // MCP servers count too: they start to list their tools (their artifacts, if any, go to a
    // scratch directory beside the database).
    let hub = crate::mcp::hub_for(
        &config,
        &workspace,
        crate::config::artifact_dir(db, "catalog"),
        &*store,
    )?;
    for note in hub.notices() {
        errln!("{note}");
    }
    let mut supervisor = Supervisor::new(worker_options(&config, Some(&workspace))?, Vec::new());
    let events = super::event_loop("vis catalog")?;
    let manifest = events.block_on(async {
        let (started, ()) = tokio::join!(supervisor.start(), hub.connect_all());
        let result = async {
            started?;
            let (namespaces, functions) = hub.functions();
            if !functions.is_empty() {
                supervisor.set_mcp_tools(namespaces, functions).await?;
            }
            Ok::<_, crate::runtime::RuntimeError>(())
        }
        .await;
        let manifest = result.map(|()| supervisor.manifest());
        supervisor.shutdown().await;
        hub.shutdown().await;
        manifest
    });
    let manifest = manifest
        .map_err(|e| CliError {
            code: 1,
            message: format!("vis catalog: {e}"),
        })?
        .map_err(|e| CliError {
            code: 1,
            message: format!("vis catalog: {e}"),
        })?;
    let snapshot = render_catalog(&manifest, budget).map_err(|e| CliError {
        code: 1,
        message: format!("vis catalog: {e}"),
    })?;
    store
        .save_catalog_snapshot(&snapshot)
        .map_err(|e| CliError {
            code: 1,
            message: format!("vis catalog: {e}"),
        })?;
    out!("{}", snapshot.text());
    Ok(0)
}
