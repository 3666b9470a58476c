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

/// An edit of a saved plan between `bf plan` and `bf apply`.
type Tamper<'a> = Box<dyn Fn(&mut Value) + 'a>;

/// The live files of the table in `dir`, read from its raw log (adds not removed since).
fn live_files(table: &Path) -> Vec<String> {
    let mut live = std::collections::BTreeSet::new();
    for (_, file) in crate::common::commit_files(table) {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let action: Value = serde_json::from_str(line).unwrap();
            let decoded = |p: &Value| {
                percent_encoding::percent_decode_str(p.as_str().unwrap()).decode_utf8().unwrap().into_owned()
            };
            if let Some(path) = action.pointer("/add/path") {
                live.insert(decoded(path));
            }
            if let Some(path) = action.pointer("/remove/path") {
                live.remove(&decoded(path));
            }
        }
    }
    live.into_iter().collect()
}

/// A saved plan is a file anyone on its way may edit. What a slice removes is derived again from the
/// table and the rehearsal as the slice commits, so an unsigned saved plan whose slice lists the
/// table's other files (February's, April's), leaves one out, or points the slice at another slice's
/// rehearsal commit is refused before any commit: not one byte of the table changes. The saved plan
/// as `bf plan` wrote it then applies. Partitioned by the date and not.
#[tokio::test(flavor = "multi_thread")]
async fn a_saved_plan_edited_to_remove_other_files_removes_nothing() {
    const FEBRUARY: [OrderRow; 2] =
        [(21, "C21", 5.0, "EUR", "2026-02-27"), (22, "C22", 6.0, "EUR", "2026-02-28")];
    const APRIL: [OrderRow; 1] = [(41, "C41", 7.0, "EUR", "2026-04-01")];
    for partitioned in [false, true] {
        let context = format!("partitioned {partitioned}");
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("orders");
        orders_table(&table, partitioned, &[&FEBRUARY, &ORDERS, &APRIL]).await;
        std::fs::write(
            dir.path().join("fixed.csv"),
            "order_id,customer,amount,currency,order_date\n1,C1,11.0,EUR,2026-03-01\n3,C3,33.0,USD,2026-03-02\n",
        )
        .unwrap();
        write_plan(
            dir.path(),
            "plan.toml",
            "reason = \"Fix two days.\"\n[target]\ntable = \"orders\"\ndate_column = \"order_date\"\n\
             [window]\nstart = 2026-03-01\nend = 2026-03-02\n[slicing]\nevery = \"day\"\n\
             [source]\ninputs.src = { path = \"fixed.csv\", format = \"csv\" }\n\
             query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM src\"\n",
        );
        ok(dir.path(), &["plan", "plan.toml", "-q", "--out", "saved.json"]);
        let saved: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("saved.json")).unwrap()).unwrap();
        let live = live_files(&table);
        let first = &saved["slices"][0]["publication"];
        let listed: Vec<String> = serde_json::from_value(first["removes"].clone()).unwrap();
        assert!(!listed.is_empty(), "{context}: slice 1 replaces a file");
        let others: Vec<&String> = live.iter().filter(|f| !listed.contains(f)).collect();
        assert!(others.len() >= 2, "{context}: February's and April's files are live: {live:?}");

        // Each edit keeps the saved plan's own sums true (the blast radius counts the files a slice
        // removes), so that it reaches the slice's commit: what is refused there is the list itself.
        let set_removes = |plan: &mut Value, removes: Vec<Value>| {
            let delta = removes.len() as i64 - listed.len() as i64;
            plan["slices"][0]["publication"]["removes"] = Value::Array(removes);
            for radius in ["/slices/0/blast_radius/files_removed", "/blast_radius/files_removed"] {
                let files = plan.pointer_mut(radius).unwrap();
                *files = (files.as_i64().unwrap() + delta).into();
            }
        };
        let tampers: [(&str, &str, Tamper); 3] = [
            (
                "every other live file listed",
                "its rehearsal did not remove",
                Box::new(|plan| {
                    let all = listed.iter().chain(others.iter().copied()).map(|f| Value::from(f.as_str()));
                    set_removes(plan, all.collect());
                }),
            ),
            ("a file left out", "its rehearsal removed", Box::new(|plan| set_removes(plan, Vec::new()))),
            (
                "another slice's rehearsal commit",
                "is not this plan's rehearsal of slice 1",
                Box::new(|plan| {
                    for key in ["publication", "blast_radius"] {
                        let second = plan["slices"][1][key].clone();
                        plan["slices"][1][key] = plan["slices"][0][key].clone();
                        plan["slices"][0][key] = second;
                    }
                }),
            ),
        ];
        let before = snapshot(&table);
        for (what, why, tamper) in &tampers {
            let mut plan = saved.clone();
            tamper(&mut plan);
            std::fs::write(dir.path().join("tampered.json"), serde_json::to_string(&plan).unwrap()).unwrap();
            let out =
                bf_in(dir.path()).args(["apply", "tampered.json", "--auto-approve", "-q"]).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{context}, {what}: {stderr}");
            assert!(
                stderr.contains(why) && stderr.contains("nothing was committed"),
                "{context}, {what}: {stderr}"
            );
            assert_eq!(snapshot(&table), before, "{context}, {what}: the table changed");
        }
        ok(dir.path(), &["apply", "saved.json", "--auto-approve", "-q"]);
        let outside = "order_date NOT BETWEEN DATE '2026-03-01' AND DATE '2026-03-02'";
        let kept = crate::common::duckdb_rows(&table, &format!("SELECT order_id FROM t WHERE {outside}"));
        assert_eq!(kept, ["21", "22", "4", "41"], "{context}: read by DuckDB");
    }
}
