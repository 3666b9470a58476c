//! Deleted keys brought back: a reload from an export made before a deletion on request (GDPR)
//! re-inserts the deleted customer's orders. The table's history says so, and the plan must too:
//! first, as a guard that refuses by default.

use crate::common::servers::python;
use crate::common::{bf_in, snapshot, write_plan};

/// The orders export, made before the deletion: C42's orders 20 and 21 still in it. Amounts in
/// cents, the fix the reload brings.
const EXPORT: &str = "order_id,customer,amount,currency,order_date
1,C01,1000,EUR,2026-03-01
2,C02,2000,EUR,2026-03-01
20,C42,4200,EUR,2026-03-01
3,C03,3000,EUR,2026-03-02
21,C42,4300,EUR,2026-03-02
4,C01,4000,EUR,2026-03-03
";

const PLAN: &str = r#"reason = "Reload 1-3 March in cents from the export."
[target]
table = "orders"
date_column = "order_date"
key = ["order_id"]
[window]
start = 2026-03-01
end = 2026-03-03
[slicing]
every = "day"
[source]
inputs.export = { path = "export.csv", format = "csv" }
query = """
SELECT order_id, customer, CAST(amount AS DOUBLE) AS amount, currency, CAST(order_date AS DATE) AS order_date
FROM export
"""
"#;

/// The orders table as the Python `deltalake` package writes it, then the deletion of customer
/// C42 (version 1: a DELETE, or a MERGE deleting the rows it matches) and an order appended since
/// (version 2).
fn orders_with_a_gdpr_delete(table: &std::path::Path, partitioned: bool, change_feed: bool, by_merge: bool) {
    python(
        &format!(
            "import datetime, deltalake, pyarrow as pa\n\
             d = lambda s: datetime.date.fromisoformat(s)\n\
             rows = [(1,'C01',10.0,'2026-03-01'),(2,'C02',20.0,'2026-03-01'),(20,'C42',42.0,'2026-03-01'),\n\
                     (3,'C03',30.0,'2026-03-02'),(21,'C42',43.0,'2026-03-02'),(4,'C01',40.0,'2026-03-03')]\n\
             t = pa.table({{'order_id': pa.array([r[0] for r in rows], pa.int64()),\n\
                           'customer': [r[1] for r in rows], 'amount': [r[2] for r in rows],\n\
                           'currency': ['EUR'] * len(rows), 'order_date': [d(r[3]) for r in rows]}})\n\
             deltalake.write_deltalake({path:?}, t, partition_by={partitions}, configuration={configuration})\n\
             {delete}\n\
             later = pa.table({{'order_id': pa.array([5], pa.int64()), 'customer': ['C05'], 'amount': [50.0],\n\
                               'currency': ['EUR'], 'order_date': [d('2026-03-03')]}})\n\
             deltalake.write_deltalake({path:?}, later, mode='append')\n",
            path = table.to_str().unwrap(),
            partitions = if partitioned { "['order_date']" } else { "None" },
            configuration = if change_feed { "{'delta.enableChangeDataFeed': 'true'}" } else { "None" },
            delete = match by_merge {
                false => format!(
                    "deltalake.DeltaTable({:?}).delete(\"customer = 'C42'\")",
                    table.to_str().unwrap()
                ),
                true => format!(
                    "deltalake.DeltaTable({:?}).merge(pa.table({{'customer': ['C42']}}), 'target.customer = source.customer', \
                     source_alias='source', target_alias='target').when_matched_delete().execute()",
                    table.to_str().unwrap()
                ),
            },
        ),
        &[],
    );
}

#[test]
fn a_reload_that_brings_back_keys_a_delete_removed_is_refused_unless_the_plan_allows_it() {
    // Each layout with and without a change data feed; the deletion a DELETE or a deleting MERGE.
    for (partitioned, change_feed, by_merge) in
        [(true, false, false), (false, true, false), (false, false, true), (true, true, true)]
    {
        let what = format!("partitioned: {partitioned}, change data feed: {change_feed}, merge: {by_merge}");
        let operation = if by_merge { "MERGE" } else { "DELETE" };
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        orders_with_a_gdpr_delete(&table, partitioned, change_feed, by_merge);
        std::fs::write(dir.path().join("export.csv"), EXPORT).unwrap();
        let untouched = snapshot(&table);

        let plan_file = write_plan(dir.path(), "reload.toml", PLAN);
        let output = bf_in(dir.path()).arg("plan").arg(&plan_file).arg("--json").output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{what}: {}", String::from_utf8_lossy(&output.stderr));
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let found = &plan["deleted_keys"]["found"];
        assert_eq!(found.as_array().map(Vec::len), Some(1), "{what}: {}", plan["deleted_keys"]);
        assert_eq!(found[0]["version"], 1, "{what}");
        assert_eq!(found[0]["operation"], operation, "{what}");
        assert_eq!(found[0]["rows"], 2, "{what}");
        assert_eq!(found[0]["samples"], serde_json::json!(["order_id = 20", "order_id = 21"]), "{what}");
        let today = chrono::Utc::now().format("%Y-%m-%d");
        let finding = format!(
            "2 rows re-add keys the {operation} of {today} (version 1) removed (order_id = 20; order_id = 21)"
        );
        let problems = plan["problems"].as_array().unwrap();
        assert!(
            problems.iter().any(|p| p
                .as_str()
                .unwrap()
                .starts_with(&format!("guard allow_deleted_keys_back failed: {finding}"))),
            "{what}: {problems:?}"
        );

        // The reviewer reads it first, in the terminal and in the pull request.
        for format in ["text", "markdown"] {
            let shown = bf_in(dir.path()).args(["show", "--format", format]).output().unwrap();
            let shown = String::from_utf8_lossy(&shown.stdout);
            let written = match format {
                "markdown" => bf::markdown::text(&finding),
                _ => finding.clone(),
            };
            let at = shown.find(&written).unwrap_or_else(|| panic!("{what}, {format}: {shown}"));
            let slices_at = shown.find('┌').or(shown.find("| slice")).unwrap_or(usize::MAX);
            assert!(at < slices_at, "{what}, {format}: shown before the slices: {shown}");
        }
        // A runner that must post no value of the data still refuses it, naming no key.
        let counted = bf_in(dir.path())
            .arg("plan")
            .arg(&plan_file)
            .args(["--samples", "none", "--json"])
            .output()
            .unwrap();
        assert_eq!(counted.status.code(), Some(1), "{what}");
        let said = String::from_utf8_lossy(&counted.stdout);
        assert!(
            said.contains(&format!("2 rows re-add keys the {operation} of"))
                && !said.contains("order_id = 2"),
            "{what}: {said}"
        );
        bf_in(dir.path()).args(["apply", "--auto-approve"]).assert().code(1);
        assert_eq!(snapshot(&table), untouched, "{what}: a refused plan wrote to the table");

        // Saying so lets it through, and the guard still says what it lets through.
        let allowed = PLAN.replace("[source]", "[guards]\nallow_deleted_keys_back = true\n\n[source]");
        let plan_file = write_plan(dir.path(), "allowed.toml", &allowed);
        let output = bf_in(dir.path()).arg("plan").arg(&plan_file).arg("--json").output().unwrap();
        assert!(output.status.success(), "{what}: {}", String::from_utf8_lossy(&output.stderr));
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let guard = plan["guards"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == "allow_deleted_keys_back")
            .unwrap();
        assert_eq!(guard["passed"], true, "{what}");
        assert!(guard["detail"].as_str().unwrap().starts_with(&finding), "{what}: {guard}");
        // A reviewer who reads only the headline learns the keys come back.
        let back = format!("2 added (2 of them keys a {operation} removed)");
        let shown = bf_in(dir.path()).args(["show", "--detail", "summary"]).output().unwrap();
        let shown = String::from_utf8_lossy(&shown.stdout);
        let summary = shown.lines().find(|l| l.starts_with("Plan: ")).unwrap_or_default();
        assert!(summary.contains(&back), "{what}: {shown}");

        // An export made after the deletion brings nothing back: no guard at all.
        let after = EXPORT.lines().filter(|l| !l.contains("C42")).collect::<Vec<_>>().join("\n")
            + "\n5,C05,5000,EUR,2026-03-03\n";
        std::fs::write(dir.path().join("export.csv"), after).unwrap();
        let plan_file = write_plan(dir.path(), "reload.toml", PLAN);
        let output = bf_in(dir.path()).arg("plan").arg(&plan_file).arg("--json").output().unwrap();
        assert!(output.status.success(), "{what}: {}", String::from_utf8_lossy(&output.stderr));
        let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(plan["deleted_keys"], serde_json::json!({}), "{what}");
        assert_eq!(snapshot(&table), untouched, "{what}: planning wrote to the table");
    }
}
