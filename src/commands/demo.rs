//! `bf demo`: build the example shop of the seeds and show what to run on it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bf::shop::Shop;

/// Build the example shop: September's till files, a silver orders table with a wrong March, and
/// the Delta tables the bundled plans in `plans/` backfill.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder to build the shop in; it must not hold a shop yet. The plans in `plans/` expect
    /// `bf-demo` beside them, which is where `bf demo` run from the repository puts it.
    #[arg(value_name = "DIR", default_value = "bf-demo")]
    dir: PathBuf,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let shop = Shop::at(&args.dir);
    let summary =
        shop.build().await.with_context(|| format!("building the example shop in {}", args.dir.display()))?;
    let mut out = std::io::stdout().lock();
    let dir = args.dir.display();
    writeln!(out, "Built the example shop in {dir}:")?;
    writeln!(
        out,
        "  landing/orders/2026-09-DD.csv  {} files, {} orders (2001-2130) for September 2026",
        summary.september_files, summary.september_orders
    )?;
    writeln!(
        out,
        "  landing/orders_march.csv      {} corrected March orders",
        summary.march_corrected_orders
    )?;
    writeln!(out, "  landing/fx_rates.csv          exchange rates to EUR")?;
    writeln!(
        out,
        "  warehouse/orders_silver       {} rows, January to April 2026, version {}: March has EUR orders as USD, and 3 duplicates",
        summary.silver_rows, summary.silver_version
    )?;
    writeln!(out, "  warehouse/orders_daily        empty: its daily job starts in October")?;
    writeln!(out)?;
    writeln!(out, "Next, from the repository (the plans point at ./bf-demo):")?;
    writeln!(out, "  bf validate plans/*.toml               check the plans offline")?;
    writeln!(out, "  bf slices plans/september.toml         30 runs, one per day, dated the day after")?;
    writeln!(out, "  bf slices plans/march.toml             one month, one replaceWhere")?;
    Ok(ExitCode::SUCCESS)
}
