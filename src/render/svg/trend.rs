//! A series of a plan's trend: before as bars, after as a line with a point per period; over it,
//! the window as a shaded band and a hover area per period with its days and numbers.

use maud::{Markup, PreEscaped, html};
use plotters::prelude::*;

use bf::rehearse::diff::Trend;

use super::{HEIGHT, WIDTH};
use crate::render::trend::{Series, label};

const BEFORE: RGBColor = RGBColor(0xb8, 0xc4, 0xd6);
const AFTER: RGBColor = RGBColor(0xd9, 0x5f, 0x02);

/// One metric's chart: plotters' drawing and the overlay naming its periods (or, should plotters
/// fail, what it said: the report's tables still hold the numbers).
pub fn chart(trend: &Trend, series: &Series) -> Markup {
    let mut svg = String::new();
    let places = match draw(trend, series, &mut svg) {
        Ok(places) => places,
        Err(error) => return html! { p.bad { "The chart could not be drawn: " (error.to_string()) } },
    };
    let window = crate::render::trend::inside(trend);
    let (top, bottom) = (places.top, places.bottom);
    html! {
        div.plot {
            (PreEscaped(svg))
            svg.overlay width=(WIDTH) height=(HEIGHT) viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) role="img" {
                @if let Some((first, last)) = window {
                    @let (x, right) = (places.x[first].0, places.x[last].1);
                    rect.window x=(x) y=(top) width=(right - x) height=(bottom - top)
                        data-first=(trend.points[first].first) data-last=(trend.points[last].last) {}
                }
                @for (i, point) in trend.points.iter().enumerate() {
                    @let (x, right) = places.x[i];
                    rect.hit x=(x) y=(top) width=(right - x) height=(bottom - top)
                        data-first=(point.first) data-last=(point.last) data-inside=(point.inside)
                        data-before=(value(series.before[i])) data-after=(value(series.after[i])) {
                        title { (tooltip(trend, series, i)) }
                    }
                }
            }
        }
    }
}

/// Where plotters put each period (its left and right edge) and the plotting area's top and
/// bottom, in the SVG's pixels.
struct Places {
    x: Vec<(i32, i32)>,
    top: i32,
    bottom: i32,
}

fn draw(trend: &Trend, series: &Series, svg: &mut String) -> Result<Places, Box<dyn std::error::Error>> {
    let n = trend.points.len();
    let (low, high) = series.range().unwrap_or((0.0, 1.0));
    let low = low.min(0.0);
    let high = if high > low { high + (high - low) / 10.0 } else { low + 1.0 };
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), low..high)?;
    let labels = |x: &f64| {
        let i = x.round();
        // Plotters asks for labels at round positions it picks: only a period's own is named.
        match i >= 0.0 && (i as usize) < n && (x - i).abs() < 1e-9 {
            true => label(&trend.points[i as usize], trend.period),
            false => String::new(),
        }
    };
    let numbers = |y: &f64| crate::render::number(*y);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xe4, 0xe7, 0xee))
        .x_labels(n.min(16))
        .x_label_formatter(&labels)
        .y_labels(5)
        .y_label_formatter(&numbers)
        .draw()?;
    let bars = series.before.iter().enumerate().filter_map(|(i, v)| {
        let v = (*v)?;
        let x = i as f64;
        Some(Rectangle::new([(x - 0.35, low.max(0.0).min(v)), (x + 0.35, v)], BEFORE.filled()))
    });
    chart.draw_series(bars)?;
    // The line breaks where a period has no value rather than drawing through it.
    for run in runs(&series.after) {
        chart.draw_series(LineSeries::new(run.iter().copied(), AFTER.stroke_width(2)))?;
        chart.draw_series(run.iter().map(|&(x, y)| Circle::new((x, y), 3, AFTER.filled())))?;
    }
    let edge = |x: f64| chart.backend_coord(&(x, low)).0;
    let x = (0..n).map(|i| (edge(i as f64 - 0.5), edge(i as f64 + 0.5))).collect();
    let (top, bottom) = (chart.backend_coord(&(0.0, high)).1, chart.backend_coord(&(0.0, low)).1);
    drop(chart);
    root.present()?;
    drop(root);
    Ok(Places { x, top, bottom })
}

/// The after side's values as runs of (period, value) without a gap.
fn runs(values: &[Option<f64>]) -> Vec<Vec<(f64, f64)>> {
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (i, value) in values.iter().enumerate() {
        match value {
            Some(v) => runs.last_mut().expect("one run at least").push((i as f64, *v)),
            None if runs.last().is_some_and(|r| !r.is_empty()) => runs.push(Vec::new()),
            None => {}
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// A value as `data-*` holds it: the number as JSON writes it, empty for none.
fn value(value: Option<f64>) -> String {
    value
        .map(|v| serde_json::Number::from_f64(v).map_or_else(String::new, |n| n.to_string()))
        .unwrap_or_default()
}

/// `2026-03-02 · revenue 546.65 → 588.35 (+41.70, +7.6%)`.
fn tooltip(trend: &Trend, series: &Series, i: usize) -> String {
    let point = &trend.points[i];
    let days = bf::words::days(point.first, point.last);
    let place = if point.inside { "" } else { " (outside the window)" };
    format!("{days}{place} · {} {}", series.name, crate::render::change(series.before[i], series.after[i]))
}
