//! The HTML report (`bf plan --html`, `bf show --html`) opened in Chromium: it loads nothing and
//! logs no error, its charts draw the saved plan's numbers with the window shaded over exactly
//! its days, hostile text from the plan and the data is text, and `--samples none` keeps the
//! data's values out.

use serde_json::Value;

use super::{chain, march_planned, series_names, trend_values};
use crate::common::bf_in;
use crate::common::browser::{artifact, open_report};

const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("a number: {value}"))
}

/// A hit area's number as the page holds it (`data-before`), `None` when empty.
fn held(value: &Value) -> Option<f64> {
    let text = value.as_str().unwrap();
    (!text.is_empty()).then(|| text.parse().unwrap())
}

#[test]
fn the_march_reload_report_draws_the_saved_numbers_and_loads_nothing() {
    let (dir, plan) = march_planned(&["--html", "march.html"]);
    let page = open_report(&dir.path().join("march.html"), &artifact("march-report.png"));
    assert_eq!(page["console"], serde_json::json!([]), "no console error or warning");
    assert_eq!(page["requests"], serde_json::json!([]), "no request anywhere");
    assert_eq!(page["csp"], CSP);
    let text = page["text"].as_str().unwrap();
    assert!(text.contains("rows 412 → 409"), "the summary heads the page");
    assert!(text.contains("Outside the window: unchanged ✓"));
    assert!(text.contains("because the source system sent EUR orders with the currency code USD"));
    assert!(std::fs::metadata(artifact("march-report.png")).unwrap().len() > 20_000, "a screenshot kept");

    let charts = page["charts"].as_array().unwrap();
    let expected: Vec<(&Value, String)> =
        chain(&plan).into_iter().flat_map(|p| series_names(p).into_iter().map(move |n| (p, n))).collect();
    assert_eq!(charts.len(), expected.len(), "a chart per metric of each table");
    for (chart, (planned, name)) in charts.iter().zip(&expected) {
        assert_eq!(chart["metric"], name.as_str());
        let values = trend_values(planned, name);
        let hits = chart["hits"].as_array().unwrap();
        assert_eq!(hits.len(), values.len(), "{name}: a hover area per day");
        // A bar (before) and a point (after) a day, and the line: a chart missing either side fails.
        let drawn =
            values.iter().map(|(b, a)| usize::from(b.is_some()) + usize::from(a.is_some())).sum::<usize>();
        assert!(number(&chart["marks"]) > drawn as f64, "{name}: the chart draws its bars and points");
        for (hit, (before, after)) in hits.iter().zip(&values) {
            assert_eq!((held(&hit["before"]), held(&hit["after"])), (*before, *after), "{name}: {hit}");
            assert_eq!(hit["cover"], "rgba(0, 0, 0, 0)", "the hover area lets the chart show: {hit}");
            let day = hit["first"].as_str().unwrap();
            assert!(hit["title"].as_str().unwrap().starts_with(day), "hover names the day: {hit}");
        }
        window_covers_its_days(name, chart, hits);
        line_follows_the_numbers(name, chart, hits, &values);
    }
}

/// The shaded band spans the hover areas of March's days, from the first's left edge to the
/// last's right one, and no other day's.
fn window_covers_its_days(name: &str, chart: &Value, hits: &[Value]) {
    let window = &chart["window"];
    assert_eq!((window["first"].as_str(), window["last"].as_str()), (Some("2026-03-01"), Some("2026-03-31")));
    let (left, right) = (number(&window["x"]), number(&window["x"]) + number(&window["width"]));
    for hit in hits {
        let (x, end) = (number(&hit["x"]), number(&hit["x"]) + number(&hit["width"]));
        let inside = hit["inside"].as_bool().unwrap();
        assert_eq!(inside, hit["first"].as_str().unwrap().starts_with("2026-03"), "{hit}");
        let shaded = x >= left - 0.5 && end <= right + 0.5;
        let outside = end <= left + 0.5 || x >= right - 0.5;
        assert!(if inside { shaded } else { outside }, "{name}: {hit} against the band {left}..{right}");
    }
}

/// The after line has a point over each day's hover area, higher where the day's number is.
fn line_follows_the_numbers(
    name: &str,
    chart: &Value,
    hits: &[Value],
    values: &[(Option<f64>, Option<f64>)],
) {
    let lines = chart["lines"].as_array().unwrap();
    let line = lines
        .iter()
        .map(|l| l["points"].as_array().unwrap())
        .find(|points| points.len() == values.len())
        .unwrap_or_else(|| panic!("{name}: a line through every day: {lines:?}"));
    let points: Vec<(f64, f64)> = line.iter().map(|p| (number(&p[0]), number(&p[1]))).collect();
    for ((x, _), hit) in points.iter().zip(hits) {
        let left = number(&hit["x"]);
        assert!(*x > left && *x < left + number(&hit["width"]), "{name}: the point at {x} over {hit}");
    }
    // Plotters draws on whole pixels: values closer than a pixel's worth may share a height.
    let after: Vec<f64> = values.iter().map(|v| v.1.unwrap()).collect();
    let spread =
        after.iter().cloned().fold(f64::MIN, f64::max) - after.iter().cloned().fold(f64::MAX, f64::min);
    for (i, (_, y)) in points.iter().enumerate() {
        for (j, (_, other)) in points.iter().enumerate() {
            let (a, b) = (after[i], after[j]);
            let clearly = b - a > spread / 50.0;
            assert!(
                if clearly { y > other } else { a >= b || y >= other },
                "{name}: day {i} ({a}) drawn at {y}, day {j} ({b}) at {other}"
            );
        }
    }
}

/// A hostile reason and hostile values in the data: shown as text, nothing run or loaded; with
/// `--samples none` the data's values stay out of the report, its charts stay in.
#[test]
fn hostile_text_in_the_reason_and_the_data_is_text_and_samples_none_keeps_values_out() {
    let dir = crate::common::demo_workspace();
    let root = dir.path();
    let reason = r#"<script>alert(1)</script><img src="http://127.0.0.1:9/r.png"> & "quoted" </dd></dl><h1>forged</h1>"#;
    let plan = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let start = plan.find("reason = ").unwrap();
    let end = start + plan[start..].find('\n').unwrap();
    let hostile_plan = format!("{}reason = '''{reason}'''{}", &plan[..start], &plan[end..]);
    std::fs::write(root.join("plans/march.toml"), hostile_plan).unwrap();
    let customer = "<img src=http://127.0.0.1:9/c.png onerror=alert(2)>C14";
    let landing = root.join("bf-demo/landing/orders_march.csv");
    let csv = std::fs::read_to_string(&landing).unwrap().replace(",C14,", &format!(",{customer},"));
    std::fs::write(&landing, csv).unwrap();

    let planned =
        bf_in(root).args(["plan", "plans/march.toml", "-q", "--html", "hostile.html"]).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let page = open_report(&root.join("hostile.html"), &artifact("hostile-report.png"));
    assert_eq!(page["console"], serde_json::json!([]), "nothing ran");
    assert_eq!(page["requests"], serde_json::json!([]), "nothing loaded");
    let text = page["text"].as_str().unwrap();
    assert!(text.contains(reason), "the reason as written:\n{text}");
    assert!(text.contains(customer), "the changed customer as written");
    assert!(!text.contains("\nforged\n") && page["charts"].as_array().unwrap().len() == 5);

    let counted = bf_in(root)
        .args(["plan", "plans/march.toml", "-q", "--samples", "none", "--html", "counts.html"])
        .output()
        .unwrap();
    assert!(counted.status.success());
    let page = open_report(&root.join("counts.html"), &artifact("counts-only-report.png"));
    let text = page["text"].as_str().unwrap();
    assert!(!text.contains("C14"), "no value read from the data:\n{text}");
    assert_eq!(page["charts"].as_array().unwrap().len(), 5, "the charts' counts and metrics stay");
}

/// A plan saved before the trend (format 7) is still shown: its report says why it has no chart
/// and draws none, the comment has no Mermaid block, and nothing fails.
#[test]
fn a_plan_saved_before_the_trend_is_shown_without_charts_saying_why() {
    let (dir, _) = march_planned(&[]);
    let saved = dir.path().join(".bf/plan.json");
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let unset = |plan: &mut Value| {
        plan.as_object_mut().unwrap().remove("trend");
        plan["format"] = 7.into();
    };
    unset(&mut plan);
    for below in plan["downstream"].as_array_mut().unwrap() {
        unset(below);
    }
    std::fs::write(&saved, serde_json::to_string(&plan).unwrap()).unwrap();

    let shown =
        bf_in(dir.path()).args(["show", "--html", "old.html", "--format", "markdown"]).output().unwrap();
    assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("```mermaid"));
    let page = open_report(&dir.path().join("old.html"), &artifact("old-plan-report.png"));
    assert_eq!(page["console"], serde_json::json!([]));
    assert_eq!(page["charts"], serde_json::json!([]), "no chart drawn of numbers it does not hold");
    assert!(page["text"].as_str().unwrap().contains("saved by an older bf, without the numbers per day"));
}
