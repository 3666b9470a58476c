//! What `bf slices` prints: the runs a plan makes, as a table or JSON.

use bf::window::{Order, Window};
use chrono::NaiveDate;
use serde::Serialize;

/// The slices of a plan file, in run order.
#[derive(Debug, Serialize)]
pub struct SlicesReport {
    pub plan: String,
    pub table: String,
    pub date_column: String,
    pub window: Window,
    pub every: String,
    pub run_offset: String,
    pub order: Order,
    pub parallel: u32,
    pub slices: Vec<SliceRow>,
}

#[derive(Debug, Serialize)]
pub struct SliceRow {
    pub index: usize,
    pub first: NaiveDate,
    pub last: NaiveDate,
    pub days: i64,
    pub run_date: NaiveDate,
    pub predicate: String,
}

/// The slices as a terminal table, under a line saying what they cover.
pub fn text(report: &SlicesReport) -> String {
    let mut table = super::table(["slice", "first", "last", "days", "run date", "replaceWhere"]);
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
    format!(
        "{} of `{}` over {} ({} days), {}, {} at a time, into {}\n{table}\n",
        super::count(report.slices.len(), "slice"),
        report.every,
        report.window,
        report.window.days(),
        report.order,
        report.parallel,
        report.table,
    )
}
