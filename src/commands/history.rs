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
    if args.json {
        crate::render::print(&render::json(&entries))?;
        return Ok(ExitCode::SUCCESS);
    }
    // Until when each backfill shown and still in place can be rolled back, under its reason; a
    // history is shown whether or not that can be told.
    let stores = Stores::from_environment();
    let shown: std::collections::BTreeSet<&str> =
        entries.iter().filter_map(|e| e.backfill().map(|b| b.backfill_id.as_str())).collect();
    let mut horizons = std::collections::BTreeMap::new();
    for applied in bf::rollback::backfills(&stores, &located.url).await.unwrap_or_default() {
        if applied.rolled_back_at.is_none()
            && shown.contains(applied.backfill_id.as_str())
            && let Ok(horizon) =
                bf::rollback::horizon(&stores, &located.url, applied.pre_version, applied.within()).await
        {
            horizons.insert(applied.backfill_id, render::rollback::horizon(&horizon));
        }
    }
    let table = render::history::table(&entries, &horizons);
    let text = match &located.catalog {
        None => format!("{table}\n"),
        Some(pinned) => format!("{}{table}\n", render::history::named(pinned)),
    };
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
