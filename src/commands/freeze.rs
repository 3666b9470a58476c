//! `bf freeze`: close days of a table that a report was signed off against.

use std::process::ExitCode;

use bf::delta::freeze::{self, Frozen};
use bf::delta::store::Stores;
use chrono::NaiveDate;

use crate::render;

/// Freeze days of a table: no plan, apply or rollback rewrites them without a recorded approval.
///
/// The period is recorded in the table itself — the table property `bf.frozen`, readable by any
/// engine — in one commit saying who froze it, when and why; `bf history` and `bf status` show it.
/// A plan that must rewrite frozen days carries `[guards] unfreeze` (who approved, the ticket);
/// `bf unfreeze` lifts the period, recorded the same way.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The table: a path, a URI, or a catalog name (`uc://catalog.schema.table`,
    /// `glue://database.table`).
    #[arg(value_name = "TABLE")]
    table: String,
    #[command(flatten)]
    period: Period,
    /// Why, for whoever meets the freeze, e.g. "Q1 closed (FIN-204)".
    #[arg(long, value_name = "TEXT")]
    reason: String,
}

/// Which days: every day through one, or a range.
#[derive(Debug, clap::Args)]
pub struct Period {
    /// Every day up to and including DATE (YYYY-MM-DD).
    #[arg(long, value_name = "DATE", conflicts_with_all = ["from", "to"], required_unless_present = "from")]
    through: Option<NaiveDate>,
    /// The first day of the range (with `--to`).
    #[arg(long, value_name = "DATE", requires = "to")]
    from: Option<NaiveDate>,
    /// The last day of the range (with `--from`).
    #[arg(long, value_name = "DATE", requires = "from")]
    to: Option<NaiveDate>,
}

impl Period {
    /// (first day, last day); no first day for `--through`.
    pub fn bounds(&self) -> (Option<NaiveDate>, NaiveDate) {
        match (self.through, self.to) {
            (Some(through), _) => (None, through),
            (None, Some(to)) => (self.from, to),
            (None, None) => unreachable!("clap asks for --through or --from/--to"),
        }
    }
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let table = open_to_write(&args.table).await?;
    let (from, to) = args.period.bounds();
    let period = Frozen {
        from,
        to,
        reason: args.reason,
        by: bf::delta::ledger::user(),
        at: chrono::Utc::now(),
        approvals: Vec::new(),
    };
    let table = freeze::freeze(table, period.clone()).await?;
    let text = render::freeze::done("Froze", &period, &args.table, table.version().unwrap_or(0));
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The table `written` names (a path, a URI, a catalog name), opened with the environment's
/// settings to write its metadata, once commits to it are known to be safe.
pub async fn open_to_write(written: &str) -> anyhow::Result<bf::deltalake::DeltaTable> {
    let located = bf::delta::catalog::locate(&std::env::current_dir()?, written).await?;
    let stores = Stores::from_environment();
    stores.require_safe_commits(&located.url)?;
    Ok(stores.open(&located.url, None).await?)
}
