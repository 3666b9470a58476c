//! The plan as a picture: the trend drawn in a terminal, as Mermaid charts in the pull-request
//! comment, and in the self-contained HTML report, each judged by what reads it — a terminal's
//! width, Mermaid's own parser and renderer, Chromium — against the numbers `bf plan --json`
//! saves and DuckDB reads from the tables.

mod calendar;
mod comment;
mod report;
mod terminal;

use std::path::Path;

use serde_json::Value;

use crate::common::{bf_in, demo_workspace};

/// The March reload planned in a demo workspace, and its saved plan as `bf show --json` prints it.
fn march_planned(extra: &[&str]) -> (tempfile::TempDir, Value) {
    let dir = demo_workspace();
    let planned = bf_in(dir.path()).args(["plan", "plans/march.toml", "-q"]).args(extra).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let plan = shown_json(dir.path());
    (dir, plan)
}

fn shown_json(dir: &Path) -> Value {
    let shown = bf_in(dir).args(["show", "--json"]).output().unwrap();
    assert!(shown.status.success());
    serde_json::from_slice(&shown.stdout).unwrap()
}

/// Each plan of the chain, upstream first.
fn chain(plan: &Value) -> Vec<&Value> {
    let mut plans = vec![plan];
    for below in plan["downstream"].as_array().into_iter().flatten() {
        plans.extend(chain(below));
    }
    plans
}

/// A series of a plan's trend, per period: ("rows" or a metric, before, after).
fn trend_values(plan: &Value, name: &str) -> Vec<(Option<f64>, Option<f64>)> {
    let points = plan["trend"]["points"].as_array().expect("the plan saves its trend");
    let value = |side: &Value| match name {
        "rows" => side["rows"].as_f64(),
        metric => side["metrics"][metric].as_f64(),
    };
    points.iter().map(|p| (value(&p["before"]), value(&p["after"]))).collect()
}

/// The names a plan's charts are drawn for: rows, then each metric by name.
fn series_names(plan: &Value) -> Vec<String> {
    let metrics = plan["total"]["before"]["metrics"].as_object().unwrap();
    std::iter::once("rows".to_owned()).chain(metrics.keys().cloned()).collect()
}
