//! Live tables: `bf apply` beside other writers. The May reload (five 7-day slices) on a table the
//! daily job keeps writing, laid out both ways: unpartitioned, whose files straddle the slices, and
//! partitioned by the day. Another writer's row is never lost or published over; a commit that
//! touches no slice never blocks; a slice that failed its verification is never finished over;
//! publishing never touches a file the table references. Another writer between bf's check of a
//! slice and its commit: `live/races.rs`.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod races;

use crate::common::{
    OrderRow, append_orders, apply_paused, bf_in, commit_files, commit_infos, commits_with, orders_table,
    rows_at, slices_committed, snapshot, write_plan,
};

const MAY_PLAN: &str = r#"reason = "Reload May: the amounts were net, not gross."

[target]
table = "orders"
date_column = "order_date"
key = ["order_id"]

[window]
start = 2026-05-01
end = 2026-05-31

[slicing]
every = "7 days"

[source]
inputs.fixed = { path = "may.csv", format = "csv" }
query = "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM fixed"
"#;

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// Order `id` of customer C`id` on `day`.
fn order(id: i64, amount: f64, day: &str) -> OrderRow {
    (id, leak(format!("C{id}")), amount, "EUR", leak(day.to_owned()))
}

fn may(day: u32) -> String {
    format!("2026-05-{day:02}")
}

/// In `dir`: `orders`, one order a day through May (ids 1–31, amount 10 × the day) and three in
/// June, written as the daily job wrote them — May 1–15, May 16–31, June 1–3, one commit each, so an
/// unpartitioned table's files straddle the weekly slices — and the May reload ([`may_reload`]).
async fn may_shop(dir: &Path, partitioned: bool) -> PathBuf {
    let first: Vec<OrderRow> = (1..=15).map(|d| order(d.into(), 10.0 * f64::from(d), &may(d))).collect();
    let second: Vec<OrderRow> = (16..=31).map(|d| order(d.into(), 10.0 * f64::from(d), &may(d))).collect();
    let june: Vec<OrderRow> =
        (1..=3).map(|d| order(100 + i64::from(d), 5.0, &format!("2026-06-0{d}"))).collect();
    let table = orders_table(&dir.join("orders"), partitioned, &[&first, &second, &june]).await;
    may_reload(dir);
    table
}

/// In `dir`: `may.toml`, reloading May of `orders` from `may.csv` (every amount +10%) in five slices:
/// 1–7, 8–14, 15–21, 22–28, 29–31.
fn may_reload(dir: &Path) {
    let fixed: String =
        (1..=31u32).map(|d| format!("{d},C{d},{:.1},EUR,{}\n", 11.0 * f64::from(d), may(d))).collect();
    std::fs::write(dir.join("may.csv"), format!("order_id,customer,amount,currency,order_date\n{fixed}"))
        .unwrap();
    write_plan(dir, "may.toml", MAY_PLAN);
}

/// The May shop in a temp dir, planned; and its table.
async fn planned(partitioned: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let table = may_shop(dir.path(), partitioned).await;
    ok(dir.path(), &["plan", "may.toml", "-q"]);
    (dir, table)
}

fn bf(dir: &Path, args: &[&str]) -> Output {
    bf_in(dir).args(args).output().unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = bf(dir, args);
    assert!(out.status.success(), "bf {args:?}:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Fails with what bf said; returns its stderr.
fn refused(dir: &Path, args: &[&str]) -> String {
    let out = bf(dir, args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "bf {args:?} should fail:\n{stderr}");
    stderr
}

/// The table one undisturbed `bf apply` of the May reload leaves, on the same layout.
async fn applied_alone(partitioned: bool) -> Vec<String> {
    let (dir, table) = planned(partitioned).await;
    ok(dir.path(), &["apply", "--auto-approve", "-q"]);
    rows_at(&table, None, "true").await
}

fn with(mut rows: Vec<String>, more: &[String]) -> Vec<String> {
    rows.extend(more.iter().cloned());
    rows.sort();
    rows
}

fn mode(recompute: bool) -> &'static [&'static str] {
    if recompute { &["--recompute"] } else { &[] }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_row_in_a_later_slice_stops_bf_before_that_slice_and_survives() {
    for partitioned in [false, true] {
        for recompute in [false, true] {
            let case = format!("partitioned: {partitioned}, recompute: {recompute}");
            let (dir, table) = planned(partitioned).await;
            let root = dir.path();
            let foreign = order(9001, 99.0, "2026-05-30");
            let mut at = 0;
            let out = apply_paused(root, mode(recompute), 3, "before", async {
                at = append_orders(&table, &[foreign]).await;
            })
            .await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{case}:\n{stderr}");
            for said in [
                "slice 5 (2026-05-29..2026-05-31) was not written: since the plan, other commits touch its rows",
                &format!("version {at}: WRITE"),
                "(rows dated 2026-05-30)",
                "The 4 slices of this backfill already committed stay recorded. Run `bf plan",
            ] {
                assert!(stderr.contains(said), "{case}: missing {said:?} in:\n{stderr}");
            }
            assert_eq!(slices_committed(&table), [1, 2, 3, 4], "{case}");
            let may_30 =
                |rows: Vec<String>| rows.into_iter().map(|r| r.split('|').next().unwrap().to_owned());
            let on_30 = || rows_at(&table, None, "order_date = DATE '2026-05-30'");
            assert_eq!(
                may_30(on_30().await).collect::<Vec<_>>(),
                ["30", "9001"],
                "{case}: the old day and the order"
            );
            let read = crate::common::duckdb_rows(
                &table,
                "SELECT order_id FROM t WHERE order_date = DATE '2026-05-30'",
            );
            assert_eq!(read, ["30", "9001"], "{case}: read by DuckDB");
            // A resume is refused the same way: the slice still would write over the order.
            let untouched = snapshot(&table);
            let again = refused(root, &[&["apply", "--auto-approve"][..], mode(recompute)].concat());
            assert!(again.contains("slice 5 (2026-05-29..2026-05-31) was not written"), "{case}:\n{again}");
            assert_eq!(snapshot(&table), untouched, "{case}: the refused resume wrote nothing");
            assert_eq!(commits_with(&table, "comment"), 0, "{case}: never finished");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn appends_outside_the_window_never_block_before_during_or_between_tasks() {
    for partitioned in [false, true] {
        let alone = applied_alone(partitioned).await;
        let june = |id: i64, day: u32| order(id, 7.0, &format!("2026-06-{day:02}"));
        let row = |o: OrderRow| format!("{}|{}|{:.1}|{}|{}", o.0, o.1, o.2, o.3, o.4);

        // Between `bf plan` and `bf apply`, and while it waits before slice 3.
        let (dir, table) = planned(partitioned).await;
        append_orders(&table, &[june(9101, 10)]).await;
        let out = apply_paused(dir.path(), &[], 3, "before", async {
            append_orders(&table, &[june(9102, 11)]).await;
        })
        .await;
        assert!(
            out.status.success(),
            "partitioned: {partitioned}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected = with(alone.clone(), &[row(june(9101, 10)), row(june(9102, 11))]);
        assert_eq!(rows_at(&table, None, "true").await, expected, "partitioned: {partitioned}");

        // Between the tasks of a fan-out, and before its finish.
        let (dir, table) = planned(partitioned).await;
        ok(dir.path(), &["apply", "--slice", "1", "--auto-approve", "-q"]);
        append_orders(&table, &[june(9103, 12)]).await;
        ok(dir.path(), &["apply", "--slices", "2..5", "--auto-approve", "-q"]);
        append_orders(&table, &[june(9104, 13)]).await;
        ok(dir.path(), &["apply", "--finish", "--auto-approve", "-q"]);
        let expected = with(alone.clone(), &[row(june(9103, 12)), row(june(9104, 13))]);
        assert_eq!(rows_at(&table, None, "true").await, expected, "fan-out, partitioned: {partitioned}");
        assert_eq!(commits_with(&table, "comment"), 1);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slice_published_before_the_slices_whose_files_it_rewrites_is_refused_before_anything() {
    let (dir, table) = planned(false).await;
    let root = dir.path();
    let untouched = snapshot(&table);
    let stderr = refused(root, &["apply", "--slice", "3", "--auto-approve"]);
    assert!(
        stderr.contains(
            "slice 3 (2026-05-15..2026-05-21) rewrites files that slices 1, 2 write: it can only be published after them"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("Nothing was written."), "{stderr}");
    assert_eq!(snapshot(&table), untouched);
    // In order, they land, one task each.
    for slice in ["1", "2", "3", "4", "5"] {
        ok(root, &["apply", "--slice", slice, "--auto-approve", "-q"]);
    }
    ok(root, &["apply", "--finish", "--auto-approve", "-q"]);
    assert_eq!(rows_at(&table, None, "true").await, applied_alone(false).await);

    // Partitioned by the day, the slices share no file: any order lands.
    let (dir, table) = planned(true).await;
    for slice in ["3", "5", "1", "4", "2"] {
        ok(dir.path(), &["apply", "--slice", slice, "--auto-approve", "-q"]);
    }
    ok(dir.path(), &["apply", "--finish", "--auto-approve", "-q"]);
    assert_eq!(rows_at(&table, None, "true").await, applied_alone(true).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_reruns_in_a_row_end_as_one_apply() {
    let (dir, table) = planned(false).await;
    let root = dir.path();
    ok(root, &["apply", "--auto-approve", "-q"]);
    let once = rows_at(&table, None, "true").await;
    for run in 2..=11 {
        let out = ok(root, &["apply", "--auto-approve", "--rerun", "all", "--json"]);
        let report: Value = serde_json::from_str(&out).unwrap();
        assert!(report["backfill_id"].as_str().unwrap().ends_with(&format!("-r{run}")), "{report}");
        assert_eq!(report["slices"].as_array().unwrap().len(), 5);
    }
    assert_eq!(rows_at(&table, None, "true").await, once, "ten reruns end as one apply");
    assert_eq!(commits_with(&table, "comment"), 11);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slice_that_failed_its_verification_is_never_finished_over() {
    let (dir, table) = planned(false).await;
    let root = dir.path();
    let dropped = bf_in(root)
        .args(["apply", "--auto-approve", "--recompute"])
        .env(bf::fault::FAULT_ENV, "drop-row:2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&dropped.stderr);
    assert_eq!(dropped.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("slice 2 (2026-05-08..2026-05-14): the table holds 6 rows of it after the commit"),
        "{stderr}"
    );
    assert_eq!(slices_committed(&table), [1, 2]);
    let slice_2 = commit_infos(&table).iter().rev().find(|(_, i)| i["bf.slice"] == 2).unwrap().0;

    // A resume, a task's retry of the slice and a finish all count it again and stop.
    for args in [
        &["apply", "--auto-approve", "--recompute"][..],
        &["apply", "--auto-approve"],
        &["apply", "--slice", "2", "--auto-approve", "--recompute"],
        &["apply", "--finish", "--auto-approve"],
    ] {
        let untouched = snapshot(&table);
        let stderr = refused(root, args);
        assert!(
            stderr.contains(&format!(
                "slice 2 (2026-05-08..2026-05-14), committed at version {slice_2}, holds 6 rows of its days, but the rehearsal held 7"
            )),
            "{args:?}:\n{stderr}"
        );
        assert!(stderr.contains("`bf rollback` puts the table back to the pre-version"), "{stderr}");
        assert_eq!(snapshot(&table), untouched, "{args:?} wrote nothing");
    }
    assert_eq!(commits_with(&table, "comment"), 0, "never commented");
    let status = ok(root, &["status"]);
    assert!(status.contains("slice 2 (2026-05-08..2026-05-14), committed at version"), "{status}");
    // The way out named works.
    ok(root, &["rollback", "--auto-approve"]);
    assert_eq!(rows_at(&table, None, "order_date <= DATE '2026-05-31'").await.len(), 31);
}

/// Every file under `table` but its log, with its inode and change time.
fn inodes(table: &Path) -> BTreeMap<PathBuf, (u64, i64, i64)> {
    let mut files = BTreeMap::new();
    let mut todo = vec![table.to_owned()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                if path.file_name().is_some_and(|n| n != "_delta_log") {
                    todo.push(path);
                }
            } else {
                files.insert(path, (meta.ino(), meta.ctime(), meta.ctime_nsec()));
            }
        }
    }
    files
}

/// The data files the commits after `after` added, read raw from the log.
fn added_after(table: &Path, after: u64) -> Vec<PathBuf> {
    commit_files(table)
        .into_iter()
        .filter(|(v, _)| *v > after)
        .flat_map(|(_, file)| {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .filter_map(|l| {
                    serde_json::from_str::<Value>(l).ok()?["add"]["path"].as_str().map(str::to_owned)
                })
                .collect::<Vec<_>>()
        })
        .map(|p| table.join(percent_encoding::percent_decode_str(&p).decode_utf8().unwrap().as_ref()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn publishing_never_touches_a_live_file_and_places_fresh_ones() {
    for partitioned in [false, true] {
        let (dir, table) = planned(partitioned).await;
        let root = dir.path();
        let planned_at = commit_files(&table).last().unwrap().0;
        // A plan reviewed for 30 days: its rehearsed files look 30 days old.
        let month_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 24 * 3600);
        for file in inodes(&root.join("orders__rehearsal")).keys() {
            std::fs::File::open(file).unwrap().set_modified(month_ago).unwrap();
        }
        let live = inodes(&table);
        let started = std::time::SystemTime::now() - std::time::Duration::from_secs(2);

        // A crash after slice 3's files are placed, before its commit: placed, not referenced.
        let crashed = bf_in(root)
            .args(["apply", "--auto-approve"])
            .env(bf::fault::FAULT_ENV, "before-publish-commit:3")
            .output()
            .unwrap();
        assert!(!crashed.status.success());
        assert_eq!(slices_committed(&table), [1, 2], "partitioned: {partitioned}");
        let placed: Vec<PathBuf> = inodes(&table).into_keys().filter(|p| !live.contains_key(p)).collect();
        let referenced = added_after(&table, planned_at);
        assert!(
            placed.iter().any(|p| !referenced.contains(p)),
            "slice 3's files are in the folder, unreferenced: {placed:?}"
        );
        ok(root, &["apply", "--auto-approve", "-q"]);
        ok(root, &["apply", "--auto-approve", "-q", "--rerun", "all"]);

        for (path, before) in &live {
            let now = std::fs::symlink_metadata(path).unwrap();
            assert_eq!((now.ino(), now.ctime(), now.ctime_nsec()), *before, "{} was touched", path.display());
        }
        for published in added_after(&table, planned_at) {
            let modified = std::fs::metadata(&published).unwrap().modified().unwrap();
            assert!(
                modified >= started,
                "{} looks old: a VACUUM beside the apply would take it",
                published.display()
            );
        }
        assert_eq!(rows_at(&table, None, "true").await, applied_alone(partitioned).await);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_deletion_vector_delete_mid_apply_never_brings_the_rows_back() {
    for partitioned in [false, true] {
        for recompute in [false, true] {
            let case = format!("partitioned: {partitioned}, recompute: {recompute}");
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let table = may_shop(root, partitioned).await;
            // The table may hold deletion vectors before the plan: the delete below changes rows only.
            crate::common::alter_table(
                &table,
                Some(crate::common::deletion_vectors_protocol()["protocol"].clone()),
                &[],
            );
            ok(root, &["plan", "may.toml", "-q"]);
            let out = apply_paused(root, mode(recompute), 3, "before", async {
                // Delete order 20 (May 20, slice 3's days) with a deletion vector on its file.
                let (version, file, position) = file_holding(&table, "2026-05-20");
                crate::common::delete_with_vector(&table, version, &file, &[position], false);
            })
            .await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{case}:\n{stderr}");
            assert!(stderr.contains("slice 3 (2026-05-15..2026-05-21) was not written"), "{case}:\n{stderr}");
            assert!(stderr.contains(": DELETE"), "{case}:\n{stderr}");
            assert_eq!(slices_committed(&table), [1, 2], "{case}");
            assert!(
                rows_at(&table, None, "order_id = 20").await.is_empty(),
                "{case}: order 20 stays deleted"
            );
            assert_eq!(rows_at(&table, None, "order_date = DATE '2026-05-21'").await.len(), 1, "{case}");
            // Read again by DuckDB's Delta extension (delta-kernel-rs applies the vector itself).
            let twenty = crate::common::duckdb_count(&table, "SELECT count(*) FROM t WHERE order_id = 20");
            assert_eq!(twenty, 0, "{case}: order 20 stays deleted, read by DuckDB");
        }
    }
}

/// The next version, the live add action of the file holding `day`'s order, and the order's
/// position in it (each file holds its days' orders in day order).
fn file_holding(table: &Path, day: &str) -> (u64, Value, u32) {
    let mut live: BTreeMap<String, Value> = BTreeMap::new();
    for (_, file) in commit_files(table) {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let action: Value = serde_json::from_str(line).unwrap();
            if let Some(add) = action.get("add") {
                live.insert(add["path"].as_str().unwrap().to_owned(), add.clone());
            }
            if let Some(remove) = action.get("remove") {
                live.remove(remove["path"].as_str().unwrap());
            }
        }
    }
    let next = commit_files(table).last().unwrap().0 + 1;
    let day: chrono::NaiveDate = day.parse().unwrap();
    for add in live.into_values() {
        if let Some(partition) = add["partitionValues"]["order_date"].as_str() {
            if partition == day.to_string() {
                return (next, add, 0);
            }
            continue;
        }
        let stats: Value = serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
        let min: chrono::NaiveDate = stats["minValues"]["order_date"].as_str().unwrap().parse().unwrap();
        let max: chrono::NaiveDate = stats["maxValues"]["order_date"].as_str().unwrap().parse().unwrap();
        if min <= day && day <= max {
            return (next, add, (day - min).num_days() as u32);
        }
    }
    panic!("no live file holds {day}")
}

/// A rehearsal commit that would also change the table itself is not published: publishing carries
/// a slice's data files, and dropping the `metaData` action silently would land something else than
/// what was rehearsed.
#[tokio::test(flavor = "multi_thread")]
async fn a_rehearsal_commit_that_changes_the_table_itself_is_not_published() {
    let (dir, table) = planned(false).await;
    let root = dir.path();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let version = saved["slices"][1]["publication"]["rehearsal_version"].as_u64().unwrap();
    let rehearsal = root.join("orders__rehearsal");
    let metadata = crate::common::latest_metadata(&rehearsal);
    let commit = rehearsal.join(format!("_delta_log/{version:020}.json"));
    let mut text = std::fs::read_to_string(&commit).unwrap().trim_end().to_owned();
    text.push_str(&format!("\n{}\n", serde_json::json!({ "metaData": metadata })));
    std::fs::write(&commit, text).unwrap();
    let stderr = refused(root, &["apply", "--auto-approve"]);
    assert!(stderr.contains("holds a `metaData` action") && stderr.contains("--recompute"), "{stderr}");
    assert_eq!(slices_committed(&table), [1], "slice 2 was not committed");
    ok(root, &["apply", "--auto-approve", "--recompute", "-q"]);
    assert_eq!(rows_at(&table, None, "true").await, applied_alone(false).await);
}

/// The change-data files a slice publishes are checked against the plan's checksums like its data
/// files: a changed one is never committed.
#[tokio::test(flavor = "multi_thread")]
async fn a_change_data_file_that_is_not_the_rehearsed_one_is_not_published() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let first: Vec<OrderRow> = (1..=31).map(|d| order(d.into(), 10.0 * f64::from(d), &may(d))).collect();
    // Unpartitioned: deltalake writes change-data files for the rows a slice rewrites (a partition
    // replaced whole needs none).
    let table = crate::common::orders_table_with(
        &root.join("orders"),
        false,
        crate::common::orders_columns(),
        &[("delta.enableChangeDataFeed", "true")],
        &[&first],
    )
    .await;
    may_reload(root);
    ok(root, &["plan", "may.toml", "-q"]);
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let cdc = saved["slices"][2]["publication"]["cdc"].as_array().unwrap();
    assert!(!cdc.is_empty(), "slice 3's rehearsal wrote change data: {}", saved["slices"][2]["publication"]);
    let changed = root.join("orders__rehearsal").join(cdc[0]["path"].as_str().unwrap());
    let mut bytes = std::fs::read(&changed).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&changed, bytes).unwrap();
    let stderr = refused(root, &["apply", "--auto-approve"]);
    assert!(stderr.contains("is not the rehearsed file") && stderr.contains("_change_data"), "{stderr}");
    assert_eq!(slices_committed(&table), [1, 2], "slice 3 was not committed");
}

/// Ages every file of the table's log past its retention and runs deltalake's own log cleanup
/// behind a checkpoint at the latest version: a plan reviewed for a month, with the table's
/// `delta.logRetentionDuration` (30 days) at its default. Returns the first version whose commit
/// file is still there.
async fn log_cleaned_up(table: &Path) -> u64 {
    let opened = crate::common::open_table(table).await;
    bf::deltalake::checkpoints::create_checkpoint(&opened, None).await.unwrap();
    let month_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(31 * 24 * 3600);
    for entry in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let file = std::fs::File::options().write(true).open(entry.unwrap().path()).unwrap();
        file.set_modified(month_ago).unwrap();
    }
    let removed = bf::deltalake::checkpoints::cleanup_metadata(&opened, None).await.unwrap();
    assert!(removed > 0, "the cleanup removed commit files");
    commit_files(table).iter().map(|(v, _)| *v).min().unwrap()
}

/// A plan reviewed for a month: another writer appends an order dated in slice 5, more loads
/// follow, and the log's commit files age past their retention and are cleaned up. The commit
/// that wrote the order is gone from the log, so what it did to the slices cannot be told: the
/// plan is stale. Published or recomputed, the apply refuses before writing, naming the cleanup,
/// and the order stays (read by DuckDB). Both layouts.
#[tokio::test(flavor = "multi_thread")]
async fn a_plan_older_than_the_logs_retention_is_stale_and_writes_nothing() {
    for partitioned in [false, true] {
        let case = format!("partitioned: {partitioned}");
        let (dir, table) = planned(partitioned).await;
        let root = dir.path();
        append_orders(&table, &[order(9001, 99.0, "2026-05-30")]).await;
        for day in 4..=6 {
            append_orders(&table, &[order(200 + day, 5.0, &format!("2026-06-0{day}"))]).await;
        }
        let first_kept = log_cleaned_up(&table).await;
        let untouched = snapshot(&table);
        for recompute in [false, true] {
            let stderr = refused(root, &[&["apply", "--auto-approve"][..], mode(recompute)].concat());
            for said in [
                "the saved plan is stale",
                &format!("the table's log before version {first_kept} was cleaned up"),
                "Plan again",
            ] {
                assert!(
                    stderr.contains(said),
                    "{case}, recompute {recompute}: missing {said:?} in:\n{stderr}"
                );
            }
            assert_eq!(snapshot(&table), untouched, "{case}: the refused apply wrote nothing");
        }
        let order = crate::common::duckdb_count(&table, "SELECT count(*) FROM t WHERE order_id = 9001");
        assert_eq!(order, 1, "{case}: the other writer's order stays");
    }
}

/// Another writer's DELETE of June orders, on a table whose files straddle the slices. Its remove
/// actions name no days (deltalake's, like Spark's, carry neither partition values nor
/// statistics), so the watch finds each removed file's days where the file was added: in the
/// table at the plan's version (the June file the daily job wrote before the plan), or in a commit
/// since it (an order appended after the plan). Neither blocks the May reload, each case alone:
/// the watch reads the plan's files only when a remove needs them.
#[tokio::test(flavor = "multi_thread")]
async fn deletes_outside_the_window_never_block_though_their_removes_name_no_days() {
    let alone = applied_alone(false).await;
    for since_the_plan in [false, true] {
        let case = format!("a file added since the plan: {since_the_plan}");
        let (dir, table) = planned(false).await;
        let predicate = if since_the_plan {
            append_orders(&table, &[order(9101, 7.0, "2026-06-10")]).await;
            "order_id = 9101"
        } else {
            "order_id > 100 AND order_id < 200"
        };
        let opened = crate::common::open_table(&table).await;
        let (opened, _) = opened.delete().with_predicate(predicate).await.unwrap();
        let version = opened.version().unwrap();
        let (_, log) = commit_files(&table).into_iter().find(|(v, _)| *v == version).unwrap();
        let removes: Vec<Value> = std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).unwrap().get("remove").cloned())
            .collect();
        assert!(!removes.is_empty(), "{case}: the DELETE removed a file");
        for remove in &removes {
            let names_days = remove.get("stats").is_some()
                || remove["partitionValues"].as_object().is_some_and(|p| !p.is_empty());
            assert!(!names_days, "{case}: the remove names no days: {remove}");
        }
        ok(dir.path(), &["apply", "--auto-approve", "-q"]);
        let expected: Vec<String> =
            alone.iter().filter(|r| since_the_plan || !r.contains("|2026-06-")).cloned().collect();
        assert_eq!(rows_at(&table, None, "true").await, expected, "{case}");
    }
}

/// Five slices applied as separate tasks, then another writer deletes an order of slice 2 and VACUUM
/// (retention 0) deletes the files the slice's commit wrote. The slice's count at its own version
/// can no longer be read from its files: it is unknown, never an error. `bf status` reports,
/// `bf apply --finish` ends the backfill (its comment), and the deleted order stays deleted (read
/// by DuckDB). Both layouts.
#[tokio::test(flavor = "multi_thread")]
async fn vacuum_after_another_writers_delete_never_makes_a_backfill_unfinishable() {
    for partitioned in [false, true] {
        let case = format!("partitioned: {partitioned}");
        let (dir, table) = planned(partitioned).await;
        let root = dir.path();
        ok(root, &["apply", "--auto-approve", "-q", "--slices", "1..5"]);
        let opened = crate::common::open_table(&table).await;
        let (opened, _) = opened.delete().with_predicate("order_id = 9").await.unwrap();
        let (_, vacuumed) = opened
            .vacuum()
            .with_retention_period(chrono::Duration::zero())
            .with_enforce_retention_duration(false)
            .await
            .unwrap();
        assert!(!vacuumed.files_deleted.is_empty(), "{case}: VACUUM deleted the slice's old files");
        ok(root, &["status"]);
        ok(root, &["apply", "--auto-approve", "-q", "--finish"]);
        assert_eq!(commits_with(&table, "comment"), 1, "{case}: finished once");
        let nine = crate::common::duckdb_count(&table, "SELECT count(*) FROM t WHERE order_id = 9");
        assert_eq!(nine, 0, "{case}: the deleted order stays deleted");
    }
}

/// One backfill applied in two ways: slice 1 recomputed (`--slice 1 --recompute`), then a plain
/// `--slice 2`. On a table whose files straddle the slices, slice 2's rehearsal rewrote files slice
/// 1's rehearsal wrote, which the table does not hold: refused before anything is written, naming
/// `--recompute`, which then finishes the backfill to the table one undisturbed apply leaves.
#[tokio::test(flavor = "multi_thread")]
async fn a_slice_published_after_a_recomputed_one_names_recompute_before_writing() {
    let alone = applied_alone(false).await;
    let (dir, table) = planned(false).await;
    let root = dir.path();
    ok(root, &["apply", "--auto-approve", "-q", "--slice", "1", "--recompute"]);
    let untouched = snapshot(&table);
    let stderr = refused(root, &["apply", "--auto-approve", "-q", "--slice", "2"]);
    assert!(
        stderr.contains("the rehearsal of slice 1 wrote, but slice 1 was written with `--recompute`"),
        "{stderr}"
    );
    assert!(stderr.contains("`bf apply --recompute`"), "{stderr}");
    assert_eq!(snapshot(&table), untouched, "nothing was written");
    ok(root, &["apply", "--auto-approve", "-q", "--recompute"]);
    assert_eq!(rows_at(&table, None, "true").await, alone, "the table one apply leaves");
}

/// Two commits of another writer that change no row of a slice and still make it stale, each
/// while bf waits before slice 3: an ALTER of the table's properties (every slice's rehearsal was
/// written against the old table), and an OPTIMIZE that compacts the files slice 3 replaces
/// (`dataChange: false`, but the rehearsal rewrote those very files). Either stops bf before slice
/// 3, naming the commit; slices 1 and 2 stay, nothing of slice 3 is written. Unpartitioned, where
/// a compaction rewrites the slices' files.
#[tokio::test(flavor = "multi_thread")]
async fn an_alter_or_an_optimize_of_a_slices_files_mid_apply_stops_before_that_slice() {
    for (what, expect) in
        [("alter", "changes the table's schema or properties"), ("optimize", "a file the slice replaces")]
    {
        let (dir, table) = planned(false).await;
        let root = dir.path();
        let out = apply_paused(root, &[], 3, "before", async {
            match what {
                "alter" => crate::common::alter_table(
                    &table,
                    None,
                    &[("delta.logRetentionDuration", "interval 60 days")],
                ),
                _ => {
                    let opened = crate::common::open_table(&table).await;
                    let (_, metrics) = opened.optimize().await.unwrap();
                    assert!(metrics.num_files_removed > 0, "the compaction rewrote files");
                }
            }
        })
        .await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what}:\n{stderr}");
        assert!(stderr.contains("slice 3 (2026-05-15..2026-05-21) was not written"), "{what}:\n{stderr}");
        assert!(stderr.contains(expect), "{what}: missing {expect:?} in:\n{stderr}");
        assert_eq!(slices_committed(&table), [1, 2], "{what}");
    }
}
