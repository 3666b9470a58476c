//! What a saved plan remembers of its inputs, so `bf apply` writes what `bf plan` showed: a folder's
//! listing (a file added later makes the plan stale), and a Delta input's version (a commit to it
//! makes the plan stale, and every slice reads the version the plan read).

use std::path::Path;

use crate::apply::{append_silver, apply_with_other_writer};
use crate::common::{bf_in, count, demo_workspace, snapshot, write_plan};

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

fn refused(root: &Path, table: &Path, fragment: &str) {
    let untouched = snapshot(table);
    let output = bf_in(root).args(["apply", "--auto-approve"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the saved plan is stale") && stderr.contains(fragment), "{stderr}");
    assert_eq!(snapshot(table), untouched, "a stale plan wrote to the table");
}

#[test]
fn a_file_added_to_an_input_folder_after_the_plan_makes_it_stale() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    write_plan(&root.join("plans"), "folder.toml", FOLDER_PLAN);
    bf_in(root).args(["plan", "plans/folder.toml", "-q"]).assert().success();
    let late = root.join("bf-demo/landing/orders/late/2026-09-02-late.csv");
    std::fs::create_dir_all(late.parent().unwrap()).unwrap();
    std::fs::write(&late, "order_id,customer,amount,ordered_at\n9001,C01,5.0,2026-09-02T10:00:00\n").unwrap();
    refused(root, &daily, "input `orders`'s folder");
    refused(root, &daily, "1 added [\"late/2026-09-02-late.csv\"]");
    std::fs::remove_file(&late).unwrap();
    bf_in(root).args(["apply", "--auto-approve", "-q"]).assert().success();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_to_a_delta_input_after_the_plan_makes_it_stale() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let silver = root.join("bf-demo/warehouse/orders_silver");
    write_plan(&root.join("plans"), "delta.toml", DELTA_PLAN);
    bf_in(root).args(["plan", "plans/delta.toml", "-q"]).assert().success();
    append_silver(&silver, &[(9001, "C01", 1.0, "EUR", "2026-03-02")]).await;
    refused(root, &daily, "input `silver`");
    refused(root, &daily, "is at version 6, but the plan read version 5");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_slice_reads_a_delta_input_at_the_version_the_plan_read() {
    let workspace = demo_workspace();
    let root = workspace.path();
    let daily = root.join("bf-demo/warehouse/orders_daily");
    let silver = root.join("bf-demo/warehouse/orders_silver");
    write_plan(&root.join("plans"), "delta.toml", DELTA_PLAN);
    bf_in(root).args(["plan", "plans/delta.toml", "-q"]).assert().success();
    let planned = count(&silver, "SELECT count(*) FROM t WHERE order_date = DATE '2026-03-02'").await;
    // Another job commits to the input while the apply waits to write slice 1, whose query is
    // already planned: slice 2 (2 March) reads the input after that commit.
    let output =
        apply_with_other_writer(root, 1, append_silver(&silver, &[(9002, "C01", 1.0, "EUR", "2026-03-02")]))
            .await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(count(&silver, "SELECT count(*) FROM t WHERE order_id = 9002").await, 1, "the input moved");
    assert_eq!(
        count(&daily, "SELECT count(*) FROM t WHERE order_date = DATE '2026-03-02'").await,
        planned,
        "slice 2 wrote the rows the plan read, not the input's newer version"
    );
    assert_eq!(count(&daily, "SELECT count(*) FROM t WHERE order_id = 9002").await, 0);
}
