//! The change as a time series: rows and each metric before and after, period by period, over the
//! window and a few periods either side of it — what the charts of `bf plan` draw (the terminal's
//! lines, the pull request's Mermaid charts, the HTML report's). The neighbours are outside the
//! window, so their two sides are equal unless something is wrong: they are the context a reader's
//! eye compares the window with.

use chrono::{Days, Months, NaiveDate};
use deltalake::arrow::datatypes::{DataType, Date32Type};
use deltalake::datafusion::common::{Column, ScalarValue};
use deltalake::datafusion::error::Result as DfResult;
use deltalake::datafusion::logical_expr::{Expr, cast, lit, when};
use serde::{Deserialize, Serialize};

use super::measures::Measures;
use super::session::{AFTER, BEFORE, Comparison, Side, as_f64, scalar};
use crate::delta::predicate::window_predicate;
use crate::plan_file::Metric;
use crate::window::{Cadence, RunOffset, Window};

/// The most periods a trend holds, window and neighbours together: a terminal line of 100
/// columns draws one per column beside its label, and a chart of more is a blur.
pub const MAX_POINTS: usize = 62;

/// How long one point of a trend is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Day,
    /// Seven days, counted from the window's first day (so no week straddles its edge).
    Week,
    /// A calendar month (the window's first and last clipped to it).
    Month,
    /// A calendar year (likewise).
    Year,
}

impl Period {
    /// The period for `window`'s length: the shortest whose points, with [`Period::context`]
    /// neighbours either side, fit in [`MAX_POINTS`] (years, however many, for a window longer
    /// than five).
    pub fn of(window: &Window) -> Period {
        [Period::Day, Period::Week, Period::Month]
            .into_iter()
            .find(|period| periods(window, *period).len() <= MAX_POINTS)
            .unwrap_or(Period::Year)
    }

    /// How many periods either side of the window are shown: a week of days, a month of weeks, a
    /// quarter of months, a year of years.
    pub fn context(self) -> u32 {
        match self {
            Period::Day => 7,
            Period::Week => 4,
            Period::Month => 3,
            Period::Year => 1,
        }
    }

    fn cadence(self) -> Cadence {
        match self {
            Period::Day => Cadence::Days(1),
            Period::Week => Cadence::Days(7),
            Period::Month => Cadence::Month,
            Period::Year => Cadence::Year,
        }
    }

    /// The day `n` periods before (negative) or after `day`, at the calendar's edge if past it.
    fn moved(self, day: NaiveDate, n: i64) -> NaiveDate {
        let step = n.unsigned_abs() as u32;
        let moved = match self {
            Period::Day => shift_days(day, n, u64::from(step)),
            Period::Week => shift_days(day, n, 7 * u64::from(step)),
            Period::Month | Period::Year => {
                let months = Months::new(if self == Period::Year { 12 * step } else { step });
                if n < 0 { day.checked_sub_months(months) } else { day.checked_add_months(months) }
            }
        };
        moved.unwrap_or(if n < 0 { NaiveDate::MIN } else { NaiveDate::MAX })
    }

    /// Where a calendar period containing `day` starts (a day and a window's week: `day` itself).
    fn start_of(self, day: NaiveDate) -> NaiveDate {
        use chrono::Datelike;
        match self {
            Period::Day | Period::Week => day,
            Period::Month => day.with_day(1).unwrap_or(day),
            Period::Year => day.with_ordinal(1).unwrap_or(day),
        }
    }
}

fn shift_days(day: NaiveDate, n: i64, days: u64) -> Option<NaiveDate> {
    if n < 0 { day.checked_sub_days(Days::new(days)) } else { day.checked_add_days(Days::new(days)) }
}

/// One period's rows and metrics, before and after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrendPoint {
    pub first: NaiveDate,
    pub last: NaiveDate,
    /// Whether the period is inside the window (else it is a neighbour, shown for context).
    pub inside: bool,
    /// No rows: a row count of 0 and every metric `None`.
    pub before: Measures,
    pub after: Measures,
}

/// The window and its neighbours, period by period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Trend {
    pub period: Period,
    pub points: Vec<TrendPoint>,
}

/// The periods a trend of `window` measures: its neighbours before, the window cut at `period`
/// (clipped to its edges), its neighbours after. A period never straddles the window's edge.
pub fn periods(window: &Window, period: Period) -> Vec<(Window, bool)> {
    let cut = |range: Window, inside: bool| {
        range
            .slices(period.cadence(), RunOffset::default())
            .map(move |s| (Window { start: s.first, end: s.last }, inside))
            .collect::<Vec<_>>()
    };
    let context = i64::from(period.context());
    let mut periods = Vec::new();
    let before = window.start.pred_opt().map(|last| Window {
        start: period.start_of(period.moved(window.start, -context)).min(last),
        end: last,
    });
    periods.extend(before.map(|range| cut(range, false)).unwrap_or_default());
    periods.extend(cut(*window, true));
    if let Some(first) = window.end.succ_opt() {
        let last = period.moved(period.start_of(first), context).pred_opt().unwrap_or(first);
        periods.extend(cut(Window { start: first, end: last.max(first) }, false));
    }
    periods
}

/// A day's rows and metrics before and after, as a slice's comparison measured them.
#[derive(Debug, Clone, PartialEq)]
pub struct Day {
    pub day: NaiveDate,
    pub before: Measures,
    pub after: Measures,
}

/// What the slices' comparisons measured day by day, and the days they cover (the window, or the
/// slices a preview rehearsed): a covered day they name no measures for holds no rows on either
/// side.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub days: std::collections::BTreeMap<NaiveDate, Day>,
    pub covered: Vec<Window>,
}

impl Measured {
    fn covers(&self, range: &Window) -> bool {
        self.covered.iter().any(|c| c.contains(range.start) && c.contains(range.end))
    }

    /// A period's measures from its days, when every day is covered and the period is one day
    /// or every metric is a sum (an average of days is not the period's average): `None` else.
    fn period(&self, range: &Window, metrics: &[Metric], empty: &Measures) -> Option<(Measures, Measures)> {
        if !self.covers(range) {
            return None;
        }
        let days: Vec<&Day> = self.days.range(range.start..=range.end).map(|(_, d)| d).collect();
        if range.start == range.end {
            return Some(
                days.first().map_or((empty.clone(), empty.clone()), |d| (d.before.clone(), d.after.clone())),
            );
        }
        let side = |pick: fn(&Day) -> &Measures| days.iter().map(|d| pick(d)).collect::<Vec<_>>();
        match days.is_empty() {
            true => Some((empty.clone(), empty.clone())),
            false => Some((
                Measures::sum_of(&side(|d| &d.before), metrics)?,
                Measures::sum_of(&side(|d| &d.after), metrics)?,
            )),
        }
    }
}

impl Comparison {
    /// Rows and `metrics` of the focused slice ([`Comparison::focus`]) per day, both sides: the
    /// trend's days inside the window, from rows the slice's comparison already holds.
    pub async fn measure_days(&self, column: &str, metrics: &[Metric]) -> DfResult<Vec<Day>> {
        let day = cast(Expr::Column(Column::new_unqualified(column)), DataType::Date32);
        let mut days: std::collections::BTreeMap<NaiveDate, Day> = std::collections::BTreeMap::new();
        for side in [Side::Before, Side::After] {
            let rows = self.ctx.table(side.slice_view()).await?.with_column(PERIOD, day.clone())?;
            for (row_day, measured) in self.grouped(rows, metrics).await? {
                let Some(ScalarValue::Date32(Some(n))) = row_day else { continue };
                let Some(date) = Date32Type::to_naive_date_opt(n) else { continue };
                let entry = days.entry(date).or_insert_with(|| Day {
                    day: date,
                    before: empty(metrics),
                    after: empty(metrics),
                });
                match side {
                    Side::Before => entry.before = measured,
                    Side::After => entry.after = measured,
                }
            }
        }
        Ok(days.into_values().collect())
    }

    /// Rows and `metrics` of each period of `window`'s trend, on both sides: from the days the
    /// slices' comparisons measured where they tell (`measured`), and for the rest — the
    /// neighbours outside the window, the days a preview did not rehearse, a longer period whose
    /// metrics do not add up from its days — by one grouped query per side over those periods'
    /// rows alone.
    pub async fn trend(
        &self,
        column: &str,
        window: &Window,
        metrics: &[Metric],
        measured: &Measured,
    ) -> DfResult<Trend> {
        let period = Period::of(window);
        let periods = periods(window, period);
        let empty = empty(metrics);
        let mut points = Vec::with_capacity(periods.len());
        let mut unknown = Vec::new();
        for (i, (range, inside)) in periods.iter().enumerate() {
            let known = measured.period(range, metrics, &empty);
            if known.is_none() {
                unknown.push((i, *range));
            }
            let (before, after) = known.unwrap_or_else(|| (empty.clone(), empty.clone()));
            points.push(TrendPoint { first: range.start, last: range.end, inside: *inside, before, after });
        }
        if unknown.is_empty() {
            return Ok(Trend { period, points });
        }
        // Each row's period by typed DATE bounds, never dates pasted into SQL text.
        let read = unknown.iter().map(|(_, range)| window_predicate(column, range)).reduce(Expr::or);
        let which = period_of(column, &unknown)?;
        for side in [Side::Before, Side::After] {
            let table = if side == Side::Before { BEFORE } else { AFTER };
            let rows = self.ctx.table(table).await?;
            let rows = rows.filter(read.clone().unwrap_or(lit(false)))?.with_column(PERIOD, which.clone())?;
            for (index, measured) in self.grouped(rows, metrics).await? {
                let Some(point) = index.and_then(|v| as_f64(&v)).and_then(|i| points.get_mut(i as usize))
                else {
                    continue;
                };
                match side {
                    Side::Before => point.before = measured,
                    Side::After => point.after = measured,
                }
            }
        }
        Ok(Trend { period, points })
    }

    /// `rows` grouped by their [`PERIOD`] column and measured: each group's value of it, and its
    /// measures.
    async fn grouped(
        &self,
        rows: deltalake::datafusion::prelude::DataFrame,
        metrics: &[Metric],
    ) -> DfResult<Vec<(Option<ScalarValue>, Measures)>> {
        self.ctx.deregister_table(VIEW)?;
        self.ctx.register_table(VIEW, rows.into_view())?;
        let measuring = self.measuring(VIEW, metrics).await?;
        let sql = format!("SELECT {PERIOD}, {} FROM {VIEW} GROUP BY {PERIOD}", measuring.select.join(", "));
        let batch = self.one_batch(&sql).await?;
        Ok((0..batch.num_rows())
            .map(|row| (scalar(&batch, 0, row), measuring.read(&batch, row, 1, metrics)))
            .collect())
    }
}

/// The measures of no rows: a count of 0, every metric `None`.
fn empty(metrics: &[Metric]) -> Measures {
    Measures { metrics: metrics.iter().map(|m| (m.name.clone(), None)).collect(), ..Measures::default() }
}

/// The view a trend's rows are grouped in, and the column naming each row's period (or day).
const VIEW: &str = "__bf_trend";
const PERIOD: &str = "__bf_period";

/// `CASE WHEN <period 3> THEN 3 WHEN <period 9> THEN 9 … END`: the index of the period a row's
/// date falls in, among `periods` (indexed).
fn period_of(column: &str, periods: &[(usize, Window)]) -> DfResult<Expr> {
    let mut branches = periods.iter().map(|(i, range)| (window_predicate(column, range), *i));
    let mut case = match branches.next() {
        Some((predicate, index)) => when(predicate, lit(index as i64)),
        None => return Ok(lit(-1_i64)),
    };
    for (predicate, index) in branches {
        case = case.when(predicate, lit(index as i64));
    }
    case.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(start: &str, end: &str) -> Window {
        Window { start: start.parse().unwrap(), end: end.parse().unwrap() }
    }

    fn spans(periods: &[(Window, bool)]) -> Vec<String> {
        periods.iter().map(|(w, inside)| format!("{}{}", if *inside { "*" } else { "" }, w)).collect()
    }

    #[test]
    fn the_march_reload_is_drawn_by_day_with_a_week_either_side() {
        let march = window("2026-03-01", "2026-03-31");
        assert_eq!(Period::of(&march), Period::Day);
        let periods = periods(&march, Period::Day);
        assert_eq!(periods.len(), 31 + 14);
        assert_eq!(periods[0].0, window("2026-02-22", "2026-02-22"));
        assert_eq!(periods[7].0, window("2026-03-01", "2026-03-01"));
        assert_eq!(periods.iter().filter(|(_, inside)| *inside).count(), 31);
        assert_eq!(periods.last().unwrap().0, window("2026-04-07", "2026-04-07"));
    }

    #[test]
    fn longer_windows_are_drawn_by_weeks_from_their_first_day_then_by_months() {
        let quarter = window("2026-01-01", "2026-03-31");
        assert_eq!(Period::of(&quarter), Period::Week);
        let weeks = spans(&periods(&quarter, Period::Week));
        assert_eq!(weeks.len(), 13 + 8, "{weeks:?}");
        assert_eq!(weeks[0], "2025-12-04..2025-12-10");
        assert_eq!(weeks[3], "2025-12-25..2025-12-31");
        assert_eq!(weeks[4], "*2026-01-01..2026-01-07");
        assert_eq!(weeks[16], "*2026-03-26..2026-03-31", "the last week is clipped to the window");
        assert_eq!(weeks[17], "2026-04-01..2026-04-07");
        assert_eq!(weeks[20], "2026-04-22..2026-04-28");

        let years = window("2024-03-15", "2026-02-10");
        assert_eq!(Period::of(&years), Period::Month);
        let months = spans(&periods(&years, Period::Month));
        assert_eq!(months[0], "2023-12-01..2023-12-31");
        assert_eq!(months[3], "2024-03-01..2024-03-14", "the window's first month, before it");
        assert_eq!(months[4], "*2024-03-15..2024-03-31");
        assert_eq!(months.last().unwrap(), "2026-04-01..2026-04-30");
        assert!(months.len() <= MAX_POINTS);

        assert_eq!(Period::of(&window("2000-01-01", "2026-12-31")), Period::Year);
    }

    #[test]
    fn no_period_straddles_the_window_and_together_they_leave_no_day_out() {
        for (start, end) in
            [("2026-03-01", "2026-03-31"), ("2026-02-03", "2026-05-19"), ("2021-06-30", "2026-01-02")]
        {
            let range = window(start, end);
            let periods = periods(&range, Period::of(&range));
            assert!(periods.len() <= MAX_POINTS, "{range}: {}", periods.len());
            for pair in periods.windows(2) {
                assert_eq!(pair[0].0.end.succ_opt(), Some(pair[1].0.start), "{range}: contiguous");
            }
            for (period, inside) in &periods {
                assert_eq!(*inside, range.contains(period.start), "{range}: {period}");
                assert_eq!(range.contains(period.start), range.contains(period.end), "{range}: {period}");
            }
        }
    }
}
