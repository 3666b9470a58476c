//! `bf status`: the saved plan, and how far its apply got, read from the table.

use std::path::PathBuf;
use std::process::ExitCode;

use bf::rehearse::plan::Plan;

use crate::render;

/// Show the saved plan and how far applying it got: slices done and pending.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plan saved with `--out`; default: the saved plan in the state dir.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    #[command(flatten)]
    state: super::StateDir,
    /// Print how far the apply got as JSON.
    #[arg(long)]
    json: bool,
}

/// What `bf status --json` prints: how far the apply got, and whether `bf apply` can publish.
#[derive(serde::Serialize)]
struct Status {
    #[serde(flatten)]
    state: bf::apply::ApplyState,
    cannot_publish: Option<String>,
    /// Committed slices whose rows are not the rehearsal's: the backfill cannot be finished.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unverified: Vec<String>,
    /// Until when `bf rollback` can undo the backfill in place (none applied, or rolled back: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    rollback: Option<bf::rollback::Horizon>,
    /// The tables downstream of the plan's, in apply order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    downstream: Vec<Status>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = Plan::load(&args.file.unwrap_or_else(|| args.state.saved_plan()))?;
    let mut statuses = Vec::new();
    for plan in root.chain() {
        let bf::apply::Status { state, cannot_publish, unverified, rollback } =
            bf::apply::status(plan).await?;
        let unverified = unverified.iter().map(ToString::to_string).collect();
        statuses.push((plan, Status { state, cannot_publish, unverified, rollback, downstream: Vec::new() }));
    }
    let text = if args.json {
        let mut all = statuses.into_iter().map(|(_, status)| status);
        let mut first = all.next().expect("a chain has its first plan");
        first.downstream = all.collect();
        render::json(&first)
    } else {
        let parts: Vec<String> = statuses
            .iter()
            .map(|(plan, status)| {
                let mut text = render::status::text(
                    plan,
                    &status.state,
                    status.cannot_publish.as_deref(),
                    &status.unverified,
                );
                if let Some(horizon) = &status.rollback {
                    text.push_str(&format!("  {}\n", render::rollback::horizon(horizon)));
                }
                text
            })
            .collect();
        parts.join("\n")
    };
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
