//! The trend in the pull-request comment: a Mermaid `xychart-beta` per metric, parsed and drawn
//! by Mermaid itself in Chromium, its bars and line the saved plan's numbers, under GitHub's limit.

use super::{chain, march_planned, series_names, trend_values};
use crate::common::bf_in;
use crate::common::browser::mermaid_blocks;

#[test]
fn the_march_reload_comment_draws_a_chart_per_metric_that_mermaid_parses() {
    let (dir, plan) = march_planned(&[]);
    let comment = bf_in(dir.path()).args(["show", "--format", "markdown"]).output().unwrap();
    assert!(comment.status.success());
    let text = String::from_utf8(comment.stdout).unwrap();
    assert!(text.len() <= 65_536, "under GitHub's comment limit: {}", text.len());
    let file = dir.path().join("comment.md");
    std::fs::write(&file, &text).unwrap();

    let blocks = mermaid_blocks(&file);
    let written = written_series(&text);
    assert_eq!(written.len(), blocks.len());
    let expected: Vec<(&serde_json::Value, String)> =
        chain(&plan).into_iter().flat_map(|p| series_names(p).into_iter().map(move |n| (p, n))).collect();
    assert_eq!(blocks.len(), expected.len(), "one chart per metric of each table, rows first");
    for (i, (block, (planned, name))) in blocks.iter().zip(&expected).enumerate() {
        assert_eq!(block["ok"], true, "{name}: {}", block["error"]);
        assert_eq!(block["type"], "xychart-beta");
        let values = trend_values(planned, name);
        assert_eq!(block["bars"], values.len(), "{name}: a bar per day");
        assert_eq!(block["lines"], 1, "{name}: the after side as one line");
        assert_eq!(block["nan"], false, "{name}: every series as long as the axis");
        let title = block["title"].as_str().unwrap();
        assert!(title.starts_with(&format!("{name} per day")), "{title}");
        let labels: Vec<String> = planned["trend"]["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["first"].as_str().unwrap()[5..].to_owned())
            .collect();
        assert_eq!(block["xLabels"], serde_json::json!(labels), "{name}: the days, in order");
        let (bars, line) = &written[i];
        let before: Vec<f64> = values.iter().map(|v| v.0.unwrap_or(0.0)).collect();
        let after: Vec<f64> = values.iter().map(|v| v.1.unwrap_or(0.0)).collect();
        assert_eq!(bars, &before, "{name}: the bars are the days before");
        assert_eq!(line, &after, "{name}: the line is the days after");
    }
    let rows = &blocks[0];
    assert!(rows["title"].as_str().unwrap().ends_with("counts moved in 3 of 31 days"), "{}", rows["title"]);
    // The table built from it holds a row a day, each rewritten: its count is the same every day,
    // never "unchanged".
    let daily = &blocks[2];
    assert!(daily["title"].as_str().unwrap().ends_with("same count every day"), "{}", daily["title"]);

    let plain = bf_in(dir.path()).args(["show", "--format", "markdown", "--no-chart"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("```mermaid"), "--no-chart leaves them out");
}

/// The `bar` and `line` values of each Mermaid block in `markdown`, as written.
fn written_series(markdown: &str) -> Vec<(Vec<f64>, Vec<f64>)> {
    let numbers = |line: &str, series: &str| -> Option<Vec<f64>> {
        let list = line.trim().strip_prefix(series)?.trim().strip_prefix('[')?.strip_suffix(']')?;
        Some(list.split(',').map(|n| n.trim().parse().unwrap()).collect())
    };
    markdown
        .split("```mermaid")
        .skip(1)
        .map(|block| {
            let block = block.split("```").next().unwrap();
            let bars = block.lines().find_map(|l| numbers(l, "bar")).expect("a bar series");
            let line = block.lines().find_map(|l| numbers(l, "line")).expect("a line series");
            (bars, line)
        })
        .collect()
}

/// A quarter's backfill (July to September into `orders_daily`, whose rows start in September):
/// drawn per week counted from its first day, a month either side, on a terminal of 100 columns
/// and in charts Mermaid parses.
#[test]
fn a_quarter_is_drawn_by_weeks_on_a_terminal_and_in_the_comment() {
    let dir = crate::common::demo_workspace();
    let root = dir.path();
    let plan = crate::common::september_plan(root, "quarter.toml", 30, |text| {
        let text = text
            .replace("start = 2026-09-01", "start = 2026-07-01")
            .replace("every = \"day\"\nrun_offset = \"1 day\"", "every = \"month\"")
            .replace("orders/{date}.csv", "orders/*.csv");
        text + "\n[guards]\nallow_empty_slices = true\n"
    });
    let shown = super::terminal::on_a_terminal(root, &format!("plan {plan} -q"));
    let lines = super::terminal::chart_lines(&shown);
    assert!(lines[0].starts_with("Per week, 2026-06-03..2026-10-28"), "{shown}");
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{lines:#?}");
    let rows = lines.iter().find(|l| l.contains("after")).unwrap();
    assert!(rows.ends_with("counts moved in 6 of 14 weeks"), "September's rows, in weeks 10 to 14: {rows}");

    let comment = bf_in(root).args(["show", "--format", "markdown"]).output().unwrap();
    let file = root.join("comment.md");
    std::fs::write(&file, &comment.stdout).unwrap();
    let blocks = mermaid_blocks(&file);
    assert_eq!(blocks.len(), 2, "rows and revenue");
    for block in &blocks {
        assert_eq!(block["ok"], true, "{}", block["error"]);
        assert_eq!(block["bars"], 22, "4 weeks, the window's 14, 4 weeks");
        assert_eq!(block["xLabels"][4], "07-01");
    }
}
