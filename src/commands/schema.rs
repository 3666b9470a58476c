//! `bf schema`: print the plan file's JSON Schema, for editors and other tools.

use std::io::Write;
use std::process::ExitCode;

/// Print the JSON Schema of plan files (the one in `schema/plan.schema.json`).
///
/// Point an editor at it with a first line `#:schema ../schema/plan.schema.json` in the plan.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The saved plan's schema instead (`schema/saved-plan.schema.json`), for policies and tools
    /// that read saved plans.
    #[arg(long)]
    saved_plan: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let schema = match args.saved_plan {
        true => bf::rehearse::plan::json_schema(),
        false => bf::plan_file::json_schema(),
    };
    std::io::stdout().lock().write_all(schema.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
