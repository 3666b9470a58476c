//! The trend under a plan's summary in a terminal: per metric (rows first), a line of block
//! characters before and one after, the window between two marks and a few periods either side of
//! it, fitted to 100 columns. A reviewer sees which days moved before reading a number.

use std::fmt::Write;

use bf::rehearse::diff::{MAX_POINTS, Trend};
use bf::rehearse::plan::Plan;

use crate::render::trend::{Series, inside, per, series};

/// The widest line the chart draws.
pub(crate) const WIDTH: usize = 100;
/// The widest a metric's name is shown beside its bars; a longer one gets a line of its own.
const NAME: usize = 16;
/// Eight heights of a bar, lowest first; a period without rows or value is left blank.
const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Drawn before the window's first period and after its last.
const EDGE: char = '┊';

/// The chart, or `None` for a plan saved without a trend (before format 8).
pub(super) fn chart(plan: &Plan) -> Option<String> {
    // A window of more than sixty years has more periods than a line has columns.
    lines(plan.trend.as_ref().filter(|t| !t.points.is_empty() && t.points.len() <= MAX_POINTS)?)
}

fn lines(trend: &Trend) -> Option<String> {
    let (first, last) = (trend.points.first()?, trend.points.last()?);
    let mut out = format!(
        "\n{}, {}..{}, the window between {EDGE} {EDGE} (bars from ▁ lowest to █ highest):\n",
        capitalized(&per(trend.period)),
        first.first,
        last.last
    );
    let all = series(trend);
    // Each line's words after its bars: the range on the first, what moved on the second.
    let said: Vec<(String, String)> = all.iter().map(|s| (range(s), s.moved_said(trend))).collect();
    let widest = said.iter().flat_map(|(a, b)| [a, b]).map(|s| s.chars().count()).max().unwrap_or(0);
    // "  <name>  before <bars>  <words>" where it fits in the line; else the name and the words
    // have a line of their own above the bars.
    let fixed = 2 + 2 + "before ".len() + trend.points.len() + 2 + 2 + widest;
    let longest = all.iter().map(|s| s.name.chars().count()).max().unwrap_or(0);
    let beside = longest <= NAME.min(WIDTH.saturating_sub(fixed));
    for (s, (range, moved)) in all.iter().zip(&said) {
        let (before, after) = (bars(trend, s, &s.before), bars(trend, s, &s.after));
        if beside {
            let _ = writeln!(out, "  {:<longest$}  before {before}  {range}", s.name);
            let _ = writeln!(out, "  {:<longest$}  after  {after}  {moved}", "");
        } else {
            let _ = writeln!(out, "  {}", cut(&format!("{}: {range}; {moved}", s.name), WIDTH - 2));
            let _ = writeln!(out, "    before {before}");
            let _ = writeln!(out, "    after  {after}");
        }
    }
    Some(out)
}

/// One side of a series as bars, on the scale both sides share, the window between [`EDGE`]s.
fn bars(trend: &Trend, series: &Series, values: &[Option<f64>]) -> String {
    let (low, high) = series.range().unwrap_or((0.0, 0.0));
    let window = inside(trend);
    let mut line = String::new();
    for (i, value) in values.iter().enumerate() {
        if window.is_some_and(|(first, _)| first == i) {
            line.push(EDGE);
        }
        line.push(match value {
            // Nothing, or no rows at all: blank, whatever the scale.
            None => ' ',
            Some(v) if *v == 0.0 && low == 0.0 => ' ',
            Some(v) => height(*v, low, high),
        });
        if window.is_some_and(|(_, last)| last == i) {
            line.push(EDGE);
        }
    }
    line
}

/// The block for `value` on a scale from `low` (the lowest block) to `high` (the highest); the
/// middle one where every value is the same.
fn height(value: f64, low: f64, high: f64) -> char {
    if high <= low {
        return BLOCKS[BLOCKS.len() / 2];
    }
    let share = (value - low) / (high - low);
    let level = (share * (BLOCKS.len() - 1) as f64).round() as usize;
    BLOCKS[level.min(BLOCKS.len() - 1)]
}

/// `13 – 14`: the scale a metric's bars are drawn on.
fn range(series: &Series) -> String {
    match series.range() {
        Some((low, high)) if low == high => format!("{} throughout", crate::render::number(low)),
        Some((low, high)) => format!("{} – {}", crate::render::number(low), crate::render::number(high)),
        None => "no values".to_owned(),
    }
}

fn cut(name: &str, width: usize) -> String {
    match name.chars().count() > width {
        true => name.chars().take(width.saturating_sub(1)).chain(['…']).collect(),
        false => name.to_owned(),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bf::rehearse::diff::{Measures, Period, TrendPoint};

    use super::*;

    /// The widest trend, a metric named at length, negative values and a period without rows.
    #[test]
    fn the_widest_trend_with_long_names_fits_a_hundred_columns() {
        let name = "revenue_in_euros_after_refunds_and_fx";
        let day =
            |i: usize| chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap() + chrono::Days::new(i as u64);
        let measures = |i: usize, shift: f64| Measures {
            rows: if i == 3 { 0 } else { 1_000_000 + i as u64 },
            metrics: BTreeMap::from([(name.to_owned(), (i != 3).then_some(i as f64 - 30.0 + shift))]),
            ..Measures::default()
        };
        let points = (0..MAX_POINTS)
            .map(|i| TrendPoint {
                first: day(i),
                last: day(i),
                inside: (4..MAX_POINTS - 4).contains(&i),
                before: measures(i, 0.0),
                after: measures(i, if i == 20 { 5.0 } else { 0.0 }),
            })
            .collect();
        let drawn = lines(&Trend { period: Period::Day, points }).unwrap();
        for line in drawn.lines() {
            assert!(line.chars().count() <= WIDTH, "{} columns: {line}", line.chars().count());
        }
        assert!(drawn.contains(&format!("\n  {name}: −30 – 31; moved in 1 of 54 days\n")), "{drawn}");
        assert!(drawn.contains("same count every day"), "never 'unchanged': {drawn}");
        let mut lines = drawn.lines().skip_while(|l| !l.contains(name));
        let before = lines.nth(1).unwrap();
        let bars: String = before.split("before ").nth(1).unwrap().chars().take(MAX_POINTS + 2).collect();
        assert!(bars.starts_with("▁▁▁ ┊") && bars.ends_with("█"), "the empty day blank: {bars}");
        let heights: Vec<usize> = bars.chars().filter_map(|c| BLOCKS.iter().position(|b| *b == c)).collect();
        assert!(heights.windows(2).all(|w| w[0] <= w[1]), "rising values, rising bars: {bars}");
    }
}
