//! `bf slices`: the runs a plan makes, with their dates and predicates, before anything runs —
//! what Airflow's `backfill --dry-run` prints.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bf::plan_file;
use bf::predicate::slice_predicate_sql;
use bf::window::{Order, Window};
use chrono::NaiveDate;
use serde::Serialize;

use crate::render;

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

#[derive(Debug, Serialize)]
struct SlicesReport {
    plan: String,
    table: String,
    date_column: String,
    window: Window,
    every: String,
    run_offset: String,
    order: Order,
    parallel: u32,
    slices: Vec<SliceRow>,
}

#[derive(Debug, Serialize)]
struct SliceRow {
    index: usize,
    first: NaiveDate,
    last: NaiveDate,
    days: i64,
    run_date: NaiveDate,
    predicate: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let document = match plan_file::load(&args.plan) {
        Ok(document) => document,
        Err(error) => {
            eprintln!("{error}");
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
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write_text(&mut out, &report)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_text(out: &mut impl Write, report: &SlicesReport) -> std::io::Result<()> {
    writeln!(
        out,
        "{} of `{}` over {} ({} days), {}, {} at a time, into {}",
        render::count(report.slices.len(), "slice"),
        report.every,
        report.window,
        report.window.days(),
        report.order,
        report.parallel,
        report.table,
    )?;
    let mut table = render::table(["slice", "first", "last", "days", "run date", "replaceWhere"]);
    for row in &report.slices {
        table.add_row([
            row.index.to_string(),
            row.first.to_string(),
            row.last.to_string(),
            row.days.to_string(),
            row.run_date.to_string(),
            row.predicate.clone(),
        ]);
    }
    writeln!(out, "{table}")
}
