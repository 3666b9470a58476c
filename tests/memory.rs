//! `BF_MEMORY_LIMIT`: the operator's bound on what bf's queries hold in memory.

use serde_json::Value;

use crate::common::{bf_in, demo_workspace, snapshot};

fn plan(root: &std::path::Path, limit: Option<&str>) -> std::process::Output {
    let mut command = bf_in(root);
    command.args(["plan", "plans/march.toml", "-q", "--json"]);
    match limit {
        Some(limit) => command.env("BF_MEMORY_LIMIT", limit),
        None => command.env_remove("BF_MEMORY_LIMIT"),
    };
    command.output().unwrap()
}

/// The March reload with its downstream table, planned with a bound that fits (64 MiB: joins as
/// sort-merge joins, sorts that may spill) gives the plan an unbounded run gives, figure for
/// figure; a bound too small for its source's join (1 KiB) stops the plan with DataFusion's
/// "Resources exhausted" and what to change, naming the setting, nothing saved; a value that is
/// not a size is refused before anything is read. The table is untouched throughout.
#[test]
fn a_memory_bound_gives_the_same_plan_or_says_what_to_change() {
    let dir = demo_workspace();
    let root = dir.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let untouched = snapshot(&silver);
    let figures = |out: &std::process::Output| {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let chain = std::iter::once(&plan).chain(plan["downstream"].as_array().unwrap());
        chain.map(|p| (p["total"].clone(), p["slices"].as_array().unwrap().len())).collect::<Vec<_>>()
    };
    let unbounded = figures(&plan(root, None));
    assert_eq!(figures(&plan(root, Some("64 MiB"))), unbounded);

    std::fs::remove_file(root.join(".bf/plan.json")).unwrap();
    let exhausted = plan(root, Some("1KiB"));
    let said = String::from_utf8_lossy(&exhausted.stderr);
    assert_eq!(exhausted.status.code(), Some(1), "{said}");
    assert!(said.contains("Resources exhausted"), "{said}");
    assert!(
        said.contains("help: bf's queries may hold 1.0 KiB in memory (BF_MEMORY_LIMIT)")
            && said.contains("Raise BF_MEMORY_LIMIT, or cut the slices smaller"),
        "{said}"
    );
    assert!(!root.join(".bf/plan.json").exists(), "no plan saved");

    let refused = plan(root, Some("lots"));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("BF_MEMORY_LIMIT: `lots` is not a size"), "{said}");
    assert_eq!(snapshot(&silver), untouched);
}

/// A table of `rows` orders, all on 1 May 2026 (ids 1..=rows, customer `C<id mod 1000>`, an amount
/// from the id), written in one commit.
async fn one_day_of(table: &std::path::Path, rows: i64) {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{Date32Array, Float64Array, Int64Array, RecordBatch, StringArray};
    use bf::deltalake::arrow::datatypes::Date32Type;
    let day = Date32Type::from_naive_date("2026-05-01".parse().unwrap());
    let batch = RecordBatch::try_new(
        crate::common::orders_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(1..=rows)),
            Arc::new(StringArray::from_iter_values((1..=rows).map(|id| format!("C{}", id % 1000)))),
            Arc::new(Float64Array::from_iter_values((1..=rows).map(|id| (id % 997) as f64 + 0.5))),
            Arc::new(StringArray::from_iter_values((1..=rows).map(|_| "EUR"))),
            Arc::new(Date32Array::from(vec![day; rows as usize])),
        ],
    )
    .unwrap();
    let created = crate::common::new_table(table, crate::common::orders_columns(), &[]).await;
    created.write(vec![batch]).await.unwrap();
}

/// A slice bigger than bf compares from memory (600,000 orders a side) is compared within a bound
/// far below its size: each side split by key into parts on disk and paired a few parts at a time.
/// Its row changes are the ones the source made — three orders changed, two added, one removed —
/// with their samples, figure for figure as without the bound; paired by SQL (two sorts of
/// 600,000 rows) the same bound is exhausted.
#[tokio::test(flavor = "multi_thread")]
async fn a_slice_bigger_than_memory_is_paired_in_parts_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    one_day_of(&root.join("orders"), 600_000).await;
    crate::common::write_plan(
        root,
        "may.toml",
        "reason = \"Three amounts were wrong, one order was void, two were missing.\"\n\
         [target]\ntable = \"orders\"\ndate_column = \"order_date\"\nkey = [\"order_id\"]\n\
         [window]\nstart = 2026-05-01\nend = 2026-05-01\n[slicing]\nevery = \"day\"\n\
         [source]\ninputs.src = { path = \"orders\", format = \"delta\" }\n\
         query = \"SELECT order_id, customer, CASE WHEN order_id IN (3, 299999, 599998) THEN amount + 1 ELSE amount END \
         AS amount, currency, order_date FROM src WHERE order_id <> 424242 \
         UNION ALL SELECT order_id + 600000, customer, amount, currency, order_date FROM src WHERE order_id <= 2\"\n\
         [[metrics]]\nname = \"revenue\"\nsql = \"SUM(amount)\"\n",
    );
    let changes = |limit: Option<&str>| {
        let mut command = bf_in(root);
        command.args(["plan", "may.toml", "--json", "-q"]);
        match limit {
            Some(limit) => command.env("BF_MEMORY_LIMIT", limit),
            None => command.env_remove("BF_MEMORY_LIMIT"),
        };
        let out = command.output().unwrap();
        assert!(out.status.success(), "{limit:?}: {}", String::from_utf8_lossy(&out.stderr));
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        plan["slices"][0]["changes"].clone()
    };
    let bounded = changes(Some("24 MiB"));
    let counts = ["added", "removed", "changed", "unchanged"].map(|k| bounded[k].as_u64().unwrap());
    assert_eq!(counts, [2, 1, 3, 599_996], "{bounded}");
    let sampled = |kind: &str, side: &str| -> Vec<String> {
        let samples = bounded["samples"].as_array().unwrap().iter().filter(|s| s["change"] == kind);
        samples.map(|s| s[side][0].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(sampled("changed", "after"), ["3", "299999", "599998"], "by key: {bounded}");
    assert_eq!(sampled("added", "after"), ["600001", "600002"]);
    assert_eq!(sampled("removed", "before"), ["424242"]);
    assert_eq!(changes(None), bounded, "the same changes and samples without the bound");
}
