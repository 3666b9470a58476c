//! What a plan rewrites (its blast radius): files and bytes removed and written, partitions
//! touched, rows carried along. The figures are checked against the published commits as the raw
//! log holds them (their `operationMetrics` and their add and remove actions), not bf's reading.

use std::path::Path;

use serde_json::Value;

use crate::common::{bf_in, commit_infos, demo_workspace, without_downstream, write_plan};

/// The add and remove actions of the table's commit `version`, read from its JSON file.
fn actions(table: &Path, version: u64) -> Vec<Value> {
    let text = std::fs::read_to_string(table.join(format!("_delta_log/{version:020}.json"))).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn saved_plan(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(".bf/plan.json")).unwrap()).unwrap()
}

/// Checks each published slice commit against the saved plan's blast radius of that slice, and that
/// its history reads as deltalake's own replaceWhere of the slice would (`partition_by`: the
/// table's partition columns, which deltalake records only for a partitioned table).
fn published_commits_match(table: &Path, plan: &Value, partition_by: Option<&str>) {
    let published: Vec<(u64, Value)> =
        commit_infos(table).into_iter().filter(|(_, i)| i.get("bf.slice").is_some()).collect();
    assert_eq!(published.len(), plan["slices"].as_array().unwrap().len());
    for (version, info) in published {
        let slice = &plan["slices"][info["bf.slice"].as_u64().unwrap() as usize - 1];
        let radius = &slice["blast_radius"];
        let metrics = &info["operationMetrics"];
        assert_eq!(info["operation"], "WRITE", "slice at version {version}: {info}");
        let parameters = &info["operationParameters"];
        assert_eq!(parameters["mode"], "Overwrite", "slice at version {version}: {info}");
        assert!(parameters["predicate"].as_str().is_some_and(|p| p.contains("order_date")), "{info}");
        assert_eq!(parameters.get("partitionBy").and_then(Value::as_str), partition_by, "{info}");
        assert_eq!(radius["files_added"], metrics["num_added_files"], "slice at version {version}: {info}");
        assert_eq!(radius["files_removed"], metrics["num_removed_files"], "slice at version {version}");
        let sized = |kind: &str| -> u64 {
            actions(table, version).iter().filter_map(|a| a.get(kind)?.get("size")?.as_u64()).sum()
        };
        assert_eq!(
            radius["bytes_added"].as_u64().unwrap(),
            sized("add"),
            "bytes written at version {version}"
        );
        assert_eq!(
            radius["bytes_removed"].as_u64().unwrap(),
            sized("remove"),
            "bytes removed at version {version}"
        );
        // Every row of the files it adds, by their statistics, less the slice's own.
        let written: u64 = actions(table, version)
            .iter()
            .filter_map(|a| a.get("add")?.get("stats")?.as_str())
            .map(|stats| serde_json::from_str::<Value>(stats).unwrap()["numRecords"].as_u64().unwrap())
            .sum();
        let after = slice["after"]["rows"].as_u64().unwrap();
        assert_eq!(
            radius["rows_carried"].as_u64().unwrap(),
            written - after,
            "rows carried at version {version}"
        );
    }
}

#[test]
fn half_of_march_on_an_unpartitioned_table_carries_the_rest_of_its_files_along() {
    let dir = demo_workspace();
    let root = dir.path();
    let table = root.join("bf-demo/warehouse/orders_silver");
    let march = without_downstream(&std::fs::read_to_string(root.join("plans/march.toml")).unwrap());
    // The corrected file holds all of March: rows outside the half are left to the query's
    // filter, as a plan for part of a file's days would.
    let half = march
        .replace("end = 2026-03-31", "end = 2026-03-15")
        .replace("[source]\n", "[source]\noutside_window = \"skip\"\n");
    assert!(half.contains("outside_window = \"skip\""));
    let plan = write_plan(&root.join("plans"), "march-half.toml", &half);
    let planned = bf_in(root).arg("plan").arg(&plan).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let text = String::from_utf8(planned.stdout).unwrap();
    let saved = saved_plan(root);
    let total = &saved["blast_radius"];
    // The files holding the first half of March hold its second half too: every row of theirs
    // outside the window is written again. Counted independently from the target's files.
    let removed: Vec<String> = saved["slices"][0]["publication"]["removes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    assert!(!removed.is_empty());
    let files: Vec<String> = removed.iter().map(|p| format!("'{}'", table.join(p).display())).collect();
    let in_removed_files: i64 = crate::common::servers::python(
        &format!(
            "import pyarrow.parquet as pq\nprint(sum(pq.read_metadata(f).num_rows for f in [{}]))",
            files.join(", ")
        ),
        &[],
    )
    .trim()
    .parse()
    .unwrap();
    let in_window = crate::common::duckdb_count(
        &table,
        "SELECT count(*) FROM t WHERE order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-15'",
    );
    let carried = (in_removed_files - in_window) as u64;
    assert!(carried > 0, "the removed files hold rows outside the window");
    assert_eq!(total["rows_carried"].as_u64().unwrap(), carried, "{total}");
    assert!(
        text.contains(&format!("{carried} rows outside the slices' days carried along")),
        "the plan says so: {text}"
    );
    assert!(text.contains("files removed → written"), "{text}");

    let applied = bf_in(root).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    published_commits_match(&table, &saved, None);
}

#[test]
fn a_table_partitioned_by_day_rewrites_only_the_window_s_partitions() {
    let dir = demo_workspace();
    let root = dir.path();
    let source = root.join("bf-demo/warehouse/orders_silver");
    let table = root.join("bf-demo/warehouse/orders_by_day");
    // The shop's orders, partitioned by day: written by the Python deltalake package, not bf.
    crate::common::servers::python(
        &format!(
            "from deltalake import DeltaTable, write_deltalake\n\
             write_deltalake('{}', DeltaTable('{}').to_pyarrow_table(), partition_by=['order_date'])",
            table.display(),
            source.display()
        ),
        &[],
    );
    let march = without_downstream(&std::fs::read_to_string(root.join("plans/march.toml")).unwrap());
    let by_day = march.replace("/warehouse/orders_silver\"", "/warehouse/orders_by_day\"");
    assert_ne!(by_day, march);
    let plan = write_plan(&root.join("plans"), "march-by-day.toml", &by_day);
    let planned = bf_in(root).arg("plan").arg(&plan).output().unwrap();
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let saved = saved_plan(root);
    let total = &saved["blast_radius"];
    assert_eq!(total["rows_carried"], 0, "a day's files hold that day only: {total}");
    let days = crate::common::duckdb_count(
        &table,
        "SELECT count(DISTINCT order_date) FROM t WHERE order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'",
    );
    let partitions = total["partitions"].as_array().unwrap();
    assert_eq!(partitions.len() as i64, days, "{partitions:?}");
    assert!(
        partitions.iter().all(|p| p.as_str().unwrap().starts_with("order_date=2026-03-")),
        "{partitions:?}"
    );

    let applied = bf_in(root).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    published_commits_match(&table, &saved, Some(r#"["order_date"]"#));
}

#[test]
fn a_plan_writing_more_than_max_bytes_rewritten_cannot_be_applied() {
    let dir = demo_workspace();
    let root = dir.path();
    let march = without_downstream(&std::fs::read_to_string(root.join("plans/march.toml")).unwrap());
    let capped =
        |limit: &str| march.replace("\n[guards]\n", &format!("\n[guards]\nmax_bytes_rewritten = {limit}\n"));
    let plan = write_plan(&root.join("plans"), "march-capped.toml", &capped("\"1 KiB\""));
    let planned = bf_in(root).arg("plan").arg(&plan).output().unwrap();
    let text = String::from_utf8_lossy(&planned.stdout);
    assert!(!planned.status.success(), "{text}");
    assert!(text.contains("max_bytes_rewritten") && text.contains("(limit 1.0 KiB)"), "{text}");
    let refused = bf_in(root).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("guard max_bytes_rewritten failed"));

    let plan = write_plan(&root.join("plans"), "march-capped.toml", &capped("\"50 GiB\""));
    bf_in(root).arg("plan").arg(&plan).assert().success();
    let plan = write_plan(&root.join("plans"), "march-capped.toml", &capped("\"50 parsecs\""));
    let invalid = bf_in(root).arg("validate").arg(&plan).output().unwrap();
    let stderr = String::from_utf8_lossy(&invalid.stderr);
    assert!(!invalid.status.success());
    assert!(
        stderr.contains("\"50 parsecs\" is not a size") && stderr.contains("march-capped.toml:"),
        "{stderr}"
    );
}
