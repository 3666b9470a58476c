//! What a saved plan remembers of its inputs, so `bf apply` writes what `bf plan` showed: a folder's
//! listing (a file added later makes the plan stale), and a Delta input's version (a commit to it
//! makes the plan stale, and every slice reads the version the plan read).

use std::path::{Path, PathBuf};

use predicates::prelude::*;

use crate::apply::append_silver;
use crate::common::{
    bf_in, count, demo_workspace, duckdb_count, duckdb_rows, slices_committed, snapshot, write_plan,
};

/// The first three days of September, loaded from the folder of all September's till files.
const FOLDER_PLAN: &str = r#"reason = "Load 1-3 September from the till's folder."
[target]
table = "../bf-demo/warehouse/orders_daily"
date_column = "order_date"
[window]
start = 2026-09-01
end = 2026-09-03
[slicing]
every = "day"
[source]
inputs.orders = { path = "../bf-demo/landing/orders", format = "csv" }
outside_window = "skip"
query = "SELECT order_id, customer, amount, CAST(ordered_at AS DATE) AS order_date FROM orders"
"#;

/// 1-3 March of orders_daily, from the orders_silver Delta table.
const DELTA_PLAN: &str = r#"reason = "Copy 1-3 March from silver."
[target]
table = "../bf-demo/warehouse/orders_daily"
date_column = "order_date"
[window]
start = 2026-03-01
end = 2026-03-03
[slicing]
every = "day"
[source]
inputs.silver = { path = "../bf-demo/warehouse/orders_silver", format = "delta" }
query = "SELECT order_id, customer, amount, order_date FROM silver WHERE order_date BETWEEN $start AND $end"
"#;

/// `bf apply` refuses the saved plan as stale naming `fragment`, publishing and recomputing, and
/// writes nothing.
fn refused(root: &Path, table: &Path, fragment: &str) {
    let untouched = snapshot(table);
    for recompute in [&[][..], &["--recompute"][..]] {
        let output = bf_in(root).args(["apply", "--auto-approve"]).args(recompute).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{recompute:?}: {stderr}");
        assert!(
            stderr.contains("the saved plan is stale") && stderr.contains(fragment),
            "{recompute:?}: {stderr}"
        );
        assert_eq!(snapshot(table), untouched, "{recompute:?}: a stale plan wrote to the table");
    }
}

#[test]
fn a_file_added_to_an_input_folder_after_the_plan_makes_it_stale() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    write_plan(&root.join("plans"), "folder.toml", FOLDER_PLAN);
    bf_in(root).args(["plan", "plans/folder.toml", "-q"]).assert().success();
    let late = root.join("bf-demo/landing/orders/2026-09-02-late.csv");
    std::fs::write(&late, "order_id,customer,amount,ordered_at\n9001,C01,5.0,2026-09-02T10:00:00\n").unwrap();
    refused(root, &daily, "input `orders`'s folder");
    refused(root, &daily, "1 added [\"2026-09-02-late.csv\"]");
    std::fs::remove_file(&late).unwrap();
    // A sub-folder that is not a `key=value` partition is not read by the query, so not listed.
    let archive = root.join("bf-demo/landing/orders/archive");
    std::fs::create_dir_all(&archive).unwrap();
    std::fs::write(
        archive.join("old.csv"),
        "order_id,customer,amount,ordered_at\n1,C01,5.0,2026-09-02T10:00:00\n",
    )
    .unwrap();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
}

/// A demo workspace with the plan that copies orders_silver into orders_daily planned; returns it
/// with the two tables' folders.
fn delta_input_planned() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let silver = root.join("bf-demo/warehouse/orders_silver");
    write_plan(&root.join("plans"), "delta.toml", DELTA_PLAN);
    bf_in(root).args(["plan", "plans/delta.toml", "-q"]).assert().success();
    (workspace, daily, silver)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_to_a_delta_input_after_the_plan_makes_it_stale() {
    let (workspace, daily, silver) = delta_input_planned();
    let root = workspace.path();
    append_silver(&silver, &[(9001, "C01", 1.0, "EUR", "2026-03-02")]).await;
    refused(root, &daily, "input `silver`");
    refused(root, &daily, "is at version 6, but the plan read version 5");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_to_a_delta_input_after_a_crash_does_not_stop_the_resume() {
    let (workspace, daily, silver) = delta_input_planned();
    let root = workspace.path();
    let planned = count(&silver, "SELECT count(*) FROM t WHERE order_date = DATE '2026-03-03'").await;
    // Recomputing, so the slices read the input (publishing never reads it).
    bf_in(root)
        .args(["apply", "--auto-approve", "-q", "--recompute"])
        .env(bf::fault::FAULT_ENV, "after-commit:1")
        .assert()
        .failure();
    assert_eq!(slices_committed(&daily), [1], "the crash struck after slice 1's commit");
    append_silver(&silver, &[(9003, "C01", 1.0, "EUR", "2026-03-03")]).await;
    // The slices left read the version the plan read, so the resume writes what was reviewed.
    bf_in(root).args(["apply", "--auto-approve", "-q", "--recompute"]).assert().success();
    assert_eq!(slices_committed(&daily), [1, 2, 3]);
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_id = 9003").await, 0);
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_date = DATE '2026-03-03'").await, planned);
    assert_eq!(duckdb_count(&daily, "SELECT count(*) FROM t WHERE order_id = 9003"), 0, "read by DuckDB");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_saved_by_an_older_bf_only_resumes_and_says_what_it_cannot_check() {
    // The saved plan rewritten as an older bf saved it: without the records that format lacks.
    fn made_older(saved: &Path) {
        let mut plan: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
        plan["format"] = 1.into();
        plan.as_object_mut().unwrap().remove("input_folders");
        plan.as_object_mut().unwrap().remove("delta_inputs");
        std::fs::write(saved, plan.to_string()).unwrap();
    }
    let workspace = demo_workspace();
    let root = workspace.path();
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    let saved = root.join(".bf/plan.json");
    let reviewed = std::fs::read_to_string(&saved).unwrap();
    // An older plan starts no backfill: editing `format` down would switch the newer checks off.
    made_older(&saved);
    bf_in(root)
        .args(["apply", "--auto-approve", "-q"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("the table holds no backfill of it to finish"));
    // It finishes one begun (here by this bf, crashed after its first slice).
    std::fs::write(&saved, &reviewed).unwrap();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).env("BF_FAULT", "after-commit:1").assert().failure();
    made_older(&saved);
    bf_in(root)
        .args(["apply", "--auto-approve", "-q"])
        .assert()
        .success()
        .stderr(predicates::str::contains("saved by an older bf (format 1)"))
        .stderr(predicates::str::contains(
            "dropped and created again at its place since `bf plan` is not detected",
        ));

    // One that read a Delta input, from before bf recorded Delta inputs: nothing to hold it to.
    let (workspace, daily, _) = delta_input_planned();
    let root = workspace.path();
    let saved = root.join(".bf/plan.json");
    bf_in(root).args(["apply", "--auto-approve", "-q"]).env("BF_FAULT", "after-commit:1").assert().failure();
    made_older(&saved);
    let output = bf_in(root).args(["apply", "--auto-approve", "-q"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(slices_committed(&daily), [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_slice_reads_a_delta_input_at_the_version_the_plan_read() {
    let (workspace, daily, silver) = delta_input_planned();
    let root = workspace.path();
    let planned = count(&silver, "SELECT count(*) FROM t WHERE order_date = DATE '2026-03-02'").await;
    // Another job commits to the input while the apply waits to write slice 1, whose query is
    // already planned: slice 2 (2 March) reads the input after that commit.
    // Recomputing: publishing lands the rehearsal's files and never reads the input.
    let output = crate::common::apply_paused(
        root,
        &["--recompute"],
        1,
        "before",
        append_silver(&silver, &[(9002, "C01", 1.0, "EUR", "2026-03-02")]),
    )
    .await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(slices_committed(&daily), [1, 2, 3]);
    assert_eq!(count(&silver, "SELECT count(*) FROM t WHERE order_id = 9002").await, 1, "the input moved");
    assert_eq!(
        count(&daily, "SELECT count(*) FROM t WHERE order_date = DATE '2026-03-02'").await,
        planned,
        "slice 2 wrote the rows the plan read, not the input's newer version"
    );
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_id = 9002").await, 0);
    assert_eq!(duckdb_count(&daily, "SELECT count(*) FROM t WHERE order_id = 9002"), 0, "read by DuckDB");
}

/// A Delta input dropped and created again at its place after the plan, at the very version number
/// the plan read: that number names another table's rows, which a recomputed slice would read. The
/// apply refuses it, and so does a resume after a crash (which a commit to the input does not
/// stop: every slice reads the version the plan read — if it is still that table's).
#[tokio::test(flavor = "multi_thread")]
async fn a_delta_input_made_again_at_the_version_the_plan_read_is_refused_on_a_resume_too() {
    let (workspace, daily, silver) = delta_input_planned();
    let root = workspace.path();
    // Another shop's orders_silver, made the same way: the same versions, another table. The
    // plan's input is kept aside.
    let made_again = || {
        let other = tempfile::tempdir().unwrap();
        crate::common::bf().args(["demo", "--shop-only"]).arg(other.path()).assert().success();
        std::fs::rename(&silver, root.join("planned-silver")).unwrap();
        std::fs::rename(other.path().join("warehouse/orders_silver"), &silver).unwrap();
    };
    made_again();
    let version = |table: &Path| {
        let log: Vec<u64> = std::fs::read_dir(table.join("_delta_log"))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".json")?.parse().ok())
            .collect();
        log.into_iter().max().unwrap()
    };
    assert_eq!(version(&silver), version(&root.join("planned-silver")), "the same version number");
    refused(root, &daily, "input `silver`");
    refused(root, &daily, "it is another table than the one the plan read");

    // The plan's input put back, an apply crashed after slice 1, then the input made again.
    std::fs::remove_dir_all(&silver).unwrap();
    std::fs::rename(root.join("planned-silver"), &silver).unwrap();
    bf_in(root)
        .args(["apply", "--auto-approve", "-q", "--recompute"])
        .env(bf::fault::FAULT_ENV, "after-commit:1")
        .assert()
        .failure();
    assert_eq!(slices_committed(&daily), [1]);
    made_again();
    let untouched = snapshot(&daily);
    let output = bf_in(root).args(["apply", "--auto-approve", "-q", "--recompute"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("input `silver`") && stderr.contains("it is another table"), "{stderr}");
    assert_eq!(snapshot(&daily), untouched, "the resume wrote nothing");
    assert_eq!(slices_committed(&daily), [1]);
}

/// What the seal requires a saved plan to record follows how the plan reads its inputs: a template
/// naming a folder per day is recorded as each day's folder listing, its files fingerprinted; two
/// inputs naming one Delta table share one record of the version read; one folder read by two
/// inputs, and its files by a template, are recorded once. Each plans and applies.
#[test]
fn each_file_and_table_a_plan_reads_is_recorded_once_however_its_inputs_name_it() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let landing = root.join("bf-demo/landing");
    for day in ["2026-09-01", "2026-09-02", "2026-09-03"] {
        std::fs::create_dir_all(landing.join(format!("byday/{day}"))).unwrap();
        std::fs::copy(
            landing.join(format!("orders/{day}.csv")),
            landing.join(format!("byday/{day}/till.csv")),
        )
        .unwrap();
    }
    let by_day = FOLDER_PLAN.replace("../bf-demo/landing/orders\"", "../bf-demo/landing/byday/{date}\"");
    assert_ne!(by_day, FOLDER_PLAN);
    write_plan(&root.join("plans"), "byday.toml", &by_day);
    bf_in(root).args(["plan", "plans/byday.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    assert_eq!(slices_committed(&root.join("bf-demo/warehouse/orders_daily")), [1, 2, 3]);

    let twice = DELTA_PLAN.replace(
        "inputs.silver = { path = \"../bf-demo/warehouse/orders_silver\", format = \"delta\" }",
        "inputs.silver = { path = \"../bf-demo/warehouse/orders_silver\", format = \"delta\" }\n\
         inputs.again = { path = \"../bf-demo/warehouse/orders_silver\", format = \"delta\" }",
    );
    assert_ne!(twice, DELTA_PLAN);
    write_plan(&root.join("plans"), "twice.toml", &twice);
    bf_in(root).args(["plan", "plans/twice.toml", "-q"]).assert().success();
    let output = bf_in(root).args(["apply", "--auto-approve", "-q"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    // One folder read by two inputs, and its files by a third, a template: each file is recorded
    // once, under the first input that read it.
    let shared = FOLDER_PLAN
        .replace(
            "inputs.orders = { path = \"../bf-demo/landing/orders\", format = \"csv\" }",
            "inputs.orders = { path = \"../bf-demo/landing/orders\", format = \"csv\" }\n\
             inputs.again = { path = \"../bf-demo/landing/orders\", format = \"csv\" }\n\
             inputs.daily = { path = \"../bf-demo/landing/orders/{date}.csv\", format = \"csv\" }",
        )
        .replace("end = 2026-09-03", "end = 2026-09-05");
    assert!(shared.contains("inputs.daily"));
    write_plan(&root.join("plans"), "shared.toml", &shared);
    bf_in(root).args(["plan", "plans/shared.toml", "-q"]).assert().success();
    let output = bf_in(root).args(["apply", "--auto-approve", "-q"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// A link inside an input folder, to a file elsewhere in the root, is that folder's file: the saved
/// plan's fingerprint of it is the one the seal looks for, so the plan applies. (Resolved through
/// the link, it read as a file the text does not name, and the plan could never be applied.)
#[test]
fn a_link_in_an_input_folder_is_that_folders_file() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let landing = root.join("bf-demo/landing");
    std::fs::create_dir_all(landing.join("linked")).unwrap();
    for day in ["2026-09-01", "2026-09-02", "2026-09-03"] {
        std::os::unix::fs::symlink(format!("../orders/{day}.csv"), landing.join(format!("linked/{day}.csv")))
            .unwrap();
    }
    let linked = FOLDER_PLAN.replace("../bf-demo/landing/orders\"", "../bf-demo/landing/linked\"");
    assert_ne!(linked, FOLDER_PLAN);
    write_plan(&root.join("plans"), "linked.toml", &linked);
    bf_in(root).args(["plan", "plans/linked.toml", "-q"]).assert().success();
    let output = bf_in(root).args(["apply", "--auto-approve", "-q"]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(slices_committed(&root.join("bf-demo/warehouse/orders_daily")), [1, 2, 3]);
}

/// Exports come as `.jsonl` and `.ndjson` as often as `.json`: a folder of them is read as JSON; a
/// folder holding none of the three is refused naming the endings looked for; `extension` reads
/// files of any other ending.
#[tokio::test(flavor = "multi_thread")]
async fn a_folder_of_jsonl_exports_is_read_and_an_empty_match_names_what_was_looked_for() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("plans")).unwrap();
    std::fs::create_dir_all(root.join("landing/export")).unwrap();
    crate::common::orders_table(
        &root.join("warehouse/orders"),
        false,
        &[&[(1, "C01", 10.0, "USD", "2026-03-02")]],
    )
    .await;
    let line = |id: u32, day: &str| {
        format!(
            "{{\"order_id\":{id},\"customer\":\"C0{id}\",\"amount\":1.5,\"currency\":\"EUR\",\"order_date\":\"{day}\"}}\n"
        )
    };
    std::fs::write(root.join("landing/export/part-1.jsonl"), line(1, "2026-03-02") + &line(2, "2026-03-03"))
        .unwrap();
    let plan = |input: &str| {
        crate::common::march_orders_plan(&format!(
            "inputs.orders = {input}\nquery = \"SELECT order_id, customer, amount, currency, \
             CAST(order_date AS DATE) AS order_date FROM orders\""
        ))
    };
    write_plan(
        &root.join("plans"),
        "march.toml",
        &plan("{ path = \"../landing/export\", format = \"json\" }"),
    );
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    assert_eq!(saved["slices"][0]["source"]["in_slice"], 2, "{}", saved["slices"][0]["source"]);

    std::fs::rename(root.join("landing/export/part-1.jsonl"), root.join("landing/export/part-1.txt"))
        .unwrap();
    bf_in(root)
        .args(["plan", "plans/march.toml"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("holds no file ending in .json, .jsonl, .ndjson"));
    let txt = "{ path = \"../landing/export\", format = \"json\", extension = \".txt\" }";
    write_plan(&root.join("plans"), "march.toml", &plan(txt));
    bf_in(root).args(["plan", "plans/march.toml", "-q"]).assert().success();
}

/// An export tree read by a pattern (`landing/**/*.jsonl`) and a CSV export read with the plan's
/// column types: the files matched are listed in the saved plan and a new one makes it stale; a
/// code with leading zeros stays text, where inferred types make it a number; a pattern matching
/// nothing names what it looked for.
#[tokio::test(flavor = "multi_thread")]
async fn an_export_tree_is_read_by_its_pattern_and_a_csv_with_the_plans_column_types() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("plans")).unwrap();
    let orders = crate::common::orders_table(
        &root.join("warehouse/orders"),
        false,
        &[&[(1, "C01", 10.0, "USD", "2026-03-02")]],
    )
    .await;
    let line = |id: u32, day: &str| {
        format!(
            "{{\"order_id\":{id},\"customer\":\"C0{id}\",\"amount\":1.5,\"currency\":\"EUR\",\"order_date\":\"{day}\"}}\n"
        )
    };
    for (folder, id, day) in [("2026/03/02", 1, "2026-03-02"), ("2026/03/03", 2, "2026-03-03")] {
        std::fs::create_dir_all(root.join("landing").join(folder)).unwrap();
        std::fs::write(root.join("landing").join(folder).join("part-0.jsonl"), line(id, day)).unwrap();
    }
    // Beside them, what an export tree also holds: neither is read.
    std::fs::write(root.join("landing/2026/03/README.md"), "exported nightly\n").unwrap();
    std::fs::write(root.join("landing/2026/.part-9.jsonl"), line(9, "2026-03-09")).unwrap();
    let query = "query = \"SELECT order_id, customer, amount, currency, CAST(order_date AS DATE) AS order_date FROM orders\"";
    let plan = |input: &str| crate::common::march_orders_plan(&format!("inputs.orders = {input}\n{query}"));
    write_plan(
        &root.join("plans"),
        "tree.toml",
        &plan("{ path = \"../landing/**/*.jsonl\", format = \"json\" }"),
    );
    bf_in(root).args(["plan", "plans/tree.toml", "-q"]).assert().success();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".bf/plan.json")).unwrap()).unwrap();
    let listed = &saved["input_folders"][0];
    assert_eq!(listed["pattern"], "**/*.jsonl", "{listed}");
    assert_eq!(listed["files"], serde_json::json!(["2026/03/02/part-0.jsonl", "2026/03/03/part-0.jsonl"]));
    assert_eq!(saved["slices"][0]["source"]["in_slice"], 2);

    // A file the pattern matches, landed after the plan: stale.
    std::fs::create_dir_all(root.join("landing/2026/03/04")).unwrap();
    std::fs::write(root.join("landing/2026/03/04/part-0.jsonl"), line(3, "2026-03-04")).unwrap();
    refused(root, &orders, "1 added [\"2026/03/04/part-0.jsonl\"]");
    bf_in(root).args(["plan", "plans/tree.toml", "-q"]).assert().success();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
    assert_eq!(
        duckdb_rows(&orders, "SELECT order_id FROM t ORDER BY order_id"),
        ["1", "2", "3"],
        "every file the pattern matched, and nothing beside them"
    );

    // A pattern matching nothing says what it looked for.
    write_plan(
        &root.join("plans"),
        "none.toml",
        &plan("{ path = \"../landing/**/*.ndjson\", format = \"json\" }"),
    );
    bf_in(root).args(["plan", "plans/none.toml"]).assert().code(1).stderr(
        predicates::str::contains("matches `**/*.ndjson`").and(predicates::str::contains("no file under")),
    );

    // Customer codes with leading zeros: read as the plan says, they stay text.
    std::fs::write(
        root.join("landing/codes.csv"),
        "order_id,customer,amount,currency,order_date\n7,00742,1.5,EUR,2026-03-05\n",
    )
    .unwrap();
    let columns = "order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, order_date DATE";
    let typed = format!("{{ path = \"../landing/codes.csv\", format = \"csv\", schema = \"{columns}\" }}");
    for (input, customer) in
        [("{ path = \"../landing/codes.csv\", format = \"csv\" }".to_owned(), "742"), (typed, "00742")]
    {
        write_plan(&root.join("plans"), "codes.toml", &plan(&input));
        let output = bf_in(root).args(["plan", "plans/codes.toml", "--json"]).output().unwrap();
        let saved: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let added = saved["slices"][0]["changes"]["samples"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["change"] == "added")
            .cloned()
            .unwrap_or_else(|| panic!("{input}: {}", saved["slices"][0]["changes"]));
        assert_eq!(added["after"][1], customer, "{input}");
    }

    // A schema for files that say their own types is a mistake, at its line.
    let parquet =
        format!("{{ path = \"../landing/codes.parquet\", format = \"parquet\", schema = \"{columns}\" }}");
    write_plan(&root.join("plans"), "parquet.toml", &plan(&parquet));
    bf_in(root).args(["validate", "plans/parquet.toml"]).assert().code(1).stderr(
        predicates::str::contains("source.inputs.orders.schema")
            .and(predicates::str::contains("a schema is for CSV and JSON")),
    );
}
