//! `bf schema`: print the plan file's JSON Schema, for editors and other tools.

use std::io::Write;
use std::process::ExitCode;

/// Print the JSON Schema of plan files (the one in `schema/plan.schema.json`).
///
/// Point an editor at it with a first line `#:schema ../schema/plan.schema.json` in the plan.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_: Args) -> anyhow::Result<ExitCode> {
    std::io::stdout().lock().write_all(bf::plan_file::json_schema().as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
