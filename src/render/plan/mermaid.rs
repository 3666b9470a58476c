//! The trend in a pull-request comment: a Mermaid `xychart-beta` per metric (rows first), which
//! GitHub draws in the comment — the window's periods and a few either side, before as bars and
//! after as a line. Every string from the plan is escaped for Mermaid ([`bf::markdown::mermaid`]);
//! the numbers are plain decimals, which is all its grammar reads.

use std::fmt::Write;

use bf::markdown as md;
use bf::rehearse::plan::Plan;

use crate::render::trend::{Series, inside, label, per, series};

/// The charts' section of the comment, or `None` for a plan saved without a trend.
pub(super) fn charts(plan: &Plan) -> Option<String> {
    let trend = plan.trend.as_ref().filter(|t| !t.points.is_empty())?;
    let (first, last) = inside(trend).map(|(f, l)| (&trend.points[f], &trend.points[l]))?;
    let per = per(trend.period);
    let mut out = format!(
        "\n**Before and after, {per}**: bars before, line after; the window is {}..{}, the periods either side \
         are outside it and should not move.\n",
        first.first, last.last
    );
    let labels: Vec<String> =
        trend.points.iter().map(|p| format!("\"{}\"", md::mermaid(&label(p, trend.period)))).collect();
    for s in series(trend) {
        let moved = s.moved_said(trend);
        let _ = write!(
            out,
            "\n```mermaid\n{}xychart-beta\n    title \"{}\"\n    x-axis [{}]\n    y-axis \"{}\" {}\n    bar [{}]\n    line [{}]\n```\n",
            wide(trend.points.len()),
            md::mermaid(&format!("{} {per} · bars before, line after · {moved}", s.name)),
            labels.join(", "),
            md::mermaid(&s.name),
            y_range(&s),
            values(&s.before),
            values(&s.after),
        );
    }
    Some(out)
}

/// Mermaid draws an xychart 700 pixels wide, its labels never thinned or turned: past 28
/// periods they run into each other, so a longer trend asks for room (GitHub scales the picture
/// to the comment's width) and smaller labels.
fn wide(points: usize) -> String {
    match points {
        0..=28 => String::new(),
        n => format!(
            "---\nconfig:\n  xyChart:\n    width: {}\n    xAxis:\n      labelFontSize: 11\n---\n",
            26 * n
        ),
    }
}

/// `0 --> 840`: from zero unless a value is negative, a tenth of room above the highest.
fn y_range(series: &Series) -> String {
    let (low, high) = series.range().unwrap_or((0.0, 1.0));
    let low = low.min(0.0);
    let high = if high > low { high + (high - low) / 10.0 } else { low + 1.0 };
    format!("{} --> {}", plain(low), plain(high))
}

/// A side's values; a period without a value is drawn at 0 (Mermaid reads numbers only).
fn values(side: &[Option<f64>]) -> String {
    side.iter().map(|v| plain(v.unwrap_or(0.0))).collect::<Vec<_>>().join(", ")
}

/// A decimal Mermaid reads: Rust never writes an exponent, and a value past f64's finite range
/// cannot come from a measured aggregate.
fn plain(value: f64) -> String {
    if value.is_finite() { format!("{value}") } else { "0".to_owned() }
}
