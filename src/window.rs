//! The window a backfill rewrites and the slices it is cut into.
//!
//! A backfill is safe when each run loads exactly the dates it names and replaces exactly those dates
//! in the table. This module is where "exactly" is decided, so it is pure calendar arithmetic: no I/O,
//! no clock (a run date is derived from the slice, never from "today").
//!
//! 1. A [`Window`] is an inclusive range of days.
//! 2. A [`Cadence`] ("day", "week", "month", `"<N> days"`, …) names the boundaries slices start on:
//!    calendar units are aligned to the calendar (ISO weeks start on Monday, months on the 1st), while
//!    `<N> days` counts from the window's first day.
//! 3. [`Window::slices`] walks those boundaries and clips the first and last slice to the window, so the
//!    slices are contiguous, disjoint and cover the window exactly.
//! 4. Each slice gets a run date (its first day plus a [`RunOffset`]), the date an orchestrator would
//!    have given that run, and a 1-based index that never depends on the order slices are executed in,
//!    because the index is what ties a slice to its commit in the table's history.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, Days, Months, NaiveDate};
use serde::{Deserialize, Serialize};

/// An inclusive range of days: the part of the table a backfill may rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Window {
    pub start: NaiveDate,
    pub end: NaiveDate,
}

/// One unit of work: the days one run loads and one commit replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    /// 1-based, in calendar order whatever the execution order.
    pub index: usize,
    /// First day, inclusive.
    pub first: NaiveDate,
    /// Last day, inclusive.
    pub last: NaiveDate,
    /// The date an orchestrator would give this run (first day + run offset).
    pub run_date: NaiveDate,
}

/// How a window is cut into slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Cadence {
    /// `N` days counted from the window's first day; "day" is `Days(1)`.
    Days(u32),
    /// ISO weeks, Monday to Sunday.
    Week,
    Month,
    Quarter,
    Year,
}

/// Days between a slice's first day and its run date; the September daily backfill's load runs the day after the day it
/// loads, so its backfill has an offset of "1 day".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunOffset(pub i64);

/// The order slices are executed in. Backward serves the common ask "fix the most recent first".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    #[default]
    Forward,
    Backward,
}

impl Window {
    /// Number of days in the window (at least 1 for a valid window).
    pub fn days(&self) -> i64 {
        (self.end - self.start).num_days() + 1
    }

    pub fn contains(&self, day: NaiveDate) -> bool {
        self.start <= day && day <= self.end
    }

    /// The days `slices` cover, as the fewest ranges: neighbouring slices joined. A plan's slices
    /// make its window; a preview's or a `slicing.only` plan's, the runs of days they rewrite.
    pub fn runs(slices: &[Slice]) -> Vec<Window> {
        let mut days: Vec<Window> = slices.iter().map(|s| Window { start: s.first, end: s.last }).collect();
        days.sort_by_key(|range| range.start);
        let mut runs: Vec<Window> = Vec::with_capacity(days.len());
        for range in days {
            match runs.last_mut() {
                Some(run) if run.end.succ_opt() == Some(range.start) => run.end = range.end,
                _ => runs.push(range),
            }
        }
        runs
    }

    /// The slices covering the window, lazily, in calendar order. Lazy because a hostile plan can ask
    /// for millions of slices and validation only needs to know there are more than the guard allows.
    pub fn slices(&self, cadence: Cadence, offset: RunOffset) -> SliceIter {
        SliceIter {
            next_first: (self.start <= self.end).then_some(self.start),
            end: self.end,
            window_start: self.start,
            cadence,
            offset,
            index: 0,
        }
    }
}

/// `slice 3 (2026-03-15..2026-03-21)`: how messages name a slice, by its index and all its days.
impl fmt::Display for Slice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slice {} ({})", self.index, crate::words::days(self.first, self.last))
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

/// The slices of a window in calendar order; see [`Window::slices`].
#[derive(Debug, Clone)]
pub struct SliceIter {
    next_first: Option<NaiveDate>,
    end: NaiveDate,
    window_start: NaiveDate,
    cadence: Cadence,
    offset: RunOffset,
    index: usize,
}

impl Iterator for SliceIter {
    type Item = Slice;

    fn next(&mut self) -> Option<Slice> {
        let first = self.next_first?;
        // `None` means the boundary lies past the last representable date: this slice runs to the end.
        let boundary = self.cadence.next_boundary(first, self.window_start);
        let last = match boundary {
            Some(b) if b <= self.end => b.pred_opt().expect("a boundary after `first` has a previous day"),
            _ => self.end,
        };
        self.next_first = if last < self.end { last.succ_opt() } else { None };
        self.index += 1;
        Some(Slice { index: self.index, first, last, run_date: self.offset.apply(first) })
    }
}

impl Cadence {
    /// The first day of the slice after the one containing `day`.
    fn next_boundary(self, day: NaiveDate, window_start: NaiveDate) -> Option<NaiveDate> {
        match self {
            Cadence::Days(n) => {
                let n = u64::from(n.max(1));
                let since_start = (day - window_start).num_days().max(0) as u64;
                let into_slice = since_start % n;
                day.checked_add_days(Days::new(n - into_slice))
            }
            Cadence::Week => {
                let into_week = u64::from(day.weekday().num_days_from_monday());
                day.checked_add_days(Days::new(7 - into_week))
            }
            Cadence::Month => first_of_month(day).checked_add_months(Months::new(1)),
            Cadence::Quarter => {
                let quarter_start = NaiveDate::from_ymd_opt(day.year(), (day.month0() / 3) * 3 + 1, 1)?;
                quarter_start.checked_add_months(Months::new(3))
            }
            Cadence::Year => NaiveDate::from_ymd_opt(day.year().checked_add(1)?, 1, 1),
        }
    }
}

fn first_of_month(day: NaiveDate) -> NaiveDate {
    day.with_day(1).expect("every month has a 1st")
}

impl RunOffset {
    /// The run date for a slice starting on `first`. Saturates at the calendar's edges rather than
    /// panicking: a run date is informative, it never selects data.
    pub fn apply(self, first: NaiveDate) -> NaiveDate {
        let days = Days::new(self.0.unsigned_abs());
        let moved = if self.0 >= 0 { first.checked_add_days(days) } else { first.checked_sub_days(days) };
        moved.unwrap_or(first)
    }
}

/// Why a cadence or offset string was not understood; the text is shown to the user as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

impl FromStr for Cadence {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, ParseError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["day"] => Ok(Cadence::Days(1)),
            ["week"] => Ok(Cadence::Week),
            ["month"] => Ok(Cadence::Month),
            ["quarter"] => Ok(Cadence::Quarter),
            ["year"] => Ok(Cadence::Year),
            [n, "day" | "days"] => match n.parse::<u32>() {
                Ok(0) => Err(ParseError("a slice must span at least 1 day".into())),
                Ok(n) => Ok(Cadence::Days(n)),
                Err(_) => {
                    Err(ParseError(format!("`{n}` is not a whole number of days (write e.g. \"7 days\")")))
                }
            },
            _ => Err(ParseError(format!(
                "`{text}` is not a slicing: use \"day\", \"week\", \"month\", \"quarter\", \"year\" or \"<N> days\""
            ))),
        }
    }
}

impl fmt::Display for Cadence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cadence::Days(1) => f.write_str("day"),
            Cadence::Days(n) => write!(f, "{n} days"),
            Cadence::Week => f.write_str("week"),
            Cadence::Month => f.write_str("month"),
            Cadence::Quarter => f.write_str("quarter"),
            Cadence::Year => f.write_str("year"),
        }
    }
}

impl FromStr for RunOffset {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, ParseError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let bad = || {
            ParseError(format!(
                "`{text}` is not a run offset: write a whole number of days, e.g. \"1 day\" or \"0 days\""
            ))
        };
        match words.as_slice() {
            [n, "day" | "days"] => {
                let days: i64 = n.parse().map_err(|_| bad())?;
                // Beyond ~100 years an offset is a typo, and it keeps date arithmetic far from overflow.
                if days.abs() > 36_600 {
                    return Err(ParseError(format!("a run offset of {days} days is more than 100 years")));
                }
                Ok(RunOffset(days))
            }
            _ => Err(bad()),
        }
    }
}

impl TryFrom<String> for Cadence {
    type Error = ParseError;
    fn try_from(text: String) -> Result<Self, ParseError> {
        text.parse()
    }
}

impl From<Cadence> for String {
    fn from(cadence: Cadence) -> String {
        cadence.to_string()
    }
}

impl TryFrom<String> for RunOffset {
    type Error = ParseError;
    fn try_from(text: String) -> Result<Self, ParseError> {
        text.parse()
    }
}

impl From<RunOffset> for String {
    fn from(offset: RunOffset) -> String {
        offset.to_string()
    }
}

impl fmt::Display for RunOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 | -1 => write!(f, "{} day", self.0),
            n => write!(f, "{n} days"),
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::Forward => "forward",
            Order::Backward => "backward",
        })
    }
}

impl Order {
    /// Puts calendar-ordered slices into execution order.
    pub fn arrange(self, mut slices: Vec<Slice>) -> Vec<Slice> {
        if self == Order::Backward {
            slices.reverse();
        }
        slices
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> NaiveDate {
        text.parse().unwrap()
    }

    fn spans(window: Window, cadence: &str) -> Vec<(String, String)> {
        window
            .slices(cadence.parse().unwrap(), RunOffset::default())
            .map(|s| (s.first.to_string(), s.last.to_string()))
            .collect()
    }

    #[test]
    fn months_are_clipped_to_the_window() {
        let window = Window { start: d("2026-03-10"), end: d("2026-05-20") };
        assert_eq!(
            spans(window, "month"),
            [
                ("2026-03-10".into(), "2026-03-31".into()),
                ("2026-04-01".into(), "2026-04-30".into()),
                ("2026-05-01".into(), "2026-05-20".into()),
            ]
        );
    }

    #[test]
    fn weeks_are_iso_weeks() {
        // 2026-03-01 is a Sunday: the first slice is that one day.
        let window = Window { start: d("2026-03-01"), end: d("2026-03-16") };
        assert_eq!(
            spans(window, "week"),
            [
                ("2026-03-01".into(), "2026-03-01".into()),
                ("2026-03-02".into(), "2026-03-08".into()),
                ("2026-03-09".into(), "2026-03-15".into()),
                ("2026-03-16".into(), "2026-03-16".into()),
            ]
        );
    }

    #[test]
    fn n_days_count_from_the_window_start() {
        let window = Window { start: d("2026-02-26"), end: d("2026-03-05") };
        assert_eq!(
            spans(window, "3 days"),
            [
                ("2026-02-26".into(), "2026-02-28".into()),
                ("2026-03-01".into(), "2026-03-03".into()),
                ("2026-03-04".into(), "2026-03-05".into()),
            ]
        );
    }

    #[test]
    fn quarters_and_leap_february() {
        let window = Window { start: d("2024-02-15"), end: d("2024-07-01") };
        assert_eq!(
            spans(window, "quarter"),
            [
                ("2024-02-15".into(), "2024-03-31".into()),
                ("2024-04-01".into(), "2024-06-30".into()),
                ("2024-07-01".into(), "2024-07-01".into()),
            ]
        );
        let feb = Window { start: d("2024-02-01"), end: d("2024-02-29") };
        assert_eq!(spans(feb, "month"), [("2024-02-01".into(), "2024-02-29".into())]);
    }

    #[test]
    fn runs_join_neighbouring_slices_in_either_order() {
        let window = Window { start: d("2026-03-01"), end: d("2026-03-31") };
        let weeks: Vec<Slice> = window.slices(Cadence::Week, RunOffset(0)).collect();
        assert_eq!(Window::runs(&weeks), [window], "a plan's slices make its window");
        let picked: Vec<Slice> = Order::Backward.arrange(vec![weeks[0], weeks[1], weeks[3]]);
        assert_eq!(
            Window::runs(&picked),
            [
                Window { start: d("2026-03-01"), end: d("2026-03-08") },
                Window { start: d("2026-03-16"), end: d("2026-03-22") },
            ]
        );
    }

    #[test]
    fn september_runs_are_dated_the_day_after() {
        // The September daily backfill: 30 runs dated 2 September to 1 October load 1 to 30 September.
        let window = Window { start: d("2026-09-01"), end: d("2026-09-30") };
        let slices: Vec<Slice> = window.slices(Cadence::Days(1), "1 day".parse().unwrap()).collect();
        assert_eq!(slices.len(), 30);
        assert_eq!(slices[0].run_date, d("2026-09-02"));
        assert_eq!(slices[29].run_date, d("2026-10-01"));
        assert_eq!(slices[29].index, 30);
    }

    #[test]
    fn the_last_date_of_the_calendar_ends_the_last_slice() {
        let window = Window { start: d("+262142-12-01"), end: NaiveDate::MAX };
        let slices: Vec<Slice> = window.slices(Cadence::Year, RunOffset(40)).collect();
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].last, NaiveDate::MAX);
        assert_eq!(slices[0].run_date, slices[0].first, "an offset past the calendar saturates");
    }

    #[test]
    fn cadence_and_offset_texts() {
        assert_eq!("7 days".parse::<Cadence>(), Ok(Cadence::Days(7)));
        assert_eq!("1 day".parse::<Cadence>(), Ok(Cadence::Days(1)));
        assert!("0 days".parse::<Cadence>().is_err());
        assert!("fortnight".parse::<Cadence>().is_err());
        assert_eq!("-2 days".parse::<RunOffset>(), Ok(RunOffset(-2)));
        assert!("1 week".parse::<RunOffset>().is_err());
        assert!("99999999 days".parse::<RunOffset>().is_err());
        for text in ["day", "week", "month", "quarter", "year", "3 days"] {
            assert_eq!(text.parse::<Cadence>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn backward_order_keeps_calendar_indexes() {
        let window = Window { start: d("2026-01-01"), end: d("2026-03-31") };
        let slices = Order::Backward.arrange(window.slices(Cadence::Month, RunOffset(0)).collect());
        let indexes: Vec<usize> = slices.iter().map(|s| s.index).collect();
        assert_eq!(indexes, [3, 2, 1]);
    }
}
