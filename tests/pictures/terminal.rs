//! The trend under the summary in a terminal: one pair of lines per metric, fitting 100 columns,
//! its bars in the days' order and height; never into a pipe, and not with `--no-chart`.

use std::path::Path;

use super::{march_planned, trend_values};
use crate::common::{bf_in, clean, duckdb_rows};

/// What `bf ARGS` prints on a terminal 100 columns wide (a pseudo-terminal: `script`).
pub(super) fn on_a_terminal(dir: &Path, args: &str) -> String {
    let bf = assert_cmd::cargo::cargo_bin("bf");
    let line = format!("stty cols 100 rows 80; exec {} {args}", bf.display());
    let mut script = clean(std::process::Command::new("script"));
    let output = script.args(["-qec", &line, "/dev/null"]).current_dir(dir).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8(output.stdout).unwrap().replace("\r\n", "\n")
}

/// The chart's lines: from its heading to the line before `Checks`.
pub(super) fn chart_lines(shown: &str) -> Vec<&str> {
    shown.lines().skip_while(|l| !l.starts_with("Per ")).take_while(|l| !l.starts_with("Checks")).collect()
}

const BLOCKS: &str = "▁▂▃▄▅▆▇█";

/// A line's bars as heights (0 blank, 1..=8), the window's edges left out, and where they were.
fn heights(line: &str, side: &str) -> (Vec<usize>, Vec<usize>) {
    let bars = line.split_once(&format!("{side:<6} ")).expect("a before or after line").1;
    let bars: Vec<char> =
        bars.chars().take_while(|c| *c == ' ' || *c == '┊' || BLOCKS.contains(*c)).collect();
    let bars: Vec<char> = String::from_iter(bars).trim_end().chars().collect();
    let edges = bars.iter().enumerate().filter(|(_, c)| **c == '┊').map(|(i, _)| i).collect();
    let heights = bars
        .iter()
        .filter(|c| **c != '┊')
        .map(|c| BLOCKS.chars().position(|b| b == *c).map_or(0, |i| i + 1))
        .collect();
    (heights, edges)
}

#[test]
fn the_march_reload_is_drawn_day_by_day_on_a_terminal_and_never_into_a_pipe() {
    let (dir, plan) = march_planned(&[]);
    let root = dir.path();
    let piped = bf_in(root).args(["show"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&piped.stdout).contains("Per day"), "a pipe gets the numbers alone");

    let shown = on_a_terminal(root, "plan plans/march.toml -q");
    let lines = chart_lines(&shown);
    assert!(lines.len() >= 5, "a heading and two lines per metric:\n{shown}");
    assert!(lines[0].starts_with("Per day, 2026-02-22..2026-04-07"), "{}", lines[0]);
    for line in &lines {
        assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
    }
    let rows_before =
        lines.iter().find(|l| l.trim_start().starts_with("rows") && l.contains("before")).unwrap();
    let rows_after = lines.iter().position(|l| l == rows_before).map(|i| lines[i + 1]).unwrap();
    assert!(
        rows_after.ends_with("counts moved in 3 of 31 days"),
        "the 3 orders appended twice: {rows_after}"
    );

    // The bars are the days' in order: a week before, the 31 days of March between the edges, a
    // week after; a day with more rows never lower than one with fewer, on one scale for both.
    let values = trend_values(&plan, "rows");
    assert_eq!(values.len(), 45);
    let (before, edges) = heights(rows_before, "before");
    let (after, after_edges) = heights(rows_after, "after");
    assert_eq!((before.len(), after.len()), (45, 45), "{rows_before}\n{rows_after}");
    assert_eq!(edges, vec![7, 39], "the window's edges around its 31 days");
    assert_eq!(after_edges, edges);
    let drawn: Vec<(f64, usize)> = values
        .iter()
        .zip(before.iter().zip(&after))
        .flat_map(|((b, a), (hb, ha))| [(b.unwrap(), *hb), (a.unwrap(), *ha)])
        .collect();
    for (value, height) in &drawn {
        for (other, other_height) in &drawn {
            if value < other {
                assert!(height <= other_height, "{value} drawn {height}, {other} drawn {other_height}");
            }
        }
    }
    let drawn_heights = || before.iter().chain(&after);
    assert_eq!(drawn_heights().max(), Some(&8), "the highest day reaches the top");
    assert_eq!(drawn_heights().min(), Some(&1), "the lowest day is the lowest bar");

    // The numbers drawn are the tables': DuckDB counts and sums each day of March and its
    // neighbours in the table (before), and March's days in the rehearsal (after; its other
    // files are the table's, by absolute path, which DuckDB's reader does not follow).
    let per_day = |table: &str, from: &str, to: &str| {
        duckdb_rows(
            &root.join("bf-demo/warehouse").join(table),
            &format!(
                "SELECT order_date, count(*), round(sum(amount_eur), 2) FROM t \
                 WHERE order_date BETWEEN DATE '{from}' AND DATE '{to}' GROUP BY 1 ORDER BY 1"
            ),
        )
    };
    let saved = |side: &str, inside: bool| -> Vec<String> {
        let points = plan["trend"]["points"].as_array().unwrap().iter();
        points
            .filter(|p| !inside || p["inside"] == true)
            .map(|p| {
                let revenue = p[side]["metrics"]["revenue"].as_f64().unwrap();
                format!(
                    "{}|{}|{}",
                    p["first"].as_str().unwrap(),
                    p[side]["rows"],
                    (revenue * 100.0).round() / 100.0
                )
            })
            .collect()
    };
    assert_eq!(per_day("orders_silver", "2026-02-22", "2026-04-07"), saved("before", false));
    assert_eq!(per_day("orders_silver__rehearsal", "2026-03-01", "2026-03-31"), saved("after", true));
    let neighbours = |side: &str| saved(side, false).into_iter().filter(|p| !p.starts_with("2026-03"));
    assert!(neighbours("before").eq(neighbours("after")), "the neighbours did not move");

    let without = on_a_terminal(root, "show --no-chart");
    assert!(without.contains("Plan: 1 slice") && !without.contains("Per day"), "{without}");
}
