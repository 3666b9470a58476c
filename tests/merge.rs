//! Merge mode on every layout: a May correction of a January–June orders table, planned, applied
//! (with a crash and a resume), verified and rolled back, each checked row by row against the
//! expected table computed here from the same rows; and a plan that does not flake on floating-point
//! sums summed in another order.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bf::deltalake::arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
};
use bf::deltalake::arrow::datatypes::{DataType as ArrowType, Date32Type, Field, Schema};
use bf::deltalake::protocol::SaveMode;
use chrono::NaiveDate;
use serde_json::Value;

use crate::common::{bf_in, duckdb_rows, new_table, rows_at, snapshot, write_plan};

/// One order: id, customer, amount, currency, day.
type Order = (i64, String, f64, String, NaiveDate);

fn day(text: &str) -> NaiveDate {
    text.parse().unwrap()
}

/// January to June 2026, three orders a day; amounts never whole (so every display agrees).
fn orders() -> Vec<Order> {
    let mut orders = Vec::new();
    let mut id = 1;
    let mut date = day("2026-01-01");
    while date <= day("2026-06-30") {
        for _ in 0..3 {
            let currency = ["EUR", "USD", "GBP"][(id % 3) as usize];
            orders.push((id, format!("C{:02}", id % 17), (id % 97) as f64 + 0.25, currency.to_owned(), date));
            id += 1;
        }
        date = date.succ_opt().unwrap();
    }
    orders
}

/// The May correction: every third May order with a new amount, every fifth missing, ten new ones.
fn may_correction(orders: &[Order]) -> Vec<Order> {
    let may = |o: &&Order| o.4 >= day("2026-05-01") && o.4 <= day("2026-05-31");
    let mut source: Vec<Order> = orders
        .iter()
        .filter(may)
        .filter(|o| o.0 % 5 != 0)
        .map(|o| if o.0 % 3 == 0 { (o.0, o.1.clone(), o.2 + 100.5, o.3.clone(), o.4) } else { o.clone() })
        .collect();
    for n in 0..10 {
        source.push((
            10_000 + n,
            "C99".into(),
            7.75 + n as f64,
            "EUR".into(),
            day("2026-05-01") + chrono::Days::new(3 * n as u64),
        ));
    }
    source
}

/// What a merge of `source` into May leaves: May's rows the source lacks stay (unless
/// `delete_missing`), the source's rows replace those with their key, new keys are added.
fn merged(orders: &[Order], source: &[Order], delete_missing: bool) -> Vec<Order> {
    let by_key: BTreeMap<i64, &Order> = source.iter().map(|o| (o.0, o)).collect();
    let in_may = |d: NaiveDate| d >= day("2026-05-01") && d <= day("2026-05-31");
    let mut result: Vec<Order> = orders
        .iter()
        .filter(|o| !(in_may(o.4) && (delete_missing || by_key.contains_key(&o.0))))
        .cloned()
        .collect();
    result.extend(source.iter().cloned());
    result.sort_by_key(|o| o.0);
    result
}

/// The table's rows, parsed back from text, sorted by id.
async fn table_orders(table: &Path) -> Vec<Order> {
    let mut rows: Vec<Order> = rows_at(table, None, "true")
        .await
        .iter()
        .map(|row| {
            let f: Vec<&str> = row.split('|').collect();
            (f[0].parse().unwrap(), f[1].to_owned(), f[2].parse().unwrap(), f[3].to_owned(), day(f[4]))
        })
        .collect();
    rows.sort_by_key(|o| o.0);
    rows
}

/// The table's rows as DuckDB's Delta extension (delta-kernel-rs, not the deltalake crate) reads
/// them, sorted by id.
fn duckdb_orders(table: &Path) -> Vec<Order> {
    let mut rows: Vec<Order> =
        duckdb_rows(table, "SELECT order_id, customer, amount, currency, order_date FROM t")
            .iter()
            .map(|row| {
                let f: Vec<&str> = row.split('|').collect();
                (f[0].parse().unwrap(), f[1].to_owned(), f[2].parse().unwrap(), f[3].to_owned(), day(f[4]))
            })
            .collect();
    rows.sort_by_key(|o| o.0);
    rows
}

fn batch(orders: &[Order]) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("order_id", ArrowType::Int64, true),
        Field::new("customer", ArrowType::Utf8, true),
        Field::new("amount", ArrowType::Float64, true),
        Field::new("currency", ArrowType::Utf8, true),
        Field::new("order_date", ArrowType::Date32, true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(orders.iter().map(|o| o.0))),
        Arc::new(StringArray::from_iter_values(orders.iter().map(|o| o.1.as_str()))),
        Arc::new(Float64Array::from_iter_values(orders.iter().map(|o| o.2))),
        Arc::new(StringArray::from_iter_values(orders.iter().map(|o| o.3.as_str()))),
        Arc::new(Date32Array::from_iter_values(orders.iter().map(|o| Date32Type::from_naive_date(o.4)))),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

/// An orders table partitioned by `partitions`, written one commit per group of rows.
async fn table_of(dir: &Path, partitions: &[&str], commits: &[Vec<Order>]) {
    let mut table = new_table(dir, crate::common::orders_columns(), partitions).await;
    for rows in commits {
        table = table.write(vec![batch(rows)]).with_save_mode(SaveMode::Append).await.unwrap();
    }
}

fn csv(path: &Path, orders: &[Order]) {
    let mut text = String::from("order_id,customer,amount,currency,order_date\n");
    for o in orders {
        text.push_str(&format!("{},{},{},{},{}\n", o.0, o.1, o.2, o.3, o.4));
    }
    std::fs::write(path, text).unwrap();
}

fn merge_plan(delete_missing: bool) -> String {
    format!(
        r#"reason = "Correct May's orders by key."
[target]
table = "orders"
date_column = "order_date"
key = ["order_id"]
[window]
start = 2026-05-01
end = 2026-05-31
[slicing]
every = "week"
[source]
inputs.may = {{ path = "may.csv", format = "csv" }}
query = "SELECT order_id, customer, amount, currency, order_date FROM may"
[write]
mode = "merge"
{}
[[metrics]]
name = "revenue"
sql = "SUM(amount)"
[guards]
max_change_pct = {{ rows = 50, revenue = 100 }}
"#,
        if delete_missing { "delete_missing = true" } else { "" }
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_plans_applies_resumes_and_rolls_back_on_every_layout() {
    let all = orders();
    let source = may_correction(&all);
    let months: Vec<Vec<Order>> = (1..=6)
        .map(|m| all.iter().filter(|o| chrono::Datelike::month(&o.4) == m).cloned().collect())
        .collect();
    for (layout, partitions) in
        [("unpartitioned", &[][..]), ("by day", &["order_date"][..]), ("by currency", &["currency"][..])]
    {
        for delete_missing in [false, true] {
            let what = format!("{layout}, delete_missing = {delete_missing}");
            let dir = tempfile::tempdir().unwrap();
            let table = dir.path().join("orders");
            table_of(&table, partitions, &months).await;
            csv(&dir.path().join("may.csv"), &source);
            write_plan(dir.path(), "merge.toml", &merge_plan(delete_missing));
            let expected = merged(&all, &source, delete_missing);

            let planned = bf_in(dir.path()).args(["plan", "merge.toml", "--json", "-q"]).output().unwrap();
            let plan: Value = serde_json::from_slice(&planned.stdout).unwrap_or_default();
            assert!(
                planned.status.success(),
                "{what}: {}{}",
                String::from_utf8_lossy(&planned.stderr),
                plan["problems"]
            );
            assert_eq!(plan["outside_window"]["unchanged"], true, "{what}");
            let after: u64 =
                plan["slices"].as_array().unwrap().iter().map(|s| s["after"]["rows"].as_u64().unwrap()).sum();
            let may = |o: &&Order| o.4 >= day("2026-05-01") && o.4 <= day("2026-05-31");
            assert_eq!(after as usize, expected.iter().filter(may).count(), "{what}: the rehearsal's May");
            // The rehearsal copied only files that can hold May's rows.
            let clone = &plan["rehearsal"]["clone"];
            let localized = clone["files_localized"].as_u64().unwrap();
            let total = localized + clone["files_referenced"].as_u64().unwrap();
            assert!(localized * 2 < total, "{what}: {localized} of {total} files copied into the rehearsal");

            let crashed = bf_in(dir.path())
                .args(["apply", "--auto-approve", "-q"])
                .env(bf::fault::FAULT_ENV, "after-commit:2")
                .output()
                .unwrap();
            assert!(!crashed.status.success(), "{what}");
            let resumed = bf_in(dir.path()).args(["apply", "--auto-approve", "-q"]).output().unwrap();
            assert!(resumed.status.success(), "{what}: {}", String::from_utf8_lossy(&resumed.stderr));
            assert_eq!(table_orders(&table).await, expected, "{what}: the merged table, row by row");
            assert_eq!(duckdb_orders(&table), expected, "{what}: the merged table, read by DuckDB");

            let rolled = bf_in(dir.path()).args(["rollback", "--auto-approve"]).output().unwrap();
            assert!(rolled.status.success(), "{what}: {}", String::from_utf8_lossy(&rolled.stderr));
            assert_eq!(table_orders(&table).await, all, "{what}: the full rollback");
            assert_eq!(duckdb_orders(&table), all, "{what}: the full rollback, read by DuckDB");

            // Again, undone slice by slice this time.
            bf_in(dir.path()).args(["plan", "merge.toml", "-q"]).assert().success();
            bf_in(dir.path()).args(["apply", "--auto-approve", "-q"]).assert().success();
            assert_eq!(table_orders(&table).await, expected, "{what}: applied again");
            let rolled =
                bf_in(dir.path()).args(["rollback", "--auto-approve", "--window-only"]).output().unwrap();
            assert!(rolled.status.success(), "{what}: {}", String::from_utf8_lossy(&rolled.stderr));
            assert_eq!(table_orders(&table).await, all, "{what}: the window-only rollback");
            assert_eq!(duckdb_orders(&table), all, "{what}: the window-only rollback, read by DuckDB");
        }
    }
}

#[test]
fn a_merge_source_with_a_null_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(table_of(&dir.path().join("orders"), &[], &[orders()]));
    let text =
        "order_id,customer,amount,currency,order_date\n,C01,1.25,EUR,2026-05-02\n7,C01,2.25,EUR,2026-05-02\n";
    std::fs::write(dir.path().join("may.csv"), text).unwrap();
    write_plan(dir.path(), "merge.toml", &merge_plan(false));
    let untouched = snapshot(&dir.path().join("orders"));
    let output = bf_in(dir.path()).args(["plan", "merge.toml", "-q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("1 source row has a NULL in the key (order_id)"), "{stderr}");
    assert_eq!(snapshot(&dir.path().join("orders")), untouched);
}

/// Outside the window, rows whose DOUBLE sum depends on the order it is taken in: 0.1 in the first
/// file committed, 0.2 and 0.3 in the second, each beside a window row, so the slice rewrites both
/// and writes their outside rows into one file, in commit order: summed the usual way, (0.1 + 0.2)
/// + 0.3 = 0.6000000000000001 after, while before the two files are read in an order DataFusion
/// picks (0.6 or 0.6000000000000001: the sums differed in 11 of 15 runs when bf summed that way).
/// bf sums floating-point metrics exactly (`rehearse/exact_sum.rs`): both sides are 0.6, the
/// correctly rounded sum, to the bit, in every run, and no tolerance is needed or shown. Summed the
/// usual way, `after` is 0.6000000000000001 whatever the order of `before`.
/// `diff::tests` proves the tolerance rule, still used for sums of parts, on fixed numbers.
#[tokio::test(flavor = "multi_thread")]
async fn floating_point_sums_in_another_order_are_not_a_change_outside_the_window() {
    for mode in ["replace", "merge"] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        let order =
            |id: i64, amount: f64, date: &str| (id, "C01".to_owned(), amount, "EUR".to_owned(), day(date));
        let files = vec![
            vec![order(1, 0.1, "2026-04-01"), order(2, 5.25, "2026-05-10")],
            vec![order(3, 0.2, "2026-04-02"), order(4, 0.3, "2026-04-03"), order(5, 6.25, "2026-05-11")],
        ];
        table_of(&table, &[], &files).await;
        csv(&dir.path().join("may.csv"), &[order(2, 9.25, "2026-05-10"), order(5, 6.25, "2026-05-11")]);
        let text = merge_plan(false)
            .replace("every = \"week\"", "every = \"month\"")
            .replace("mode = \"merge\"", &format!("mode = \"{mode}\""));
        write_plan(dir.path(), "plan.toml", &text);
        let untouched = snapshot(&table);
        let planned = bf_in(dir.path()).args(["plan", "plan.toml", "--json", "-q"]).output().unwrap();
        let plan: Value = serde_json::from_slice(&planned.stdout).unwrap();
        assert!(planned.status.success(), "{mode}: {}", plan["problems"]);
        let outside = &plan["outside_window"];
        assert_eq!(outside["unchanged"], true, "{mode}: {outside}");
        assert_eq!(outside["replaced_files"], 2, "{mode}: both files straddle the window");
        for side in ["before", "after"] {
            let revenue = outside[side]["metrics"]["revenue"].as_f64();
            assert_eq!(revenue, Some(0.6), "{mode}: {side}, the exact sum: {outside}");
        }
        assert_eq!(outside["within_error"].as_array().map_or(0, Vec::len), 0, "{mode}: {outside}");
        assert_eq!(snapshot(&table), untouched, "{mode}");
    }
}
