//! `bf slices`: the runs a plan makes, with their dates and predicates, before anything runs —
//! what Airflow's `backfill --dry-run` prints.

use std::path::PathBuf;
use std::process::ExitCode;

use bf::delta::predicate::slice_predicate_sql;
use bf::plan_file;

use crate::render;
use crate::render::slices::{SliceRow, SlicesReport};

/// Show the slices a plan makes: index, first and last day, run date, replaceWhere predicate.
///
/// Slices are listed in the order they will run; the index is the slice's place in the calendar.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plan file.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, policy: &bf::plan_file::confine::Policy) -> anyhow::Result<ExitCode> {
    let document = match plan_file::load(&args.plan, &policy.scope(&args.plan)) {
        Ok(document) => document,
        Err(error) => {
            say!("{error}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let plan = &document.plan;
    let column = &plan.target.date_column;
    let report = SlicesReport {
        plan: args.plan.display().to_string(),
        table: document.resolve(&plan.target.table).to_string(),
        date_column: column.clone(),
        window: plan.window(),
        every: plan.slicing.every.to_string(),
        run_offset: plan.slicing.run_offset.to_string(),
        order: plan.slicing.order,
        parallel: plan.slicing.parallel,
        slices: plan
            .slices()
            .iter()
            .map(|slice| SliceRow {
                index: slice.index,
                first: slice.first,
                last: slice.last,
                days: (slice.last - slice.first).num_days() + 1,
                run_date: slice.run_date,
                predicate: slice_predicate_sql(column, slice),
            })
            .collect(),
    };
    let text = if args.json { render::json(&report) } else { render::slices::text(&report) };
    crate::render::print(&text)?;
    Ok(ExitCode::SUCCESS)
}
