//! Which slice writes each row the queries return.
//!
//! A slice rewrites its days: whatever the table held for them is replaced by what the slice
//! writes. A slice's query may return rows for another slice's days — a `{date}` input holding
//! events by the day they *arrived* keeps each day's late events in the next day's file — and a
//! slice that wrote only its own query's rows would drop those: the slice owning their day
//! rewrites it from files that do not hold them.
//!
//! So before anything is written, every slice's query is surveyed: its rows counted per day, and
//! what it reads noted. A slice then writes its own query's rows for its days and, after them, the
//! rows for its days that another slice's query returns from files its own query does not read:
//! that slice is its *lender*. Rows another slice's query returns from the same files are the
//! owner's own query's rows already (a query reading one month's file for every weekly slice
//! lends nothing), so nothing is written twice.
//!
//! The routes are saved with the plan (each slice's lenders), so `bf apply --recompute` writes
//! what the rehearsal wrote.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;

use deltalake::arrow::datatypes::Date32Type;
use deltalake::datafusion::common::{Column, ScalarValue};
use deltalake::datafusion::functions_aggregate::expr_fn::count;
use deltalake::datafusion::logical_expr::{Expr, lit};
use deltalake::datafusion::prelude::DataFrame;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};

use crate::window::{Slice, Window};

/// Where the source's rows fell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceCounts {
    /// Rows in this slice: the ones written.
    pub in_slice: u64,
    /// Rows in the window but in another slice: that slice writes them, as its own query returns
    /// them too or as rows lent to it (see `lenders`).
    pub other_slices: u64,
    /// Rows for this slice's days that other slices' queries return from files its own query does
    /// not read (late rows in the next day's file): written by this slice, after its own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub from_other_slices: u64,
    /// Rows outside the window: never written.
    pub outside_window: u64,
    /// Rows whose date is NULL: never written.
    pub null_date: u64,
}

impl SourceCounts {
    /// The rows this slice writes: its own query's for its days and those lent to it.
    pub fn written(&self) -> u64 {
        self.in_slice + self.from_other_slices
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where one slice's query returns rows, and what it reads.
#[derive(Debug, Clone)]
pub struct Survey {
    pub slice: Slice,
    /// Rows per day the query returns; `None` counts the rows with a NULL date.
    pub days: BTreeMap<Option<NaiveDate>, u64>,
    /// What the query reads: each file's URL, and each Delta input's as `URL@version`.
    pub reads: BTreeSet<String>,
}

impl Survey {
    /// The rows the query returns for `slice`'s days.
    fn rows_in(&self, slice: &Slice) -> u64 {
        self.days.range(Some(slice.first)..=Some(slice.last)).map(|(_, rows)| rows).sum()
    }
}

/// A slice's lender: another slice whose query returns rows for its days from files it does not
/// read, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Lender {
    /// The lending slice's index.
    pub slice: usize,
    /// The rows its query returns for the borrowing slice's days.
    pub rows: u64,
}

/// A day outside the window the queries return rows for: no slice writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct OutsideDay {
    pub day: NaiveDate,
    /// The most rows any one slice's query returns for it: the slices' queries may read the same
    /// files, so their counts are not added.
    pub rows: u64,
}

/// Every rehearsed slice's counts and lenders, and the days outside the window the queries return.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    slices: BTreeMap<usize, (SourceCounts, Vec<Lender>)>,
    outside: Vec<OutsideDay>,
}

impl Routes {
    /// The routes among the surveyed slices of a plan over `window`.
    pub fn new(surveys: &[Survey], window: &Window) -> Routes {
        let mut slices = BTreeMap::new();
        for own in surveys {
            let lenders: Vec<Lender> = surveys
                .iter()
                .filter(|other| other.slice.index != own.slice.index && !other.reads.is_subset(&own.reads))
                .map(|other| Lender { slice: other.slice.index, rows: other.rows_in(&own.slice) })
                .filter(|lender| lender.rows > 0)
                .collect();
            let mut counts = counts(own, window);
            counts.from_other_slices = lenders.iter().map(|l| l.rows).sum();
            slices.insert(own.slice.index, (counts, lenders));
        }
        Routes { slices, outside: outside_days(surveys, window) }
    }

    /// The days outside the window the queries return rows for, in order.
    pub fn outside(&self) -> &[OutsideDay] {
        &self.outside
    }

    /// Where slice `index`'s query's rows fell, and the rows lent to it.
    pub fn counts(&self, index: usize) -> SourceCounts {
        self.slices.get(&index).map(|(counts, _)| *counts).unwrap_or_default()
    }

    /// The slices lending rows to slice `index`.
    pub fn lenders(&self, index: usize) -> &[Lender] {
        self.slices.get(&index).map_or(&[], |(_, lenders)| lenders.as_slice())
    }
}

/// Each day outside the window any query returns rows for, with the most rows one query returns.
fn outside_days(surveys: &[Survey], window: &Window) -> Vec<OutsideDay> {
    let mut days: BTreeMap<NaiveDate, u64> = BTreeMap::new();
    for survey in surveys {
        for (day, rows) in &survey.days {
            if let Some(day) = day.filter(|d| !window.contains(*d)) {
                let most = days.entry(day).or_insert(0);
                *most = (*most).max(*rows);
            }
        }
    }
    days.into_iter().map(|(day, rows)| OutsideDay { day, rows }).collect()
}

/// The survey's rows by where their day falls: this slice, the window's other days, outside the
/// window, NULL.
fn counts(survey: &Survey, window: &Window) -> SourceCounts {
    let mut counts = SourceCounts::default();
    for (day, rows) in &survey.days {
        let bucket = match day {
            None => &mut counts.null_date,
            Some(day) if survey.slice.first <= *day && *day <= survey.slice.last => &mut counts.in_slice,
            Some(day) if window.contains(*day) => &mut counts.other_slices,
            Some(_) => &mut counts.outside_window,
        };
        *bucket += rows;
    }
    counts
}

/// The query's rows counted by their day (`None`: a NULL date), in one pass. As many groups as the
/// query has days, whatever its rows.
pub(super) async fn rows_per_day(
    rows: &DataFrame,
    column: &str,
) -> deltalake::datafusion::error::Result<std::collections::BTreeMap<Option<chrono::NaiveDate>, u64>> {
    let date = Expr::Column(Column::new_unqualified(column));
    // Only the date column goes in: grouped by it alone, whatever the query's own grouping makes
    // depend on it (DataFusion adds a grouped query's dependent columns to the groups).
    let dates = rows.clone().select(vec![date.clone()])?;
    let counted = dates.aggregate(vec![date], vec![count(lit(1)).alias("rows")])?;
    let mut days = std::collections::BTreeMap::new();
    let mut batches = counted.execute_stream().await?;
    while let Some(batch) = batches.try_next().await? {
        for row in 0..batch.num_rows() {
            let day = match ScalarValue::try_from_array(batch.column(0), row)? {
                ScalarValue::Date32(day) => day.and_then(Date32Type::to_naive_date_opt),
                other => {
                    return Err(deltalake::datafusion::error::DataFusionError::Internal(format!(
                        "the date column counted as {other:?}"
                    )));
                }
            };
            let rows = match ScalarValue::try_from_array(batch.column(1), row)? {
                ScalarValue::Int64(Some(n)) => u64::try_from(n).unwrap_or(0),
                _ => 0,
            };
            *days.entry(day).or_insert(0) += rows;
        }
    }
    Ok(days)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    fn slice(index: usize, first: &str) -> Slice {
        Slice { index, first: day(first), last: day(first), run_date: day(first) }
    }

    fn survey(slice: Slice, days: &[(&str, u64)], reads: &[&str]) -> Survey {
        Survey {
            slice,
            days: days.iter().map(|(d, n)| (Some(day(d)), *n)).collect(),
            reads: reads.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn late_rows_in_the_next_days_file_are_written_by_the_day_they_belong_to() {
        let window = Window { start: day("2026-03-01"), end: day("2026-03-03") };
        let surveys = [
            survey(slice(1, "2026-03-01"), &[("2026-03-01", 10)], &["d1.csv"]),
            survey(slice(2, "2026-03-02"), &[("2026-03-01", 3), ("2026-03-02", 8)], &["d2.csv"]),
            survey(
                slice(3, "2026-03-03"),
                &[("2026-03-02", 2), ("2026-03-03", 9), ("2026-04-01", 1)],
                &["d3.csv"],
            ),
        ];
        let routes = Routes::new(&surveys, &window);
        assert_eq!(routes.lenders(1), [Lender { slice: 2, rows: 3 }]);
        assert_eq!(routes.lenders(2), [Lender { slice: 3, rows: 2 }]);
        assert!(routes.lenders(3).is_empty());
        let second = routes.counts(2);
        assert_eq!((second.in_slice, second.other_slices, second.from_other_slices), (8, 3, 2));
        assert_eq!(second.written(), 10);
        assert_eq!(routes.counts(3).outside_window, 1);
        assert_eq!(routes.outside(), [OutsideDay { day: day("2026-04-01"), rows: 1 }]);
    }

    #[test]
    fn a_day_outside_the_window_counts_the_most_one_query_returns() {
        let window = Window { start: day("2026-03-01"), end: day("2026-03-02") };
        let surveys = [
            survey(slice(1, "2026-03-01"), &[("2026-02-28", 4), ("2026-03-01", 1)], &["march.csv"]),
            survey(slice(2, "2026-03-02"), &[("2026-02-28", 4), ("2026-03-03", 2)], &["march.csv"]),
        ];
        let days: Vec<_> = Routes::new(&surveys, &window).outside().iter().map(|d| (d.day, d.rows)).collect();
        assert_eq!(days, [(day("2026-02-28"), 4), (day("2026-03-03"), 2)]);
    }

    #[test]
    fn rows_read_from_the_same_files_are_the_owners_own() {
        let window = Window { start: day("2026-03-01"), end: day("2026-03-02") };
        let whole = [("2026-03-01", 10), ("2026-03-02", 8)];
        let surveys = [
            survey(slice(1, "2026-03-01"), &whole, &["march.csv"]),
            survey(slice(2, "2026-03-02"), &whole, &["march.csv"]),
        ];
        let routes = Routes::new(&surveys, &window);
        assert!(routes.lenders(1).is_empty() && routes.lenders(2).is_empty());
        assert_eq!(routes.counts(1).written(), 10);
        assert_eq!(routes.counts(2).other_slices, 10);
    }
}
