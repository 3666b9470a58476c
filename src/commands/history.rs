//! `bf history`: a table's commits, like DESCRIBE HISTORY, with bf's ledger beside them.

use std::io::Write;
use std::process::ExitCode;

use bf::plan_file::Location;
use bf::{ledger, table};

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
    let url = table::table_url(&Location::resolve(&std::env::current_dir()?, &args.table))?;
    let target = table::open(&url, None).await?;
    let entries = ledger::history(&target, args.limit).await?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &entries)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(out, "{}", history_table(&entries))?;
    Ok(ExitCode::SUCCESS)
}

/// The commits as a table, newest first: DESCRIBE HISTORY's columns and bf's.
pub fn history_table(entries: &[ledger::Entry]) -> comfy_table::Table {
    let mut rows = render::table([
        "version",
        "timestamp",
        "operation",
        "predicate",
        "rows",
        "backfill",
        "slice",
        "reason",
    ]);
    for entry in entries {
        let text = |k: &str| {
            entry
                .bf
                .get(k)
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .unwrap_or_default()
        };
        let backfill = match (text("backfill_id"), text("rollback_of")) {
            (id, _) if !id.is_empty() => id,
            (_, undone) if !undone.is_empty() => format!("rollback of {undone}"),
            _ => String::new(),
        };
        let slice = if entry.bf.contains_key("comment") { "comment".to_owned() } else { text("slice") };
        rows.add_row([
            entry.version.to_string(),
            entry
                .timestamp
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default(),
            entry.operation.clone(),
            entry.predicate.clone().unwrap_or_default(),
            entry.rows_written.map(|n| n.to_string()).unwrap_or_default(),
            backfill,
            slice,
            text("reason").chars().take(60).collect(),
        ]);
    }
    rows
}
