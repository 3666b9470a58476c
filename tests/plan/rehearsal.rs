//! The rehearsal: March planned on a shallow clone without touching the target, a partitioned
//! target cloned without copying a file, planning again replacing it, and what the plan saves and shows.

use super::*;

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
        .stdout(predicate::str::contains(
            "### ✅ Plan: 1 slice to replace; rows 412 → 409 (−0.7%): 287 changed, 3 removed; revenue ",
        ))
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
