//! bf's pictures as SVG for its HTML reports: a plan's trend per metric (`trend.rs`) and the
//! calendar of a table's rows per day (`calendar.rs`). Plotters' SVG backend draws them; it
//! cannot name what it draws, so a second SVG of the same size lies over each (written by maud,
//! which escapes), carrying what each mark stands for in `data-*` attributes (read by tests and
//! scripts) and a `<title>` the browser shows on hover.

pub mod calendar;
mod trend;

pub use calendar::{Mark, calendar};
pub use trend::chart;

/// A picture's size in CSS pixels; the page scales it to its column.
const WIDTH: u32 = 960;
const HEIGHT: u32 = 260;
