//! `bf plan --sample N`: a first look at a year of daily slices.

use std::path::Path;

use serde_json::Value;

use super::{days, loaded, reload, usual, workspace};
use crate::common::{duckdb_count, snapshot};
use crate::second_hour::{bf, said};

/// The calendar index (1-based) of `day` in 2025.
fn index_of(day: &str) -> usize {
    days().position(|d| d.to_string() == day).unwrap() + 1
}

fn saved(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A preview of 3 of a year's 365 daily slices rehearses the first day, the day the table holds
/// the most orders, and the last, and shows them as a plan does under "preview: 3 of 365 slices";
/// its figures are those slices' (the orders the test wrote on those days), and everything else,
/// the window's other 362 days included, is compared unchanged. It is saved where `bf apply` does
/// not look, in a rehearsal of its own, so a plan saved before it stays appliable; `bf apply`
/// refuses the preview by name or by default, naming `bf plan` without `--sample`, and a preview
/// whose `preview` mark was cut out is refused by the seal. The table is untouched throughout,
/// and the preview's rehearsal read by DuckDB holds the corrected orders of those three days.
#[test]
fn a_preview_of_a_year_rehearses_its_first_last_and_largest_day_and_apply_refuses_it() {
    for partitioned in [false, true] {
        let (dir, table) = workspace(partitioned);
        let root = dir.path();
        std::fs::write(root.join("plans/year.toml"), reload("2025-01-01", "2025-12-31")).unwrap();
        std::fs::write(root.join("plans/new_year.toml"), reload("2025-01-01", "2025-01-03")).unwrap();

        // A full plan saved first: the preview must leave it appliable.
        let planned = bf(root, &["plan", "plans/new_year.toml", "-q"]);
        assert_eq!(planned.status.code(), Some(0), "{}", said(&planned));
        let untouched = snapshot(&table);

        let previewed = bf(root, &["plan", "plans/year.toml", "--sample", "3", "-q"]);
        let text = said(&previewed);
        assert_eq!(previewed.status.code(), Some(0), "{text}");
        let largest = index_of("2025-06-18");
        assert!(
            text.contains(&format!(
                "preview: 3 of 365 slices — 1 (first), {largest} (largest by rows), 365 (last)"
            )),
            "{text}"
        );
        let orders: usize =
            ["2025-01-01", "2025-06-18", "2025-12-31"].iter().map(|d| loaded(d.parse().unwrap())).sum();
        assert!(
            text.contains(&format!(
                "Preview: 3 of 365 slices to replace; {} before and after",
                bf::words::count(orders, "row")
            )),
            "{text}"
        );
        assert!(text.contains("Outside the previewed slices: unchanged ✓"), "{text}");
        assert!(text.contains("plans/year.toml`") && text.contains("without `--sample`"), "{text}");
        assert!(root.join(".bf/preview.json").exists() && root.join(".bf/plan.json").exists());

        let preview = saved(&root.join(".bf/preview.json"));
        let chosen: Vec<u64> = preview["preview"]["chosen"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["index"].as_u64().unwrap())
            .collect();
        assert_eq!(chosen, [1, largest as u64, 365]);
        assert_eq!(preview["preview"]["of"], 365);
        assert_eq!(preview["slices"].as_array().unwrap().len(), 3);
        assert_eq!(preview["total"]["before"]["rows"], orders as u64);
        // The window's other days are outside what the preview rewrote, and did not move.
        assert_eq!(preview["outside_window"]["unchanged"], true, "{}", preview["outside_window"]);
        // Compared where they could have moved: the other days of the weekly files the three
        // slices rewrote (none when each day is a partition of its own).
        let carried: usize = match partitioned {
            true => 0,
            false => [1, largest, 365]
                .iter()
                .map(|&at| {
                    let week = (at - 1) / 7 * 7;
                    days().skip(week).take(7).map(loaded).sum::<usize>() - loaded(days().nth(at - 1).unwrap())
                })
                .sum(),
        };
        assert_eq!(preview["outside_window"]["before"]["rows"], carried as u64);

        // Its rehearsal is its own, read by another implementation: the three days corrected.
        let rehearsal = root.join("lake/orders__rehearsal__preview");
        let revenue = |day: &str| {
            let sql = format!(
                "SELECT CAST(ROUND(SUM(amount) * 100) AS BIGINT) FROM t WHERE order_date = DATE '{day}'"
            );
            duckdb_count(&rehearsal, &sql)
        };
        let corrected = |day: &str| {
            let n = usual(day.parse().unwrap()) as i64;
            n * 1001 + 100 * n * (n - 1) / 2
        };
        for day in ["2025-01-01", "2025-06-18", "2025-12-31"] {
            assert_eq!(revenue(day), corrected(day), "{day} in the preview's rehearsal");
        }
        assert_eq!(snapshot(&table), untouched, "a preview writes nothing to the table");

        // Applied: the refusal names the preview and the way out; nothing is written.
        for args in [
            &["apply", "--auto-approve", "--state-dir", "fresh"][..],
            &["apply", ".bf/preview.json", "--auto-approve"],
        ] {
            if args.contains(&"fresh") {
                let fresh =
                    bf(root, &["plan", "plans/year.toml", "--sample", "3", "-q", "--state-dir", "fresh"]);
                assert_eq!(fresh.status.code(), Some(0), "{}", said(&fresh));
                assert!(!root.join("fresh/plan.json").exists());
            }
            let refused = bf(root, args);
            let why = said(&refused);
            assert_eq!(refused.status.code(), Some(1), "{args:?}: {why}");
            assert!(
                why.contains("is a preview of 3 of its plan's 365 slices")
                    && why.contains("plans/year.toml` without `--sample`"),
                "{args:?}: {why}"
            );
            assert_eq!(snapshot(&table), untouched, "{args:?} wrote nothing");
        }
        let status = bf(root, &["status", ".bf/preview.json"]);
        assert!(
            said(&status).contains("a preview of 3 of its 365 slices (`bf plan --sample`): never applied"),
            "{}",
            said(&status)
        );
        let mut tampered = preview.clone();
        tampered.as_object_mut().unwrap().remove("preview");
        std::fs::write(root.join("tampered.json"), tampered.to_string()).unwrap();
        let refused = bf(root, &["apply", "tampered.json", "--auto-approve"]);
        assert_eq!(refused.status.code(), Some(1), "{}", said(&refused));
        assert!(said(&refused).contains("its slices are not the ones its text makes"), "{}", said(&refused));
        assert_eq!(snapshot(&table), untouched, "the tampered preview wrote nothing");

        // The plan saved before the preview publishes as rehearsed.
        let applied = bf(root, &["apply", "--auto-approve"]);
        assert_eq!(applied.status.code(), Some(0), "{}", said(&applied));
        let revenue = |day: &str| {
            let sql = format!(
                "SELECT CAST(ROUND(SUM(amount) * 100) AS BIGINT) FROM t WHERE order_date = DATE '{day}'"
            );
            duckdb_count(&table, &sql)
        };
        for day in ["2025-01-01", "2025-01-03"] {
            assert_eq!(revenue(day), corrected(day), "{day} applied");
        }
        assert_eq!(
            revenue("2025-06-18"),
            corrected("2025-06-18") - 40,
            "the preview's days are not the table's"
        );
    }
}
