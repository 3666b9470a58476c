//! `bf unfreeze`: open frozen days of a table again, recorded.

use std::process::ExitCode;

use crate::render;

/// Lift a frozen period of a table (`bf freeze`), or open some of its days to one approved
/// backfill; recorded in the table with who did it and why.
///
/// Lifting names the period as it was frozen: `--through DATE`, or `--from DATE --to DATE`. With
/// `--approved-by` and `--ticket`, the period stays frozen for everyone else and the days
/// `--from`..`--to` are opened to a plan whose `[guards] unfreeze` names the same approver, ticket
/// and days. A plan file can only ask for that; this command, run by someone who can write the
/// table, is what grants it.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table: a path, a URI, or a catalog name (`uc://catalog.schema.table`,
    /// `glue://database.table`).
    #[arg(value_name = "TABLE")]
    table: String,
    #[command(flatten)]
    period: super::freeze::Period,
    /// Why it is lifted or opened, e.g. "restatement approved (FIN-231)".
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Who approved rewriting the days, as the plan's `[guards] unfreeze` names them (with `--ticket`).
    #[arg(long, value_name = "NAME", requires = "ticket")]
    approved_by: Option<String>,
    /// Where the approval is recorded, as the plan's `[guards] unfreeze` names it (with `--approved-by`).
    #[arg(long, value_name = "TICKET", requires = "approved_by")]
    ticket: Option<String>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let table = super::freeze::open_to_write(&args.table).await?;
    let (from, to) = args.period.bounds();
    let user = bf::delta::ledger::user();
    if let (Some(approved_by), Some(ticket)) = (args.approved_by, args.ticket) {
        let approval = bf::delta::freeze::Approval {
            from: from.unwrap_or(chrono::NaiveDate::MIN),
            to,
            approved_by,
            ticket,
            reason: args.reason,
            by: user,
            at: chrono::Utc::now(),
        };
        let (table, opened) = bf::delta::freeze::approve(table, approval.clone()).await?;
        let text = render::freeze::approved(&approval, &opened, &args.table, table.version().unwrap_or(0));
        crate::render::print(&text)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (table, lifted) = bf::delta::freeze::unfreeze(table, from, to, &args.reason, &user).await?;
    let text = render::freeze::done("Unfroze", &lifted, &args.table, table.version().unwrap_or(0));
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
