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

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = Plan::load(&args.file.unwrap_or_else(|| args.state.saved_plan()))?;
    let state = bf::apply::state(&plan).await?;
    let text = if args.json { render::json(&state) } else { render::status::text(&plan, &state) };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
