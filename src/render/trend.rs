//! A plan's trend as the series every chart draws — the terminal's lines, the pull request's
//! Mermaid charts, the HTML report's — so the three cannot disagree on a value, a label or which
//! periods moved.

use bf::rehearse::diff::{Measures, Period, Trend, TrendPoint};

/// The row count's series' name, as every table of a plan names it.
const ROWS: &str = "rows";

/// One metric (or the row count) over the trend's periods, before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    /// One value per period; a metric's `None` where it is NULL (a period without rows).
    pub before: Vec<Option<f64>>,
    pub after: Vec<Option<f64>>,
    /// Per period, whether its value moved by more than the rounding of summing in another order.
    pub moved: Vec<bool>,
}

impl Series {
    /// How many of the window's periods moved.
    pub fn moved_inside(&self, trend: &Trend) -> usize {
        trend.points.iter().zip(&self.moved).filter(|(p, moved)| p.inside && **moved).count()
    }

    /// `moved in 31 of 31 days`, `same every day`; for the row count `counts moved in 3 of 31
    /// days` and `same count every day` — never "unchanged": a day's count can stay while its rows
    /// are rewritten, which the summary counts. A period outside the window that moved is called out.
    pub fn moved_said(&self, trend: &Trend) -> String {
        let unit = unit(trend.period);
        let periods = trend.points.iter().filter(|p| p.inside).count();
        let moved = self.moved_inside(trend);
        let outside = self.moved.iter().filter(|m| **m).count() - moved;
        let counts = self.name == ROWS;
        let mut said = match (moved, counts) {
            (0, true) => format!("same count every {unit}"),
            (0, false) => format!("same every {unit}"),
            (n, true) => format!("counts moved in {n} of {}", crate::render::count(periods, unit)),
            (n, false) => format!("moved in {n} of {}", crate::render::count(periods, unit)),
        };
        if outside > 0 {
            said.push_str(&format!("; {} outside the window ✗", crate::render::count(outside, unit)));
        }
        said
    }

    /// The smallest and largest value either side holds, `None` when it holds none.
    pub fn range(&self) -> Option<(f64, f64)> {
        let values = self.before.iter().chain(&self.after).flatten().copied();
        values.fold(None, |range, v| match range {
            None => Some((v, v)),
            Some((low, high)) => Some((low.min(v), high.max(v))),
        })
    }
}

/// The row count, then each metric in the plan's order of names.
pub fn series(trend: &Trend) -> Vec<Series> {
    let rows = |m: &Measures| Some(m.rows as f64);
    let mut all = vec![one(ROWS, trend, rows, |_, _| 0.0)];
    let names: Vec<&String> =
        trend.points.first().map(|p| p.before.metrics.keys().collect()).unwrap_or_default();
    for name in names {
        let value = |m: &Measures| m.metrics.get(name).copied().flatten();
        let error = |b: &Measures, a: &Measures| {
            b.error.get(name).copied().unwrap_or(0.0) + a.error.get(name).copied().unwrap_or(0.0)
        };
        all.push(one(name, trend, value, error));
    }
    all
}

fn one(
    name: &str,
    trend: &Trend,
    value: impl Fn(&Measures) -> Option<f64>,
    error: impl Fn(&Measures, &Measures) -> f64,
) -> Series {
    let moved = |p: &TrendPoint| match (value(&p.before), value(&p.after)) {
        (Some(b), Some(a)) => (a - b).abs() > error(&p.before, &p.after),
        (b, a) => b.is_some() != a.is_some(),
    };
    Series {
        name: name.to_owned(),
        before: trend.points.iter().map(|p| value(&p.before)).collect(),
        after: trend.points.iter().map(|p| value(&p.after)).collect(),
        moved: trend.points.iter().map(moved).collect(),
    }
}

/// A period as an axis names it: `03-01` for a day or a week (its first day), `2026-03` for a
/// month, `2026` for a year.
pub fn label(point: &TrendPoint, period: Period) -> String {
    match period {
        Period::Day | Period::Week => point.first.format("%m-%d").to_string(),
        Period::Month => point.first.format("%Y-%m").to_string(),
        Period::Year => point.first.format("%Y").to_string(),
    }
}

/// What one point of a trend is: `day`, `week` (seven days counted from the window's first, the
/// last clipped to it), `month`, `year`.
pub fn unit(period: Period) -> &'static str {
    match period {
        Period::Day => "day",
        Period::Week => "week",
        Period::Month => "month",
        Period::Year => "year",
    }
}

/// `per day`, `per week`, …: how a chart's heading names its points.
pub fn per(period: Period) -> String {
    format!("per {}", unit(period))
}

/// The window's first and last period, by index.
pub fn inside(trend: &Trend) -> Option<(usize, usize)> {
    let first = trend.points.iter().position(|p| p.inside)?;
    let last = trend.points.iter().rposition(|p| p.inside)?;
    Some((first, last))
}
