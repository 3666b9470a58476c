//! `bf plan`: the rehearsal proves the backfill without touching the target, and every number it
//! prints is checked here against a computation of the test's own.

use std::collections::BTreeSet;
use std::path::Path;

use bf::deltalake::arrow::array::{Array, Float64Array};
use bf::deltalake::arrow::datatypes::Date32Type;
use bf::deltalake::datafusion::prelude::{ParquetReadOptions, SessionContext, col, lit};
use bf::deltalake::datafusion::scalar::ScalarValue;
use predicates::prelude::*;
use serde_json::Value;

use crate::common::{OrderRow, bf_in, count, demo_workspace, open_table, orders_table, snapshot, write_plan};

/// The corrected March from the shop's landing files, computed by hand: (order_id, currency, amount in EUR).
fn corrected_march(shop: &Path) -> Vec<(i64, String, f64)> {
    let rates = crate::common::fx_rates(&shop.join("landing"));
    std::fs::read_to_string(shop.join("landing/orders_march.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            let rate = rates.iter().find(|(c, _)| c == fields[3]).unwrap().1;
            let amount: f64 = fields[2].parse().unwrap();
            (fields[0].parse().unwrap(), fields[3].to_owned(), (amount * rate * 100.0).round() / 100.0)
        })
        .collect()
}

async fn sum(table: &Path, sql: &str) -> f64 {
    let provider = open_table(table).await.table_provider().await.unwrap();
    let ctx = SessionContext::new();
    ctx.register_table("t", provider).unwrap();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    batches[0].column(0).as_any().downcast_ref::<Float64Array>().unwrap().value(0)
}

fn plan_json(output: &std::process::Output) -> Value {
    assert!(output.status.success(), "bf plan failed:\n{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("bf plan --json prints one JSON document")
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-6)
}

#[tokio::test(flavor = "multi_thread")]
async fn march_is_rehearsed_without_touching_the_target() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let shop = root.join("bf-demo");
    let target = shop.join("warehouse/orders_silver");
    let untouched = snapshot(&target);

    let plan = plan_json(&bf_in(root).args(["plan", "plans/march.toml", "--json"]).output().unwrap());
    assert_eq!(snapshot(&target), untouched, "bf plan changed a byte of the target");

    // Before: the target's March, by the test's own query.
    let march = "order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    let before_rows = count(&target, &format!("SELECT count(*) FROM t WHERE {march}")).await;
    let before_revenue = sum(&target, &format!("SELECT SUM(amount_eur) FROM t WHERE {march}")).await;
    // After: the corrected landing file, converted by hand.
    let corrected = corrected_march(&shop);
    let after_revenue: f64 = corrected.iter().map(|r| r.2).sum();
    let eur_orders = corrected.iter().filter(|r| r.1 == "EUR").count() as u64;

    assert_eq!(plan["target"]["pre_version"], 5);
    // Where the plan's time went: each step timed; the steps that run one after the other no more
    // than the whole (a slice's comparison and checks run beside the next slice's write).
    let timings = plan["timings"].as_object().unwrap();
    let total = timings["total"].as_u64().unwrap();
    let step = |name: &str| timings[name].as_u64().unwrap();
    let in_turn: u64 =
        ["open", "clone", "source", "write", "record", "fingerprint"].into_iter().map(step).sum();
    assert!(total > 0 && in_turn <= total && timings.len() == 9, "{timings:?}");
    assert!(step("compare") + step("checks") <= total, "{timings:?}");
    let slice = &plan["slices"][0];
    assert_eq!(plan["slices"].as_array().unwrap().len(), 1);
    assert_eq!((slice["first"].as_str(), slice["last"].as_str()), (Some("2026-03-01"), Some("2026-03-31")));
    assert_eq!(slice["before"]["rows"], before_rows);
    assert_eq!(slice["after"]["rows"], corrected.len() as u64);
    assert!(close(&slice["before"]["metrics"]["revenue"], before_revenue), "{slice}");
    assert!(close(&slice["after"]["metrics"]["revenue"], after_revenue), "{slice}");
    assert_eq!(slice["source"]["in_slice"], corrected.len() as u64);
    assert_eq!(slice["source"]["outside_window"], 0);
    // Row changes: the 3 duplicates go, every order that really was in EUR changes.
    assert_eq!(slice["changes"]["removed"], 3);
    assert_eq!(slice["changes"]["added"], 0);
    assert_eq!(slice["changes"]["changed"], eur_orders);
    // Samples, five of each kind by key: the lowest EUR orders as the corrected file has them (only
    // the currency and the euro amount differ), then the three removed duplicates.
    let samples = slice["changes"]["samples"].as_array().unwrap();
    let kinds: Vec<&str> = samples.iter().map(|s| s["change"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["changed", "changed", "changed", "changed", "changed", "removed", "removed", "removed"]
    );
    let mut eur: Vec<&(i64, String, f64)> = corrected.iter().filter(|r| r.1 == "EUR").collect();
    eur.sort_by_key(|r| r.0);
    for (sample, expected) in samples[..5].iter().zip(&eur) {
        let (before, after) = (&sample["before"], &sample["after"]);
        assert_eq!(after[0].as_str(), Some(expected.0.to_string().as_str()), "{sample}");
        assert_eq!(before[0], after[0], "{sample}");
        assert_eq!((before[3].as_str(), after[3].as_str()), (Some("USD"), Some("EUR")), "{sample}");
        let amount: f64 = after[4].as_str().unwrap().parse().unwrap();
        assert!((amount - expected.2).abs() < 1e-6, "{sample}");
    }
    let removed: Vec<i64> =
        samples[5..].iter().map(|s| s["before"][0].as_str().unwrap().parse().unwrap()).collect();
    assert!(removed.is_sorted(), "{removed:?}");
    assert!(samples[5..].iter().all(|s| s["after"].is_null()));
    // Nothing outside March moved: the files the rehearsal shares with the target are the target's
    // files other than the ones it copied in to rewrite.
    let total_rows = count(&target, "SELECT count(*) FROM t").await;
    let clone = &plan["rehearsal"]["clone"];
    assert_eq!(plan["outside_window"]["unchanged"], true);
    assert_eq!(plan["outside_window"]["shared_files"], clone["files_referenced"]);
    assert_eq!(plan["outside_window"]["replaced_files"], clone["files_localized"]);
    assert_eq!(plan["outside_window"]["before"], plan["outside_window"]["after"]);
    // The breakdown puts the revenue change in USD → EUR first.
    let top = &plan["breakdown"][0];
    assert_eq!(
        (top["metric"].as_str(), top["from"][0].as_str(), top["to"][0].as_str()),
        (Some("revenue"), Some("USD"), Some("EUR"))
    );
    assert!(plan["problems"].as_array().unwrap().is_empty(), "{}", plan["problems"]);

    // The rehearsal holds exactly the corrected March and the untouched rest.
    let rehearsal = shop.join("warehouse/orders_silver__rehearsal");
    assert_eq!(
        count(&rehearsal, &format!("SELECT count(*) FROM t WHERE {march}")).await,
        corrected.len() as i64
    );
    assert_eq!(
        count(&rehearsal, &format!("SELECT count(*) FROM t WHERE {march} AND currency = 'EUR'")).await,
        eur_orders as i64
    );
    assert_eq!(
        count(&rehearsal, "SELECT count(*) FROM t").await,
        total_rows - before_rows + corrected.len() as i64
    );
    assert!(close(
        &Value::from(sum(&rehearsal, &format!("SELECT SUM(amount_eur) FROM t WHERE {march}")).await),
        after_revenue
    ));

    // The clone copied only the target's files that hold March rows (found by reading each file),
    // plus what the slice wrote.
    let mut overlapping = BTreeSet::new();
    for file in std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
    {
        let ctx = SessionContext::new();
        let frame = ctx.read_parquet(file.to_str().unwrap(), ParquetReadOptions::default()).await.unwrap();
        let day = |d: &str| lit(ScalarValue::Date32(Some(Date32Type::from_naive_date(d.parse().unwrap()))));
        let rows = frame
            .filter(col("order_date").between(day("2026-03-01"), day("2026-03-31")))
            .unwrap()
            .count()
            .await
            .unwrap();
        if rows > 0 {
            overlapping.insert(std::fs::read(&file).unwrap());
        }
    }
    let slice_commit =
        std::fs::read_to_string(rehearsal.join("_delta_log/00000000000000000001.json")).unwrap();
    let written: BTreeSet<_> = slice_commit
        .lines()
        .filter_map(|l| {
            serde_json::from_str::<Value>(l).ok()?.get("add")?.get("path")?.as_str().map(str::to_owned)
        })
        .collect();
    let in_clone: BTreeSet<_> = std::fs::read_dir(&rehearsal)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "_delta_log" && n != bf::rehearse::clone::LOCALIZED)
        .collect();
    assert_eq!(in_clone, written, "besides its copies, the clone holds only the slice's new files");
    let copies: BTreeSet<Vec<u8>> = std::fs::read_dir(rehearsal.join(bf::rehearse::clone::LOCALIZED))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(copies, overlapping, "the copies are exactly the target's files holding March rows");
    assert_eq!(plan["rehearsal"]["clone"]["files_localized"], overlapping.len());
    assert_eq!(plan["rehearsal"]["clone"]["files_referenced"], 5 - overlapping.len());
    // Its first commit is a CLONE naming the source and its version.
    let first = std::fs::read_to_string(rehearsal.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(first.contains(r#""operation":"CLONE""#) && first.contains(r#""sourceVersion":5"#), "{first}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partitioned_target_is_cloned_without_copying_any_file() {
    let dir = tempfile::tempdir().unwrap();
    let rows: [&[OrderRow]; 2] = [
        &[
            (1, "C01", 10.0, "EUR", "2026-02-28"),
            (2, "C02", 20.0, "USD", "2026-03-01"),
            (3, "C03", 30.0, "USD", "2026-03-15"),
        ],
        &[(4, "C04", 40.0, "USD", "2026-03-31"), (5, "C05", 50.0, "EUR", "2026-04-01")],
    ];
    let target = orders_table(&dir.path().join("orders"), true, &rows).await;
    std::fs::write(dir.path().join("march.csv"), "order_id,customer,amount,currency,order_date\n2,C02,20.0,EUR,2026-03-01\n3,C03,30.0,EUR,2026-03-15\n6,C06,60.0,EUR,2026-03-20\n7,C07,70.0,EUR,2026-04-15\n").unwrap();
    let plan_text = crate::common::VALID_PLAN
        .replace("../warehouse/orders_silver", "orders")
        .replace("orders.csv", "march.csv")
        .replace(
            "SELECT order_id, amount, order_date FROM orders",
            // $start and $end arrive as DATE values: each slice reads only its week, and the
            // April row is outside every slice's bounds.
            "SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders \
             WHERE CAST(order_date AS DATE) BETWEEN $start AND $end OR order_id = 7",
        )
        .replace("[slicing]\nevery = \"month\"", "[slicing]\nevery = \"week\"\nparallel = 2")
        // The April row is known: counted, not a problem.
        + "outside_window = \"skip\"\n\n[[metrics]]\nname = \"amount\"\nsql = \"SUM(amount)\"\n"
        // The last week's only order (the 31st) is not in the corrected March: emptying it is meant.
        + "\n[guards]\nallow_empty_slices = true\n";
    let plan_file = write_plan(
        dir.path(),
        "march.toml",
        &plan_text
            .replace("date_column = \"order_date\"", "date_column = \"order_date\"\nkey = [\"order_id\"]"),
    );
    let untouched = snapshot(&target);
    let plan = plan_json(&bf_in(dir.path()).arg("plan").arg(&plan_file).arg("--json").output().unwrap());
    assert_eq!(snapshot(&target), untouched);
    assert_eq!(plan["rehearsal"]["clone"]["files_localized"], 0);
    assert_eq!(plan["slices"].as_array().unwrap().len(), 6, "ISO weeks of March 2026");
    assert_eq!(plan["total"]["before"]["rows"], 3);
    assert_eq!(plan["total"]["after"]["rows"], 3);
    assert!(close(&plan["total"]["before"]["metrics"]["amount"], 90.0));
    assert!(close(&plan["total"]["after"]["metrics"]["amount"], 110.0));
    let changes: u64 =
        plan["slices"].as_array().unwrap().iter().map(|s| s["changes"]["removed"].as_u64().unwrap()).sum();
    assert_eq!(changes, 1, "order 4 is not in the corrected file");
    assert_eq!(plan["outside_window"]["unchanged"], true);
    // The April row is counted as outside the window by every slice, and never written.
    for slice in plan["slices"].as_array().unwrap() {
        assert_eq!(slice["source"]["outside_window"], 1, "{slice}");
        assert_eq!(slice["source"]["other_slices"], 0, "the query filtered on $start and $end: {slice}");
    }
    // Every data file the rehearsal wrote is in a March partition.
    let rehearsal = dir.path().join("orders__rehearsal");
    for entry in std::fs::read_dir(&rehearsal).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            name == "_delta_log" || name.starts_with("order_date=2026-03-"),
            "unexpected {name} in the rehearsal"
        );
    }
}

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

/// A plan that must be refused: exit 1, the message, no saved plan, the target untouched.
fn refused(workspace: &Path, plan: &Path, target: &Path, fragment: &str) {
    let untouched = snapshot(target);
    bf_in(workspace).arg("plan").arg(plan).assert().code(1).stderr(predicate::str::contains(fragment));
    assert!(!workspace.join(".bf/plan.json").exists(), "a refused plan must not be saved");
    assert_eq!(snapshot(target), untouched);
}

#[test]
fn errors_name_what_is_wrong_and_write_nothing() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    // The reload alone: its variants move the target, which the downstream plan would no longer read.
    let march =
        crate::common::without_downstream(&std::fs::read_to_string(root.join("plans/march.toml")).unwrap());
    let variant = |name: &str, from: &str, to: &str| {
        assert!(march.contains(from), "{from}");
        write_plan(&root.join("plans"), name, &march.replace(from, to))
    };

    let plan = variant("a_file.toml", "warehouse/orders_silver\"", "landing/fx_rates.csv\"");
    refused(root, &plan, &silver, "landing/fx_rates.csv is a file; a Delta table is a folder");
    std::fs::create_dir_all(root.join("bf-demo/warehouse/empty")).unwrap();
    let plan = variant("not_delta.toml", "warehouse/orders_silver\"", "warehouse/empty\"");
    refused(root, &plan, &silver, "is not a Delta table");
    let plan = variant("missing.toml", "warehouse/orders_silver\"", "warehouse/nowhere\"");
    refused(root, &plan, &silver, "warehouse/nowhere: no such folder");
    let plan = variant("no_column.toml", "date_column = \"order_date\"", "date_column = \"ordered_on\"");
    refused(root, &plan, &silver, "the table has no column `ordered_on`");
    refused(root, &plan, &silver, "did you mean `order_date`?");
    let plan = variant("not_a_date.toml", "date_column = \"order_date\"", "date_column = \"customer\"");
    refused(root, &plan, &silver, "`customer` in");
    let plan = variant("columns.toml", "       o.currency,\n", "       o.currency AS currency_code,\n");
    refused(root, &plan, &silver, "`currency` (STRING) is in the table but not in the query");
    let plan = variant("parallel.toml", "every = \"month\"", "every = \"day\"\nparallel = 4");
    refused(root, &plan, &silver, "ConcurrentAppend");

    // Text where the table holds a number is refused before any slice runs, naming the column.
    let plan = variant(
        "text.toml",
        "SELECT o.order_id,",
        "SELECT CONCAT('#', CAST(o.order_id AS VARCHAR)) AS order_id,",
    );
    refused(
        root,
        &plan,
        &silver,
        "`order_id` is STRING in the query but BIGINT in the table: text becomes a number",
    );
    // Cast by the query itself, a value that does not cast fails the slice, naming it and the value.
    let plan = variant(
        "cast.toml",
        "SELECT o.order_id,",
        "SELECT CAST(CONCAT('#', CAST(o.order_id AS VARCHAR)) AS BIGINT) AS order_id,",
    );
    refused(root, &plan, &silver, "Cannot cast string '#");
    // Two source rows for one key refuse the merge plan, naming keys; nothing reaches the target.
    let plan = variant("dupes.toml", "mode = \"replace\"", "mode = \"merge\"");
    let text = std::fs::read_to_string(&plan).unwrap().replace("JOIN fx ON o.currency = fx.currency\n", "JOIN fx ON o.currency = fx.currency\nUNION ALL SELECT order_id, customer, amount, currency, amount AS amount_eur, CAST(ordered_at AS DATE) AS order_date FROM orders\n");
    std::fs::write(&plan, text).unwrap();
    refused(
        root,
        &plan,
        &silver,
        "the source has several rows for 409 keys, and a merge needs one row per key",
    );

    let daily = root.join("bf-demo/warehouse/orders_daily");
    std::fs::remove_file(root.join("bf-demo/landing/orders/2026-09-17.csv")).unwrap();
    refused(root, &root.join("plans/september.toml"), &daily, "slice 17 (2026-09-17): input `orders` reads");
}

#[test]
fn source_rows_with_a_null_date_make_the_plan_unappliable() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let nulls = march.replace(
        "CAST(o.ordered_at AS DATE) AS order_date",
        "CASE WHEN o.order_id % 100 = 0 THEN NULL ELSE CAST(o.ordered_at AS DATE) END AS order_date",
    );
    let plan = write_plan(&root.join("plans"), "nulls.toml", &nulls);
    let output = bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let saved: Value = serde_json::from_slice(&output.stdout).unwrap();
    let expected = corrected_march(&root.join("bf-demo")).iter().filter(|r| r.0 % 100 == 0).count();
    assert_eq!(saved["slices"][0]["source"]["null_date"], expected);
    let problem = format!("{expected} source rows have a NULL order_date");
    assert!(
        saved["problems"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().starts_with(&problem)),
        "{}",
        saved["problems"]
    );
    let silver = root.join("bf-demo/warehouse/orders_silver");
    crate::common::refused_with_its_problems_erased(
        root,
        &silver,
        "source rows have a NULL date: no slice writes them",
    );
}

#[test]
fn source_rows_outside_the_window_fail_the_plan_unless_it_says_skip() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let silver = root.join("bf-demo/warehouse/orders_silver");
    let untouched = snapshot(&silver);
    // A query that shifts every date by a day, as a wrong time zone would: March 31 lands in April.
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let shifted = march.replace(
        "CAST(o.ordered_at AS DATE) AS order_date",
        "CAST(o.ordered_at AS DATE) + INTERVAL '1 day' AS order_date",
    );
    let last_day = std::fs::read_to_string(root.join("bf-demo/landing/orders_march.csv"))
        .unwrap()
        .lines()
        .filter(|l| l.split(',').nth(4).is_some_and(|t| t.starts_with("2026-03-31")))
        .count();
    assert!(last_day > 0, "the shop has orders on March 31");

    let plan = write_plan(&root.join("plans"), "shifted.toml", &shifted);
    let output = bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let saved: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(saved["slices"][0]["source"]["outside_window"], last_day);
    let problem = format!(
        "{last_day} rows the query returns for slice 1 fall outside the window 2026-03-01..2026-03-31"
    );
    let problems = saved["problems"].as_array().unwrap();
    assert!(problems.iter().any(|p| p.as_str().unwrap().starts_with(&problem)), "{problems:?}");
    bf_in(root).args(["apply", "--auto-approve"]).assert().code(1).stderr(predicate::str::contains(&problem));
    assert_eq!(snapshot(&silver), untouched);
    crate::common::refused_with_its_problems_erased(
        root,
        &silver,
        "source rows fall outside the window: no slice writes them",
    );

    // The fix the problem suggests works: the query wrapped, filtered on the column it computes.
    let problem_text = problems.iter().find_map(|p| p.as_str().filter(|p| p.starts_with(&problem))).unwrap();
    let wrap = problem_text.split("— ").nth(1).unwrap().split("—").next().unwrap().trim();
    assert_eq!(wrap, "SELECT * FROM (<the query>) WHERE order_date BETWEEN $start AND $end");
    let (head, rest) = shifted.split_once("query = \"\"\"\n").unwrap();
    let (query, tail) = rest.split_once("\"\"\"").unwrap();
    let wrapped =
        format!("{head}query = \"\"\"\n{}\n\"\"\"{tail}", wrap.replace("<the query>", query.trim()));
    let plan = write_plan(&root.join("plans"), "wrapped.toml", &wrapped);
    let fixed = plan_json(&bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap());
    assert_eq!(fixed["slices"][0]["source"]["outside_window"], 0, "{wrapped}");
    assert!(!fixed["problems"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().contains("outside")));

    // Saying so makes them a count, not a problem.
    let skipping = shifted.replace("\n[write]", "outside_window = \"skip\"\n\n[write]");
    let plan = write_plan(&root.join("plans"), "skipping.toml", &skipping);
    let saved = plan_json(&bf_in(root).arg("plan").arg(&plan).arg("--json").output().unwrap());
    assert_eq!(saved["slices"][0]["source"]["outside_window"], last_day);
    assert!(!saved["problems"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().contains("outside")));
    assert_eq!(snapshot(&silver), untouched);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timestamp_or_text_date_column_is_refused_saying_why() {
    use std::sync::Arc;

    use bf::deltalake::arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
    use bf::deltalake::arrow::datatypes::{DataType as ArrowType, Field, Schema, TimeUnit};
    use bf::deltalake::kernel::{DataType, PrimitiveType, StructField};

    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events");
    let columns = vec![
        StructField::new("order_id", DataType::LONG, true),
        StructField::new("ordered_at", DataType::Primitive(PrimitiveType::Timestamp), true),
        StructField::new("day", DataType::STRING, true),
    ];
    let table = crate::common::new_table(&events, columns, &[]).await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_id", ArrowType::Int64, true),
        Field::new("ordered_at", ArrowType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        Field::new("day", ArrowType::Utf8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![1_772_323_200_000_000, 1_772_409_600_000_000])
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from(vec!["2026-03-01", "2026-03-02"])),
        ],
    )
    .unwrap();
    table.write(vec![batch]).await.unwrap();
    let untouched = snapshot(&events);

    std::fs::write(dir.path().join("orders.csv"), "order_id,ordered_at,day\n").unwrap();
    for (column, fragment) in [
        ("ordered_at", "`ordered_at` in"),
        ("ordered_at", "is TIMESTAMP, but the window filters on a DATE column"),
        ("ordered_at", "depend on a time zone"),
        ("day", "is STRING, but the window filters on a DATE column"),
        ("day", "text dates compare as text"),
    ] {
        let plan = crate::common::VALID_PLAN
            .replace("../warehouse/orders_silver", "events")
            .replace("date_column = \"order_date\"", &format!("date_column = \"{column}\""))
            .replace("SELECT order_id, amount, order_date FROM orders", "SELECT * FROM orders");
        let plan = write_plan(dir.path(), "events.toml", &plan);
        bf_in(dir.path()).arg("plan").arg(&plan).assert().code(1).stderr(predicate::str::contains(fragment));
        assert!(!dir.path().join(".bf/plan.json").exists());
        assert_eq!(snapshot(&events), untouched);
    }
}

#[test]
fn a_failed_check_or_guard_makes_the_plan_fail_and_unappliable() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let march = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    let strict = march
        .replace(
            "sql = \"SELECT * FROM slice WHERE amount <= 0\"",
            "sql = \"SELECT * FROM slice WHERE currency = 'GBP'\"",
        )
        .replace("rows = 5, revenue = 10", "rows = 0.5, revenue = 1");
    let plan = write_plan(&root.join("plans"), "strict.toml", &strict);
    let output = bf_in(root).arg("plan").arg(&plan).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("✗ amounts are positive"), "{stdout}");
    assert!(stdout.contains("✗ max_change_pct.revenue"), "{stdout}");
    assert!(stdout.contains("revenue changes +5.4% (limit ±1%)"), "{stdout}");
    assert!(stdout.contains("the row count changes −0.7% (limit ±0.5%)"), "{stdout}");
    assert!(stdout.contains("This plan cannot be applied"), "{stdout}");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let problems = saved["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 3, "{problems:?}");
    let gbp = corrected_march(&root.join("bf-demo")).iter().filter(|r| r.1 == "GBP").count();
    let check =
        saved["checks"].as_array().unwrap().iter().find(|c| c["name"] == "amounts are positive").unwrap();
    assert_eq!(check["offending"], gbp);
    assert_eq!(check["sample"].as_array().unwrap().len(), 3);
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

#[test]
fn saved_plan_shape_show_formats_and_exit_codes() {
    let workspace = demo_workspace();
    let root = workspace.path();
    bf_in(root)
        .args(["plan", "plans/march.toml", "--detailed-exitcode", "--out", "march.plan.json"])
        .assert()
        .code(2);
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("march.plan.json")).unwrap()).unwrap();
    for key in [
        "format",
        "id",
        "created_at",
        "plan_file",
        "reason",
        "target",
        "window",
        "every",
        "mode",
        "rehearsal",
        "inputs",
        "input_folders",
        "delta_inputs",
        "slices",
        "total",
        "outside_window",
        "breakdown_by",
        "breakdown",
        "checks",
        "guards",
        "problems",
    ] {
        assert!(saved.get(key).is_some(), "the saved plan has no `{key}`");
    }
    let text = std::fs::read_to_string(root.join("plans/march.toml")).unwrap();
    assert_eq!(saved["plan_file"]["text"], text);
    assert_eq!(saved["plan_file"]["sha256"], bf::rehearse::plan::sha256_hex(text.as_bytes()));
    let inputs: Vec<&str> =
        saved["inputs"].as_array().unwrap().iter().map(|i| i["input"].as_str().unwrap()).collect();
    assert_eq!(inputs, ["fx", "orders"]);
    let csv = std::fs::read(root.join("bf-demo/landing/orders_march.csv")).unwrap();
    assert_eq!(saved["inputs"][1]["sha256"], bf::rehearse::plan::sha256_hex(&csv));
    assert_eq!(saved["inputs"][1]["size"], csv.len());

    bf_in(root).args(["show", "march.plan.json", "--json"]).assert().success().stdout(predicate::function(
        |out: &str| serde_json::from_str::<Value>(out).is_ok_and(|shown| shown == saved),
    ));
    bf_in(root)
        .args(["show", "march.plan.json", "--format", "markdown"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("## ✅ Backfill of 2 tables"))
        .stdout(predicate::str::contains("### ✅ Plan: 1 slice to replace; rows 412 → 409 (−0.7%); revenue "))
        .stdout(predicate::str::contains("| 1 | 2026-03-01..2026-03-31 | 412 → 409 (−3, −0.7%) |"));
    bf_in(root)
        .arg("show")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no saved plan at .bf/plan.json"));
}

#[tokio::test(flavor = "multi_thread")]
async fn planning_again_replaces_the_rehearsal() {
    let workspace = demo_workspace();
    let root = workspace.path();
    bf_in(root).args(["plan", "plans/september.toml", "-q"]).assert().success();
    let rehearsal = root.join("bf-demo/warehouse/orders_daily__rehearsal");
    assert_eq!(open_table(&rehearsal).await.version(), Some(30), "a clone and 30 slices");
    // The correction's guard expects September to be loaded already; on the empty table it would fail.
    let correction = std::fs::read_to_string(root.join("plans/correction-2026-09-15.toml")).unwrap();
    let correction = write_plan(
        &root.join("plans"),
        "correction.toml",
        &correction.replace("max_change_pct = { rows = 50 }", ""),
    );
    bf_in(root).arg("plan").arg(&correction).arg("-q").assert().success();
    assert_eq!(open_table(&rehearsal).await.version(), Some(1), "replaced, not appended to");
    assert_eq!(
        count(&rehearsal, "SELECT count(*) FROM t").await,
        3,
        "only the 15th, from a fresh clone of the empty table"
    );

    // A folder that is not a rehearsal is never replaced.
    let plan = std::fs::read_to_string(root.join("plans/march.toml")).unwrap()
        + "\n[rehearsal]\ntable = \"../bf-demo/warehouse/orders_daily\"\n";
    let path = write_plan(&root.join("plans"), "clobber.toml", &plan);
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let untouched = snapshot(&daily);
    bf_in(root)
        .arg("plan")
        .arg(&path)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is not a bf rehearsal"));
    assert_eq!(snapshot(&daily), untouched);
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
    let mut comparison =
        Comparison::new(&bf::delta::store::Stores::from_environment(), &target, &rehearsal, schema)
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
        let changes = comparison.slice_changes(&key, 5).await.unwrap();
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
