//! The calendar of a table's rows per day (`bf gaps --html`): a column per week, Monday on top,
//! each day shaded by its rows, the missing, thin and unfinished days in colours of their own;
//! over it, a hover area per day with its date, rows and what `bf gaps` found.

use chrono::{Datelike, Days, NaiveDate};
use maud::{Markup, PreEscaped, html};
use plotters::prelude::*;

/// What `bf gaps` found on a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Rows as usual.
    Rows,
    /// No row, on a day the table is open.
    Missing,
    /// Far below its usual rows.
    Thin,
    /// Inside a bf backfill that never finished.
    Unfinished,
    /// No row, on a weekday the table never has rows: not a gap.
    Closed,
}

impl Mark {
    /// The word a day's `data-mark` and the legend use.
    pub fn word(self) -> &'static str {
        match self {
            Mark::Rows => "rows",
            Mark::Missing => "missing",
            Mark::Thin => "thin",
            Mark::Unfinished => "unfinished",
            Mark::Closed => "closed",
        }
    }

    /// The colour a day of this kind is drawn in; `Rows` is shaded by [`shade`].
    pub fn colour(self) -> RGBColor {
        match self {
            Mark::Rows => RGBColor(0x2f, 0x6d, 0xb5),
            Mark::Missing => RGBColor(0xcf, 0x22, 0x2e),
            Mark::Thin => RGBColor(0xf0, 0x88, 0x3e),
            Mark::Unfinished => RGBColor(0x82, 0x50, 0xdf),
            Mark::Closed => RGBColor(0xe4, 0xe7, 0xee),
        }
    }
}

const CELL: u32 = 16;
const LEFT: u32 = 40;
const TOP: u32 = 24;

/// One day of the calendar: its date, its rows, what was found on it.
pub type Day = (NaiveDate, u64, Mark);

/// The calendar of `days` (consecutive, in order): one picture per calendar year they touch.
pub fn calendar(days: &[Day]) -> Markup {
    let max = days.iter().map(|(_, rows, _)| *rows).max().unwrap_or(0);
    let mut years: Vec<&[Day]> = Vec::new();
    let mut rest = days;
    while let Some((first, _, _)) = rest.first() {
        let split = rest.iter().position(|(d, ..)| d.year() != first.year()).unwrap_or(rest.len());
        years.push(&rest[..split]);
        rest = &rest[split..];
    }
    html! { @for year in years { (one_year(year, max)) } }
}

fn one_year(days: &[Day], max: u64) -> Markup {
    let Some((first, ..)) = days.first() else { return html! {} };
    let monday =
        first.checked_sub_days(Days::new(first.weekday().num_days_from_monday().into())).unwrap_or(*first);
    let week = |day: &NaiveDate| ((*day - monday).num_days() / 7) as u32;
    let weeks = days.last().map_or(1, |(last, ..)| week(last) + 1);
    let (width, height) = (LEFT + weeks * CELL + 8, TOP + 7 * CELL + 4);
    let place =
        |day: &NaiveDate| (LEFT + week(day) * CELL, TOP + day.weekday().num_days_from_monday() * CELL);
    let mut svg = String::new();
    let drawn = draw(days, max, (width, height), &place, &mut svg);
    html! {
        div.plot.calendar style=(format!("max-width:{width}px")) data-year=(first.year()) {
            @if drawn.is_ok() { (PreEscaped(svg)) }
            svg.overlay width=(width) height=(height) viewBox=(format!("0 0 {width} {height}")) role="img" {
                @for (day, rows, mark) in days {
                    @let (x, y) = place(day);
                    rect.day x=(x) y=(y) width=(CELL) height=(CELL)
                        data-day=(day) data-rows=(rows) data-mark=(mark.word()) {
                        title { (day) " (" (day.format("%a")) "): " (crate::render::count(*rows as usize, "row"))
                            @if *mark != Mark::Rows { " — " (mark.word()) } }
                    }
                }
            }
        }
    }
}

/// Plotters draws the days, the weekdays' and the months' names on the backend's own pixels.
fn draw(
    days: &[Day],
    max: u64,
    size: (u32, u32),
    place: &dyn Fn(&NaiveDate) -> (u32, u32),
    svg: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(svg, size).into_drawing_area();
    root.fill(&WHITE)?;
    let label = ("sans-serif", 11).into_font().color(&RGBColor(0x66, 0x66, 0x77));
    for (i, name) in ["Mon", "", "Wed", "", "Fri", "", "Sun"].iter().enumerate() {
        root.draw(&Text::new(*name, (4, (TOP + i as u32 * CELL + 3) as i32), label.clone()))?;
    }
    for (day, rows, mark) in days {
        let (x, y) = place(day);
        let (x, y) = (x as i32, y as i32);
        let colour = match mark {
            Mark::Rows => shade(*rows, max),
            other => other.colour(),
        };
        root.draw(&Rectangle::new(
            [(x + 1, y + 1), (x + CELL as i32 - 1, y + CELL as i32 - 1)],
            colour.filled(),
        ))?;
        if day.day() == 1 || day == &days[0].0 {
            root.draw(&Text::new(day.format("%b %Y").to_string(), (x, 6), label.clone()))?;
        }
    }
    root.present()?;
    Ok(())
}

/// A day with rows, from a pale blue for few to [`Mark::Rows`]' blue for the most.
fn shade(rows: u64, max: u64) -> RGBColor {
    let share = if max == 0 { 1.0 } else { rows as f64 / max as f64 };
    let RGBColor(r, g, b) = Mark::Rows.colour();
    let mix = |full: u8| (255.0 - (255.0 - f64::from(full)) * (0.25 + 0.75 * share)).round() as u8;
    RGBColor(mix(r), mix(g), mix(b))
}
