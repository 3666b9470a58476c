//! `bf gaps --html`: the calendar of a year of orders opened in Chromium — a day per cell with
//! its rows (DuckDB's count), the missing, thin and unfinished days drawn in their colours.

use serde_json::Value;

use crate::common::browser::{artifact, open_report};
use crate::common::duckdb_rows;
use crate::gaps::{MISSING, THIN, reload, workspace};
use crate::second_hour::{bf, said};

#[test]
fn the_calendar_of_a_year_marks_the_days_bf_gaps_finds() {
    let (dir, table) = workspace(false);
    let root = dir.path();
    std::fs::write(root.join("plans/september.toml"), reload("2025-09-01", "2025-09-07")).unwrap();
    let planned = bf(root, &["plan", "plans/september.toml", "-q"]);
    assert!(planned.status.success(), "{}", said(&planned));
    let stopped = bf(root, &["apply", "--slices", "1..2", "--auto-approve", "-q"]);
    assert!(stopped.status.success(), "{}", said(&stopped));
    let year =
        ["gaps", "lake/orders", "--date-column", "order_date", "--from", "2025-01-01", "--to", "2025-12-31"];
    let found = bf(root, &[&year[..], &["--html", "gaps.html"]].concat());
    assert!(found.status.success(), "{}", said(&found));

    let page = open_report(&root.join("gaps.html"), &artifact("gaps-calendar.png"));
    assert_eq!(page["console"], serde_json::json!([]));
    assert_eq!(page["requests"], serde_json::json!([]));
    let days = page["days"].as_array().unwrap();
    assert_eq!(days.len(), 365, "a cell per day of 2025");
    let marked = |mark: &str| -> Vec<&str> {
        days.iter().filter(|d| d["mark"] == mark).map(|d| d["day"].as_str().unwrap()).collect()
    };
    assert_eq!(marked("missing"), MISSING);
    assert_eq!(marked("thin"), [THIN]);
    let september: Vec<String> = (1..=7).map(|d| format!("2025-09-{d:02}")).collect();
    assert_eq!(marked("unfinished"), september, "the week of the backfill left after 2 of 7 slices");
    let colour = |day: &Value| day["fill"].as_str().unwrap_or_default().to_ascii_lowercase();
    for day in days {
        let drawn = colour(day);
        let expected = match day["mark"].as_str().unwrap() {
            "missing" => Some("#cf222e"),
            "thin" => Some("#f0883e"),
            "unfinished" => Some("#8250df"),
            _ => None,
        };
        match expected {
            Some(expected) => assert_eq!(drawn, expected, "{day}"),
            None => assert!(
                drawn.starts_with('#') && !["#cf222e", "#f0883e", "#8250df"].contains(&drawn.as_str()),
                "{day}"
            ),
        }
        assert_eq!(day["cover"], "rgba(0, 0, 0, 0)", "the hover area lets the day show: {day}");
        let title = day["title"].as_str().unwrap();
        assert!(title.starts_with(day["day"].as_str().unwrap()), "{title}");
    }

    // Each cell's rows are the table's, as DuckDB counts them.
    let counted: Vec<String> = duckdb_rows(&table, "SELECT order_date, count(*) FROM t GROUP BY 1");
    let drawn: Vec<String> = days
        .iter()
        .filter(|d| d["rows"] != "0")
        .map(|d| format!("{}|{}", d["day"].as_str().unwrap(), d["rows"].as_str().unwrap()))
        .collect();
    assert_eq!(drawn, counted);
}
