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
    #[arg(long, conflicts_with = "lineage_facet")]
    saved_plan: bool,
    /// The `bf` OpenLineage run facet's schema instead (`schema/lineage/BfRunFacet-1-0-0.json`), the
    /// one its `_schemaURL` names.
    #[arg(long)]
    lineage_facet: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let schema = match (args.saved_plan, args.lineage_facet) {
        (true, _) => bf::rehearse::plan::json_schema(),
        (_, true) => bf::lineage::facet::json_schema(),
        _ => bf::plan_file::json_schema(),
    };
    std::io::stdout().lock().write_all(schema.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
