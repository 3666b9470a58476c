//! `bf apply`: the scenarios' backfills on the demo shop, exactly once, resumable after a crash, refused
//! when the plan is stale — and what it did not touch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;

use predicates::prelude::*;
use serde_json::Value;

use crate::common::{
    OrderRow, bf_in, commit_infos, commits_with, count, demo_workspace, duckdb_count, duckdb_rows,
    open_table, slices_committed, snapshot, wait_for, write_plan,
};

fn apply(root: &Path) -> Output {
    bf_in(root).args(["apply", "--auto-approve"]).output().unwrap()
}

fn plan(root: &Path, plan: &str) {
    bf_in(root).args(["plan", plan, "-q"]).assert().success();
}

async fn rows_where(table: &Path, predicate: &str) -> Vec<String> {
    crate::common::rows_at(table, None, predicate).await
}

async fn contents(table: &Path) -> Vec<String> {
    rows_where(table, "true").await
}

/// orders_daily's rows once September is applied without interruption, in a shop of its own: what
/// every crashed, killed or tampered-with run must end as.
async fn september_uninterrupted() -> Vec<String> {
    let reference = demo_workspace();
    plan(reference.path(), "plans/september.toml");
    assert!(apply(reference.path()).status.success());
    contents(&reference.path().join("bf-demo/warehouse/orders_daily")).await
}

/// The data files the table's current version reads for each day (from the log).
async fn files_by_day(table: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let table = open_table(table).await;
    let mut days: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    use futures::TryStreamExt;
    let files: Vec<_> = table.get_active_add_actions_by_predicate(None).try_collect().await.unwrap();
    for file in files {
        // A partition value, or else the file's statistics (these tables hold one day per file).
        let day = match file.partition_values_map().get("order_date") {
            Some(Some(day)) => day.clone(),
            _ => {
                let stats: Value = serde_json::from_str(&file.stats().unwrap()).unwrap();
                stats["minValues"]["order_date"].as_str().unwrap().to_owned()
            }
        };
        days.entry(day).or_default().insert(file.path().into_owned());
    }
    days
}

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

#[test]
fn a_retention_shorter_than_the_undo_is_warned_about() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    write_plan(
        &root.join("plans"),
        "long_undo.toml",
        &march.replace("[record]", "[record]\nkeep_undo_for = \"60 days\""),
    );
    bf_in(root)
        .args(["plan", "plans/long_undo.toml"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Warning: delta.logRetentionDuration is 30.0 days, less than [record] keep_undo_for = 60 days",
        ))
        .stdout(predicate::str::contains("Warning: delta.deletedFileRetentionDuration is 7.0 days"));
    bf_in(root)
        .args(["apply", "--auto-approve"])
        .assert()
        .success()
        .stderr(predicate::str::contains("Warning: delta.logRetentionDuration"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_at_any_point_resumes_to_the_same_table() {
    let expected = september_uninterrupted().await;

    // Each point, with the slices the table holds when the process dies there.
    for (point, at_crash) in [
        ("before-slice:1", 0),
        ("after-commit:1", 1),
        ("before-slice:7", 6),
        ("after-commit:16", 16),
        ("after-commit:30", 30),
        ("before-comment", 30),
    ] {
        let workspace = demo_workspace();
        let root = workspace.path();
        let daily = root.join("bf-demo/warehouse/orders_daily");
        plan(root, "plans/september.toml");
        let crashed =
            bf_in(root).args(["apply", "--auto-approve"]).env(bf::fault::FAULT_ENV, point).output().unwrap();
        assert!(!crashed.status.success(), "{point}: the process was meant to die");
        assert_eq!(slices_committed(&daily), (1..=at_crash).collect::<Vec<u64>>(), "{point}: where it died");
        assert_eq!(commits_with(&daily, "comment"), 0, "{point}: no comment before the last slice");
        let resumed = apply(root);
        assert!(resumed.status.success(), "{point}: {}", String::from_utf8_lossy(&resumed.stderr));
        assert_eq!(contents(&daily).await, expected, "{point}: the resumed table differs");
        assert_eq!(duckdb_rows(&daily, "SELECT * FROM t"), expected, "{point}: read by DuckDB");
        assert_eq!(
            slices_committed(&daily),
            (1..=30).collect::<Vec<u64>>(),
            "{point}: every slice exactly once"
        );
        assert_eq!(commits_with(&daily, "comment"), 1, "{point}: one comment");
        let infos = commit_infos(&daily);
        let backfills: BTreeSet<&str> =
            infos.iter().filter_map(|(_, i)| i.get("bf.backfill_id")?.as_str()).collect();
        assert_eq!(backfills.len(), 1, "{point}: the resume continued the same backfill");
    }
}

/// A resume takes a slice as committed only when the commit that names it carries the slice's own
/// Delta transaction: a commit whose commitInfo merely claims slice 4 (copied by a tool that copies
/// commit properties, or by hand) does not make bf skip slice 4.
#[tokio::test(flavor = "multi_thread")]
async fn a_resume_skips_only_the_slices_whose_commits_carry_their_transactions() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    let crashed = bf_in(root)
        .args(["apply", "--auto-approve"])
        .env(bf::fault::FAULT_ENV, "after-commit:3")
        .output()
        .unwrap();
    assert!(!crashed.status.success());
    let infos = commit_infos(&daily);
    let (third, info) = infos.iter().find(|(_, i)| i["bf.slice"] == 3).unwrap().clone();
    let raw = std::fs::read_to_string(daily.join(format!("_delta_log/{third:020}.json"))).unwrap();
    assert!(raw.contains("\"txn\""), "bf's slice commit carries its transaction:\n{raw}");
    let mut claim = info.clone();
    claim["bf.slice"] = 4.into();
    claim["bf.slice_first"] = "2026-09-04".into();
    claim["bf.slice_last"] = "2026-09-04".into();
    let next = infos.last().unwrap().0 + 1;
    std::fs::write(
        daily.join(format!("_delta_log/{next:020}.json")),
        serde_json::json!({ "commitInfo": claim }).to_string() + "\n",
    )
    .unwrap();
    let resumed = apply(root);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.starts_with("skip ")).collect();
    assert_eq!(skipped.len(), 3, "slices 1 to 3 are skipped, the claimed 4th is written:\n{stderr}");
    let written: Vec<u64> = commit_infos(&daily)
        .iter()
        .filter(|(v, i)| *v > next && i.get("bf.slice").is_some())
        .filter_map(|(_, i)| i["bf.slice"].as_u64())
        .collect();
    assert_eq!(written, (4..=30).collect::<Vec<u64>>());
    let expected = september_uninterrupted().await;
    assert_eq!(duckdb_rows(&daily, "SELECT * FROM t"), expected, "read by DuckDB");
}

/// Starts `bf apply` of the saved plan in `root` as a child process (its output piped).
fn spawn_apply(root: &Path, envs: &[(&str, &std::ffi::OsStr)]) -> std::process::Child {
    spawn_apply_saying(root, &["-q"], envs)
}

/// [`spawn_apply`] with other arguments (`-q` left out, it prints a line per slice).
fn spawn_apply_saying(root: &Path, args: &[&str], envs: &[(&str, &std::ffi::OsStr)]) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("bf"))
        .args(["apply", "--auto-approve"])
        .args(args)
        .current_dir(root)
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_9_mid_run_resumes_to_the_same_table() {
    let expected = september_uninterrupted().await;
    // Killed once the log shows this many slices: early, middle, late in the slice loop. The kill
    // follows the table, not a clock, so it lands mid-apply on a fast machine and a slow one.
    for after in [1usize, 12, 24] {
        let workspace = demo_workspace();
        let root = workspace.path();
        let daily = root.join("bf-demo/warehouse/orders_daily");
        plan(root, "plans/september.toml");
        let mut child = spawn_apply(root, &[]);
        wait_for(&format!("{after} slices"), || slices_committed(&daily).len() >= after);
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        let at_kill = slices_committed(&daily).len();
        assert!(!status.success(), "after {after} slices: the apply finished before the kill");
        assert!(
            (after..30).contains(&at_kill),
            "the kill after {after} slices landed at {at_kill} of 30: not mid-apply"
        );
        let resumed = apply(root);
        assert!(resumed.status.success(), "after {after}: {}", String::from_utf8_lossy(&resumed.stderr));
        let stderr = String::from_utf8_lossy(&resumed.stderr);
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("skip ")).count(),
            at_kill,
            "the resume skips what the killed run committed:\n{stderr}"
        );
        assert_eq!(contents(&daily).await, expected, "after {after}");
        assert_eq!(slices_committed(&daily), (1..=30).collect::<Vec<u64>>(), "after {after}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_plan_is_refused_and_nothing_is_written() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let refused = |fragments: &[&str]| {
        let untouched = snapshot(&silver);
        let output = apply(root);
        assert_eq!(output.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&output.stderr);
        for fragment in fragments {
            assert!(stderr.contains(fragment), "missing {fragment:?} in:\n{stderr}");
        }
        assert_eq!(snapshot(&silver), untouched, "a refused apply wrote to the table");
    };

    // The plan file edited since `bf plan`: the diff is shown.
    plan(root, "plans/march.toml");
    let path = root.join("plans/march.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("revenue = 10", "revenue = 50")).unwrap();
    refused(&[
        "the plan file",
        "changed since `bf plan`",
        "-max_change_pct = { rows = 5, revenue = 10 }",
        "+max_change_pct = { rows = 5, revenue = 50 }",
        "Run `bf plan",
    ]);
    std::fs::write(&path, &text).unwrap();

    // An input changed.
    plan(root, "plans/march.toml");
    let csv = root.join("bf-demo/landing/orders_march.csv");
    let original = std::fs::read_to_string(&csv).unwrap();
    std::fs::write(&csv, original.replacen("EUR", "GBP", 1)).unwrap();
    refused(&["input `orders` changed since `bf plan`"]);
    std::fs::write(&csv, &original).unwrap();

    // Another writer added an order to March since the plan: the slice is not written, the commit
    // is named with the day it touches.
    plan(root, "plans/march.toml");
    let rows: [&[OrderRow]; 1] = [&[(9001, "C01", 1.0, "EUR", "2026-03-05")]];
    append_silver(&silver, rows[0]).await;
    refused(&[
        "slice 1 (2026-03-01..2026-03-31) was not written: since the plan, other commits touch its rows",
        "version 6: WRITE",
        "(rows dated 2026-03-05)",
        "No slice of this backfill is committed. Run `bf plan",
    ]);

    // A failed check.
    let strict = write_plan(
        &root.join("plans"),
        "strict.toml",
        &text.replace("WHERE amount <= 0", "WHERE amount > 0"),
    );
    bf_in(root).arg("plan").arg(&strict).arg("-q").assert().code(1);
    refused(&["this plan cannot be applied", "amounts are positive"]);
}

pub(crate) async fn append_silver(silver: &Path, rows: &[OrderRow]) {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    };
    use bf::deltalake::arrow::datatypes::{DataType, Date32Type, Field, Schema};
    let day = |d: &str| Date32Type::from_naive_date(d.parse().unwrap());
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
        Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| day(r.4)))),
    ];
    let schema = Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("customer", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("currency", DataType::Utf8, true),
        Field::new("amount_eur", DataType::Float64, true),
        Field::new("order_date", DataType::Date32, true),
    ]);
    let batch = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
    open_table(silver).await.write(vec![batch]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn four_slices_at_once_on_a_table_partitioned_by_day() {
    let dir = tempfile::tempdir().unwrap();
    let target = crate::common::four_days_at_once(dir.path()).await;
    bf_in(dir.path()).args(["plan", "days.toml", "-q"]).assert().success();
    let untouched_day = files_by_day(&target).await.get("2026-09-05").cloned();
    let output = bf_in(dir.path()).args(["apply", "--auto-approve"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut slices = slices_committed(&target);
    slices.sort();
    assert_eq!(slices, [1, 2, 3, 4], "all four slices committed");
    assert_eq!(count(&target, "SELECT count(*) FROM t").await, 5);
    assert_eq!(count(&target, "SELECT CAST(SUM(amount) AS BIGINT) FROM t").await, 11 + 30 + 40 + 50 + 20);
    assert_eq!(files_by_day(&target).await.get("2026-09-05").cloned(), untouched_day, "outside the window");
}

#[test]
fn apply_asks_and_refuses_without_a_terminal() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    plan(root, "plans/march.toml");
    let untouched = snapshot(&silver);
    bf_in(root).arg("apply").assert().code(1).stderr(predicate::str::contains("pass --auto-approve"));
    assert_eq!(snapshot(&silver), untouched);
    // A plan file planned and applied in one go.
    bf_in(root)
        .args(["apply", "plans/correction-2026-09-15.toml", "--auto-approve"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("This plan cannot be applied"));
    bf_in(root)
        .args(["apply", "plans/september.toml", "--auto-approve", "-q"])
        .assert()
        .success()
        .stdout(predicate::str::contains("30 slices committed"));
}

async fn append_daily(daily: &Path, id: i64, day: &str) {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{
        ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
    };
    use bf::deltalake::arrow::datatypes::{DataType, Date32Type, Field, Schema};
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![id])),
        Arc::new(StringArray::from(vec!["C99"])),
        Arc::new(Float64Array::from(vec![1.0])),
        Arc::new(Date32Array::from(vec![Date32Type::from_naive_date(day.parse().unwrap())])),
    ];
    let schema = Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("customer", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new("order_date", DataType::Date32, true),
    ]);
    let batch = RecordBatch::try_new(Arc::new(schema), columns).unwrap();
    open_table(daily).await.write(vec![batch]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn another_writer_outside_the_window_lands_beside_the_backfill() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    let output =
        crate::common::apply_paused(root, &[], 5, "before", append_daily(&daily, 9001, "2026-10-01")).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        count(&daily, "SELECT count(*) FROM t").await,
        131,
        "130 backfilled and the other writer's order"
    );
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_id = 9001").await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_writer_inside_the_window_stops_the_apply_cleanly() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    let output =
        crate::common::apply_paused(root, &[], 5, "before", append_daily(&daily, 9002, "2026-09-05")).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("slice 5 (2026-09-05) was not written: since the plan, other commits touch"),
        "{stderr}"
    );
    assert!(stderr.contains("version 5: WRITE") && stderr.contains("(rows dated 2026-09-05)"), "{stderr}");
    assert!(stderr.contains("The 4 slices of this backfill already committed stay recorded"), "{stderr}");
    assert!(!stderr.contains("run `bf apply` again to resume"), "no resume can write it: {stderr}");
    // Slices 1-4 stay, the other writer's row stays, nothing of slice 5 was written.
    assert_eq!(slices_committed(&daily), [1, 2, 3, 4]);
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_date = DATE '2026-09-05'").await, 1);
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_id = 9002").await, 1);
    // Applying the old plan again is refused as stale: someone else wrote since it was made.
    bf_in(root)
        .args(["apply", "--auto-approve"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("version 5: WRITE"));
}

#[tokio::test(flavor = "multi_thread")]
async fn rerun_all_applies_every_slice_again_under_a_new_backfill_id() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    assert!(apply(root).status.success());
    let first = rows_where(&daily, "true").await;
    let output = bf_in(root).args(["apply", "--auto-approve", "--rerun", "all", "--json"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(report["backfill_id"], format!("{}-r2", saved["id"].as_str().unwrap()));
    // The version to go back to is the rerun's own: the first run's table, not the plan's version.
    assert_eq!(report["pre_version"], 31, "the first run's last commit");
    assert_eq!(report["post_version"], 62, "31 commits of the first run, 31 of the rerun");
    let slices = report["slices"].as_array().unwrap();
    assert_eq!(slices.len(), 30);
    assert!(slices.iter().all(|s| s["status"] == "committed"));
    assert_eq!(rows_where(&daily, "true").await, first, "replacing a day with the same rows changes nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_applies_at_once_commit_each_slice_once() {
    let reference = demo_workspace();
    plan(reference.path(), "plans/september.toml");
    assert!(apply(reference.path()).status.success());
    let expected = rows_where(&reference.path().join("bf-demo/warehouse/orders_daily"), "true").await;

    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    plan(root, "plans/september.toml");
    // Both paused between slice 1's check and its commit, each on its own pause file, then released
    // together: they race for the same commit.
    let pauses = [root.join("paused-a"), root.join("paused-b")];
    let children: Vec<_> = pauses
        .iter()
        .map(|pause| {
            spawn_apply_saying(
                root,
                &[],
                &[
                    (bf::fault::PAUSE_FILE_ENV, pause.as_os_str()),
                    (bf::fault::PAUSE_SLICE_ENV, std::ffi::OsStr::new("1")),
                    (bf::fault::PAUSE_POINT_ENV, std::ffi::OsStr::new("after-check")),
                ],
            )
        })
        .collect();
    wait_for("both applies to reach slice 1", || pauses.iter().all(|p| p.exists()));
    assert!(slices_committed(&daily).is_empty(), "neither wrote before the release");
    let outputs = crate::common::release_together("both applies to reach slice 1", &pauses, children);
    // Both built slice 1's commit on the same version: one lands, the other finds it committed and
    // skips it; later slices may race the same way, each ending committed once.
    let stderrs: Vec<String> =
        outputs.iter().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).collect();
    for (out, stderr) in outputs.iter().zip(&stderrs) {
        assert!(out.status.success() || stderr.contains("conflicts with another writer"), "{stderr}");
    }
    let skipped = stderrs.iter().filter(|s| s.contains("skip 2026-09-01: already committed")).count();
    assert_eq!(skipped, 1, "exactly one lost slice 1 and found it committed: {stderrs:?}");
    let mut committed = slices_committed(&daily);
    committed.sort();
    assert_eq!(committed, (1..=30).collect::<Vec<u64>>(), "every slice committed exactly once");
    assert_eq!(commits_with(&daily, "comment"), 1, "one comment");
    assert_eq!(rows_where(&daily, "true").await, expected);
}

#[test]
fn a_reason_with_quotes_newlines_and_unicode_survives_the_ledger() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let reason = "He said \"it's wrong\"; 'March' \\ USD → EUR.\nSecond line: ✓ ünïcode, tab\there.";
    let start = march.find("reason = ").unwrap();
    let end = start + march[start..].find('\n').unwrap();
    let toml_reason = format!("reason = {}", toml_basic_string(reason));
    write_plan(
        &root.join("plans"),
        "quoted.toml",
        &format!("{}{}{}", &march[..start], toml_reason, &march[end..]),
    );
    bf_in(root).args(["plan", "plans/quoted.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    let output = bf_in(root)
        .args(["history", "bf-demo/warehouse/orders_silver", "--json", "--limit", "2"])
        .output()
        .unwrap();
    let history: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(history[1]["bf"]["reason"], reason);
    let info = std::fs::read_to_string(
        root.join("bf-demo/warehouse/orders_silver/_delta_log/00000000000000000006.json"),
    )
    .unwrap();
    let commit: Value =
        info.lines().find_map(|l| serde_json::from_str::<Value>(l).ok()?.get("commitInfo").cloned()).unwrap();
    let user: Value = serde_json::from_str(commit["userMetadata"].as_str().unwrap()).unwrap();
    assert_eq!(user["bf.reason"], reason);
}

/// `text` as a TOML basic string.
fn toml_basic_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

#[test]
fn credentials_in_the_environment_never_reach_output_plans_or_commits() {
    let secret = "FAKE-SECRET-7f3a9c1e";
    let workspace = demo_workspace();
    let root = workspace.path();
    let with_secrets = |args: &[&str]| {
        bf_in(root)
            .args(args)
            .env("AWS_SECRET_ACCESS_KEY", secret)
            .env("AWS_ACCESS_KEY_ID", secret)
            .env("AZURE_STORAGE_ACCOUNT_KEY", secret)
            .env("GOOGLE_SERVICE_ACCOUNT_KEY", secret)
            .output()
            .unwrap()
    };
    let mut printed = Vec::new();
    for args in [
        &["plan", "plans/march.toml", "--json"][..],
        &["show", "--format", "markdown"],
        &["apply", "--auto-approve", "--json"],
        &["history", "bf-demo/warehouse/orders_silver", "--json"],
        &["status"],
        &["rollback", "--cascade", "--auto-approve", "--json"],
    ] {
        let output = with_secrets(args);
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        printed.extend(output.stdout);
        printed.extend(output.stderr);
    }
    assert!(!String::from_utf8_lossy(&printed).contains(secret), "a credential was printed");
    for (path, _) in snapshot(root) {
        let bytes = std::fs::read(root.join(&path)).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(secret),
            "a credential was written to {}",
            path.display()
        );
    }
}

/// The rows of `rows` (as [`contents`] gives them) whose first field, the order id, is `id`.
fn rows_where_in(rows: &[String], id: &str) -> Vec<String> {
    let found: Vec<String> = rows.iter().filter(|r| r.split('|').next() == Some(id)).cloned().collect();
    assert_eq!(found.len(), 1, "order {id}: {found:?}");
    found
}

/// The first six days of September, with `edit` applied to the September plan's text.
fn week_plan_with(root: &Path, name: &str, edit: impl Fn(String) -> String) -> String {
    crate::common::september_plan(root, name, 6, edit)
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

#[tokio::test(flavor = "multi_thread")]
async fn a_change_log_table_bf_may_not_write_is_refused_before_any_slice() {
    use bf::deltalake::kernel::{DataType, StructField};
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let log = root.join("bf-demo/warehouse/change_log");
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let text = march.replace("warehouse/backfill_log", "warehouse/change_log");
    write_plan(&root.join("plans"), "logged.toml", &text);
    let foreign_log = || async {
        let columns = vec![StructField::new("backfill_id", DataType::STRING, true)];
        crate::common::new_table(&log, columns, &[]).await;
        let identity = serde_json::json!({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["identityColumns"]});
        crate::common::alter_table(&log, Some(identity), &[]);
    };
    // At plan time: the log table exists with a writer feature bf does not honour.
    foreign_log().await;
    let untouched = snapshot(&silver);
    let output = bf_in(root).args(["plan", "plans/logged.toml", "-q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("change_log") && stderr.contains("`identityColumns`"), "{stderr}");
    // At apply time: planned while the log table did not exist, created before the apply.
    std::fs::remove_dir_all(&log).unwrap();
    plan(root, "plans/logged.toml");
    foreign_log().await;
    let logged = snapshot(&log);
    let output = apply(root);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`identityColumns`"), "{stderr}");
    assert_eq!(snapshot(&silver), untouched, "refused before the first slice");
    assert_eq!(snapshot(&log), logged);
}

/// `delta.appendOnly = true` promises readers that rows are only ever added: bf refuses to plan a
/// backfill of such a table (naming the property, before any clone), and appends its one row to a
/// change-log table that makes the promise, removing nothing from it.
#[tokio::test(flavor = "multi_thread")]
async fn an_append_only_table_is_refused_for_rewrites_and_appended_to_as_a_log() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let log = root.join("bf-demo/warehouse/backfill_log");
    plan(root, "plans/march.toml");
    assert!(apply(root).status.success());
    crate::common::alter_table(&log, None, &[("delta.appendOnly", "true")]);
    let promised = std::fs::read_dir(log.join("_delta_log")).unwrap().count();
    assert!(bf_in(root).args(["rollback", "--cascade", "--auto-approve"]).output().unwrap().status.success());
    plan(root, "plans/march.toml");
    assert!(apply(root).status.success());
    let appended = std::fs::read_to_string(log.join(format!("_delta_log/{promised:020}.json"))).unwrap();
    let actions: Vec<Value> = appended.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(actions.iter().filter(|a| a.get("add").is_some()).count(), 1, "one row, one file: {appended}");
    assert!(actions.iter().all(|a| a.get("remove").is_none()), "nothing removed: {appended}");
    assert!(!log.join(format!("_delta_log/{:020}.json", promised + 1)).exists(), "one commit");

    let silver = root.join("bf-demo/warehouse/orders_silver");
    crate::common::alter_table(&silver, None, &[("delta.appendOnly", "true")]);
    let untouched = snapshot(&silver);
    let output = bf_in(root).args(["plan", "plans/march.toml", "-q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`delta.appendOnly = true`"), "{stderr}");
    assert_eq!(snapshot(&silver), untouched);
}

/// A checkpoint is written at every 20th version of a run of slices and at no other, read from
/// the log's own files, not through bf; and a second reader reads the table through it. The table
/// bf carries on with (loaded again from the checkpoint) is the one it had, at its version, though
/// another writer has committed since: the apply records that version as the slice's commit and
/// reads the slice's written files from it (the next slice's check reads the log again anyway).
#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_is_written_at_every_twentieth_version_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let rows: [OrderRow; 1] = [(1, "C1", 10.0, "EUR", "2026-03-01")];
    let at = |version: u64| dir.path().join(format!("v{version}"));
    for version in [18, 19] {
        let commits = vec![&rows[..]; version as usize];
        let table = open_table(&crate::common::orders_table(&at(version), false, &commits).await).await;
        assert_eq!(table.version(), Some(version as _));
        let files = table.get_file_uris().unwrap().collect::<Vec<_>>();
        let another = crate::common::append_orders(&at(version), &rows).await;
        assert_eq!(another, version + 1);
        let carried = bf::delta::table::checkpoint_when_due(table).await;
        assert_eq!(carried.version(), Some(version as _), "the table carried on moved past its own commit");
        assert_eq!(carried.get_file_uris().unwrap().collect::<Vec<_>>(), files);
        let log = at(version).join("_delta_log");
        let written = log.join(format!("{version:020}.checkpoint.parquet")).is_file();
        assert_eq!(written, version == 19, "version {version}");
        assert_eq!(log.join("_last_checkpoint").exists(), written);
    }
    assert_eq!(duckdb_count(&at(19), "SELECT count(*) FROM t"), 20);

    // Where the table's own interval put deltalake's checkpoint at that version, it is not written
    // a second time (the kernel finds it).
    let own = dir.path().join("own");
    let commits = vec![&rows[..]; 19];
    crate::common::orders_table_with(
        &own,
        false,
        crate::common::orders_columns(),
        &[("delta.checkpointInterval", "20")],
        &commits,
    )
    .await;
    let checkpoint = own.join(format!("_delta_log/{:020}.checkpoint.parquet", 19));
    let modified = || std::fs::metadata(&checkpoint).unwrap().modified().unwrap();
    let deltalakes = modified();
    bf::delta::table::checkpoint_when_due(open_table(&own).await).await;
    assert_eq!(modified(), deltalakes, "deltalake's checkpoint at 19 was written again");
}
