//! Stage zero, before a plan: which days of a table need a backfill (`bf gaps`). In: a table, its
//! date column and a range of days. Out: the days with no rows, the days far below their usual
//! level, and the backfills bf left unfinished there — and, from them, a plan for exactly those
//! days ([`write`]).
//!
//! The rows per day come from the log where it settles them ([`crate::delta::days`]). A day's usual
//! level is the median of the same weekday over the weeks around it: a Sunday is compared with
//! Sundays, so a shop's quiet weekends are not gaps, and a day that counts as missing is left out
//! of its neighbours' medians, so one hole does not make the next week look thin.

pub mod write;

use chrono::{Datelike, Days, NaiveDate, Weekday};
use deltalake::DeltaTable;
use serde::Serialize;
use url::Url;

use crate::delta::days::rows_per_day;
use crate::delta::store::{Stores, display_url};
use crate::window::Window;

/// When a day counts as thin: fewer rows than `threshold` × its usual level, the median of the
/// same weekday over `weeks` weeks before and after it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thinness {
    pub threshold: f64,
    pub weeks: u32,
}

impl Default for Thinness {
    fn default() -> Self {
        Thinness { threshold: 0.5, weeks: 4 }
    }
}

/// What `bf gaps` found.
#[derive(Debug, Clone, Serialize)]
pub struct Gaps {
    pub table: String,
    pub version: u64,
    pub date_column: String,
    pub range: Window,
    pub thinness: Thinness,
    /// The weekdays without a row anywhere in the range and the weeks around it (`Sat`, `Sun`): a
    /// business's closed days, not counted as missing.
    pub closed: Vec<String>,
    /// Days of the range without a row, on weekdays the table is open.
    pub missing: Vec<NaiveDate>,
    /// Days far below their usual level.
    pub thin: Vec<Thin>,
    /// bf backfills of the table over days of the range whose apply never finished, and that were
    /// not rolled back.
    pub unfinished: Vec<Unfinished>,
    /// Rows on each day of the range that holds any (what the calendar of `bf gaps --html` draws).
    pub rows: std::collections::BTreeMap<NaiveDate, u64>,
    /// How the rows were counted: data files whose date column was read (the rest from the log),
    /// or `None` when deltalake's reader counted them (deletion vectors, a clone's files).
    pub files_read: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thin {
    pub day: NaiveDate,
    pub rows: u64,
    /// The median of the same weekday's rows around it.
    pub usual: u64,
    /// How many of those weekdays it was taken over.
    pub compared_with: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Unfinished {
    pub backfill_id: String,
    pub reason: String,
    pub window: Window,
    pub committed: usize,
    pub slices: usize,
}

impl Gaps {
    /// The days a backfill should write: the missing and the thin ones, in calendar order.
    pub fn days(&self) -> Vec<NaiveDate> {
        let mut days: Vec<NaiveDate> =
            self.missing.iter().copied().chain(self.thin.iter().map(|t| t.day)).collect();
        days.sort();
        days
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.thin.is_empty() && self.unfinished.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GapsError {
    #[error("counting {table}'s rows per day: {source}")]
    Count { table: String, source: deltalake::DeltaTableError },
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    History(#[from] crate::rollback::RollbackError),
}

/// Looks for the gaps of `table` (at `url`, in `stores`) on `date_column` over `range`.
pub async fn find(
    stores: &Stores,
    url: &Url,
    table: &DeltaTable,
    date_column: &str,
    range: Window,
    thinness: Thinness,
) -> Result<Gaps, GapsError> {
    if range.start > range.end {
        return Err(GapsError::Refused(format!(
            "the range ends ({}) before it starts ({})",
            range.end, range.start
        )));
    }
    crate::delta::table::check_date_column(table, date_column)
        .map_err(|e| GapsError::Refused(e.to_string()))?;
    // The weeks around the range too: its first and last days have neighbours to be judged by.
    let around = Days::new(7 * u64::from(thinness.weeks));
    let first = range.start.checked_sub_days(around).unwrap_or(NaiveDate::MIN);
    let last = range.end.checked_add_days(around).unwrap_or(NaiveDate::MAX);
    let counted = rows_per_day(table, date_column, first, last)
        .await
        .map_err(|source| GapsError::Count { table: display_url(url), source })?;
    let rows = |day: NaiveDate| counted.rows.get(&day).copied().unwrap_or(0);
    let closed = closed_weekdays(first, last, &rows);
    let mut missing = Vec::new();
    let mut thin = Vec::new();
    for day in range.start.iter_days().take_while(|d| *d <= range.end) {
        let found = rows(day);
        if found == 0 {
            if !closed.contains(&day.weekday()) {
                missing.push(day);
            }
            continue;
        }
        if let Some((usual, compared_with)) = usual(day, thinness.weeks, &rows)
            && (found as f64) < thinness.threshold * usual as f64
        {
            thin.push(Thin { day, rows: found, usual, compared_with });
        }
    }
    let unfinished = crate::rollback::backfills(stores, url)
        .await?
        .into_iter()
        .filter(|b| !b.finished && b.rolled_back_at.is_none())
        .filter(|b| b.window.start <= range.end && range.start <= b.window.end)
        .map(|b| Unfinished {
            backfill_id: b.backfill_id,
            reason: b.reason,
            window: b.window,
            committed: b.slices,
            slices: b.planned,
        })
        .collect();
    Ok(Gaps {
        table: display_url(url),
        version: table.version().unwrap_or(0),
        date_column: date_column.to_owned(),
        range,
        thinness,
        closed: closed.iter().map(|d| d.to_string()).collect(),
        missing,
        thin,
        unfinished,
        rows: counted
            .rows
            .range(range.start..=range.end)
            .filter(|(_, n)| **n > 0)
            .map(|(d, n)| (*d, *n))
            .collect(),
        files_read: counted.files_read,
    })
}

/// The weekdays on which the table holds no row on any day from `first` to `last` when each comes
/// at least four times there: a business's closed days (a B2B shop's weekends), which are not gaps.
/// One weekday with a row anywhere is open; an outage, however long, leaves the weekdays around it
/// open.
fn closed_weekdays(first: NaiveDate, last: NaiveDate, rows: &impl Fn(NaiveDate) -> u64) -> Vec<Weekday> {
    let mut seen: [(u32, bool); 7] = [(0, false); 7];
    for day in first.iter_days().take_while(|d| *d <= last) {
        let (count, open) = &mut seen[day.weekday().num_days_from_monday() as usize];
        *count += 1;
        *open |= rows(day) > 0;
    }
    // No row on any day: a load that broke before the weeks looked at, not a business closed all
    // week (every weekday counted closed said "No gaps" over a range without a row).
    if !seen.iter().any(|(_, open)| *open) {
        return Vec::new();
    }
    (0..7u8)
        .filter(|&at| seen[at as usize].0 >= 4 && !seen[at as usize].1)
        .filter_map(|at| Weekday::try_from(at).ok())
        .collect()
}

/// Consecutive days (sorted) as `(first, last)` runs: a month without rows is one run.
pub fn runs(days: &[NaiveDate]) -> Vec<(NaiveDate, NaiveDate)> {
    let mut runs: Vec<(NaiveDate, NaiveDate)> = Vec::new();
    for &day in days {
        match runs.last_mut() {
            Some((_, last)) if last.succ_opt() == Some(day) => *last = day,
            _ => runs.push((day, day)),
        }
    }
    runs
}

/// The usual rows of `day`'s weekday around it — the median over up to `weeks` weeks either side,
/// days without rows left out — and how many days it was taken over; `None` under two.
fn usual(day: NaiveDate, weeks: u32, rows: &impl Fn(NaiveDate) -> u64) -> Option<(u64, usize)> {
    let mut around: Vec<u64> = (1..=u64::from(weeks))
        .flat_map(|k| [day.checked_sub_days(Days::new(7 * k)), day.checked_add_days(Days::new(7 * k))])
        .flatten()
        .map(rows)
        .filter(|n| *n > 0)
        .collect();
    if around.len() < 2 {
        return None;
    }
    around.sort_unstable();
    let middle = around.len() / 2;
    let median = match around.len() % 2 {
        1 => around[middle],
        _ => (around[middle - 1] + around[middle]) / 2,
    };
    Some((median, around.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    #[test]
    fn a_day_is_judged_by_its_own_weekday_without_the_missing_ones() {
        // Weekdays 20, Sundays 10; one Sunday missing.
        let rows = |day: NaiveDate| match (day.weekday(), day == d("2025-05-11")) {
            (_, true) => 0,
            (chrono::Weekday::Sun, false) => 10,
            _ => 20,
        };
        assert_eq!(usual(d("2025-05-18"), 4, &rows), Some((10, 7)), "a Sunday by the other Sundays");
        assert_eq!(usual(d("2025-05-20"), 4, &rows), Some((20, 8)));
        assert_eq!(usual(d("2025-05-20"), 0, &rows), None, "no weeks around: no usual level");
        let lonely = |day: NaiveDate| u64::from(day == d("2025-05-13"));
        assert_eq!(usual(d("2025-05-20"), 4, &lonely), None, "one neighbour is not a level");
        let even = |day: NaiveDate| if day < d("2025-05-20") { 10 } else { 30 };
        assert_eq!(usual(d("2025-05-20"), 1, &even), Some((20, 2)), "the median of two is their mean");
    }

    #[test]
    fn weekdays_without_any_row_are_closed_and_an_outage_closes_none() {
        let weekdays_only = |day: NaiveDate| u64::from(day.weekday().num_days_from_monday() < 5) * 20;
        let (first, last) = (d("2025-03-01"), d("2025-05-31"));
        assert_eq!(closed_weekdays(first, last, &weekdays_only), [Weekday::Sat, Weekday::Sun]);
        let outage = |day: NaiveDate| u64::from(!(d("2025-03-10") <= day && day <= d("2025-05-20"))) * 20;
        assert!(closed_weekdays(first, last, &outage).is_empty(), "ten weeks out, every weekday still open");
        assert!(
            closed_weekdays(d("2025-03-01"), d("2025-03-21"), &|_| 0).is_empty(),
            "three weeks say nothing"
        );
        assert!(
            closed_weekdays(first, last, &|_| 0).is_empty(),
            "no row at all: nothing is closed, all is missing"
        );
    }
}
