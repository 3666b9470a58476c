//! `bf history`: a table's commits, like DESCRIBE HISTORY, with bf's ledger beside them.

use std::process::ExitCode;

use bf::delta::catalog;
use bf::delta::ledger;
use bf::delta::store::Stores;

use crate::render;

/// Show a table's commits: version, time, operation, predicate, rows written, and bf's columns.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table: a path, a URI, or a catalog name (`uc://catalog.schema.table`,
    /// `glue://database.table`).
    #[arg(value_name = "TABLE")]
    table: String,
    /// Only the last N commits.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print JSON: one object per commit, newest first.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let located = catalog::locate(&std::env::current_dir()?, &args.table).await?;
    let target = Stores::from_environment().open(&located.url, None).await?;
    let entries = ledger::history(&target, args.limit).await?;
    let text = match (args.json, &located.catalog) {
        (true, _) => render::json(&entries),
        (false, None) => format!("{}\n", render::history::table(&entries)),
        (false, Some(pinned)) => {
            format!("{}{}\n", render::history::named(pinned), render::history::table(&entries))
        }
    };
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
