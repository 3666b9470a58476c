//! Rows a slice's query returns for another slice's days: the late events of a day, held in the
//! next day's file of an input landed by arrival. The slice owning their day rewrites it, so it
//! writes them; otherwise the reload would drop them while its reconcile said ✓.

use crate::common::{OrderRow, bf_in, duckdb_rows, orders_table, write_plan};

/// The table as the daily loads left it: orders 3 and 7 arrived a day late, and were loaded.
const LOADED: [OrderRow; 8] = [
    (1, "C01", 10.0, "EUR", "2026-03-01"),
    (2, "C02", 20.0, "EUR", "2026-03-01"),
    (3, "C03", 30.0, "EUR", "2026-03-01"),
    (4, "C04", 40.0, "EUR", "2026-03-02"),
    (5, "C05", 50.0, "EUR", "2026-03-02"),
    (6, "C06", 60.0, "EUR", "2026-03-03"),
    (7, "C07", 70.0, "EUR", "2026-03-02"),
    (8, "C08", 80.0, "EUR", "2026-03-03"),
];

/// The landing files, one per day of arrival: each day's late orders in the next day's file.
const LANDED: [(&str, &str); 3] = [
    ("2026-03-01", "1,C01,10.0,EUR,2026-03-01\n2,C02,20.0,EUR,2026-03-01\n"),
    ("2026-03-02", "3,C03,30.0,EUR,2026-03-01\n4,C04,40.0,EUR,2026-03-02\n5,C05,50.0,EUR,2026-03-02\n"),
    ("2026-03-03", "6,C06,60.0,EUR,2026-03-03\n7,C07,70.0,EUR,2026-03-02\n8,C08,80.0,EUR,2026-03-03\n"),
];

/// Every amount reloaded in cents, as the fix: the query multiplies by 100.
const PLAN: &str = r#"reason = "Reload 1-3 March in cents from the files as they arrived."
[target]
table = "orders"
date_column = "order_date"
[window]
start = 2026-03-01
end = 2026-03-03
[slicing]
every = "day"
[source]
inputs.landed = { path = "landing/{date}.csv", format = "csv" }
query = """
SELECT order_id, customer, amount * 100 AS amount, currency, CAST(order_date AS DATE) AS order_date FROM landed
"""
"#;

#[tokio::test(flavor = "multi_thread")]
async fn late_rows_in_the_next_days_file_are_written_by_the_slice_owning_their_day() {
    for (partitioned, apply) in
        [(true, &["apply", "--auto-approve"][..]), (false, &["apply", "--auto-approve", "--recompute"])]
    {
        let dir = tempfile::tempdir().unwrap();
        let table = orders_table(&dir.path().join("orders"), partitioned, &[&LOADED]).await;
        std::fs::create_dir(dir.path().join("landing")).unwrap();
        for (day, rows) in LANDED {
            let header = "order_id,customer,amount,currency,order_date\n";
            std::fs::write(dir.path().join(format!("landing/{day}.csv")), format!("{header}{rows}")).unwrap();
        }
        let plan_file = write_plan(dir.path(), "cents.toml", PLAN);
        let what = format!("partitioned: {partitioned}, {apply:?}");

        let output = bf_in(dir.path()).arg("plan").arg(&plan_file).arg("--json").output().unwrap();
        assert!(output.status.success(), "{what}: {}", String::from_utf8_lossy(&output.stderr));
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let slices = plan["slices"].as_array().unwrap();
        let lent: Vec<_> =
            slices.iter().map(|s| (s["source"]["from_other_slices"].as_u64(), &s["lenders"])).collect();
        assert_eq!(lent[0], (Some(1), &serde_json::json!([{ "slice": 2, "rows": 1 }])), "{what}");
        assert_eq!(lent[1], (Some(1), &serde_json::json!([{ "slice": 3, "rows": 1 }])), "{what}");
        assert_eq!(lent[2].0, None, "{what}: slice 3 borrows nothing");
        for slice in slices {
            assert_eq!(slice["after"]["rows"], slice["before"]["rows"], "{what}: no row dropped: {slice}");
        }
        assert_eq!(
            plan["row_changes"]["removed"],
            serde_json::Value::Null,
            "{what}: {}",
            plan["row_changes"]
        );
        assert!(plan["checks"].as_array().unwrap().iter().all(|c| c["passed"] == true), "{what}");
        // The reconcile says what it compared: the slice's rows, those lent to it among them.
        let first =
            plan["checks"].as_array().unwrap().iter().find(|c| c["name"] == "reconcile" && c["slice"] == 1);
        let detail = first.unwrap()["detail"].as_str().unwrap();
        assert_eq!(
            detail,
            "ok 2026-03-01: 3 rows for the source's 3 (1 of them from other slices' files), 0 missing",
            "{what}"
        );

        let shown = bf_in(dir.path()).arg("show").output().unwrap();
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            text.contains(
                "2 rows the queries return for another slice's days are written by the slice owning that day: \
                 slice 1 writes 1 from slice 2's files, slice 2 writes 1 from slice 3's files"
            ),
            "{what}: {text}"
        );

        let applied = bf_in(dir.path()).args(apply).output().unwrap();
        assert!(applied.status.success(), "{what}: {}", String::from_utf8_lossy(&applied.stderr));
        // Read by DuckDB, not bf's crate: every order is there, in cents, on its own day.
        let rows = duckdb_rows(
            &table,
            "SELECT order_id, CAST(amount AS BIGINT), CAST(order_date AS VARCHAR) FROM t",
        );
        let mut expected: Vec<String> = LOADED
            .iter()
            .map(|(id, _, amount, _, day)| format!("{id}|{}|{day}", (amount * 100.0) as i64))
            .collect();
        expected.sort();
        assert_eq!(rows, expected, "{what}");
    }
}
