//! `bf gaps`: the days a table lacks, found, planned and filled.

use serde_json::Value;

use super::{MISSING, THIN, days, loaded, reload, usual, workspace};
use crate::common::{commit_infos, duckdb_rows};
use crate::second_hour::{bf, said};

const YEAR: [&str; 6] = ["--date-column", "order_date", "--from", "2025-01-01", "--to", "2025-12-31"];

fn gaps(root: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["gaps", "lake/orders"];
    args.extend(YEAR);
    args.extend(extra);
    bf(root, &args)
}

/// Rows per day as DuckDB reads the table: `day|rows|revenue in cents`, for the days given.
fn by_day(table: &std::path::Path, days: &[&str]) -> Vec<String> {
    let list: Vec<String> = days.iter().map(|d| format!("DATE '{d}'")).collect();
    duckdb_rows(
        table,
        &format!(
            "SELECT order_date, COUNT(*), CAST(ROUND(SUM(amount) * 100) AS BIGINT) FROM t \
             WHERE order_date IN ({}) GROUP BY order_date",
            list.join(", ")
        ),
    )
}

/// What [`by_day`] reads on `days` as the job loaded them, or as the corrections reload them (a
/// day without rows reads as no row).
fn expected(days: &[&str], corrected: bool) -> Vec<String> {
    let mut rows: Vec<String> = days
        .iter()
        .map(|d| (d, if corrected { usual(d.parse().unwrap()) } else { loaded(d.parse().unwrap()) }))
        .filter(|(_, n)| *n > 0)
        .map(|(d, n)| format!("{d}|{n}|{}", cents(n, corrected)))
        .collect();
    rows.sort();
    rows
}

/// Revenue in cents of `n` orders as the job loaded them (10.00, 11.00, …), or corrected (a cent
/// more each).
fn cents(n: usize, corrected: bool) -> usize {
    n * 1000 + 100 * n * n.saturating_sub(1) / 2 + if corrected { n } else { 0 }
}

/// A year of orders another job wrote with two days it never loaded, one day at a tenth of its
/// usual orders, and a bf backfill of a September week left after 2 of its 7 slices: `bf gaps`
/// finds exactly those — in text and JSON, counted from the log and the files' date columns (one
/// week a file) or from the partitions — and nothing else: not the quiet weekends (half a
/// weekday's orders), not the sale day (twice). For a plan file it looks at the plan's window.
/// `--write-plan --like` writes a plan for exactly the three days, which `bf validate` refuses at
/// its reason until the author writes one; planned and applied after the September backfill is
/// finished, it fills them — DuckDB reads each of the three days whole, the days between them as
/// they were, and three slice commits — and `bf gaps` finds nothing more.
#[test]
fn gaps_finds_the_missing_thin_and_unfinished_days_and_a_plan_like_another_fills_them() {
    for partitioned in [false, true] {
        let (dir, table) = workspace(partitioned);
        let root = dir.path();
        let september =
            format!("#:schema ../schema/plan.schema.json\n{}", reload("2025-09-01", "2025-09-07"));
        std::fs::write(root.join("plans/september.toml"), september).unwrap();
        let planned = bf(root, &["plan", "plans/september.toml", "-q"]);
        assert_eq!(planned.status.code(), Some(0), "{}", said(&planned));
        let stopped = bf(root, &["apply", "--slices", "1..2", "--auto-approve", "-q"]);
        assert_eq!(stopped.status.code(), Some(0), "{}", said(&stopped));

        let found = gaps(root, &[]);
        let text = said(&found);
        assert_eq!(found.status.code(), Some(0), "{text}");
        assert!(
            text.contains("Missing: 2 days without a row\n  2025-03-14 (Fri)\n  2025-07-04 (Fri)\n"),
            "{text}"
        );
        assert!(text.contains("Thin: 1 day under 50% of its usual rows"), "{text}");
        assert!(text.contains("  2025-05-20 (Tue)  2 rows, usually 20 (10%)"), "{text}");
        assert!(text.contains("Unfinished: 1 backfill never finished"), "{text}");
        assert!(text.contains("2025-09-01..2025-09-07): 2 of 7 slices committed"), "{text}");
        assert!(text.contains("3 days to backfill"), "{text}");
        // Weekly files straddle their days: their date columns are read; a day's partition is not.
        let counted = match partitioned {
            true => "rows per day from the log alone\n",
            false => "files the log does not settle\n",
        };
        assert!(text.contains(counted), "{text}");

        let json: Value = serde_json::from_slice(&gaps(root, &["--json"]).stdout).unwrap();
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_owned()).collect()
        };
        assert_eq!(strings(&json["missing"]), MISSING);
        let thin = &json["thin"].as_array().unwrap()[..];
        assert_eq!(thin.len(), 1, "{thin:?}");
        assert_eq!(
            (thin[0]["day"].as_str(), thin[0]["rows"].as_u64(), thin[0]["usual"].as_u64()),
            (Some(THIN), Some(2), Some(20))
        );
        assert_eq!(strings(&json["days"]), [MISSING[0], THIN, MISSING[1]]);
        let unfinished = &json["unfinished"][0];
        assert_eq!((unfinished["committed"].as_u64(), unfinished["slices"].as_u64()), (Some(2), Some(7)));

        // A plan's window is the range: September's week has no gap but the unfinished backfill.
        let week: Value =
            serde_json::from_slice(&bf(root, &["gaps", "plans/september.toml", "--json"]).stdout).unwrap();
        assert_eq!(
            (week["missing"].as_array().unwrap().len(), week["thin"].as_array().unwrap().len()),
            (0, 0)
        );
        assert_eq!(week["unfinished"].as_array().unwrap().len(), 1, "{week}");

        // A plan for exactly those days, like September's.
        let wrote = gaps(root, &["--write-plan", "plans/holes.toml", "--like", "plans/september.toml"]);
        assert_eq!(wrote.status.code(), Some(0), "{}", said(&wrote));
        let holes = std::fs::read_to_string(root.join("plans/holes.toml")).unwrap();
        assert!(holes.starts_with("#:schema ../schema/plan.schema.json\n# Written by `bf gaps`"), "{holes}");
        assert!(holes.contains("start = 2025-03-14\nend = 2025-07-04"), "{holes}");
        assert!(holes.contains("only = [2025-03-14, 2025-05-20, 2025-07-04]"), "{holes}");
        assert!(holes.contains("#   2025-05-20 2 rows, usually 20"), "{holes}");
        let again = gaps(root, &["--write-plan", "plans/holes.toml", "--like", "plans/september.toml"]);
        assert_eq!(again.status.code(), Some(1), "never over an existing file: {}", said(&again));
        let elsewhere = gaps(root, &["--write-plan", "plan/holes.toml", "--like", "plans/september.toml"]);
        assert!(
            said(&elsewhere).contains("the folder plan does not exist; make it first"),
            "{}",
            said(&elsewhere)
        );
        let refused = bf(root, &["validate", "plans/holes.toml"]);
        assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
        assert!(said(&refused).contains("`reason` is still the placeholder"), "{}", said(&refused));
        let written = holes.replace(
            "<why these days are reloaded>",
            "The job never loaded two days and lost most of a third.",
        );
        std::fs::write(root.join("plans/holes.toml"), written).unwrap();
        let valid = bf(root, &["validate", "plans/holes.toml"]);
        assert_eq!(valid.status.code(), Some(0), "{}", said(&valid));

        // The unfinished backfill finished first, as bf gaps said; then the holes filled.
        let finished = bf(root, &["apply", "--auto-approve", "-q"]);
        assert_eq!(finished.status.code(), Some(0), "{}", said(&finished));
        let before = commit_infos(&table).len();
        for step in [&["plan", "plans/holes.toml", "-q"][..], &["apply", "--auto-approve", "-q"]] {
            let out = bf(root, step);
            assert_eq!(out.status.code(), Some(0), "{step:?}: {}", said(&out));
        }
        let slices =
            commit_infos(&table)[before..].iter().filter(|(_, info)| info.get("bf.slice").is_some()).count();
        assert_eq!(slices, 3, "one commit per day found, none for the days between");
        let filled = [MISSING[0], THIN, MISSING[1]];
        assert_eq!(by_day(&table, &filled), expected(&filled, true));
        let between = ["2025-03-15", "2025-05-19", "2025-05-21", "2025-07-03"];
        let untouched = expected(&between, false);
        assert_eq!(by_day(&table, &between), untouched, "the days between are as the job loaded them");
        let total: usize = days().map(usual).sum();
        assert_eq!(duckdb_rows(&table, "SELECT COUNT(*) FROM t"), [total.to_string()]);

        let none = said(&gaps(root, &[]));
        assert!(none.contains("No gaps"), "{none}");

        // Rolled back window-only: one commit per slice, each on its own day (on the partitioned
        // table, only those days' files), the days between as loaded; the gaps are back.
        let before = commit_infos(&table).len();
        let undone = bf(root, &["rollback", "--window-only", "--auto-approve"]);
        assert_eq!(undone.status.code(), Some(0), "{}", said(&undone));
        let commits = crate::databricks::commits_from(&table, before as u64);
        assert_eq!(commits.len(), 3, "three slices put back: {commits:?}");
        if partitioned {
            let days: std::collections::BTreeSet<String> = commits
                .iter()
                .flat_map(|(_, actions)| actions.iter())
                .filter_map(|a| a.get("add").or_else(|| a.get("remove")))
                .map(|file| file["partitionValues"]["order_date"].as_str().unwrap().to_owned())
                .collect();
            assert_eq!(days, filled.iter().map(|d| d.to_string()).collect(), "only the three days' files");
        }
        assert_eq!(by_day(&table, &between), untouched);
        assert_eq!(by_day(&table, &filled), expected(&filled, false), "the three days as loaded again");
        let json: Value = serde_json::from_slice(&gaps(root, &["--json"]).stdout).unwrap();
        assert_eq!(strings(&json["days"]), [MISSING[0], THIN, MISSING[1]], "{json}");
    }
}

/// A DELETE with a deletion vector, as Spark writes one, takes 18 of a day's 20 orders: the log's
/// `numRecords` still says 20, so `bf gaps` counts through the table and finds the day thin.
#[test]
fn a_day_thinned_by_a_deletion_vector_is_counted_through_the_table() {
    let (dir, table) = workspace(true);
    let root = dir.path();
    let day = "2025-10-07";
    let logs: Vec<(u64, std::path::PathBuf)> = crate::common::commit_files(&table);
    let file = logs
        .iter()
        .flat_map(|(_, path)| {
            std::fs::read_to_string(path).unwrap().lines().map(str::to_owned).collect::<Vec<_>>()
        })
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok()?.get("add").cloned())
        .find(|add| add["partitionValues"]["order_date"] == day)
        .unwrap();
    let next = logs.iter().map(|(v, _)| *v).max().unwrap() + 1;
    crate::common::delete_with_vector(&table, next, &file, &(0..18).collect::<Vec<u32>>(), true);

    let found = said(&gaps(root, &[]));
    assert!(found.contains("rows per day read through the table"), "{found}");
    assert!(found.contains(&format!("  {day} (Tue)  2 rows, usually 20 (10%)")), "{found}");
    assert!(found.contains(&format!("  {THIN} (Tue)  2 rows, usually 20 (10%)")), "{found}");
}

/// A range the table holds no row of, with no row in the weeks around it either (a load that broke
/// long before): every day is missing — never "No gaps" because every weekday looked closed.
#[test]
fn a_range_without_any_row_is_all_missing() {
    let (dir, _table) = workspace(false);
    let found = bf(
        dir.path(),
        &["gaps", "lake/orders", "--date-column", "order_date", "--from", "2026-06-01", "--to", "2026-06-30"],
    );
    let text = said(&found);
    assert_eq!(found.status.code(), Some(0), "{text}");
    assert!(text.contains("Missing: 30 days without a row"), "{text}");
    assert!(!text.contains("No gaps") && !text.contains("closed on"), "{text}");
}
