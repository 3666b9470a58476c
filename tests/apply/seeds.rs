//! The seed scenarios applied: September one run per day then the 15th corrected, the March
//! reload recorded and commented, a merge plan, a backward plan.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn september_one_run_per_day_then_the_15th_corrected() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    let output = apply(root);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().filter(|l| l.starts_with("ok 2026-09-")).count(), 30, "{stderr}");
    assert!(stderr.contains("ok 2026-09-15: 3 rows for the source's 3, 0 missing"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("30 slices committed (130 rows)"));
    // "ran 30 runs, 0 failed; orders_daily has 30 days, 130 orders"
    assert_eq!(count(&daily, "SELECT count(DISTINCT order_date) FROM t").await, 30);
    assert_eq!(count(&daily, "SELECT count(*) FROM t").await, 130);
    assert_eq!(count(&daily, "SELECT min(order_id) FROM t").await, 2001);
    assert_eq!(count(&daily, "SELECT max(order_id) FROM t").await, 2130);
    assert_eq!(slices_committed(&daily), (1..=30).collect::<Vec<u64>>(), "one commit per slice, in order");
    let infos = commit_infos(&daily);
    assert!(infos.iter().filter(|(_, i)| i.get("bf.slice").is_some()).all(|(_, i)| i["bf.pre_version"] == 0));
    // A long run of slices keeps the log short: a checkpoint after version 19, which a reader that
    // is not bf's reads the table through.
    let log = daily.join("_delta_log");
    let last: Value =
        serde_json::from_str(&std::fs::read_to_string(log.join("_last_checkpoint")).unwrap()).unwrap();
    assert_eq!(last["version"], 19, "{last}");
    assert!(log.join("00000000000000000019.checkpoint.parquet").is_file());
    assert_eq!(duckdb_count(&daily, "SELECT count(*) FROM t"), 130);

    // The correction: the file of the 15th gets the late order; one run replaces that day only.
    let files_before = files_by_day(&daily).await;
    let landing = root.join("bf-demo/landing/orders/2026-09-15.csv");
    let mut text = std::fs::read_to_string(&landing).unwrap();
    text.push_str("2131,C02,19.99,2026-09-15T20:30:00\n");
    std::fs::write(&landing, text).unwrap();
    plan(root, "plans/correction-2026-09-15.toml");
    let output = apply(root);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("ok 2026-09-15: 4 rows for the source's 4, 0 missing")
    );
    assert_eq!(count(&daily, "SELECT count(*) FROM t").await, 131);
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_date = DATE '2026-09-15'").await, 4);
    let files_after = files_by_day(&daily).await;
    for (day, files) in &files_before {
        if day != "2026-09-15" {
            assert_eq!(files_after.get(day), Some(files), "{day} was touched");
        }
    }
    assert_ne!(files_after.get("2026-09-15"), files_before.get("2026-09-15"));
    // The history names the day it replaced and the rows it wrote.
    let log = std::fs::read_to_string(daily.join("_delta_log/00000000000000000032.json")).unwrap();
    let info: Value =
        log.lines().find_map(|l| serde_json::from_str::<Value>(l).ok()?.get("commitInfo").cloned()).unwrap();
    assert_eq!(info["operation"], "WRITE");
    assert_eq!(info["operationParameters"]["predicate"], "order_date = '2026-09-15'::date");
    assert_eq!(info["operationMetrics"]["num_added_rows"], 4);
    assert_eq!(info["bf.pre_version"], 31);
    let user: Value = serde_json::from_str(info["userMetadata"].as_str().unwrap()).unwrap();
    assert_eq!(user["bf.slice_first"], "2026-09-15");
}

#[tokio::test(flavor = "multi_thread")]
async fn march_reload_applied_recorded_and_commented() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let outside = "order_date NOT BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    let outside_rows = rows_where(&silver, outside).await;
    let outside_read_by_duckdb = duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {outside}"));
    plan(root, "plans/march.toml");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(
        saved["warnings"],
        serde_json::json!([]),
        "the default retention covers the default 7 days of undo"
    );
    let output = apply(root);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let table = open_table(&silver).await;
    assert_eq!(table.version(), Some(7), "one slice commit and the comment commit after version 5");
    let description = table.snapshot().unwrap().metadata().description().map(str::to_owned).unwrap();
    assert!(description.starts_with("Reloading orders_silver for March 2026"), "{description}");
    assert!(
        description.contains(saved["id"].as_str().unwrap()) && description.contains("2026-03-01..2026-03-31")
    );
    let infos = commit_infos(&silver);
    let (version, slice) = infos.iter().find(|(_, i)| i.get("bf.slice").is_some()).unwrap();
    assert_eq!(*version, 6);
    assert_eq!(slice["bf.pre_version"], 5);
    assert_eq!(slice["bf.plan_sha256"], saved["plan_file"]["sha256"]);
    assert_eq!(slice["bf.reason"], saved["reason"]);
    // The table now holds what the rehearsal showed, and nothing outside March moved.
    assert_eq!(
        count(
            &silver,
            "SELECT count(*) FROM t WHERE order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'"
        )
        .await,
        409
    );
    assert_eq!(count(&silver, "SELECT count(*) FROM t WHERE currency = 'EUR' AND order_date >= DATE '2026-03-01' AND order_date <= DATE '2026-03-31'").await as u64,
        saved["slices"][0]["changes"]["changed"].as_u64().unwrap());
    assert_eq!(rows_where(&silver, outside).await, outside_rows);
    // A second reader, DuckDB's Delta extension (delta-kernel-rs, not the deltalake crate), reads
    // the same: March's 409 rows, the corrected EUR orders, every row outside March as before.
    let march = "order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    assert_eq!(duckdb_count(&silver, &format!("SELECT count(*) FROM t WHERE {march}")), 409);
    assert_eq!(
        duckdb_count(&silver, &format!("SELECT count(*) FROM t WHERE {march} AND currency = 'EUR'")) as u64,
        saved["slices"][0]["changes"]["changed"].as_u64().unwrap()
    );
    assert_eq!(duckdb_rows(&silver, &format!("SELECT * FROM t WHERE {outside}")), outside_read_by_duckdb);
    assert_eq!(
        duckdb_rows(&silver, "SELECT * FROM t"),
        rows_where(&silver, "true").await,
        "both readers agree"
    );

    // The change log got one row, and a second apply (nothing left to do) does not add another.
    let log = root.join("bf-demo/warehouse/backfill_log");
    let row = rows_where(&log, "true").await;
    assert_eq!(row.len(), 1);
    let fields: Vec<&str> = row[0].split('|').collect();
    assert_eq!(
        &fields[..10],
        [
            saved["id"].as_str().unwrap(),
            &bf::delta::store::display_url(
                &url::Url::parse(saved["target"]["uri"].as_str().unwrap()).unwrap()
            ),
            "2026-03-01",
            "2026-03-31",
            saved["reason"].as_str().unwrap(),
            "5",
            "7",
            "1",
            "412",
            "409"
        ]
    );
    assert!(apply(root).status.success());
    assert_eq!(rows_where(&log, "true").await.len(), 1);
    assert_eq!(open_table(&silver).await.version(), Some(7), "nothing left to apply, nothing committed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_plan_applies_resumes_verifies_and_rolls_back() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let merge = |text: String| text.replace("parallel = 1", "parallel = 1\n[write]\nmode = \"merge\"");
    let plan_file = week_plan_with(root, "merge.toml", merge);
    plan(root, &plan_file);
    let crashed = bf_in(root)
        .args(["apply", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "after-commit:3")
        .output()
        .unwrap();
    assert!(!crashed.status.success());
    assert_eq!(slices_committed(&daily), [1, 2, 3]);
    let output = apply(root);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ok 2026-09-04: 4 rows for the source's 4, 0 missing"), "verified: {stderr}");
    assert_eq!(slices_committed(&daily), (1..=6).collect::<Vec<u64>>());
    // The merged table holds exactly the six days' orders, read independently from the till files.
    let till = |root: &Path| {
        let mut orders: Vec<(i64, String, f64, String)> = Vec::new();
        for day in 1..=6 {
            let path = root.join(format!("bf-demo/landing/orders/2026-09-{day:02}.csv"));
            for line in std::fs::read_to_string(path).unwrap().lines().skip(1) {
                let f: Vec<&str> = line.split(',').collect();
                orders.push((
                    f[0].parse().unwrap(),
                    f[1].to_owned(),
                    f[2].parse().unwrap(),
                    f[3][..10].to_owned(),
                ));
            }
        }
        orders.sort_by_key(|o| o.0);
        orders
    };
    let table_orders = |rows: Vec<String>| {
        let mut orders: Vec<(i64, String, f64, String)> = rows
            .iter()
            .map(|r| {
                let f: Vec<&str> = r.split('|').collect();
                (f[0].parse().unwrap(), f[1].to_owned(), f[2].parse().unwrap(), f[3].to_owned())
            })
            .collect();
        orders.sort_by_key(|o| o.0);
        orders
    };
    let expected = contents(&daily).await;
    assert_eq!(table_orders(expected.clone()), till(root));

    assert_eq!(duckdb_rows(&daily, "SELECT * FROM t"), expected, "read by DuckDB");

    // A second merge corrects one order's amount on 2 September, and its source lacks another
    // order of that day: a merge keeps the rows the source lacks (only `delete_missing` drops them).
    let day = root.join("bf-demo/landing/orders/2026-09-02.csv");
    let original = std::fs::read_to_string(&day).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let (corrected_line, lacking_line) = (lines[1], lines[2]);
    let fields: Vec<&str> = corrected_line.split(',').collect();
    let corrected = original
        .replace(corrected_line, &format!("{},{},999.99,{}", fields[0], fields[1], fields[3]))
        .replace(&format!("{lacking_line}\n"), "");
    std::fs::write(&day, corrected).unwrap();
    plan(root, &plan_file);
    assert!(apply(root).status.success());
    let id = fields[0];
    assert_eq!(rows_where(&daily, &format!("order_id = {id}")).await.len(), 1);
    assert!(rows_where(&daily, &format!("order_id = {id}")).await[0].contains("999.99"));
    let lacking = lacking_line.split(',').next().unwrap();
    let kept = rows_where(&daily, &format!("order_id = {lacking}")).await;
    assert_eq!(kept, rows_where_in(&expected, lacking), "the order the source lacks is kept as it was");
    assert_eq!(contents(&daily).await.len(), expected.len(), "a merge adds and updates, it removes nothing");
    assert_eq!(duckdb_rows(&daily, "SELECT * FROM t"), contents(&daily).await, "read by DuckDB");

    // Window-only rollback of the second merge: the first merge's rows again, row by row.
    let rolled =
        bf_in(root).args(["rollback", "--cascade", "--auto-approve", "--window-only"]).output().unwrap();
    assert!(rolled.status.success(), "{}", String::from_utf8_lossy(&rolled.stderr));
    assert_eq!(duckdb_rows(&daily, "SELECT * FROM t"), expected, "read by DuckDB");
    assert_eq!(contents(&daily).await, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backward_plan_commits_last_day_first_and_resumes() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let plan_file =
        week_plan_with(root, "backward.toml", |t| t.replace("order = \"forward\"", "order = \"backward\""));
    plan(root, &plan_file);
    let crashed = bf_in(root)
        .args(["apply", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "after-commit:4")
        .output()
        .unwrap();
    assert!(!crashed.status.success());
    assert_eq!(slices_committed(&daily), [6, 5, 4], "the last day first, stopped after slice 4");
    assert!(apply(root).status.success());
    assert_eq!(slices_committed(&daily), [6, 5, 4, 3, 2, 1]);
    let forward = demo_workspace();
    let reference = week_plan_with(forward.path(), "forward.toml", |t| t);
    plan(forward.path(), &reference);
    assert!(apply(forward.path()).status.success());
    assert_eq!(
        contents(&daily).await,
        contents(&forward.path().join("bf-demo/warehouse/orders_daily")).await
    );
}
