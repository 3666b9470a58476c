//! `bf demo` builds the example shop: the numbers below are the scenarios' numbers (the September
//! daily backfill, the 15 September correction, the March reload).

use bf::deltalake::arrow::util::display::array_value_to_string;
use bf::deltalake::datafusion::prelude::SessionContext;
use predicates::prelude::*;

use crate::common::{bf, count, open_table};

#[tokio::test(flavor = "multi_thread")]
async fn demo_builds_the_example_shop() {
    let dir = tempfile::tempdir().unwrap();
    let shop = dir.path().join("shop");
    let demo = bf()
        .arg("demo")
        .arg(&shop)
        .assert()
        .success()
        .stdout(predicate::str::contains("30 files, 130 orders (2001-2130)"))
        .stdout(predicate::str::contains("$ cd "))
        .stdout(predicate::str::contains(
            "Plan: 1 slice to replace; rows 412 → 409 (−0.7%): 287 changed, 3 removed; revenue ",
        ))
        // What the verbs themselves print, not a second wording.
        .stdout(predicate::str::contains(
            "ok 2026-03-01..2026-03-31: 409 rows for the source's 409, 0 missing (version 6)",
        ))
        .stdout(predicate::str::contains(": version 5 → 7; 1 slice committed (409 rows), 0 already there."))
        .stdout(predicate::str::contains("$ bf history warehouse/orders_silver --limit 3"))
        .stdout(predicate::str::contains("Will RESTORE version 5 in one commit."))
        .stdout(predicate::str::contains(
            "now version 9, equal to version 5 (412 rows in the window, 409 before the rollback); wrote versions 8–9 (2 commits).",
        ))
        // The chain: revenue_by_day rehearsed on the reloaded silver, applied after it, rolled back first.
        .stdout(predicate::str::contains("── downstream of orders_silver: revenue_by_day ──"))
        .stdout(predicate::str::contains(
            "revenue_by_day: Plan: 1 slice to replace; 31 rows before and after: 31 changed; orders 412 → 409",
        ))
        .stdout(predicate::str::contains("$ bf history warehouse/revenue_by_day --limit 3"))
        .stdout(predicate::str::contains("$ bf rollback --cascade --auto-approve"))
        .stdout(predicate::str::contains("Backfill applied: orders_silver → revenue_by_day"))
        .stdout(predicate::function(|out: &str| {
            // Downstream first on the way out.
            out.find("revenue_by_day: now version").unwrap_or(usize::MAX)
                < out.find("orders_silver: now version").unwrap_or(0)
        }));
    // The notice file tells what the walkthrough ended with: the rollback.
    let notice =
        walk(dir.path()).into_iter().find(|p| p.ends_with("march-reload.md")).expect("the notice file");
    let notice = std::fs::read_to_string(notice).unwrap();
    assert!(notice.contains("## Backfill rolled back: orders_silver → revenue_by_day"), "{notice}");
    assert!(!notice.contains("Backfill applied"), "{notice}");
    // `bf clean` in the shop finds the walkthrough's rehearsal: the demo remembered it like `bf plan`.
    crate::common::bf_in(&shop)
        .args(["clean", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("orders_silver__rehearsal"));

    // The walkthrough's plan is saved where `bf show` run in the shop finds it, and the shop's own
    // plans are valid there.
    crate::common::bf_in(&shop).arg("show").assert().success().stdout(predicate::str::contains("412 → 409"));
    let plans: Vec<_> = bf::shop::PLANS.iter().map(|(name, _)| shop.join("plans").join(name)).collect();
    crate::common::bf_in(&shop).arg("validate").args(&plans).assert().success();
    assert!(shop.join("schema/plan.schema.json").is_file());

    // September: one file per day, 130 orders numbered 2001 to 2130, 3 on the 15th.
    let mut ids = Vec::new();
    let mut files = 0;
    for day in 1..=30 {
        let text =
            std::fs::read_to_string(shop.join(format!("landing/orders/2026-09-{day:02}.csv"))).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("order_id,customer,amount,ordered_at"));
        let rows: Vec<&str> = lines.collect();
        if day == 15 {
            assert_eq!(rows.len(), 3);
        }
        ids.extend(rows.iter().map(|r| r.split(',').next().unwrap().parse::<i64>().unwrap()));
        files += 1;
    }
    assert_eq!(files, 30);
    assert_eq!(ids, (2001..=2130).collect::<Vec<_>>());

    // orders_silver as built (version 5): January to April, March wrong (no EUR, 3 duplicates), five
    // loads after the create; then the walkthrough's backfill, a slice and a comment.
    let silver = shop.join("warehouse/orders_silver");
    let built = crate::common::open_table_at(&silver, Some(5)).await;
    let ctx = SessionContext::new();
    ctx.register_table("t", built.table_provider().await.unwrap()).unwrap();
    let at_build = async |sql: String| {
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        array_value_to_string(batches[0].column(0), 0).unwrap()
    };
    let march = "order_date BETWEEN DATE '2026-03-01' AND DATE '2026-03-31'";
    assert_eq!(at_build("SELECT count(*) FROM t".into()).await, "1586");
    assert_eq!(at_build(format!("SELECT count(*) FROM t WHERE {march}")).await, "412");
    assert_eq!(at_build(format!("SELECT count(DISTINCT order_id) FROM t WHERE {march}")).await, "409");
    assert_eq!(at_build(format!("SELECT count(*) FROM t WHERE {march} AND currency = 'EUR'")).await, "0");
    // The walkthrough applied (versions 6, 7) and rolled back (8, 9): March is as built again.
    assert_eq!(open_table(&silver).await.version(), Some(9));
    assert_eq!(count(&silver, &format!("SELECT count(*) FROM t WHERE {march}")).await, 412);
    assert_eq!(count(&silver, "SELECT count(*) FROM t").await, 1586);

    // revenue_by_day as built (version 4, one load per month): March summed from the wrong silver;
    // the walkthrough applied (5, 6) and rolled back (7, 8) its chain.
    let revenue = shop.join("warehouse/revenue_by_day");
    assert_eq!(open_table(&revenue).await.version(), Some(8));
    assert_eq!(count(&revenue, &format!("SELECT count(*) FROM t WHERE {march}")).await, 31);
    assert_eq!(
        count(&revenue, &format!("SELECT CAST(SUM(orders) AS BIGINT) FROM t WHERE {march}")).await,
        412
    );
    assert_eq!(count(&revenue, "SELECT CAST(SUM(orders) AS BIGINT) FROM t").await, 1586);

    // The corrected March has one line per order.
    let corrected = std::fs::read_to_string(shop.join("landing/orders_march.csv")).unwrap();
    assert_eq!(corrected.lines().count(), 1 + 409);

    // orders_daily: empty, created with the columns the September plan writes.
    let daily = shop.join("warehouse/orders_daily");
    assert_eq!(count(&daily, "SELECT count(*) FROM t").await, 0);
    let table = open_table(&daily).await;
    let columns: Vec<String> =
        table.snapshot().unwrap().schema().fields().map(|f| f.name().clone()).collect();
    assert_eq!(columns, ["order_id", "customer", "amount", "order_date"]);
    // The next steps it prints, run as printed in the shop: the correction they end with adds the
    // order the till sent late.
    let printed = String::from_utf8(demo.get_output().stdout.clone()).unwrap();
    let steps: Vec<&str> = printed
        .split("the September daily backfill (one run per day):\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().split("   ").next().unwrap().trim())
        .collect();
    assert_eq!(steps.len(), 5, "{steps:?}");
    let mut last = String::new();
    for step in steps {
        let command = step.replacen("bf ", &format!("{} ", assert_cmd::cargo::cargo_bin("bf").display()), 1);
        let out = crate::common::clean(std::process::Command::new("sh"))
            .arg("-c")
            .arg(&command)
            .current_dir(&shop)
            .env_remove("BF_STATE_DIR")
            .output()
            .unwrap();
        assert!(out.status.success(), "{step}:\n{}", String::from_utf8_lossy(&out.stderr));
        last = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    assert!(
        last.contains("Plan: 1 slice to replace; rows 3 → 4"),
        "the correction changes the 15th:\n{last}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_refuses_to_build_over_an_existing_shop() {
    let dir = tempfile::tempdir().unwrap();
    bf().arg("demo").arg(dir.path()).assert().success();
    let log = dir.path().join("warehouse/orders_silver/_delta_log");
    let before: Vec<_> = std::fs::read_dir(&log).unwrap().map(|e| e.unwrap().file_name()).collect();
    bf().arg("demo")
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("already holds a shop"));
    let after: Vec<_> = std::fs::read_dir(&log).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(before.len(), after.len(), "nothing was appended to the existing shop");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
