//! `bf status`: the saved plan, and how far its apply got, read from the table.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bf::plan::Plan;
use bf::{ledger, table};

use crate::render::plan::summary;

/// Show the saved plan and how far applying it got: slices done and pending.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plan saved with `--out`; default: the saved plan in the state dir.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&args.file.unwrap_or_else(|| args.state.saved_plan()))?;
    let url = url::Url::parse(&plan.target.uri)?;
    let target = table::open(&url, None).await?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Plan {} for {} (made {}):",
        plan.id,
        table::display_url(&url),
        plan.created_at.format("%Y-%m-%d %H:%M UTC")
    )?;
    writeln!(out, "  {}", summary(&plan))?;
    let backfills = ledger::backfills_of_plan(&target, &plan.id).await?;
    let Some(last) = backfills.last() else {
        let state =
            if plan.appliable() { "not applied yet" } else { "cannot be applied (failed checks or guards)" };
        writeln!(
            out,
            "  {state}: 0 of {} slices committed; the table is at version {}",
            plan.slices.len(),
            target.version().unwrap_or(0)
        )?;
        return Ok(ExitCode::SUCCESS);
    };
    let recorded = ledger::find_backfill(&target, last).await?.expect("a backfill id found in the history");
    let done: Vec<u64> = recorded.slices.iter().map(|s| s.0).collect();
    let pending: Vec<String> = plan
        .slices
        .iter()
        .filter(|s| !done.contains(&(s.index as u64)))
        .map(|s| s.first.to_string())
        .collect();
    writeln!(out, "  backfill {last}: {} of {} slices committed", done.len(), plan.slices.len())?;
    if pending.is_empty() {
        let commented = ledger::commits_after(&target, plan.target.pre_version).await?.iter().any(|e| {
            e.bf.get("backfill_id").and_then(|v| v.as_str()) == Some(last.as_str())
                && e.bf.contains_key("comment")
        });
        writeln!(
            out,
            "  {}",
            if commented {
                "done: every slice committed and the comment set"
            } else {
                "every slice committed; the comment is not set yet: run `bf apply`"
            }
        )?;
    } else {
        writeln!(out, "  pending: {} — run `bf apply` to resume", pending.join(", "))?;
    }
    writeln!(out, "  the version to go back to: {}", plan.target.pre_version)?;
    Ok(ExitCode::SUCCESS)
}
