//! `bf history`: a table's commits, like DESCRIBE HISTORY, with bf's ledger beside them.

use std::io::Write;
use std::process::ExitCode;

use bf::delta::ledger;
use bf::delta::store::{self, Location, Stores};

use crate::render;

/// Show a table's commits: version, time, operation, predicate, rows written, and bf's columns.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table: a path or a URI.
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
    let url = store::table_url(&Location::resolve(&std::env::current_dir()?, &args.table))?;
    let target = Stores::from_environment().open(&url, None).await?;
    let entries = ledger::history(&target, args.limit).await?;
    let text =
        if args.json { render::json(&entries) } else { format!("{}\n", render::history::table(&entries)) };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
