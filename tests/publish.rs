//! `bf apply` publishes the files the rehearsal wrote: what lands is what the plan showed, byte for
//! byte, even from a query that would give other rows if run again; when the rehearsal is gone or
//! was made again, a plain apply refuses, and `--recompute` runs the queries again.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common::{OrderRow, bf_in, demo_workspace, orders_table, rows_at, snapshot, write_plan};

const ORDERS: [OrderRow; 4] = [
    (1, "C1", 10.0, "EUR", "2026-03-01"),
    (2, "C2", 20.0, "EUR", "2026-03-01"),
    (3, "C3", 30.0, "USD", "2026-03-02"),
    (4, "C4", 40.0, "USD", "2026-03-03"),
];

fn ok(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = bf_in(dir).args(args).output().unwrap();
    assert!(out.status.success(), "bf {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The files a table's commits after `after` added, by path, with the sha256 of their bytes, read
/// from the raw log and the files.
fn added_files(table: &Path, after: u64) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut version = after + 1;
    while let Ok(log) = std::fs::read_to_string(table.join(format!("_delta_log/{version:020}.json"))) {
        for line in log.lines() {
            let action: Value = serde_json::from_str(line).unwrap();
            if let Some(path) = action.pointer("/add/path").and_then(Value::as_str) {
                let path = percent_encoding::percent_decode_str(path).decode_utf8().unwrap().into_owned();
                let bytes = std::fs::read(table.join(&path)).unwrap();
                files.push((path, hex::encode(Sha256::digest(&bytes))));
            }
        }
        version += 1;
    }
    files.sort();
    files
}

/// A query with `random()` gives other amounts each time it runs: the plan shows one draw, and the
/// apply must land exactly that one — the rehearsal's files, byte for byte — where running the query
/// again (`--recompute`) lands another. Unpartitioned and partitioned by the date, replace and merge.
#[tokio::test(flavor = "multi_thread")]
async fn apply_lands_exactly_the_rehearsed_files_even_from_a_random_query() {
    for partitioned in [false, true] {
        for mode in ["replace", "merge"] {
            let context = format!("partitioned {partitioned}, {mode}");
            let mut landed = Vec::new();
            for recompute in [false, true] {
                let dir = tempfile::tempdir().unwrap();
                let table = dir.path().join("orders");
                orders_table(&table, partitioned, &[&ORDERS]).await;
                std::fs::write(
                    dir.path().join("fixed.csv"),
                    "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n\
                     5,C5,50.0,EUR,2026-03-01\n3,C3,33.0,USD,2026-03-02\n",
                )
                .unwrap();
                write_plan(
                    dir.path(),
                    "plan.toml",
                    &format!(
                        "reason = \"Jitter the amounts.\"\n[target]\ntable = \"orders\"\ndate_column = \"order_date\"\n\
                         key = [\"order_id\"]\n[window]\nstart = 2026-03-01\nend = 2026-03-02\n[slicing]\nevery = \"day\"\n\
                         [write]\nmode = \"{mode}\"\n[source]\ninputs.src = {{ path = \"fixed.csv\", format = \"csv\" }}\n\
                         query = \"SELECT order_id, customer, amount + random() AS amount, currency, \
                         CAST(order_date AS DATE) AS order_date FROM src\"\n"
                    ),
                );
                ok(dir.path(), &["plan", "plan.toml", "-q"]);
                let rehearsal = dir.path().join("orders__rehearsal");
                let window = "order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-02'";
                let rehearsed = rows_at(&rehearsal, None, window).await;
                let mut apply = vec!["apply", "--auto-approve", "-q"];
                if recompute {
                    apply.push("--recompute");
                }
                ok(dir.path(), &apply);
                let applied = rows_at(&table, None, window).await;
                let files = added_files(&table, 1);
                if recompute {
                    assert_ne!(applied, rehearsed, "{context}: the query ran again and drew other amounts");
                } else {
                    assert_eq!(applied, rehearsed, "{context}: the rows the plan showed");
                    let rehearsal_files = added_files(&rehearsal, 0);
                    assert!(!files.is_empty(), "{context}");
                    for file in &files {
                        assert!(
                            rehearsal_files.contains(file),
                            "{context}: {file:?} is the rehearsal's file"
                        );
                    }
                    // Outside the window, nothing moved.
                    assert_eq!(
                        rows_at(&table, None, "order_date = DATE '2026-03-03'").await,
                        rows_at(&rehearsal, None, "order_date = DATE '2026-03-03'").await
                    );
                }
                landed.push(applied);
            }
            assert_ne!(landed[0], landed[1], "{context}");
        }
    }
}

/// The rehearsal a saved plan publishes must be the one it reviewed, whole: removed by `bf clean`,
/// made again by another `bf plan`, or missing a file, a plain `bf apply` refuses, says why and names
/// both ways out, and writes nothing; `bf apply --recompute` still applies.
#[tokio::test(flavor = "multi_thread")]
async fn a_rehearsal_gone_made_again_or_missing_a_file_is_not_published_and_recompute_applies() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    crate::common::september_plan(root, "week.toml", 6, |text| text);
    ok(root, &["plan", "plans/week.toml", "--out", "first.json", "-q"]);
    let saved: Value = serde_json::from_slice(&std::fs::read(root.join("first.json")).unwrap()).unwrap();
    let rehearsal =
        url::Url::parse(saved["rehearsal"]["uri"].as_str().unwrap()).unwrap().to_file_path().unwrap();

    let refused = |why: &str| {
        let untouched = snapshot(&daily);
        let out = bf_in(root).args(["apply", "first.json", "--auto-approve"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("bf cannot publish the rehearsed slices")
                && stderr.contains(why)
                && stderr.contains("`bf plan`")
                && stderr.contains("`bf apply --recompute`"),
            "{why}: {stderr}"
        );
        assert_eq!(snapshot(&daily), untouched, "{why}: nothing written");
    };

    let status = |first: &str| {
        let out = ok(root, &["status", "first.json"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains(first), "{text}");
    };
    status("next: `bf apply` publishes the rehearsed files of the slices left: exactly what the plan shows");

    // A file the first slice publishes, gone.
    let first_added = saved["slices"][0]["publication"]["adds"][0]["path"].as_str().unwrap();
    let file = rehearsal.join(first_added);
    let kept = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    refused("the rehearsal no longer holds");
    std::fs::write(&file, kept).unwrap();

    // Moved on since the plan: one more commit in its log, written raw.
    let log = rehearsal.join("_delta_log");
    let reviewed = saved["rehearsal"]["version"].as_u64().unwrap();
    let extra = log.join(format!("{:020}.json", reviewed + 1));
    std::fs::write(&extra, "{\"commitInfo\":{\"timestamp\":1,\"operation\":\"WRITE\"}}\n").unwrap();
    refused(&format!("is at version {}, not the version {reviewed} this plan reviewed", reviewed + 1));
    std::fs::remove_file(&extra).unwrap();

    // Made again by another plan.
    ok(root, &["plan", "plans/week.toml", "-q"]);
    refused("was made again since this plan");

    // Deleted.
    ok(root, &["clean", rehearsal.to_str().unwrap()]);
    refused("cannot be opened");
    status(
        "next: `bf apply --recompute` runs the queries of the slices left again: the rehearsed files cannot be published (the rehearsal",
    );
    let json: Value = serde_json::from_slice(&ok(root, &["status", "first.json", "--json"]).stdout).unwrap();
    assert!(json["cannot_publish"].as_str().is_some_and(|why| why.contains("cannot be opened")), "{json}");
    assert_eq!(json["pending"].as_array().map(Vec::len), Some(6), "{json}");

    ok(root, &["apply", "first.json", "--auto-approve", "--recompute", "-q"]);
    assert_eq!(crate::common::slices_committed(&daily), (1..=6).collect::<Vec<u64>>());
}

/// The user's scenarios end with the same rows whether `bf apply` publishes the rehearsal or runs
/// each slice's query again: the March reload of orders_silver, September's thirty daily runs, and
/// the correction of 15 September.
#[tokio::test(flavor = "multi_thread")]
async fn the_scenarios_end_with_the_same_rows_published_or_recomputed() {
    let mut ends = Vec::new();
    for apply in [&["apply", "--auto-approve", "-q"][..], &["apply", "--auto-approve", "-q", "--recompute"]] {
        let workspace = demo_workspace();
        let root = workspace.path();
        let silver = root.join("bf-demo/warehouse/orders_silver");
        let daily = root.join("bf-demo/warehouse/orders_daily");
        ok(root, &["plan", "plans/march.toml", "-q"]);
        ok(root, apply);
        ok(root, &["plan", "plans/september.toml", "-q"]);
        ok(root, apply);
        let landing = root.join("bf-demo/landing/orders/2026-09-15.csv");
        let mut text = std::fs::read_to_string(&landing).unwrap();
        text.push_str("2131,C02,19.99,2026-09-15T20:30:00\n");
        std::fs::write(&landing, text).unwrap();
        ok(root, &["plan", "plans/correction-2026-09-15.toml", "-q"]);
        ok(root, apply);
        ends.push((rows_at(&silver, None, "true").await, rows_at(&daily, None, "true").await));
    }
    assert_eq!(ends[0].1.len(), 131, "September's 130 orders and the late one");
    assert_eq!(ends[0], ends[1]);
}
