//! `bf status`: the saved plan, and how far its apply got, read from the table.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bf::plan::Plan;

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
struct Status<'a> {
    #[serde(flatten)]
    state: &'a bf::apply::ApplyState,
    cannot_publish: Option<&'a str>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&args.file.unwrap_or_else(|| args.state.saved_plan()))?;
    let state = bf::apply::state(&plan).await?;
    let cannot_publish = bf::apply::cannot_publish(&plan, &state).await;
    let text = if args.json {
        render::json(&Status { state: &state, cannot_publish: cannot_publish.as_deref() })
    } else {
        render::status::text(&plan, &state, cannot_publish.as_deref())
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
