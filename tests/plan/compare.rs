//! The comparison: rows outside the window in the files the slices rewrote, a merge's kept rows,
//! a slice compared from memory, one cent in a million rows.

use super::*;

/// Rows outside the window are compared in the files the slices rewrote, not in the whole table:
/// here a file mixing February, March and April days is replaced, and its February and April rows
/// must come back in the rewritten file; the January file is shared untouched and not read.
#[tokio::test(flavor = "multi_thread")]
async fn rows_outside_the_window_are_compared_in_the_files_the_slices_rewrote() {
    let dir = tempfile::tempdir().unwrap();
    let rows: [&[OrderRow]; 3] = [
        &[(1, "C01", 10.0, "EUR", "2026-01-10")],
        &[(2, "C02", 20.0, "EUR", "2026-02-28"), (3, "C03", 30.0, "USD", "2026-03-01")],
        &[(4, "C04", 40.0, "USD", "2026-03-31"), (5, "C05", 50.0, "EUR", "2026-04-01")],
    ];
    let target = orders_table(&dir.path().join("orders"), false, &rows).await;
    std::fs::write(dir.path().join("march.csv"), "order_id,customer,amount,currency,order_date\n3,C03,33.0,EUR,2026-03-01\n4,C04,44.0,EUR,2026-03-31\n").unwrap();
    let plan_text = crate::common::VALID_PLAN
        .replace("../warehouse/orders_silver", "orders")
        .replace("orders.csv", "march.csv")
        .replace(
            "SELECT order_id, amount, order_date FROM orders",
            "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders",
        )
        + "\n[[metrics]]\nname = \"amount\"\nsql = \"SUM(amount)\"\n";
    let plan_file = write_plan(dir.path(), "march.toml", &plan_text);
    let untouched = snapshot(&target);
    let plan = plan_json(&bf_in(dir.path()).arg("plan").arg(&plan_file).arg("--json").output().unwrap());
    assert_eq!(snapshot(&target), untouched);

    // Worked out from the rows above: the two files holding March days are replaced; outside March
    // they hold orders 2 (February) and 5 (April), 70.0 in all.
    let outside = &plan["outside_window"];
    assert_eq!(outside["unchanged"], true, "{outside}");
    assert_eq!(outside["shared_files"], 1, "{outside}");
    assert_eq!(outside["replaced_files"], 2, "{outside}");
    for side in ["before", "after"] {
        assert_eq!(outside[side]["rows"], 2, "{outside}");
        assert!(close(&outside[side]["metrics"]["amount"], 70.0), "{outside}");
    }
    assert_eq!(plan["total"]["before"]["rows"], 2);
    assert!(close(&plan["total"]["after"]["metrics"]["amount"], 77.0));
    let text = bf_in(dir.path()).args(["show"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "Outside the window: unchanged ✓ (1 file shared untouched; the 2 files the slices replaced"
        ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_keeps_the_rows_the_source_lacks_unless_delete_missing_and_never_multiplies_rows() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    // The corrected source holds only the even orders; the table's March has 3 orders twice.
    let even = march.replace("mode = \"replace\"", "mode = \"merge\"").replace(
        "JOIN fx ON o.currency = fx.currency\n",
        "JOIN fx ON o.currency = fx.currency\nWHERE o.order_id % 2 = 0\n",
    );
    let in_march = "order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    let odd_rows =
        count(&silver, &format!("SELECT count(*) FROM t WHERE {in_march} AND order_id % 2 = 1")).await;
    let even_copies = count(
        &silver,
        &format!("SELECT count(*) - count(DISTINCT order_id) FROM t WHERE {in_march} AND order_id % 2 = 0"),
    )
    .await;
    let odd_copies = count(
        &silver,
        &format!("SELECT count(*) - count(DISTINCT order_id) FROM t WHERE {in_march} AND order_id % 2 = 1"),
    )
    .await;
    assert!(odd_copies > 0, "the table's March has an odd order twice");
    let plan_of = |name: &str, text: &str| {
        let plan = write_plan(&root.join("plans"), name, text);
        let output = bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap();
        let json: Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.code(), json)
    };

    let (code, plan) = plan_of("merge.toml", &even);
    let source = plan["slices"][0]["source"]["in_slice"].as_i64().unwrap();
    assert_eq!(
        plan["slices"][0]["after"]["rows"].as_i64().unwrap(),
        source + odd_rows,
        "the source's rows, and the table's rows whose key the source lacks"
    );
    let changes = &plan["slices"][0]["changes"];
    assert_eq!(changes["added"], 0, "every even order was in the table");
    assert_eq!(
        changes["removed"].as_i64().unwrap(),
        even_copies,
        "only the surplus copies of corrected keys go"
    );
    let warned = plan["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str().unwrap().contains(
            "the table holds several rows for 3 keys; a source row for such a key replaces all of them",
        )
    });
    assert!(warned, "the duplicated keys are reported: {}", plan["warnings"]);
    let reconcile = plan["checks"].as_array().unwrap().iter().find(|c| c["kind"] == "reconcile").unwrap();
    assert_eq!(reconcile["passed"], true, "every source order is in the merged slice");
    // The odd duplicates the source does not correct stay duplicated, and the unique check says so.
    let unique =
        plan["checks"].as_array().unwrap().iter().find(|c| c["name"] == "one row per order").unwrap();
    assert_eq!(unique["passed"], false, "{unique}");
    assert_eq!(unique["offending"], 2 * odd_copies, "each odd order kept twice, both copies: {unique}");
    assert_eq!(code, Some(1), "a failed check makes the plan unappliable: {}", plan["problems"]);

    let (code, plan) = plan_of(
        "replace-by-key.toml",
        &even.replace("mode = \"merge\"", "mode = \"merge\"\ndelete_missing = true"),
    );
    assert_eq!(
        plan["slices"][0]["after"]["rows"].as_i64().unwrap(),
        source,
        "delete_missing: the slice holds exactly the source's rows"
    );
    assert_eq!(plan["slices"][0]["changes"]["removed"].as_i64().unwrap(), odd_rows + even_copies);
    assert_eq!(code, Some(1), "the rows guard (5%) refuses removing half of March: {}", plan["problems"]);
}

/// A slice small enough is compared from memory, each side read once; a bigger one is read by
/// each query. Both give the same measures, row changes and samples, duplicated keys included.
#[tokio::test(flavor = "multi_thread")]
async fn a_slice_compared_from_memory_reads_as_one_read_by_each_query() {
    use crate::common::{OrderRow, open_table, orders_table};
    use bf::rehearse::diff::Comparison;
    let dir = tempfile::tempdir().unwrap();
    let day = |d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap();
    let before: [OrderRow; 5] = [
        (1, "C1", 10.0, "EUR", "2026-03-01"),
        (2, "C2", 20.0, "EUR", "2026-03-01"),
        (2, "C2", 20.0, "EUR", "2026-03-01"),
        (3, "C3", 30.0, "USD", "2026-03-01"),
        (4, "C4", 40.0, "USD", "2026-03-02"),
    ];
    let after: [OrderRow; 4] = [
        (1, "C1", 11.0, "EUR", "2026-03-01"),
        (2, "C2", 20.0, "EUR", "2026-03-01"),
        (5, "C5", 50.0, "EUR", "2026-03-01"),
        (4, "C4", 40.0, "USD", "2026-03-02"),
    ];
    let target = open_table(&orders_table(&dir.path().join("before"), false, &[&before]).await).await;
    let rehearsal = open_table(&orders_table(&dir.path().join("after"), true, &[&after]).await).await;
    let schema = bf::delta::table::arrow_schema(&target).unwrap();
    let mut comparison = Comparison::new(
        &bf::delta::store::Stores::from_environment(),
        &target,
        &rehearsal,
        schema,
        Default::default(),
    )
    .await
    .unwrap();
    let metrics = [bf::plan_file::Metric { name: "revenue".into(), sql: "SUM(amount)".into() }];
    let slice = bf::window::Slice {
        index: 1,
        first: day("2026-03-01"),
        last: day("2026-03-01"),
        run_date: day("2026-03-01"),
    };
    let predicate = bf::delta::predicate::slice_predicate("order_date", &slice);
    let key = ["order_id".to_owned()];
    let mut compared = Vec::new();
    for in_memory in [false, true] {
        comparison.focus(predicate.clone(), in_memory).await.unwrap();
        let (before, after) = comparison.measure_slice(&metrics).await.unwrap();
        let changes = comparison.slice_changes(&key, 5, &[]).await.unwrap();
        compared.push((before, after, changes));
    }
    let (before, after, changes) = &compared[0];
    assert_eq!((before.rows, after.rows), (4, 3));
    assert_eq!((changes.added, changes.removed, changes.changed), (1, 2, 1), "{changes:?}");
    assert_eq!(compared[0], compared[1], "from memory, the same numbers and samples");
}

/// The revenue of a slice of a million orders averaging about 100 EUR, one of them a cent more after
/// the backfill: summed the usual way, the rounding bound of such a sum (γ(n)·Σ|x| ≈ 0.011) is
/// larger than the cent, and the slice read "unchanged"; summed exactly, the cent is the change.
#[tokio::test(flavor = "multi_thread")]
async fn a_cent_in_one_row_of_a_million_row_slice_is_a_change() {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{Date32Array, Int64Array, RecordBatch, StringArray};
    let dir = tempfile::tempdir().unwrap();
    let rows = 1_000_000i64;
    let mut state = 7u64;
    let cents: Vec<f64> = (0..rows)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (1 + (state >> 33) % 19_999) as f64 / 100.0
        })
        .collect();
    let schema = crate::common::orders_schema();
    let day = Date32Type::from_naive_date("2026-05-01".parse().unwrap());
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(0..rows)),
            Arc::new(StringArray::from_iter_values((0..rows).map(|_| "C"))),
            Arc::new(Float64Array::from(cents.clone())),
            Arc::new(StringArray::from_iter_values((0..rows).map(|_| "EUR"))),
            Arc::new(Date32Array::from(vec![day; rows as usize])),
        ],
    )
    .unwrap();
    let table =
        crate::common::new_table(&dir.path().join("orders"), crate::common::orders_columns(), &[]).await;
    table.write(vec![batch]).await.unwrap();
    write_plan(
        dir.path(),
        "cent.toml",
        "reason = \"One order was a cent short.\"\n[target]\ntable = \"orders\"\ndate_column = \"order_date\"\n\
         key = [\"order_id\"]\n[window]\nstart = 2026-05-01\nend = 2026-05-01\n[slicing]\nevery = \"day\"\n\
         [source]\ninputs.src = { path = \"orders\", format = \"delta\" }\n\
         query = \"SELECT order_id, customer, CASE WHEN order_id = 123456 THEN amount + 0.01 ELSE amount END AS amount, \
         currency, order_date FROM src\"\n[[metrics]]\nname = \"revenue\"\nsql = \"SUM(amount)\"\n",
    );
    let out = bf_in(dir.path()).args(["plan", "cent.toml", "--json", "-q"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved: Value = serde_json::from_slice(&out.stdout).unwrap();
    let slice = &saved["slices"][0];
    let (before, after) = (&slice["before"], &slice["after"]);
    let revenue = |side: &Value| side["metrics"]["revenue"].as_f64().unwrap();
    let bound = |side: &Value| side["error"]["revenue"].as_f64().unwrap();
    let change = revenue(after) - revenue(before);
    assert!((change - 0.01).abs() < 1e-6, "the change is the cent: {change}");
    assert!(bound(before) + bound(after) < 1e-6, "the bound is far below a cent: {before} {after}");
    // The sums are exact: the test's own exact total, to the last bit.
    let mut exact = bf::rehearse::exact_sum::ExactSum::default();
    cents.iter().for_each(|&c| exact.add(c));
    assert_eq!(revenue(before), exact.value().unwrap(), "the exact sum of the amounts");
    assert_eq!(slice["changes"]["changed"], 1, "{}", slice["changes"]);
}
