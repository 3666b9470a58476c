//! `bf unfreeze`: open frozen days of a table again, recorded.

use std::io::Write;
use std::process::ExitCode;

use crate::render;

/// Lift a frozen period of a table (`bf freeze`), recorded in the table with who lifted it and why.
///
/// The period is named as it was frozen: `--through DATE`, or `--from DATE --to DATE`. For one
/// backfill over frozen days, prefer the plan's `[guards] unfreeze`: the freeze stays for everyone
/// else, and the approval is recorded in the backfill's commits.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table: a path, a URI, or a catalog name (`uc://catalog.schema.table`,
    /// `glue://database.table`).
    #[arg(value_name = "TABLE")]
    table: String,
    #[command(flatten)]
    period: super::freeze::Period,
    /// Why it is lifted, e.g. "restatement approved (FIN-231)".
    #[arg(long, value_name = "TEXT")]
    reason: String,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let table = super::freeze::open_to_write(&args.table).await?;
    let (from, to) = args.period.bounds();
    let user = bf::delta::ledger::user();
    let (table, lifted) = bf::delta::freeze::unfreeze(table, from, to, &args.reason, &user).await?;
    let text = render::freeze::done("Unfroze", &lifted, &args.table, table.version().unwrap_or(0));
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
